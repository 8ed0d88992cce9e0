"""What a run does, decided before anything is written: one ``Decision`` per run.

The triggers are tried in the order of ``TRIGGERS``; the first that applies decides:

    first run -> full refresh -> model SQL changed -> change feed unusable (a source
    recreated, snapshots expired, deletion vectors, a rewrite then a flush) -> columns the
    model reads changed -> the model's tables written by someone else -> nothing changed ->
    maintenance would cost more than a rebuild -> state missing -> changes dated before the
    cursor -> maintain

Everything is read from DuckLake's catalog metadata, and no data (deleted rows below excepted).
The cost choice weighs what maintenance reads and writes against what a rebuild does
(``estimate``), in rows:

    maintain ~ rows of data files added in the window
             + PRE_IMAGE_WEIGHT * rows of the row groups holding the rows deleted in the
               window (a row group per deleted row, at most the file: ``preimages``
               reads them, only the columns the model reads; ``window_rows``)
             + INSERT_WEIGHT * (rows inserted + rows deleted)
             + rows of the inputs a join term, a recomputed aggregate, a window's touched
               partitions, a set operation's counts or a top-N's rescan read in full
             + OUTPUT_WEIGHT * rows an operator recomputes whole and stores again (a window
               without PARTITION BY is one partition; a recursive CTE)
    rebuild  ~ rows of every input table + OUTPUT_WEIGHT * rows of the model

The weights are per-row costs relative to scanning a row, measured with the TPC-H benchmark
(``make bench``) on DuckDB 1.5. A run rebuilds when maintenance is estimated to cost more than
``rebuild_above`` of a rebuild, so a large batch never costs much more than rebuilding.
Inserted and deleted rows are counted from the metadata (``window_rows``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property
from typing import Any

import duckdb

from ..compiler import IVMPlan
from ..compiler.operators import (
    Aggregate,
    AsofJoin,
    CountedSetOperation,
    Filter,
    Join,
    Operator,
    OuterJoin,
    RecursiveCTE,
    ScalarSubquery,
    Scan,
    TopN,
    Window,
)
from ..errors import ConfigurationError
from ..sql import BUILTIN, TableRef
from .counts import CountRead, counts_at
from .key_ranges import NarrowedRead, narrowed_rows
from .lake import (
    FLUSH,
    REWRITE,
    SnapshotChange,
    lake_identity,
    live_rows,
    metadata_catalog,
    read_columns,
    rewritten_history,
    snapshot_changes,
    snapshot_exists,
    snapshots_present,
    uses_deletion_vectors,
)
from .live_rows import CountAt, live_row_counts
from .near_reads import NearRead, near_reads, near_rows, reads_changed, rows_read
from .runlog import Cursor, Entry, PastRun, is_own_commit, labelled
from .window_rows import window_rows

#: rebuild when the estimated maintenance work exceeds this share of a rebuild's
REBUILD_ABOVE = 1.0
#: an inserted row through the feed, the deltas and the apply, against a row scanned
INSERT_WEIGHT = 20
#: a row of those row groups against a row scanned by a rebuild: reading Q1's seven columns
#: at the deleted positions of every row group of lineitem took 85 ms, Q1's rebuild 190 ms
#: (SF1); the twins of the benchmark's views that always maintain agree (docs/measurements.md)
PRE_IMAGE_WEIGHT = 0.5
#: a model row written by a rebuild, against a row scanned
OUTPUT_WEIGHT = 20


class Strategy(StrEnum):
    INITIAL = "initial"
    INCREMENTAL = "incremental"
    REBUILD = "rebuild"
    UNCHANGED = "unchanged"
    EMPTY = "empty"  # dbt's --empty: the SQL checked, no rows read or written


@dataclass(frozen=True)
class Estimate:
    """Rows a maintenance run and a rebuild would read or write."""

    changed_rows: int  # rows inserted, plus (at most) rows deleted, in the window
    maintain_rows: int
    rebuild_rows: int
    #: the model's measured cost of a maintained row over that of a rebuilt row
    #: (``learned_correction``), 1.0 until it has been measured
    correction: float = 1.0

    @property
    def share(self) -> float:
        return self.maintain_rows * self.correction / max(self.rebuild_rows, 1)

    def rebuild_is_cheaper(self, above: float = REBUILD_ABOVE) -> bool:
        return self.share > above

    def describe(self) -> str:
        learned = (
            f" (its rows priced x{self.correction:.2g} from the model's past run times)"
            if self.correction != 1.0
            else ""
        )
        return (
            f"up to {self.changed_rows} rows changed; estimated maintenance cost "
            f"{self.share:.0%} of a rebuild's{learned}"
        )


@dataclass(frozen=True)
class Decision:
    """What a run will do, why, and over which window."""

    strategy: Strategy
    reason: str
    #: per catalog, the window applied: (cursor, pinned), or (pinned, pinned) for a build
    windows: dict[str, tuple[int, int]]
    #: the sources (keys) that changed in the window
    changed: frozenset[str] = frozenset()
    estimate: Estimate | None = None
    #: an unchanged run that still records new cursors (the old ones expired)
    advance: bool = False
    #: per changed source, the snapshots that changed it (see ``WindowChanges.spans``)
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: the changed sources whose files a rewrite, compaction or flush reorganized in the
    #: window (their scans take the delta per rowid)
    reorganized: frozenset[str] = frozenset()
    #: the changed sources that the window only inserted into (their deltas end no row)
    appended: frozenset[str] = frozenset()
    #: the sources and state tables (keys) of at least ``LARGE_TABLE_ROWS`` rows
    large_tables: frozenset[str] = frozenset()

    @property
    def refills(self) -> bool:
        """A rebuild chosen for cost: the model's table exists and is refilled in place, from
        its sources alone; its state tables are dropped (``IVMPlan.refill_sql``)."""
        return self.strategy is Strategy.REBUILD and bool(self.changed)


#: a state table of at least this many rows is read by key range (``sql.keyed_join``), and
#: a source this large is narrowed through the inputs a join term narrows (``Join``): each
#: costs another DuckLake scan (4-7 ms at TPC-H SF1, measured), reading or hashing a table
#: this large costs more
LARGE_TABLE_ROWS = 1_000_000

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


@dataclass
class Situation:
    """What a run knows when it decides: the plan, the pinned snapshots, the table ids of the
    sources, the model and its state tables, and the model's last run."""

    con: duckdb.DuckDBPyConnection
    plan: IVMPlan
    pinned: dict[str, int]
    ids: dict[str, int | None]
    #: lake identities (``lake.lake_identity``) read so far, by catalog: the model's own with
    #: the decision (its known runs need it), the others when the run needs them (``lake``)
    lakes: dict[str, str]
    last: Entry | None
    full_refresh: bool = False
    rebuild_above: float | None = REBUILD_ABOVE

    def lake(self, catalog: str) -> str:
        """The catalog's lake identity, read once; an unchanged run reads only the model's."""
        if catalog not in self.lakes:
            self.lakes[catalog] = lake_identity(self.con, catalog)
        return self.lakes[catalog]

    @property
    def cursors(self) -> dict[str, Cursor]:
        return {c.source: c for c in self.last.cursors} if self.last is not None else {}

    @property
    def window(self) -> dict[str, tuple[int, int]]:
        """(cursor, pinned) per catalog; a catalog without a cursor starts at the pin."""
        old = {c.catalog: c.snapshot_id for c in self.cursors.values()}
        return {cat: (old.get(cat, snap), snap) for cat, snap in self.pinned.items()}

    @property
    def build_window(self) -> dict[str, tuple[int, int]]:
        return {cat: (snap, snap) for cat, snap in self.pinned.items()}

    def rebuild(self, reason: str, strategy: Strategy = Strategy.REBUILD) -> Decision:
        return Decision(strategy, reason, self.build_window)

    @cached_property
    def changes(self) -> WindowChanges:
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
        own = {self.plan.target, *self.plan.state_tables}
        for catalog, (old, new) in self.window.items():
            if old == new:
                continue
            sources = [s for s in self.plan.sources if s.catalog == catalog]
            for source in sources:
                if self.ids[source.key] != self.cursors[source.key].table_id:
                    return WindowChanges(broken=f"source {source.key} was dropped or recreated")
            mine = {tid: t for t in own if t.catalog == catalog and (tid := self.ids.get(t.key))}
            if not snapshot_exists(self.con, catalog, old):
                if not all(self._unchanged_since(s, old, new) for s in sources):
                    return WindowChanges(
                        broken=f"snapshot {old} of {catalog} expired behind the cursor"
                    )
                if not self._untouched_since_last_run(catalog, old, new, set(mine)):
                    return WindowChanges(
                        broken=f"snapshot {old} of {catalog} expired behind the cursor, and "
                        "with it what wrote the model's tables since its last run"
                    )
                expired.add(catalog)
                continue
            source_tables = {tid: s for s in sources if (tid := self.ids[s.key]) is not None}
            by_id = {tid: s.key for tid, s in source_tables.items()}
            tables = source_tables | mine  # ids are unique within one catalog
            window_changes = snapshot_changes(self.con, catalog, old, new, set(tables))
            for change in window_changes:
                if change.table_id in by_id:
                    key = by_id[change.table_id]
                    listed[key] = max(listed.get(key, 0), change.snapshot_id)
                if _flushes_deletions(self.con, change, window_changes, tables, set(mine)):
                    continue
                if change.table_id in mine:
                    benign = change.kind in COMPACTIONS | ALTERATIONS
                    if not benign and not is_own_commit(change, self.plan.target):
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
            if uses_deletion_vectors(self.con, catalog, touched):
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

    @cached_property
    def verified_spans(self) -> tuple[dict[str, tuple[int, int]], str | None]:
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
        spans = dict(self.changes.spans)
        changed = [source for source in self.plan.sources if source.key in spans]

        def read(source: TableRef, snapshot: int) -> CountRead:
            tid = self.ids[source.key]
            assert tid is not None
            return CountRead(
                self.lake(source.catalog),
                source,
                tid,
                snapshot,
                self.pinned[source.catalog],
                self.changes.listed.get(source.key, 0),
            )

        recorded = {s.key: rows for s in changed if (rows := self.cursors[s.key].rows) is not None}
        starts = [s for s in changed if s.key in recorded]
        at_start = counts_at(self.con, [read(s, spans[s.key][0]) for s in starts])
        moved = [s for s, rows in zip(starts, at_start, strict=True) if rows != recorded[s.key]]
        at_cursor = counts_at(self.con, [read(s, self.window[s.catalog][0]) for s in moved])
        for source, rows in zip(moved, at_cursor, strict=True):
            if rows != recorded[source.key]:
                return {}, _rewritten(source, self.window[source.catalog][0])
        for source in changed:
            if source.key not in recorded or source in moved:
                spans[source.key] = (self.window[source.catalog][0], spans[source.key][1])
        return spans, None

    def _untouched_since_last_run(self, catalog: str, old: int, new: int, mine: set[int]) -> bool:
        """Whether, the cursor's snapshot ``old`` having expired, the model's tables (``mine``)
        provably hold what its last run wrote: every snapshot after that run's commit is
        still there, and none of those after ``old`` wrote them but the model's own runs
        (compactions and alterations aside). A write into the model between the expiry and
        this run was otherwise taken as no change, and the cursor moved past it."""
        meta = metadata_catalog(catalog)
        row = self.con.execute(
            f"SELECT {BUILTIN}.max(snapshot_id) FROM {meta}.ducklake_snapshot_changes "
            f"WHERE {labelled(self.plan.target)} AND snapshot_id <= {int(new)}"
        ).fetchone()
        committed = row[0] if row else None
        if committed is None or not snapshots_present(self.con, catalog, committed, new):
            return False
        return all(
            change.kind in COMPACTIONS | ALTERATIONS or is_own_commit(change, self.plan.target)
            for change in snapshot_changes(self.con, catalog, old, new, mine)
        )

    def _unchanged_since(self, source: TableRef, old: int, new: int) -> bool:
        """Whether a source's rows at ``new`` are exactly its rows at the (expired) snapshot
        ``old``: no live row version was written after ``old``, so every row live now was live
        then, and the row count is the one recorded with the cursor."""
        cursor = self.cursors[source.key]
        if cursor.rows is None or self.plan.hides_snapshot_id(source.key):
            return False
        rows, newest = live_rows(self.con, source, new, newest=True)
        return newest <= old and rows == cursor.rows

    @cached_property
    def table_rows(self) -> dict[str, int]:
        """Rows of the sources, the model and its state tables (by key; those that exist),
        from the lake's table statistics: one query per catalog, for the estimate and for
        ``large_tables``."""
        found: dict[str, int] = {}
        known = [*self.plan.sources, self.plan.target, *self.plan.state_tables]
        for catalog in {t.catalog for t in known}:
            tables = {
                tid: t.key
                for t in known
                if t.catalog == catalog and (tid := self.ids.get(t.key)) is not None
            }
            counts = _record_counts(self.con, catalog, set(tables))
            found |= {key: counts.get(tid, 0) for tid, key in tables.items()}
        return found

    @cached_property
    def large_tables(self) -> frozenset[str]:
        """The sources and state tables of at least ``LARGE_TABLE_ROWS`` rows."""
        tables = [*self.plan.sources, *self.plan.state_tables]
        return _large({t.key: self.table_rows.get(t.key, 0) for t in tables})

    @cached_property
    def costs(self) -> Estimate:
        """What maintaining this window and rebuilding would cost (``estimate``), corrected
        by what the model's past runs measured (``learned_correction``)."""
        found = estimate(
            self.con,
            self.plan,
            self.window,
            self.changes.spans,
            self.ids,
            self.table_rows,
            self.lake,
        )
        past = self.last.past if self.last is not None else ()
        return replace(found, correction=learned_correction(past))


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


Trigger = Callable[[Situation], "Decision | None"]


def first_run(s: Situation) -> Decision | None:
    if not s.cursors or s.ids[s.plan.target.key] is None:
        return s.rebuild("first run", Strategy.INITIAL)
    return None


def state_missing(s: Situation) -> Decision | None:
    """Maintenance needs the model's state, which a rebuild chosen for cost drops: tried
    after ``cheaper_to_rebuild``, so that such rebuilds in a row never build it."""
    if any(s.ids.get(t.key) is None for t in s.plan.state_tables):
        return s.rebuild("its state tables are missing", Strategy.INITIAL)
    return None


def full_refresh(s: Situation) -> Decision | None:
    return s.rebuild("full refresh requested") if s.full_refresh else None


def sql_changed(s: Situation) -> Decision | None:
    sources = {source.key for source in s.plan.sources}
    assert s.last is not None
    if set(s.cursors) != sources or s.last.sql_hash != s.plan.sql_hash:
        return s.rebuild("model SQL changed")
    return None


def feed_broken(s: Situation) -> Decision | None:
    broken = s.changes.broken
    return s.rebuild(broken) if broken is not None else None


def _rewritten(source: TableRef, old: int) -> str:
    return (
        f"source {source.key} at snapshot {old} no longer holds the rows this model read "
        "there: a later commit dated its changes before the cursor (DuckLake, concurrent "
        "commits)"
    )


def columns_changed(s: Situation) -> Decision | None:
    """A source's columns changed: only those the model reads matter (their DuckLake ids,
    names and types)."""
    for key in sorted(s.changes.altered):
        source = next(t for t in s.plan.sources if t.key == key)
        tid = s.ids[key]
        assert tid is not None
        now = read_columns(s.con, source.catalog, tid, s.plan.source_reads[key])
        if now != s.cursors[key].columns:
            return s.rebuild(f"the columns read from source {key} changed")
    return None


def foreign_writes(s: Situation) -> Decision | None:
    foreign = s.changes.foreign
    return s.rebuild(foreign) if foreign is not None else None


def nothing_changed(s: Situation) -> Decision | None:
    if s.changes.changed:
        return None
    if s.changes.expired:
        reason = "no source changed; the cursor moves past expired snapshots"
        return Decision(Strategy.UNCHANGED, reason, s.window, advance=True)
    return Decision(Strategy.UNCHANGED, "no source changed", s.window)


def cheaper_to_rebuild(s: Situation) -> Decision | None:
    if s.rebuild_above is None:
        return None
    changed = s.changes.changed
    if not s.costs.rebuild_is_cheaper(s.rebuild_above):
        return None
    reason = f"cheaper than maintenance: {s.costs.describe()} (rebuild above {s.rebuild_above:.0%})"
    return Decision(Strategy.REBUILD, reason, s.build_window, changed, s.costs)


def changes_misdated(s: Situation) -> Decision | None:
    _, misdated = s.verified_spans
    return s.rebuild(misdated) if misdated is not None else None


def maintain(s: Situation) -> Decision:
    changed = s.changes.changed
    reason = f"{len(changed)} of {len(s.plan.sources)} sources changed"
    whole = s.plan.recomputed_in_full(changed)
    if whole:
        reason += f"; recomputed in full: {', '.join(whole)}"
    found = s.costs if s.rebuild_above is not None else None
    if found is not None:
        reason += f"; {found.describe()}"
    return Decision(
        Strategy.INCREMENTAL,
        reason,
        s.window,
        changed,
        found,
        spans=s.verified_spans[0],
        reorganized=s.changes.reorganized,
        appended=s.changes.appended,
        large_tables=s.large_tables,
    )


#: the triggers, in the order they are tried; ``maintain`` ends every list
TRIGGERS: tuple[Trigger, ...] = (
    first_run,
    full_refresh,
    sql_changed,
    feed_broken,
    columns_changed,
    foreign_writes,
    nothing_changed,
    cheaper_to_rebuild,
    state_missing,
    changes_misdated,
)


def decide(situation: Situation) -> Decision:
    for trigger in TRIGGERS:
        decision = trigger(situation)
        if decision is not None:
            return decision
    return maintain(situation)


def rebuild_above(value: Any) -> float | None:
    """``ivm_rebuild_above``: a share of a rebuild's cost, ``never``, or unset (the default)."""
    if value is None:
        return REBUILD_ABOVE
    if value == "never":
        return None
    try:
        share = float(value)
    except (TypeError, ValueError):
        share = -1.0
    if share < 0:
        raise ConfigurationError(
            f"ivm_rebuild_above={value!r}: give a share of a rebuild's cost (e.g. 1.0, the "
            "default; 0 always rebuilds), or 'never' to always maintain"
        )
    return share


def estimate(
    con: duckdb.DuckDBPyConnection,
    plan: IVMPlan,
    windows: dict[str, tuple[int, int]],
    spans: dict[str, tuple[int, int]],
    ids: dict[str, int | None],
    table_rows: dict[str, int],
    lake: Callable[[str], str],
) -> Estimate:
    """The estimate for a window in which the sources of ``spans`` (keys) changed, each over
    its span (``WindowChanges.spans``); ``ids`` holds the table ids of the sources and of the
    model, ``table_rows`` their rows, ``lake`` gives a catalog's lake identity. What a span
    changed is read once per process (``memo``): the models of a run share their sources'
    spans, not their windows (each run commits a snapshot of its own)."""
    changed = frozenset(spans)
    rows: dict[str, int] = {}
    feed_rows = inserted_rows = deleted_rows = 0
    #: deleted rows whose old values DuckLake keeps in its catalog (inlined): cheap to look up
    cheap_deleted = 0
    tables = [*plan.sources, plan.target]
    for catalog in windows:
        known = {
            t.key: tid
            for t in tables
            if t.catalog == catalog and (tid := ids.get(t.key)) is not None
        }
        rows |= {key: table_rows.get(key, 0) for key in known}
        touched = {tid: spans[key] for key, tid in known.items() if key in spans}
        changed_rows = window_rows(con, lake(catalog), catalog, touched)
        feed_rows += changed_rows.inserted + int(PRE_IMAGE_WEIGHT * changed_rows.pre_images)
        inserted_rows += changed_rows.inserted
        deleted_rows += changed_rows.deleted
        cheap_deleted += changed_rows.inlined_deleted
    model_rows = rows.pop(plan.target.key, 0)
    narrowed: dict[NarrowedRead, int] = {}
    terms = list(_join_terms(plan.root, changed, _large(rows)))
    reads = {read for _, _, term_reads, _ in terms for read in term_reads}
    near = list(near_reads(plan.root, changed))
    for _, read, keys, origins, _ in near:
        near_rows(read, keys, origins, rows, {}, reads)
    for catalog in windows:
        prefix = f"{catalog}."
        mine = {r for r in reads if r.table.startswith(prefix) and r.by_table.startswith(prefix)}
        narrowed |= narrowed_rows(con, lake(catalog), catalog, mine, ids, spans)
    return Estimate(
        inserted_rows + deleted_rows + cheap_deleted,
        feed_rows
        + INSERT_WEIGHT * (inserted_rows + deleted_rows + cheap_deleted)
        + full_reads(plan.root, changed, rows, narrowed, terms, near),
        sum(rows.values()) + OUTPUT_WEIGHT * model_rows,
    )


#: maintained and rebuilt runs with an estimate that the correction needs, at least
LEARN_FROM = (2, 1)
#: maintained runs teach the correction when their estimate was at least this share of a
#: rebuild's: a smaller one's time is mostly the run's fixed cost, not its rows'
NEAR_THE_CHOICE = 0.25
#: the correction's bounds: the estimate's weights are never off by more than this
CORRECTION_BOUNDS = (1 / 16, 16.0)


def learned_correction(past: Sequence[PastRun]) -> float:
    """How much more a maintained row of the estimate costs than a rebuilt one on this
    model, measured: seconds per estimated row over its recent maintained runs, against the
    same over its recent rebuilds (those chosen for cost, which refill as a bare rebuild does;
    else its builds, which also build its state). Only maintained runs near the choice teach
    it (``NEAR_THE_CHOICE``): a run's fixed cost would price the rows of small batches many
    times over. The weights of ``estimate`` were measured on one benchmark and one machine;
    the correction fits them to this model's data and machine. 1.0 until the model has
    maintained and rebuilt with estimates (``LEARN_FROM``); a model that only ever rebuilds
    never learns that maintenance got cheaper, one that maintains at a loss learns it in a
    few runs, and tries again once those runs leave its last ``runlog.PAST_RUNS``."""
    rebuilt = [p for p in past if p.strategy == "rebuild" and p.estimated_rows] or [
        p for p in past if p.strategy == "initial" and p.estimated_rows
    ]
    if len(rebuilt) < LEARN_FROM[1]:
        return 1.0
    near = NEAR_THE_CHOICE * (rebuilt[0].estimated_rows or 0)
    maintained = [
        p
        for p in past
        if p.strategy == "incremental" and p.estimated_rows and p.estimated_rows >= near
    ]
    if len(maintained) < LEARN_FROM[0]:
        return 1.0

    def rate(runs: list[PastRun]) -> float:
        return sum(p.seconds for p in runs) / sum(p.estimated_rows or 0 for p in runs)

    low, high = CORRECTION_BOUNDS
    return min(max(rate(maintained) / max(rate(rebuilt), 1e-12), low), high)


def estimated_rows(decision: Decision, cursors: Sequence[Cursor], rows_written: int) -> int | None:
    """What the cost estimate gives the strategy a run carried out, for ``learned_correction``:
    maintenance's rows when it maintained, a rebuild's when it (re)built (the sources' rows
    and the model's, weighted as ``estimate`` weighs them)."""
    if decision.strategy is Strategy.INCREMENTAL:
        return decision.estimate.maintain_rows if decision.estimate is not None else None
    if decision.strategy in (Strategy.INITIAL, Strategy.REBUILD):
        if decision.estimate is not None:
            return decision.estimate.rebuild_rows
        if any(c.rows is None for c in cursors):
            return None
        return sum(c.rows or 0 for c in cursors) + OUTPUT_WEIGHT * rows_written
    return None


#: a join, one of its inputs that a term reads beside a changing input, the reads of that
#: input narrowed to the changing input's keys, and, when the term takes that input from a
#: read it shares with other terms (``Join.whole_reads``), which one
JoinTerm = tuple[Join, int, tuple[NarrowedRead, ...], tuple[int, int, str] | None]


def _large(rows: dict[str, int]) -> frozenset[str]:
    """The tables of ``rows`` of at least ``LARGE_TABLE_ROWS`` rows."""
    return frozenset(key for key, n in rows.items() if n >= LARGE_TABLE_ROWS)


def _join_terms(
    root: Operator, changed: frozenset[str], large: frozenset[str]
) -> Iterator[JoinTerm]:
    """Per join term (a changing input) and other input j: the narrowed reads j may take,
    or the whole read of j it shares (``large``: the sources the join narrows through)."""
    above = {id(n.child): n.predicate for n in root.walk() if isinstance(n, Filter)}
    for node in root.walk():
        if not isinstance(node, Join) or not reads_changed(node, changed):
            continue
        equalities = node.equalities(above.get(id(node)))
        changing_inputs = [i for i, c in enumerate(node.children) if reads_changed(c, changed)]
        shared = {
            (i, j): (id(node), j, at)
            for (j, at), users in node.whole_reads(
                changing_inputs, changed, large, equalities
            ).items()
            for i in users
        }
        for i in changing_inputs:
            changing = node.children[i]
            for j, other in enumerate(node.children):
                if j == i:
                    continue
                reads = ()
                if isinstance(other, Scan) and isinstance(changing, Scan):
                    reads = tuple(
                        NarrowedRead(other.table.key, mine, changing.table.key, theirs)
                        for mine, theirs in equalities.get((j, i), ())
                    )
                yield node, j, reads, shared.get((i, j))


def full_reads(
    root: Operator,
    changed: frozenset[str],
    rows: dict[str, int],
    narrowed: dict[NarrowedRead, int] | None = None,
    terms: list[JoinTerm] | None = None,
    near: list[NearRead] | None = None,
) -> int:
    """Rows of inputs read in full by the delta: a join term joins one input's delta with
    every other input's whole state, or, where it narrows an input to the delta's keys, with
    the rows of its files whose key range meets them (``narrowed``, from ``key_ranges``); an
    aggregate without a fold recomputes the touched groups from its input at the new
    snapshot; an ASOF join recomputes the touched keys' rows from both inputs at the new
    snapshot; the padded rows of an outer join are found in the other input's old state and
    judged over the changed input's old and new states; the rows a semi, anti or mark join
    judges are read narrowed to the change's keys (``near_reads``); a scalar subquery's change
    re-reads its outer rows; a window recomputes its touched
    partitions from its input at the new snapshot (and at the old one too, without stored
    rows); a counting set operation counts the touched rows in both inputs; a top-N may rescan
    its input. A window without PARTITION BY and a recursive CTE recompute everything and store
    it again. An input that several join terms take from one read (``Join.whole_reads``)
    counts once. ``terms`` and ``near``: the join terms (``_join_terms``) and the narrowed reads
    (``near_reads``), when the caller has walked them."""
    total = 0
    for node in root.walk():
        if not reads_changed(node, changed):
            continue
        if isinstance(node, Join):
            continue  # below, by term
        if isinstance(node, Aggregate) and not node.folds:
            total += rows_read(node.child, rows)
        elif isinstance(node, OuterJoin):
            left, right = node.children
            for changing, other, pads_other in (
                (left, right, node.keep_right),
                (right, left, node.keep_left),
            ):
                if reads_changed(changing, changed):
                    total += rows_read(other, rows)
                    if pads_other:
                        total += rows_read(other, rows) + 2 * rows_read(changing, rows)
        elif isinstance(node, AsofJoin):
            total += sum(rows_read(c, rows) for c in node.children)
        elif isinstance(node, ScalarSubquery):
            left, right = node.children
            if reads_changed(left, changed):
                total += rows_read(right, rows)
            if reads_changed(right, changed):
                total += rows_read(left, rows)
        elif isinstance(node, Window):
            total += rows_read(node.child, rows) * (1 if node.stored else 2)
            if not node.partition:
                total += OUTPUT_WEIGHT * rows_read(node.child, rows)
        elif isinstance(node, CountedSetOperation | TopN):
            total += sum(rows_read(c, rows) for c in node.children)
        elif isinstance(node, RecursiveCTE):
            total += (1 + OUTPUT_WEIGHT) * rows_read(node, rows)
    if terms is None:
        terms = list(_join_terms(root, changed, _large(rows)))
    counted: set[tuple[int, int, str]] = set()
    for node, j, reads, shared in terms:
        if shared is not None:  # one read for the terms that share it
            if shared not in counted:
                counted.add(shared)
                total += rows_read(node.children[j], rows)
            continue
        bounded = [narrowed[r] for r in reads if narrowed and r in narrowed]
        total += min(bounded) if bounded else rows_read(node.children[j], rows)
    for _, read, keys, origins, times in near_reads(root, changed) if near is None else near:
        total += times * near_rows(read, keys, origins, rows, narrowed or {}, set())
    return total


def _record_counts(
    con: duckdb.DuckDBPyConnection, catalog: str, tables: set[int]
) -> dict[int, int]:
    if not tables:
        return {}
    meta = metadata_catalog(catalog)
    found = con.execute(
        f"SELECT table_id, record_count FROM {meta}.ducklake_table_stats "
        f"WHERE table_id IN ({', '.join(str(i) for i in sorted(tables))})"
    ).fetchall()
    return {int(t): int(n or 0) for t, n in found}
