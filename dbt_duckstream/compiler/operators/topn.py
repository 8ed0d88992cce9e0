"""Top-N: ``ORDER BY ... LIMIT n OFFSET m``, its rows stored and recomputed when the input
changes.

    view:   SELECT * FROM r ORDER BY o LIMIT n OFFSET m
    state:  the n rows at the cursor
    delta:  the stored rows                                           with -1
            UNION ALL
            SELECT * FROM r@new ORDER BY o LIMIT n OFFSET m            with +1
            (consolidated: the rows that stay cancel)

Which rows are first depends on the whole input, so there is no rule per row; but DuckDB
finds the first n + m rows of its input in one pass without sorting it (a heap), so the
recomputation costs a scan of the input, and only the rows that enter or leave the top reach
the table. Insert-only windows do better still: the new top is the top of the stored rows and
the inserted ones, so the input is not read at all (with an OFFSET the stored rows are the
first n + m, and the model the last n of them).

The rows are stored, never recomputed at the old snapshot: with ties in the ORDER BY either
tied row is a valid result, and a retraction must find the one that was kept. The table is
always a valid result of the model's SQL; where the ORDER BY leaves rows tied at the n-th
place, a recomputation may keep another (a ``cut`` of ``compiler/ties.py``).

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT id, v FROM t ORDER BY v DESC, id LIMIT 2",
...     {"t": ("id INTEGER, v INTEGER", "(1, 10), (2, 20), (3, 30)")},
...     "DELETE FROM t WHERE id = 3; INSERT INTO t VALUES (4, 15)",
... )
-1 (3, 30)
+1 (4, 15)
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ...sql import column_list, expr_sql
from ..render import MULT, Mode, RenderContext, Side
from .base import DeltaReads, Operator, RowsOf
from .stored import build_state, consolidated, retract_assert

#: the position of a stored row among the first n + m
POSITION = "_ivm_pos"


@dataclass(eq=False)
class TopN(Operator):
    child: Operator
    #: ORDER BY terms over the child's columns
    order: tuple[exp.Ordered, ...]
    limit: int | None
    offset: int = 0
    kind = "topn"

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
        return "stored top rows; recomputed from the input when a row leaves them"

    def delta_reads(self, changed: frozenset[str], rows: RowsOf) -> DeltaReads:
        """A change that reaches into the first rows may rescan the input."""
        return DeltaReads(sum(rows(c) for c in self.children))

    def _order_sql(self) -> str:
        return ", ".join(expr_sql(term) for term in self.order)

    def _first(self, source: str) -> str:
        """The first n + m rows of ``source``, each with its position."""
        limit = "" if self.limit is None else f" LIMIT {self.limit + self.offset}"
        return (
            f"SELECT *, row_number() OVER (ORDER BY {self._order_sql()}) AS {POSITION} "
            f"FROM (SELECT * FROM {source} ORDER BY {self._order_sql()}{limit})"
        )

    def _output(self, stored: str) -> str:
        return f"SELECT {column_list(self.columns)} FROM {stored} WHERE {POSITION} > {self.offset}"

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        if ctx.mode is Mode.RECOMPUTE:
            limit = "" if self.limit is None else f" LIMIT {self.limit}"
            offset = f" OFFSET {self.offset}" if self.offset else ""
            source = self.child.state(ctx, side)
            return f"SELECT * FROM {source} ORDER BY {self._order_sql()}{limit}{offset}"
        if ctx.mode is Mode.BUILD:
            return self._output(build_state(ctx, self, self._first(self.child.state(ctx, side))))
        if side == "old" or self.child.delta(ctx) is None:
            return self._output(self.state_table_sql())
        return self._output(self._new(ctx))

    def render_delta(self, ctx: RenderContext) -> str | None:
        if self.child.delta(ctx) is None:
            return None
        old, new = self._output(self.state_table_sql()), self._output(self._new(ctx))
        return consolidated(retract_assert(old, new), self.columns)

    def _new(self, ctx: RenderContext) -> str:
        """A temporary table of the first n + m rows at the new snapshot; at the end of the
        run it replaces the stored rows.

        When the delta retracts no stored row, the first rows of the stored ones and the
        asserted ones are the first rows of the new input (a row that left was not among the
        stored ones, so every stored row still precedes every row that is not stored);
        otherwise the input is read. The delta is netted first: a join's delta may assert and
        retract the same row (an inserted row matching a deleted one), which is no change."""

        def compute() -> str:
            child_delta = self.child.delta(ctx)
            assert child_delta is not None
            delta = ctx.cte(
                f"{self.name}_net", consolidated(f"SELECT * FROM {child_delta}", self.columns)
            )
            table, columns = self.state_table_sql(), column_list(self.columns)
            retracted = ctx.cte(
                f"{self.name}_retracted",
                f"SELECT {columns} FROM {delta} WHERE {MULT} < 0 "
                f"INTERSECT SELECT {columns} FROM {table}",
            )
            asserted = ctx.cte(
                f"{self.name}_asserted",
                f"SELECT {columns} FROM {delta}, range({MULT}) WHERE {MULT} > 0",
            )
            merged = self._first(
                f"(SELECT {columns} FROM {table} UNION ALL SELECT * FROM {asserted})"
            )
            rescanned = self._first(self.child.state(ctx, "new"))
            new = ctx.temp(
                f"{self.name}_new",
                f"SELECT * FROM ({merged}) WHERE NOT EXISTS (SELECT 1 FROM {retracted})\n"
                f"UNION ALL\n"
                f"SELECT * FROM ({rescanned}) WHERE EXISTS (SELECT 1 FROM {retracted})",
            )
            ctx.write(f"DELETE FROM {table}")
            ctx.write(f"INSERT INTO {table} SELECT * FROM {new}")
            return new

        found = ctx.once(self.node_id, "stored rows", compute)
        assert found is not None
        return found
