"""UNION ALL: multiplicities add, so deltas add.

    view:  SELECT * FROM r UNION ALL SELECT * FROM s
    delta: SELECT * FROM delta(r) UNION ALL SELECT * FROM delta(s)

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT k FROM r UNION ALL SELECT k FROM s",
...     {"r": ("k INTEGER", "(1), (2)"), "s": ("k INTEGER", "(2), (NULL)")},
...     "DELETE FROM r WHERE k = 2; INSERT INTO s VALUES (NULL), (3)",
... )
-1 (2,)
+1 (3,)
+1 (None,)
"""

from __future__ import annotations

from dataclasses import dataclass

from ....sql import quote
from ...render import MULT, RenderContext, Side
from ..base import Operator


@dataclass(eq=False)
class UnionAll(Operator):
    left: Operator
    right: Operator
    kind = "union_all"

    @property
    def columns(self) -> tuple[str, ...]:
        return self.left.columns

    @property
    def children(self) -> tuple[Operator, ...]:
        return (self.left, self.right)

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        left, right = self.left.state(ctx, side), self.right.state(ctx, side)
        return f"SELECT * FROM {left}\nUNION ALL\nSELECT * FROM {right}"

    def render_delta(self, ctx: RenderContext) -> str | None:
        parts = []
        for child in (self.left, self.right):
            delta = child.delta(ctx)
            if delta is not None:
                # named after the left input's columns, even when only the right one changed
                renamed = ", ".join(
                    f"{quote(c)} AS {quote(o)}"
                    for c, o in zip((*child.columns, MULT), (*self.columns, MULT), strict=True)
                )
                parts.append(f"SELECT {renamed} FROM {delta}")
        return "\nUNION ALL\n".join(parts) or None
