"""SUM: a running sum and the count of non-null values in it.

The sum of a group whose values are all NULL is NULL, not 0: the non-null count says which.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT g, sum(v) AS s FROM t GROUP BY g",
...     {"t": ("g VARCHAR, v INTEGER", "('a', 1), ('a', 2), ('b', 5)")},
...     "DELETE FROM t WHERE v = 1; UPDATE t SET v = NULL WHERE g = 'b'",
... )
-1 ('a', 3)
-1 ('b', 5)
+1 ('a', 2)
+1 ('b', None)
"""

from __future__ import annotations

from dataclasses import dataclass

from ....render import MULT
from .base import Accumulator


@dataclass(frozen=True)
class Sum(Accumulator):
    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column("sum"), self.column("n"))

    def initial(self) -> list[str]:
        value = self.value_sql()
        return [self.named(f"sum({value})", "sum"), self.named(f"count({value})", "n")]

    def fold(self) -> list[str]:
        return [
            self.named(f"SUM({self.value_sql()} * {MULT})", "sum"),
            self.named(self.signed_count(), "n"),
        ]

    def merge(self, s: str, d: str) -> list[str]:
        n = f"coalesce({self.ref(s, 'n')}, 0) + coalesce({self.ref(d, 'n')}, 0)"
        total = f"coalesce({self.ref(s, 'sum')}, 0) + coalesce({self.ref(d, 'sum')}, 0)"
        return [
            self.named(f"CASE WHEN {n} = 0 THEN NULL ELSE {total} END", "sum"),
            self.named(n, "n"),
        ]

    def final(self) -> str:
        return self.ref(None, "sum")
