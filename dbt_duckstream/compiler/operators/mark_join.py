"""Mark join: the left input's rows with the value of a subquery predicate as a new column.

    view:  SELECT ..., x IN (SELECT y FROM r WHERE q) ... FROM l    (in CASE, OR, the select
                                                                     list: anywhere a boolean
                                                                     may stand)
    delta: SELECT dl.*, (x IN (SELECT y FROM r@new WHERE q)) AS mark FROM delta(l) AS dl
           UNION ALL
           SELECT l.*, <mark over r@old>, -1 UNION ALL SELECT l.*, <mark over r@new>, +1
           FROM l@old WHERE <a row of delta(r) may change the mark> AND the marks differ

The operator adds one column, the predicate's three-valued result (TRUE, FALSE or NULL, as
SQL gives it), and the expression that held the subquery reads that column. The rule is the
semi join's, keeping all three values: ``l``'s change is marked over ``r@new``; ``r``'s
change re-marks the rows of ``l@old`` it may touch, retracting each with its old mark and
asserting it with its new one where the two differ.

Cost: as the semi join's.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT o.id, o.cid IN (SELECT c.id FROM c) AS known FROM o",
...     {"o": ("id INTEGER, cid INTEGER", "(1, 1), (2, 2), (3, NULL)"),
...      "c": ("id INTEGER", "(1)")},
...     "INSERT INTO c VALUES (NULL)",
... )
-1 (2, False)
+1 (2, None)
"""

from __future__ import annotations

from dataclasses import dataclass

from ...sql import quote
from ..render import MULT, RenderContext, Side
from .join import input_name
from .membership import MembershipJoin
from .touched import AFTER, BEFORE


@dataclass(eq=False)
class MarkJoin(MembershipJoin):
    #: the name of the added column
    mark: str = "_ivm_mark"
    kind = "mark_join"

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.left.columns, self.mark)

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        left = self.left.node.state(ctx, side)
        return (
            f"SELECT {self.left_columns()}, {self.value(ctx, side)} AS {quote(self.mark)} "
            f"FROM {left} AS {input_name(0)}"
        )

    def render_delta(self, ctx: RenderContext) -> str | None:
        terms = []
        left_delta = self.left.node.delta(ctx)
        if left_delta is not None:
            terms.append(
                f"SELECT {self.left_columns()}, {self.value(ctx, 'new', left_delta)} AS "
                f"{quote(self.mark)}, "
                f"{input_name(0)}.{MULT} FROM {left_delta} AS {input_name(0)}"
            )
        right_delta = self.right.node.delta(ctx)
        if right_delta is not None:
            flips = self.flips(ctx, right_delta)
            for column, sign in ((BEFORE, -1), (AFTER, 1)):
                terms.append(
                    f"SELECT {self.left_columns()}, {input_name(0)}.{column} AS "
                    f"{quote(self.mark)}, {sign} AS {MULT} FROM {flips} AS {input_name(0)}"
                )
        return "\nUNION ALL\n".join(terms) if terms else None
