"""The rule of the set operations that count: per distinct row, the output has ``f(a, b)``
copies where the left input has ``a`` and the right ``b``; so the delta of a row is
``f(a + da, b + db) - f(a, b)``, and only the rows the inputs' deltas touch can change.

    touched: SELECT row, SUM(da), SUM(db) FROM (delta(r) tagged left UNION ALL delta(s)
             tagged right) GROUP BY row
    a, b:    count(*) of r@old, s@old SEMI JOIN touched, per row
    delta:   SELECT row, f(a + da, b + db) - f(a, b) FROM touched ... WHERE it is not 0

Each operation is ``f`` (``multiplicity``) and its SQL keyword. Asserted rows carry the values
of the input delta's rows, retracted ones those of the delta or of the input's old rows: all
read from tables, so a retraction finds the row it once asserted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ....sql import column_list, quote, same_key
from ...render import MULT, RenderContext, Side
from ..base import DeltaReads, Operator, RowsOf

_LEFT, _RIGHT, _COUNT = "_ivm_dl", "_ivm_dr", "_ivm_c"


@dataclass(eq=False)
class CountedSetOperation(Operator):
    left: Operator
    right: Operator
    #: the operation as SQL writes it (``EXCEPT ALL``)
    keyword: ClassVar[str] = ""

    @staticmethod
    def multiplicity(a: str, b: str) -> str:
        """SQL of the copies a row has in the output, from its copies ``a`` (left) and
        ``b`` (right)."""
        raise NotImplementedError

    @property
    def columns(self) -> tuple[str, ...]:
        return self.left.columns

    @property
    def children(self) -> tuple[Operator, ...]:
        return (self.left, self.right)

    @property
    def strategy(self) -> str:
        return "copies counted per touched row"

    def delta_reads(self, changed: frozenset[str], rows: RowsOf) -> DeltaReads:
        """The touched rows are counted in both inputs."""
        return DeltaReads(sum(rows(c) for c in self.children))

    def _renamed(self, relation: str, child: Operator, extra: str = "") -> str:
        """``relation`` (rows of ``child``) with its columns named after the output's."""
        select = ", ".join(
            f"{quote(c)} AS {quote(o)}" for c, o in zip(child.columns, self.columns, strict=True)
        )
        return f"SELECT {select}{extra} FROM {relation}"

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        left, right = self.left.state(ctx, side), self.right.state(ctx, side)
        return f"SELECT * FROM {left}\n{self.keyword}\nSELECT * FROM {right}"

    def render_delta(self, ctx: RenderContext) -> str | None:
        tagged = []
        for child, (dl, dr) in ((self.left, (MULT, "0")), (self.right, ("0", MULT))):
            delta = child.delta(ctx)
            if delta is not None:
                tagged.append(self._renamed(delta, child, f", {dl} AS {_LEFT}, {dr} AS {_RIGHT}"))
        if not tagged:
            return None
        columns = column_list(self.columns)
        touched = ctx.cte(
            f"{self.name}_touched",
            f"SELECT {columns}, SUM({_LEFT})::BIGINT AS {_LEFT}, SUM({_RIGHT})::BIGINT AS "
            f"{_RIGHT} FROM (\n" + "\nUNION ALL\n".join(tagged) + "\n) GROUP BY ALL",
        )
        old = []
        for side, child in (("left", self.left), ("right", self.right)):
            rows = self._renamed(child.state(ctx, "old"), child)
            old.append(
                ctx.cte(
                    f"{self.name}_old_{side}",
                    f"SELECT {column_list(self.columns, 'o.')}, count(*) AS {_COUNT} "
                    f"FROM ({rows}) AS o SEMI JOIN {touched} AS t "
                    f"ON {same_key('o', 't', self.columns)} GROUP BY ALL",
                )
            )
        counts = ctx.cte(
            f"{self.name}_counts",
            f"SELECT {column_list(self.columns, 't.')}, "
            f"coalesce(l.{_COUNT}, 0) AS a0, coalesce(r.{_COUNT}, 0) AS b0, "
            f"coalesce(l.{_COUNT}, 0) + t.{_LEFT} AS a1, "
            f"coalesce(r.{_COUNT}, 0) + t.{_RIGHT} AS b1 "
            f"FROM {touched} AS t LEFT JOIN {old[0]} AS l ON {same_key('t', 'l', self.columns)} "
            f"LEFT JOIN {old[1]} AS r ON {same_key('t', 'r', self.columns)}",
        )
        before, after = self.multiplicity("a0", "b0"), self.multiplicity("a1", "b1")
        return (
            f"SELECT {columns}, ({after}) - ({before}) AS {MULT} FROM {counts} "
            f"WHERE ({after}) <> ({before})"
        )
