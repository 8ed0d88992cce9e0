"""INTERSECT ALL keeps ``min(a, b)`` copies of a row; INTERSECT one copy when both inputs
have it.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT k FROM r INTERSECT ALL SELECT k FROM s",
...     {"r": ("k INTEGER", "(1), (1), (NULL)"), "s": ("k INTEGER", "(1), (NULL)")},
...     "INSERT INTO s VALUES (1), (1); DELETE FROM r WHERE k IS NULL",
... )
-1 (None,)
+1 (1,)
"""

from __future__ import annotations

from .counted import CountedSetOperation


class IntersectAll(CountedSetOperation):
    kind = "intersect_all"
    keyword = "INTERSECT ALL"

    @staticmethod
    def multiplicity(a: str, b: str) -> str:
        return f"least({a}, {b})"


class Intersect(CountedSetOperation):
    kind = "intersect"
    keyword = "INTERSECT"

    @staticmethod
    def multiplicity(a: str, b: str) -> str:
        return f"({a} > 0 AND {b} > 0)::INTEGER"
