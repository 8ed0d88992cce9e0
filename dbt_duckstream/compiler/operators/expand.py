"""Expand: a table function of each input row (``FROM t, unnest(t.tags) AS u(tag)``,
``range(t.n)``) maps each row on its own, so it maps the delta.

    view:  SELECT t.*, u.x FROM t, unnest(t.l) AS u(x)
    delta: SELECT d.*, u.x, d._ivm_m FROM delta(t) AS d, unnest(d.l) AS u(x)

A retracted row expands to exactly the rows its assertion once did: the function reads only
that row's values.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT t.id, u.tag FROM t, unnest(t.tags) AS u(tag)",
...     {"t": ("id INTEGER, tags VARCHAR[]", "(1, ['a', 'b']), (2, [])")},
...     "UPDATE t SET tags = ['c'] WHERE id = 2; DELETE FROM t WHERE id = 1",
... )
-1 (1, 'a')
-1 (1, 'b')
+1 (2, 'c')
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ...sql import column_list, expr_sql, quote
from ..render import MULT, RenderContext, Side
from .base import Operator

_ROW, _FUNCTION = "_ivm_row", "_ivm_fn"


@dataclass(eq=False)
class Expand(Operator):
    child: Operator
    #: the table function call, its arguments over the child's columns
    call: exp.Expr
    #: the FROM alias that prefixes the function's columns (``u`` of ``u.tag``)
    alias: str
    names: tuple[str, ...]
    kind = "expand"

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.child.columns, *(f"{self.alias}.{n}" for n in self.names))

    @property
    def children(self) -> tuple[Operator, ...]:
        return (self.child,)

    def _query(self, relation: str, extra: str = "") -> str:
        row = exp.to_identifier(_ROW, quoted=True)
        call = self.call.copy().transform(
            lambda n: exp.column(n.this, row) if isinstance(n, exp.Column) and not n.table else n
        )
        outputs = ", ".join(
            f"{quote(_FUNCTION)}.{quote(n)} AS {quote(f'{self.alias}.{n}')}" for n in self.names
        )
        return (
            f"SELECT {column_list(self.child.columns, f'{quote(_ROW)}.')}, {outputs}{extra} "
            f"FROM {relation} AS {quote(_ROW)}, "
            f"{expr_sql(call)} AS {quote(_FUNCTION)}({column_list(self.names)})"
        )

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        return self._query(self.child.state(ctx, side))

    def render_delta(self, ctx: RenderContext) -> str | None:
        delta = self.child.delta(ctx)
        if delta is None:
            return None
        return self._query(delta, f", {quote(_ROW)}.{MULT}")
