"""Scan: a base table, read at a snapshot or as its netted change feed.

    view:  SELECT k, v FROM lake.main.t
    delta: SELECT "k", "v", SUM(CASE WHEN change_type IN ('insert', 'update_postimage')
                                THEN 1 ELSE -1 END) AS "_ivm_m"
           FROM ducklake_table_changes('lake', 'main', 't', old + 1, new)
           GROUP BY ALL HAVING SUM(...) <> 0

The feed reports every intermediate change in the window; summing signed multiplicities per
distinct row nets it: a row inserted then deleted cancels, an update that changes nothing
cancels, and netting never depends on rowids (compaction may renumber them).

The netted feed is a MATERIALIZED CTE: after compaction the feed's column statistics describe
the current files, not older pre-images, so no filter may be pushed into the feed read (see
``lake.feed_safe_optimizers`` for the rest of that story).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import MULT, Operator, RenderContext, Side, TableRef, column_list, literal

#: stands in for the columns of a scan whose rows are counted but none of whose columns are read
ROW_MARKER = "_ivm_row"
_SIGN = "CASE WHEN change_type IN ('insert', 'update_postimage') THEN 1 ELSE -1 END"


@dataclass(eq=False)
class Scan(Operator):
    table: TableRef
    read: tuple[str, ...]
    kind = "scan"
    materialize_delta = True

    @property
    def columns(self) -> tuple[str, ...]:
        return self.read or (ROW_MARKER,)

    @property
    def children(self) -> tuple[Operator, ...]:
        return ()

    def sources(self) -> set[TableRef]:
        return {self.table}

    def _select_list(self) -> str:
        return column_list(self.read) if self.read else f"TRUE AS {ROW_MARKER}"

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        version = ctx.version(self.table.catalog, side)
        return f"SELECT {self._select_list()} FROM {self.table.sql()} AT (VERSION => {version})"

    def render_delta(self, ctx: RenderContext) -> str | None:
        old, new = ctx.snapshots[self.table.catalog]
        feed = (
            f"ducklake_table_changes({literal(self.table.catalog)}, {literal(self.table.schema)}, "
            f"{literal(self.table.name)}, {old + 1}, {new})"
        )
        return (
            f"SELECT {self._select_list()}, SUM({_SIGN})::BIGINT AS {MULT}\n"
            f"FROM {feed}\n"
            f"GROUP BY ALL\n"
            f"HAVING SUM({_SIGN}) <> 0"
        )
