"""Project: deterministic expressions map each row on its own, so they map the delta.

    view:  SELECT a + b AS s FROM r
    delta: SELECT a + b AS s, _ivm_m FROM delta(r)

Bags keep duplicates: two input rows that project to the same output row stay two copies.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT k % 2 AS parity FROM t",
...     {"t": ("k INTEGER", "(1), (2), (3)")},
...     "DELETE FROM t WHERE k = 3; INSERT INTO t VALUES (4), (6)",
... )
-1 (1,)
+2 (0,)
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ...sql import expr_sql, quote
from ..render import MULT, RenderContext, Side
from .base import Operator


@dataclass(eq=False)
class Project(Operator):
    child: Operator
    outputs: tuple[tuple[str, exp.Expr], ...]
    kind = "project"

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.outputs)

    @property
    def children(self) -> tuple[Operator, ...]:
        return (self.child,)

    def _select_list(self) -> str:
        return ", ".join(f"{expr_sql(e)} AS {quote(name)}" for name, e in self.outputs)

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        return f"SELECT {self._select_list()} FROM {self.child.state(ctx, side)}"

    def state_near(
        self,
        ctx: RenderContext,
        side: Side,
        keys: tuple[tuple[str, str], ...],
        relation: str,
        above: exp.Expr | None = None,
    ) -> str:
        """Keys that are input columns passed through narrow the input."""
        inner = self.passed_keys(keys)
        if not inner:
            return super().state_near(ctx, side, keys, relation, above)
        child = self.child.state_near(ctx, side, inner, relation)
        return f"(SELECT {self._select_list()} FROM {child})"

    def passed_keys(self, keys: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        """``keys`` as the input's columns, when each is an input column passed through
        (empty otherwise)."""
        passed = {
            name: e.name
            for name, e in self.outputs
            if isinstance(e, exp.Column) and not e.table and e.name in self.child.columns
        }
        if any(mine not in passed for mine, _ in keys):
            return ()
        return tuple((passed[mine], theirs) for mine, theirs in keys)

    def render_delta(self, ctx: RenderContext) -> str | None:
        child = self.child.delta(ctx)
        if child is None:
            return None
        return f"SELECT {self._select_list()}, {MULT} FROM {child}"
