"""MIN and MAX: the current extreme, moved by inserted values; a group that loses a row at or
beyond its extreme (or any row, when it stores none) is recomputed from the input at the new
snapshot, and only such a group.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT g, min(v) AS lo, max(v) AS hi FROM t GROUP BY g",
...     {"t": ("g VARCHAR, v INTEGER", "('a', 1), ('a', 5), ('a', 7)")},
...     "DELETE FROM t WHERE v = 1; INSERT INTO t VALUES ('a', 9)",
... )
-1 ('a', 1, 7)
+1 ('a', 5, 9)
"""

from __future__ import annotations

from dataclasses import dataclass

from ....render import MULT
from .base import Accumulator


@dataclass(frozen=True)
class Extreme(Accumulator):
    #: "min" or "max"
    function: str = "min"

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column("v"),)

    def initial(self) -> list[str]:
        return [self.named(f"{self.function}({self.value_sql()})", "v")]

    def fold(self) -> list[str]:
        value = self.value_sql()
        return [
            self.named(f"{self.function}({value}) FILTER (WHERE {MULT} > 0)", "in"),
            self.named(f"{self.function}({value}) FILTER (WHERE {MULT} < 0)", "out"),
        ]

    def merge(self, s: str, d: str) -> list[str]:
        pick = "least" if self.function == "min" else "greatest"
        return [self.named(f"{pick}({self.ref(s, 'v')}, {self.ref(d, 'in')})", "v")]

    def rescan(self, s: str, d: str) -> str | None:
        """A removed value at or beyond the stored extreme; or any removed value where none is
        stored (a new group, or one of NULLs): a delta that is not netted, like a join's, may
        retract a value it also inserts, which the fold took in."""
        beyond = "<=" if self.function == "min" else ">="
        out, stored = self.ref(d, "out"), self.ref(s, "v")
        return (
            f"coalesce({out} {beyond} {stored} OR ({out} IS NOT NULL AND {stored} IS NULL), FALSE)"
        )

    def final(self) -> str:
        return self.ref(None, "v")
