"""COUNT: the group's row count for ``COUNT(*)``, a non-null count for ``COUNT(x)``.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT g, count(*) AS n, count(v) AS nv FROM t GROUP BY g",
...     {"t": ("g VARCHAR, v INTEGER", "('a', 1), ('a', NULL)")},
...     "INSERT INTO t VALUES ('a', NULL)",
... )
-1 ('a', 2, 1)
+1 ('a', 3, 1)
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import ROW_COUNT, Accumulator


@dataclass(frozen=True)
class RowCount(Accumulator):
    """``COUNT(*)``: nothing beyond the row count every group keeps."""

    @property
    def columns(self) -> tuple[str, ...]:
        return ()

    def initial(self) -> list[str]:
        return []

    def final(self) -> str:
        return ROW_COUNT


@dataclass(frozen=True)
class Count(Accumulator):
    """``COUNT(x)`` (and ``COUNT(*) FILTER (...)``): rows whose value is not NULL."""

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column("n"),)

    def initial(self) -> list[str]:
        return [self.named(f"count({self.value_sql()})", "n")]

    def fold(self) -> list[str]:
        return [self.named(self.signed_count(), "n")]

    def merge(self, s: str, d: str) -> list[str]:
        total = f"coalesce({self.ref(s, 'n')}, 0) + coalesce({self.ref(d, 'n')}, 0)"
        return [self.named(total, "n")]

    def final(self) -> str:
        return self.ref(None, "n")
