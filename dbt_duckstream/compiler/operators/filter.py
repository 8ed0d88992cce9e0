"""Filter: a deterministic predicate commutes with the delta.

    view:  SELECT * FROM r WHERE p
    delta: SELECT * FROM delta(r) WHERE p

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT k, v FROM t WHERE v > 1",
...     {"t": ("k INTEGER, v INTEGER", "(1, 0), (2, 5)")},
...     "UPDATE t SET v = 3 WHERE k = 1; UPDATE t SET v = 0 WHERE k = 2",
... )
-1 (2, 5)
+1 (1, 3)
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ...sql import expr_sql
from ..render import RenderContext, Side
from .base import Operator
from .join import Join


@dataclass(eq=False)
class Filter(Operator):
    child: Operator
    predicate: exp.Expr
    kind = "filter"

    def materializes_delta(self, ctx: RenderContext) -> bool:
        # over a join, the join's terms are rendered here (``delta_under``): materialized
        # as the join's own delta would be
        return isinstance(self.child, Join) and self.child.materializes_delta(ctx)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.child.columns

    @property
    def children(self) -> tuple[Operator, ...]:
        return (self.child,)

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        return f"SELECT * FROM {self.child.state(ctx, side)} WHERE {expr_sql(self.predicate)}"

    def state_near(
        self,
        ctx: RenderContext,
        side: Side,
        keys: tuple[tuple[str, str], ...],
        relation: str,
        above: exp.Expr | None = None,
    ) -> str:
        predicate = self.predicate if above is None else exp.and_(self.predicate, above)
        child = self.child.state_near(ctx, side, keys, relation, predicate)
        return f"(SELECT * FROM {child} WHERE {expr_sql(self.predicate)})"

    def render_delta(self, ctx: RenderContext) -> str | None:
        child = self.child.delta_under(ctx, self.predicate)
        if child is None:
            return None
        return f"SELECT * FROM {child} WHERE {expr_sql(self.predicate)}"
