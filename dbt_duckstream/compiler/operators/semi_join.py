"""Semi join: the rows of the left input for which a subquery predicate is true.

    view:  SELECT ... FROM l WHERE EXISTS (SELECT 1 FROM r WHERE q)       (or x IN (SELECT y ...),
                                                                           x > ANY (...), ...)
    delta: SELECT dl.* FROM delta(l) AS dl WHERE EXISTS (SELECT 1 FROM r@new WHERE q)
           UNION ALL
           SELECT l.*, +1 if the predicate became true, -1 if it stopped being true
           FROM l@old WHERE EXISTS (SELECT 1 FROM delta(r) WHERE q)
                AND (EXISTS (... r@old ...)) IS TRUE <> (EXISTS (... r@new ...)) IS TRUE

The predicate judges each row of ``l`` alone, so ``l``'s change is filtered over ``r@new``;
then, with ``l`` at the old snapshot, ``r``'s change can only flip the rows it touches
(``membership``): those whose predicate was true over ``r@old`` and is not over ``r@new`` are
retracted, and the other way round asserted. A row passes when the predicate is TRUE, as in
WHERE: ``x IN (...)`` that is NULL (``x`` NULL, or a NULL among the values) does not pass.
Duplicates on either side change nothing: a row of ``l`` passes once, however many rows of
``r`` match it. Correlated subqueries become ``q``, and any condition works in it.

Cost: ``l``'s change looks its matches up in ``r@new``; ``r``'s change reads ``l@old`` in
full to find the rows it touches, then ``r@old`` and ``r@new`` once each for the rows that
meet ``q`` with one of those (a semi join built on the few touched rows; all of ``r`` when
uncorrelated), and judges the touched rows over these (hash joins on the equalities of ``q``,
a nested loop without any).

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT o.id FROM o WHERE o.cid IN (SELECT c.id FROM c WHERE c.vip)",
...     {"o": ("id INTEGER, cid INTEGER", "(1, 1), (2, 2), (3, NULL)"),
...      "c": ("id INTEGER, vip BOOLEAN", "(1, true), (1, true), (2, false)")},
...     "UPDATE c SET vip = true WHERE id = 2; DELETE FROM c WHERE id = 1",
... )
-1 (1,)
+1 (2,)
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ..render import MULT, RenderContext, Side
from .join import JoinInput, input_name
from .membership import Membership, MembershipJoin
from .touched import AFTER


@dataclass(eq=False)
class SemiJoin(MembershipJoin):
    kind = "semi_join"
    #: which values of the predicate let a row through
    verdict = "IS TRUE"
    #: the same test as a WHERE condition (WHERE keeps the rows whose condition is TRUE),
    #: which DuckDB plans as a semi or anti join; ``(p) IS TRUE`` it plans as a mark join and
    #: a filter, 1.7x slower on TPC-H Q18
    negation = ""

    @property
    def columns(self) -> tuple[str, ...]:
        return self.left.columns

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        left = self.left.node.state(ctx, side)
        return (
            f"SELECT * FROM {left} AS {input_name(0)} "
            f"WHERE {self.negation}({self.value(ctx, side)})"
        )

    def render_delta(self, ctx: RenderContext) -> str | None:
        terms = []
        left_delta = self.left.node.delta(ctx)
        if left_delta is not None:
            terms.append(
                f"SELECT * FROM {left_delta} AS {input_name(0)} "
                f"WHERE {self.negation}({self.value(ctx, 'new', left_delta)})"
            )
        right_delta = self.right.node.delta(ctx)
        if right_delta is not None:
            flips = self.flips(ctx, right_delta)
            terms.append(
                f"SELECT {self.left_columns()}, CASE WHEN {input_name(0)}.{AFTER} THEN 1 "
                f"ELSE -1 END AS {MULT} FROM {flips} AS {input_name(0)}"
            )
        return "\nUNION ALL\n".join(terms) if terms else None


def semi_join(left: JoinInput, right: JoinInput, on: exp.Expr | None) -> SemiJoin:
    """DuckDB's ``l SEMI JOIN r ON p``: ``WHERE EXISTS (SELECT 1 FROM r WHERE p)``."""
    return SemiJoin(left, right, Membership("exists", on))
