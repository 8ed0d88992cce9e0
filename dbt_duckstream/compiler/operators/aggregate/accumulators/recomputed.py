"""Any other deterministic aggregate (``COUNT(DISTINCT x)``, ``stddev``, ``median``,
``bool_and``, ...): its value is stored, and every group the delta touches is recomputed from
the input at the new snapshot. The old value is read from the state table, never recomputed,
so a retraction finds exactly the row it stored, floating-point values included.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT g, count(DISTINCT v) AS d FROM t GROUP BY g",
...     {"t": ("g VARCHAR, v INTEGER", "('a', 1), ('a', 1), ('b', 2)")},
...     "INSERT INTO t VALUES ('a', 2), ('b', 2)",
... )
-1 ('a', 1)
+1 ('a', 2)
"""

from __future__ import annotations

from dataclasses import dataclass

from .....sql import expr_sql
from .base import Accumulator


@dataclass(frozen=True)
class Recomputed(Accumulator):
    @property
    def folds(self) -> bool:
        return False

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column("v"),)

    def initial(self) -> list[str]:
        return [self.named(expr_sql(self.call), "v")]

    def final(self) -> str:
        return self.ref(None, "v")
