"""EXCEPT ALL keeps ``max(a - b, 0)`` copies of a row; EXCEPT one copy when the left input has
it and the right does not.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT k FROM r EXCEPT ALL SELECT k FROM s",
...     {"r": ("k INTEGER", "(1), (1), (1), (NULL)"), "s": ("k INTEGER", "(1)")},
...     "INSERT INTO s VALUES (1), (NULL)",
... )
-1 (1,)
-1 (None,)
"""

from __future__ import annotations

from .counted import CountedSetOperation


class ExceptAll(CountedSetOperation):
    kind = "except_all"
    keyword = "EXCEPT ALL"

    @staticmethod
    def multiplicity(a: str, b: str) -> str:
        return f"greatest({a} - {b}, 0)"


class Except(CountedSetOperation):
    kind = "except"
    keyword = "EXCEPT"

    @staticmethod
    def multiplicity(a: str, b: str) -> str:
        return f"({a} > 0 AND {b} = 0)::INTEGER"
