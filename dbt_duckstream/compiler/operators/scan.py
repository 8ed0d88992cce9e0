"""Scan: a base table, read at a snapshot, or as its exact delta over the window.

    view:  SELECT k, v FROM lake.main.t
    delta: SELECT k, v, SUM(m) AS _ivm_m FROM (
             SELECT k, v, +1 AS m FROM t AT (VERSION => new) WHERE snapshot_id > old
             UNION ALL
             SELECT k, v, -1 AS m FROM t AT (VERSION => old)
             WHERE rowid IN (SELECT rowid FROM ducklake_table_deletions(..., old + 1, new))
           ) GROUP BY ALL HAVING SUM(m) <> 0

The table at ``new`` is the table at ``old``, minus the row versions that ended in the window
(deleted, or replaced by an update), plus those that began in it. DuckLake's virtual column
``snapshot_id`` names the snapshot that wrote a row version, so the versions that began are a
pruned read of the new snapshot; the versions that ended are the old snapshot's rows whose
rowids the change feed reports as deleted. Only rowids are taken from the feed: its values are
wrong when one transaction touches a file-backed row twice (duckdb/ducklake#1387), while its
rowids and every time-travel read are right. Netting the two bags per distinct row makes
identical rewrites (compaction, ``rewrite_data_files``) cancel.

The feed's rowids are materialized and read unfiltered: filters pushed into DuckLake's feed
functions have produced wrong rows (duckdb/ducklake#1201, #1369).

A source with a column named ``snapshot_id`` hides the virtual column; the versions that began
are then the new snapshot's rows whose rowids the feed reports as inserted.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT k, v FROM t",
...     {"t": ("k INTEGER, v INTEGER", "(1, 10), (2, 20)")},
...     "UPDATE t SET v = 11 WHERE k = 1; INSERT INTO t VALUES (3, 30); DELETE FROM t WHERE k = 3",
... )
-1 (1, 10)
+1 (1, 11)
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import UnsupportedSQLError
from ...sql import TableRef, column_list, literal
from ..render import MULT, RenderContext, Side
from .base import Operator

#: stands in for the columns of a scan whose rows are counted but none of whose columns are read
ROW_MARKER = "_ivm_row"


@dataclass(eq=False)
class Scan(Operator):
    table: TableRef
    read: tuple[str, ...]
    #: the table has a column named ``snapshot_id``, hiding DuckLake's virtual column
    hides_snapshot_id: bool = False
    kind = "scan"
    materialize_delta = True

    @property
    def columns(self) -> tuple[str, ...]:
        return self.read or (ROW_MARKER,)

    @property
    def children(self) -> tuple[Operator, ...]:
        return ()

    def own_sources(self) -> set[TableRef]:
        return {self.table}

    def _select_list(self) -> str:
        return column_list(self.read) if self.read else f"TRUE AS {ROW_MARKER}"

    def _at(self, version: int) -> str:
        return f"{self.table.sql()} AT (VERSION => {version})"

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        return (
            f"SELECT {self._select_list()} FROM {self._at(ctx.version(self.table.catalog, side))}"
        )

    def render_delta(self, ctx: RenderContext) -> str | None:
        feed = ctx.feeds.get(self.table.key)
        if feed is None:
            return source_delta_sql(
                self.table, self.read, ctx.snapshots[self.table.catalog], self.hides_snapshot_id
            )
        # the run read the source's delta once, with more columns: project and net again
        return (
            f"SELECT {self._select_list()}, SUM({MULT})::BIGINT AS {MULT} FROM {feed} "
            f"GROUP BY ALL HAVING SUM({MULT}) <> 0"
        )


def source_delta_sql(
    table: TableRef, read: tuple[str, ...], window: tuple[int, int], hides_snapshot_id: bool
) -> str:
    """The netted delta of ``read`` columns of ``table`` over ``window`` (see the module)."""
    old, new = window
    arguments = ", ".join(literal(p) for p in (table.catalog, table.schema, table.name))

    def rowids(function: str) -> str:
        feed = f"ducklake_table_{function}({arguments}, {old + 1}, {new})"
        return (
            f"rowid IN (WITH feed AS MATERIALIZED (SELECT DISTINCT rowid FROM {feed}) "
            "SELECT rowid FROM feed)"
        )

    began = rowids("insertions") if hides_snapshot_id else f"snapshot_id > {old}"
    select = column_list(read) if read else f"TRUE AS {ROW_MARKER}"
    columns = column_list(read or (ROW_MARKER,))
    return (
        f"SELECT {columns}, SUM(_ivm_sign)::BIGINT AS {MULT} FROM (\n"
        f"  SELECT {select}, 1 AS _ivm_sign FROM {table.sql()} AT (VERSION => {new}) "
        f"WHERE {began}\n"
        f"  UNION ALL\n"
        f"  SELECT {select}, -1 AS _ivm_sign FROM {table.sql()} AT (VERSION => {old}) "
        f"WHERE {rowids('deletions')}\n"
        f") GROUP BY ALL HAVING SUM(_ivm_sign) <> 0"
    )


def check_row_identity(table: TableRef, columns: list[str]) -> None:
    """Maintenance needs DuckLake's ``rowid``; a source column of that name hides it."""
    if any(c.lower() == "rowid" for c in columns):
        raise UnsupportedSQLError(
            f"source {table.key} has a column named rowid",
            "it hides DuckLake's row ids, which maintenance reads; rename the column, or set "
            "ivm_fallback='rebuild' to rebuild the model in full on every run",
        )
