"""Constant: a relation that reads no table (``VALUES``, ``range(3)``, ``generate_series`` and
``unnest`` with literal arguments). It never changes, so it has no delta; joined with a
changing input it is read like any unchanged input.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT t.k, v.label FROM t JOIN (VALUES (1, 'one'), (2, 'two')) AS v(k, label) "
...     "ON t.k = v.k",
...     {"t": ("k INTEGER", "(1)")},
...     "INSERT INTO t VALUES (2), (3)",
... )
+1 (2, 'two')
"""

from __future__ import annotations

from dataclasses import dataclass

from ..render import RenderContext, Side
from .base import Operator


@dataclass(eq=False)
class Constant(Operator):
    #: a FROM item naming its columns, e.g. ``(VALUES (1, 'a')) AS v("k", "label")``
    item: str
    names: tuple[str, ...]
    kind = "constant"

    @property
    def columns(self) -> tuple[str, ...]:
        return self.names

    @property
    def children(self) -> tuple[Operator, ...]:
        return ()

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        return f"SELECT * FROM {self.item}"

    def render_delta(self, ctx: RenderContext) -> str | None:
        return None
