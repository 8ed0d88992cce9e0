"""What changed in a run's window, from DuckLake's snapshot metadata: which sources changed
rows (over which span of snapshots), which were altered, reorganized or only appended to,
and what makes the window unusable (a source recreated, snapshots expired, deletion vectors,
a rewrite then a flush, a write to the model's tables by another hand)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import duckdb

from ...sql import BUILTIN, TableRef
from ..counts import CountRead, counts_at
from ..lake import (
    FLUSH,
    REWRITE,
    SnapshotChange,
    live_rows,
    metadata_catalog,
    rewritten_history,
    snapshot_exists,
    snapshots_present,
    uses_deletion_vectors,
)
from ..live_rows import CountAt, live_row_counts
from ..runlog import is_own_commit, labelled

if TYPE_CHECKING:
    from .situation import Situation

#: snapshot change kinds that rewrite a table's storage without changing its rows
COMPACTIONS = frozenset({"compacted_table", "merge_adjacent", REWRITE, FLUSH})
#: kinds that change a table's columns or comment, not its rows
ALTERATIONS = frozenset({"altered_table", "created_table"})
#: kinds that change a table's rows; any other kind (a compaction, a rewrite, a flush of
#: inlined rows) reorganizes its files, and its feed may report rows it keeps as deleted
ROW_CHANGES = frozenset(
    {"inserted_into_table", "deleted_from_table", "inlined_insert", "inlined_delete"}
)
#: kinds that only add rows
INSERTIONS = frozenset({"inserted_into_table", "inlined_insert"})


@dataclass(frozen=True)
class WindowChanges:
    """What happened in the window, from DuckLake's snapshot metadata."""

    @property
    def changed(self) -> frozenset[str]:
        return frozenset(self.spans)

    #: sources whose rows changed, each with the span of snapshots that changed them:
    #: (the one before the first, the last); its delta over the window is its delta over that
    #: span, which other models whose windows differ only in quiet snapshots share
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: sources whose columns (or comment) changed
    altered: frozenset[str] = frozenset()
    #: why the window cannot be maintained from the change feed
    broken: str | None = None
    #: a write to the model's own tables that no run of the model made
    foreign: str | None = None
    #: catalogs whose snapshots behind the cursor expired, while the sources there provably
    #: did not change: the cursor moves past them
    expired: frozenset[str] = frozenset()
    #: sources whose files a compaction, rewrite or flush reorganized
    reorganized: frozenset[str] = frozenset()
    #: sources that something else than an insertion changed (deleted, updated, reorganized)
    ending: frozenset[str] = frozenset()
    #: per source, the last snapshot of the window that lists any change to it
    listed: dict[str, int] = field(default_factory=dict)

    @property
    def appended(self) -> frozenset[str]:
        """Changed sources whose changes in the window were all insertions."""
        return self.changed - self.ending - self.reorganized


def window_changes(situation: Situation) -> WindowChanges:
    """What changed in the window for the model's sources and its own tables."""
    spans: dict[str, tuple[int, int]] = {}
    altered: set[str] = set()
    foreign: str | None = None
    expired: set[str] = set()
    reorganized: set[str] = set()
    ending: set[str] = set()
    listed: dict[str, int] = {}
    #: a source whose old snapshot the maintenance would read cannot be read right
    rewritten: str | None = None
    own = {situation.plan.target, *situation.plan.state_tables}
    for catalog, (old, new) in situation.window.items():
        if old == new:
            continue
        sources = [s for s in situation.plan.sources if s.catalog == catalog]
        for source in sources:
            if situation.ids[source.key] != situation.cursors[source.key].table_id:
                return WindowChanges(broken=f"source {source.key} was dropped or recreated")
        mine = {tid: t for t in own if t.catalog == catalog and (tid := situation.ids.get(t.key))}
        if not snapshot_exists(situation.con, catalog, old):
            if not all(_unchanged_since(situation, s, old, new) for s in sources):
                return WindowChanges(
                    broken=f"snapshot {old} of {catalog} expired behind the cursor"
                )
            if not _untouched_since_last_run(situation, catalog, old, new, set(mine)):
                return WindowChanges(
                    broken=f"snapshot {old} of {catalog} expired behind the cursor, and "
                    "with it what wrote the model's tables since its last run"
                )
            expired.add(catalog)
            continue
        source_tables = {tid: s for s in sources if (tid := situation.ids[s.key]) is not None}
        by_id = {tid: s.key for tid, s in source_tables.items()}
        tables = source_tables | mine  # ids are unique within one catalog
        window_changes = situation.snapshot_changes(catalog, old, new, set(tables))
        for change in window_changes:
            if change.table_id in by_id:
                key = by_id[change.table_id]
                listed[key] = max(listed.get(key, 0), change.snapshot_id)
            if _flushes_deletions(situation.con, change, window_changes, tables, set(mine)):
                continue
            if change.table_id in mine:
                benign = change.kind in COMPACTIONS | ALTERATIONS
                if not benign and not is_own_commit(change, situation.plan.target):
                    foreign = foreign or (
                        f"its table was written outside dbt-duckstream in snapshot "
                        f"{change.snapshot_id} ({change.kind})"
                    )
            elif change.kind == "dropped_table":
                return WindowChanges(broken=f"source {by_id[change.table_id]} was dropped")
            elif change.kind in ALTERATIONS:
                altered.add(by_id[change.table_id])
            elif change.kind not in COMPACTIONS:
                key = by_id[change.table_id]
                first, _ = spans.get(key, (change.snapshot_id - 1, 0))
                spans[key] = (first, change.snapshot_id)
            if change.table_id in by_id and change.kind not in ROW_CHANGES | ALTERATIONS:
                reorganized.add(by_id[change.table_id])
            if change.table_id in by_id and change.kind not in INSERTIONS | ALTERATIONS:
                ending.add(by_id[change.table_id])
        found = rewritten_history(window_changes, set(by_id))
        if found is not None and rewritten is None:
            table_id, rewrite, flush = found
            rewritten = (
                f"source {by_id[table_id]} was rewritten in snapshot {rewrite} and its "
                f"inlined data flushed in snapshot {flush}, after which DuckLake reads the "
                "snapshots before the rewrite wrongly (duckdb/ducklake#1406)"
            )
        touched = {tid for tid, key in by_id.items() if key in spans}
        if uses_deletion_vectors(situation.con, catalog, touched):
            return WindowChanges(
                broken=f"a source in {catalog} writes deletion vectors, in which DuckLake "
                "does not record which snapshot deleted a row"
            )
    if rewritten is not None and spans:  # with no change, nothing is read
        return WindowChanges(broken=rewritten)
    return WindowChanges(
        spans,
        frozenset(altered),
        None,
        foreign,
        frozenset(expired),
        frozenset(reorganized & set(spans)),
        frozenset(ending),
        listed,
    )


def verified_spans(situation: Situation) -> tuple[dict[str, tuple[int, int]], str | None]:
    """The changed sources' spans, checked against DuckLake dating a commit's changes too
    early, or why the window cannot be trusted. Checked only once maintenance is chosen
    (a rebuild reads the sources whole, needing no span).

    A transaction that commits after another one may stamp its deletions of inlined rows
    with a snapshot before its own (seen with concurrent dbt threads, and with a
    PostgreSQL catalog beside a writer process: a model's deletions from its source model
    stamped some 90 snapshots before the commit that listed them). Then the source at the
    start of the span no longer has the rows the model read at its cursor: its count
    differs from the recorded one. The count at the cursor then says which: the rows the
    model read there are gone (the window cannot be trusted), or only the span's start
    moved (the span widens to the window). Counts at a span's start are shared by the
    models of a run (``counts``). Deletions dated early lower the count at the span's
    start wherever they land; only insertions dated early (never seen) could offset them."""
    spans = dict(situation.changes.spans)
    changed = [source for source in situation.plan.sources if source.key in spans]

    def read(source: TableRef, snapshot: int) -> CountRead:
        tid = situation.ids[source.key]
        assert tid is not None
        return CountRead(
            situation.lake(source.catalog),
            source,
            tid,
            snapshot,
            situation.pinned[source.catalog],
            situation.changes.listed.get(source.key, 0),
        )

    recorded = {s.key: rows for s in changed if (rows := situation.cursors[s.key].rows) is not None}
    starts = [s for s in changed if s.key in recorded]
    at_start = counts_at(situation.con, [read(s, spans[s.key][0]) for s in starts])
    moved = [s for s, rows in zip(starts, at_start, strict=True) if rows != recorded[s.key]]
    at_cursor = counts_at(situation.con, [read(s, situation.window[s.catalog][0]) for s in moved])
    for source, rows in zip(moved, at_cursor, strict=True):
        if rows != recorded[source.key]:
            return {}, _rewritten(source, situation.window[source.catalog][0])
    for source in changed:
        if source.key not in recorded or source in moved:
            spans[source.key] = (situation.window[source.catalog][0], spans[source.key][1])
    return spans, None


def _rewritten(source: TableRef, old: int) -> str:
    return (
        f"source {source.key} at snapshot {old} no longer holds the rows this model read "
        "there: a later commit dated its changes before the cursor (DuckLake, concurrent "
        "commits)"
    )


def _untouched_since_last_run(
    situation: Situation, catalog: str, old: int, new: int, mine: set[int]
) -> bool:
    """Whether, the cursor's snapshot ``old`` having expired, the model's tables (``mine``)
    provably hold what its last run wrote: every snapshot after that run's commit is
    still there, and none of those after ``old`` wrote them but the model's own runs
    (compactions and alterations aside). A write into the model between the expiry and
    this run was otherwise taken as no change, and the cursor moved past it."""
    meta = metadata_catalog(catalog)
    row = situation.con.execute(
        f"SELECT {BUILTIN}.max(snapshot_id) FROM {meta}.ducklake_snapshot_changes "
        f"WHERE {labelled(situation.plan.target)} AND snapshot_id <= {int(new)}"
    ).fetchone()
    committed = row[0] if row else None
    if committed is None or not snapshots_present(situation.con, catalog, committed, new):
        return False
    return all(
        change.kind in COMPACTIONS | ALTERATIONS or is_own_commit(change, situation.plan.target)
        for change in situation.snapshot_changes(catalog, old, new, mine)
    )


def _unchanged_since(situation: Situation, source: TableRef, old: int, new: int) -> bool:
    """Whether a source's rows at ``new`` are exactly its rows at the (expired) snapshot
    ``old``: no live row version was written after ``old``, so every row live now was live
    then, and the row count is the one recorded with the cursor."""
    cursor = situation.cursors[source.key]
    if cursor.rows is None or situation.plan.hides_snapshot_id(source.key):
        return False
    rows, newest = live_rows(situation.con, source, new, newest=True)
    return newest <= old and rows == cursor.rows


def _flushes_deletions(
    con: duckdb.DuckDBPyConnection,
    change: SnapshotChange,
    window_changes: list[SnapshotChange],
    tables: dict[int, TableRef],
    own: set[int],
) -> bool:
    """Whether a ``deleted_from_table`` entry is ``ducklake_flush_inlined_data`` writing
    inlined deletions to a delete file: DuckLake records that as a deletion, alone or beside
    ``inline_flush``. It is one when the snapshot wrote no row to the table and left its row
    count as it was (a deletion that removed nothing): two scans of the table, spared for a
    source that the window changed anyway (another snapshot wrote rows to it), whose delta
    takes a flush for what it is (its ended rows are those alive at the window's start)."""
    if change.kind != "deleted_from_table" or change.table_id not in tables:
        return False
    same = [
        c
        for c in window_changes
        if c.snapshot_id == change.snapshot_id and c.table_id == change.table_id
    ]
    if any(c.kind not in COMPACTIONS | {"deleted_from_table"} for c in same):
        return False
    if change.table_id not in own and any(
        c.table_id == change.table_id and c.kind in INSERTIONS for c in window_changes
    ):
        return False
    table = tables[change.table_id]
    at = (change.snapshot_id - 1, change.snapshot_id)
    before, after = live_row_counts(con, [CountAt(table, change.table_id, s) for s in at])
    return before == after
