"""Anti join: the rows of the left input for which a subquery predicate is false.

    view:  SELECT ... FROM l WHERE NOT EXISTS (SELECT 1 FROM r WHERE q)   (or x NOT IN (...), ...)
    delta: SELECT dl.* FROM delta(l) AS dl WHERE (EXISTS (... r@new ...)) IS FALSE
           UNION ALL
           SELECT l.*, +1 if the predicate became false, -1 if it stopped being false
           FROM l@old WHERE <a row of delta(r) may change the predicate for l>
                AND (... r@old ...) IS FALSE <> (... r@new ...) IS FALSE

The semi join's rule with the other verdict: a row passes ``WHERE NOT p`` when ``p`` is
FALSE. That is where NULLs matter: ``x NOT IN (SELECT y ...)`` is NULL, so the row does not
pass, when ``x`` is NULL and the subquery has rows, or when ``y`` is NULL for a row that
does not equal ``x``; it is true for an empty subquery, NULL ``x`` or not. The rows a change
of ``r`` may flip are those with a row of ``delta(r)`` whose comparison is not false (a NULL
``y`` touches every row), so a NULL entering or leaving the subquery is seen.

Cost: as the semi join's.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT o.id FROM o WHERE o.cid NOT IN (SELECT c.id FROM c)",
...     {"o": ("id INTEGER, cid INTEGER", "(1, 1), (2, 2), (3, NULL)"),
...      "c": ("id INTEGER", "(1)")},
...     "INSERT INTO c VALUES (NULL)",
... )
-1 (2,)
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from .join import JoinInput
from .membership import Membership
from .semi_join import SemiJoin


@dataclass(eq=False)
class AntiJoin(SemiJoin):
    kind = "anti_join"
    verdict = "IS FALSE"
    negation = "NOT "


def anti_join(left: JoinInput, right: JoinInput, on: exp.Expr | None) -> AntiJoin:
    """DuckDB's ``l ANTI JOIN r ON p``: ``WHERE NOT EXISTS (SELECT 1 FROM r WHERE p)``."""
    return AntiJoin(left, right, Membership("exists", on))
