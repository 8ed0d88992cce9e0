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
rowids the change feed reports as deleted.

A window in which a rewrite, a compaction or a flush reorganized the table's files (DuckLake's
snapshot metadata says so) breaks both halves: ``ducklake_rewrite_data_files`` reports as
deleted rows it keeps (same rowid, same ``snapshot_id``), and gives rows it copies from a
file with deletes its own snapshot as ``snapshot_id``, reporting them inserted and never
deleted. A rowid is a row's identity in both snapshots, so the delta is then taken per
rowid, over every rowid that may have changed (a version began, or the feed reports it
deleted): the new snapshot's rows under those rowids, minus the old snapshot's; a row the
window did not change cancels out.

    delta: WITH c AS (SELECT rowid FROM t AT (VERSION => new) WHERE snapshot_id > old
                      UNION SELECT rowid FROM ducklake_table_deletions(..., old + 1, new))
           SELECT k, v, +1 AS m FROM t AT (VERSION => new) WHERE rowid IN c
           UNION ALL SELECT k, v, -1 AS m FROM t AT (VERSION => old) WHERE rowid IN c  ...

(Those reads cost a scan of both snapshots, so they are made only then.)

A maintenance run reads the ended rows more cheaply than the old snapshot filtered by the
feed's rowids, which scans every touched file whole: ``runtime.preimages`` plans a query of
exactly the positions that ended, from DuckLake's delete files and inlined deletions, and
passes it in as ``ended_rows`` (see ``source_delta_sql``); the definition above is its
fallback and its proof (the property tests compare the two).

A window whose snapshots only inserted into the table (DuckLake's snapshot metadata lists no
other change to it) ended no row version, and its delta is the first half alone: the common
append-only batch reads neither the feed nor the old snapshot. Its rows only gain copies, so
the run's shared read of them (``runtime.feeds``) serves as the delta where it is used, as it
is: a projection of rows that cannot cancel needs no netting.

Only rowids are taken from the feed: its values are wrong when one transaction touches a
file-backed row twice (duckdb/ducklake#1387), while its rowids and every time-travel read are
right. Netting the two bags per distinct row makes
identical rewrites (compaction, ``rewrite_data_files``) cancel.

The feed's rowids are materialized and read unfiltered: filters pushed into DuckLake's feed
functions have produced wrong rows (duckdb/ducklake#1201, #1369).

Each half read by rowid checks that no rowid names two rows, and fails the run otherwise
(``AMBIGUOUS_ROWIDS``): DuckLake 0.4 commits rows inserted and then updated in one transaction
under transaction-local row ids (from 10^18), which later transactions hand out again, so a
deletion reported for one of them would retract the other row too. The run then rebuilds.

A source with a column named ``snapshot_id`` hides the virtual column; the rowids that may
have changed are then the ones the feed reports inserted or deleted, in every window.

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
#: how a delta says that DuckLake gave two live rows of a table one row id
AMBIGUOUS_ROWIDS = "two live rows share a DuckLake row id in"


@dataclass(eq=False)
class Scan(Operator):
    table: TableRef
    read: tuple[str, ...]
    #: the table has a column named ``snapshot_id``, hiding DuckLake's virtual column
    hides_snapshot_id: bool = False
    kind = "scan"
    inline_state = True

    @property
    def columns(self) -> tuple[str, ...]:
        return self.read or (ROW_MARKER,)

    @property
    def children(self) -> tuple[Operator, ...]:
        return ()

    def own_sources(self) -> set[TableRef]:
        return {self.table}

    @property
    def source_table(self) -> str | None:
        return self.table.key

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
                self.table,
                self.read,
                ctx.snapshots[self.table.catalog],
                self.hides_snapshot_id,
                reorganized=self.table.key in ctx.reorganized,
                appended=self.table.key in ctx.appended,
            )
        if self._projects_feed(ctx):
            return f"SELECT {self._select_list()}, {MULT} FROM {feed}"
        # the run read the source's delta once, with more columns: project and net again
        return (
            f"SELECT {self._select_list()}, SUM({MULT})::BIGINT AS {MULT} FROM {feed} "
            f"GROUP BY ALL HAVING SUM({MULT}) <> 0"
        )

    def _projects_feed(self, ctx: RenderContext) -> bool:
        """Whether the delta is the run's shared read of a window that only inserted, read
        where it is used: its rows only gain copies, so a projection of them cancels nothing
        and needs no netting (a grouping by every column read: 23 of 109 ms of TPC-H Q1's
        run at SF10 with appends), nor a copy."""
        return self.table.key in ctx.feeds and inserts_only(
            appended=self.table.key in ctx.appended,
            reorganized=self.table.key in ctx.reorganized,
            hides_snapshot_id=self.hides_snapshot_id,
        )

    def materializes_delta(self, ctx: RenderContext) -> bool:
        """A source's delta is read by several statements; one read in place is not."""
        return not self._projects_feed(ctx)


def source_delta_sql(
    table: TableRef,
    read: tuple[str, ...],
    window: tuple[int, int],
    hides_snapshot_id: bool,
    *,
    reorganized: bool = False,
    appended: bool = False,
    ended_rows: str | None = None,
    netted: bool = True,
    read_at: int | None = None,
) -> str:
    """The netted delta of ``read`` columns of ``table`` over ``window`` (see the module);
    ``reorganized``: a rewrite, compaction or flush of the table's files falls in the window;
    ``appended``: the window only inserted into the table, so no row version ended in it;
    ``ended_rows``: a query of the row versions that ended in the window (``read`` and ``rowid``,
    as ``runtime.preimages`` reads them from the files that hold them), in place of the old
    snapshot's rows under the rowids the feed reports deleted; ``netted=False``: a window that
    only inserted may keep duplicate rows apart, each with multiplicity 1 (the shared feed
    cache: no row can cancel there); ``read_at``: a snapshot after ``new`` up to which
    nothing changed the table, at which the rows that began are read instead (the same rows,
    in a catalog version the reader may have loaded already)."""
    old, new = window
    began_at = new if read_at is None else read_at
    only_inserted = inserts_only(
        appended=appended, reorganized=reorganized, hides_snapshot_id=hides_snapshot_id
    )
    select = column_list(read) if read else f"TRUE AS {ROW_MARKER}"
    if only_inserted and not netted:
        return (
            f"SELECT {select}, 1::BIGINT AS {MULT} "
            f"FROM {table.sql()} AT (VERSION => {began_at}) WHERE snapshot_id > {old}"
        )
    arguments = ", ".join(literal(p) for p in (table.catalog, table.schema, table.name))

    def rowids(function: str) -> str:
        return (
            f"SELECT DISTINCT rowid FROM ducklake_table_{function}({arguments}, {old + 1}, {new})"
        )

    def among(rows: str) -> str:
        return f"rowid IN (WITH feed AS MATERIALIZED ({rows}) SELECT rowid FROM feed)"

    if hides_snapshot_id:
        began = ended = among(f"{rowids('insertions')} UNION {rowids('deletions')}")
    elif reorganized:
        began_rows = (
            f"SELECT rowid FROM {table.sql()} AT (VERSION => {began_at}) WHERE snapshot_id > {old}"
        )
        began = ended = among(f"{began_rows} UNION {rowids('deletions')}")
    else:
        began, ended = f"snapshot_id > {old}", among(rowids("deletions"))
    columns = column_list(read or (ROW_MARKER,))
    ctes: list[str] = []

    def half(version: int, where: str, sign: int) -> str:
        """The rows of one snapshot; taken by rowid, each rowid must name one row."""
        rows = f"{table.sql()} AT (VERSION => {version}) WHERE {where}"
        if sign < 0 and ended_rows is not None and not (hides_snapshot_id or reorganized):
            rows = f"({ended_rows})"
        elif not where.startswith("rowid IN"):
            return f"  SELECT {select}, {sign} AS _ivm_sign FROM {rows}"
        name = f"_ivm_by_rowid_{len(ctes)}"
        ctes.append(f"{name} AS MATERIALIZED (SELECT rowid AS _ivm_rowid, {select} FROM {rows})")
        return (
            f"  SELECT {columns}, {sign} AS _ivm_sign FROM {name} WHERE CASE WHEN (SELECT "
            f"count(*) = count(DISTINCT _ivm_rowid) FROM {name}) THEN TRUE "
            f"ELSE error({literal(f'{AMBIGUOUS_ROWIDS} {table.key}')}) END"
        )

    halves = [half(began_at, began, 1)]
    if not only_inserted:
        halves.append(half(old, ended, -1))
    with_clause = f"WITH {', '.join(ctes)}\n" if ctes else ""
    return (
        f"{with_clause}SELECT {columns}, SUM(_ivm_sign)::BIGINT AS {MULT} FROM (\n"
        + "\n  UNION ALL\n".join(halves)
        + "\n) GROUP BY ALL HAVING SUM(_ivm_sign) <> 0"
    )


def inserts_only(*, appended: bool, reorganized: bool, hides_snapshot_id: bool) -> bool:
    """Whether a window's delta is the rows it inserted alone, each gaining one copy: it only
    inserted into the table, and ``snapshot_id`` tells those rows (no reorganization gave
    kept rows a new one, no column hides it)."""
    return appended and not (reorganized or hides_snapshot_id)


def check_row_identity(table: TableRef, columns: list[str]) -> None:
    """Maintenance needs DuckLake's ``rowid``; a source column of that name hides it."""
    if any(c.lower() == "rowid" for c in columns):
        raise UnsupportedSQLError(
            f"source {table.key} has a column named rowid",
            "it hides DuckLake's row ids, which maintenance reads; rename the column, or set "
            "ivm_fallback='rebuild' to rebuild the model in full on every run",
        )
