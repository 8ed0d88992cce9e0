"""AVG: the sum and the non-null count, divided when read.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT avg(v) AS a FROM t",
...     {"t": ("v INTEGER", "(1), (3)")},
...     "INSERT INTO t VALUES (NULL), (8)",
... )
-1 (2.0,)
+1 (4.0,)
"""

from __future__ import annotations

from dataclasses import dataclass

from .sum import Sum


@dataclass(frozen=True)
class Avg(Sum):
    def final(self) -> str:
        total, n = (self.ref(None, part) for part in ("sum", "n"))
        return f"CASE WHEN {n} = 0 THEN NULL ELSE {total}::DOUBLE / {n} END"
