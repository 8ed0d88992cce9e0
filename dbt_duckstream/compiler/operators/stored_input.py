"""Stored input: a join input's rows kept in a state table, so that a join term reads them
there instead of the source's files.

    view:   SELECT ... FROM orders JOIN lineitem ON ... WHERE l_shipmode IN ('MAIL', 'SHIP') ...
    state:  lineitem's rows that pass the conjuncts reading lineitem alone  (at the cursor)
    old:    SELECT * FROM state
    new:    (SELECT * FROM state EXCEPT ALL retracted copies) UNION ALL asserted copies
    delta:  SELECT * FROM delta(lineitem) WHERE conjuncts

With changes at random keys, a join term narrowed to the changed keys of one input still
reads every row group of the other, since the keys fall in every one: TPC-H Q12 at SF1 after
a 0.1% mixed batch read lineitem's files for 126-168 ms of a 171-178 ms rebuild. Its own
conjuncts keep 0.5% of lineitem's rows, and the same term reading them from a state table
took 30-35 ms. The filter above the join still applies every conjunct, so the join may read
fewer rows of the input than it has: only those the conjuncts keep.

The state is kept as a bag, by value: each run deletes one stored row per retracted copy and
inserts the asserted ones, after the model is written. Every value comes from a read of the
source (the build's, or a window's), so a retraction finds the row it matches bit for bit
(``apply``). The model's configuration names the inputs to store (``ivm_stored_inputs``):
storing pays where the conjuncts are selective and the source large, which the compiler
cannot know.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT r.id, s.w FROM r JOIN s ON r.k = s.k WHERE s.w > 1",
...     {"r": ("id INTEGER, k INTEGER", "(1, 1), (2, 2)"),
...      "s": ("k INTEGER, w INTEGER", "(1, 5), (2, 0)")},
...     "UPDATE s SET w = 7 WHERE k = 2; DELETE FROM s WHERE k = 1",
...     stored_inputs=("s",),
... )
-1 (1, 5)
+1 (2, 7)
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ...sql import TableRef, column_list, expr_sql, literal, quote
from ..apply import copies_of, expanded, insert_sql, retracted_copies
from ..render import MULT, Mode, RenderContext, Side
from .base import Operator
from .scan import Scan
from .stored import build_state

#: what a run that does not find every stored row it retracts fails with (then it rebuilds)
STORED_ROWS_MISSING = "lacks rows its maintenance retracts"


@dataclass(eq=False)
class StoredInput(Operator):
    #: the source's read, as the join took it
    child: Scan
    #: the conjuncts of the join (or of the filter above it) that read this input alone,
    #: over the scan's columns
    predicate: exp.Expr
    kind = "stored_input"

    @property
    def columns(self) -> tuple[str, ...]:
        return self.child.columns

    @property
    def children(self) -> tuple[Operator, ...]:
        return (self.child,)

    @property
    def stored(self) -> bool:
        return True

    @property
    def strategy(self) -> str:
        return f"rows of {self.child.table.key} passing {expr_sql(self.predicate)}, stored"

    @property
    def table(self) -> TableRef:
        return self.child.table

    def _passing(self, relation: str) -> str:
        return f"SELECT * FROM {relation} WHERE {expr_sql(self.predicate)}"

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        columns = column_list(self.columns)
        if ctx.mode is Mode.RECOMPUTE:
            return self._passing(self.child.state(ctx, side))
        if ctx.mode is Mode.BUILD:
            rows = f"SELECT {columns} FROM ({self._passing(self.child.state(ctx, 'new'))})"
            return f"SELECT {columns} FROM {build_state(ctx, self, rows)}"
        stored = f"SELECT {columns} FROM {self.state_table_sql()}"
        # whichever side a term reads, the run brings the state forward (``render_delta``)
        delta = self.delta(ctx)
        if side == "old" or delta is None:
            return stored
        return (
            f"SELECT {columns} FROM (\n{stored}\nEXCEPT ALL\n"
            f"{expanded(self.columns, delta, retracted=True)})\n"
            f"UNION ALL\n{expanded(self.columns, delta)}"
        )

    def render_delta(self, ctx: RenderContext) -> str | None:
        child = self.child.delta(ctx)
        if child is None:
            return None
        return self._passing(child)

    def materializes_delta(self, ctx: RenderContext) -> bool:
        """The run's writes read it after the model is written (``delta``)."""
        return True

    def delta(self, ctx: RenderContext) -> str | None:
        """The delta, and, once per run, the writes that bring the stored rows forward by it:
        one stored row deleted per retracted copy, the asserted copies inserted (none of
        them when the delta is empty: the source changed, but no row its conditions keep)."""
        name = super().delta(ctx)
        if name is None or ctx.mode is not Mode.MAINTAIN:
            return name

        def writes() -> str:
            table = self.state_table_sql()
            retracted = retracted_copies(name)
            found = quote(f"_ivm_{ctx.prefix}_{self.name}_retracted")
            ctx.write(
                f"CREATE OR REPLACE TEMP TABLE {found} AS\n"
                f"{copies_of(table, self.columns, retracted)}",
                unless_empty=name,
            )
            ctx.temps.append(found)
            # a stored row one bit off (a float inlined by a lake's own limit, ``inlining``)
            # would stay: the run rebuilds instead (``UnmatchedRetractions``)
            missing = literal(f"{self.table.key}: the stored input {table} {STORED_ROWS_MISSING}")
            ctx.write(
                f"SELECT CASE WHEN (SELECT count(*) FROM {found}) = "
                f"(SELECT coalesce(sum(-{MULT}), 0) FROM {name} WHERE {MULT} < 0) "
                f"THEN TRUE ELSE error({missing}) END",
                unless_empty=name,
            )
            ctx.write(
                f"DELETE FROM {table} WHERE rowid IN (SELECT rid FROM {found})", unless_empty=name
            )
            ctx.write(insert_sql(table, self.columns, name), unless_empty=name)
            return table

        ctx.once(self.node_id, "writes", writes)
        return name
