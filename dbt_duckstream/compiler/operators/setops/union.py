"""UNION: a row is in the output once when either input has it: ``f(a, b) = [a + b > 0]``.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT k FROM r UNION SELECT k FROM s",
...     {"r": ("k INTEGER", "(1), (1), (NULL)"), "s": ("k INTEGER", "(2), (NULL)")},
...     "DELETE FROM r WHERE k = 1; DELETE FROM s WHERE k IS NULL; INSERT INTO s VALUES (3)",
... )
-1 (1,)
+1 (3,)
"""

from __future__ import annotations

from .counted import CountedSetOperation


class Union(CountedSetOperation):
    kind = "union"
    keyword = "UNION"

    @staticmethod
    def multiplicity(a: str, b: str) -> str:
        return f"({a} + {b} > 0)::INTEGER"
