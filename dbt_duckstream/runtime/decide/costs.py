"""What maintaining a window and rebuilding would cost, in rows read and written, from
DuckLake's metadata (see the package's docstring for the weighing), corrected by what the
model's past runs measured."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import duckdb

from ...compiler import IVMPlan
from ...compiler.operators import Filter, Join, Operator, Scan, StoredInput
from ..captured import captured_all
from ..feeds import cached
from ..key_ranges import NarrowedRead, narrowed_rows
from ..lake import record_counts
from ..near_reads import NearRead, near_reads, near_rows, reads_changed, rows_read
from ..runlog import Cursor, PastRun
from ..window_rows import ROW_GROUP_ROWS, WindowRows, per_table
from .decision import REBUILD_ABOVE, Decision, Strategy

if TYPE_CHECKING:
    from .situation import Situation

#: an inserted row through the feed, the deltas and the apply, against a row scanned
INSERT_WEIGHT = 20
#: a row of those row groups against a row scanned by a rebuild: reading Q1's seven columns
#: at the deleted positions of every row group of lineitem took 85 ms, Q1's rebuild 190 ms
#: (SF1); the twins of the benchmark's views that always maintain agree (docs/measurements.md)
PRE_IMAGE_WEIGHT = 0.5
#: a model row written by a rebuild, against a row scanned
OUTPUT_WEIGHT = 20
#: a row of an input read narrowed to a delta's keys, in a row group that holds none of them:
#: the reader decodes its key column alone to skip it. At TPC-H SF1, lineitem's five columns
#: of Q12 narrowed to 20 order keys spread over the table took 22 ms, to 200 to 6,000 keys
#: (a key in every row group) 45-56 ms; Q12's whole query 85 ms
KEY_PROBE_WEIGHT = 0.25


def probed_rows(rows: int, keys: int) -> int:
    """What reading ``rows`` narrowed to ``keys`` keys costs, in rows scanned: the key column
    of every row, and every column of the row groups holding a key (one per key, at most all),
    which weigh as the row groups holding pre-images do.

    >>> probed_rows(6_000_000, 2), probed_rows(6_000_000, 1_000)
    (1561440, 3000000)
    """
    matched = min(rows, keys * ROW_GROUP_ROWS)
    return int(KEY_PROBE_WEIGHT * rows + (PRE_IMAGE_WEIGHT - KEY_PROBE_WEIGHT) * matched)


@dataclass(frozen=True)
class Estimate:
    """Rows a maintenance run and a rebuild would read or write."""

    changed_rows: int  # rows inserted, plus (at most) rows deleted, in the window
    maintain_rows: int
    #: the rows a rebuild reads and writes, and when it builds the model's state too (a model
    #: that usually maintains: ``Situation.usually_maintains``), the state's rows it writes
    rebuild_rows: int
    #: the model's measured cost of a maintained row over that of a rebuilt row
    #: (``learned_correction``), 1.0 until it has been measured
    correction: float = 1.0
    #: the rows of the model's state tables that the rebuild writes again (in ``rebuild_rows``)
    state_rows: int = 0

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
        rebuild = "a rebuild's with its state" if self.state_rows else "a rebuild's"
        return (
            f"up to {self.changed_rows} rows changed; estimated maintenance cost "
            f"{self.share:.0%} of {rebuild}{learned}"
        )


#: a state table of at least this many rows is read by key range (``sql.keyed_join``), and
#: a source this large is narrowed through the inputs a join term narrows (``Join``): each
#: costs another DuckLake scan (4-7 ms at TPC-H SF1, measured), reading or hashing a table
#: this large costs more
LARGE_TABLE_ROWS = 1_000_000


def table_rows(situation: Situation) -> dict[str, int]:
    """Rows of the sources, the model and its state tables (by key; those that exist),
    from the lake's table statistics: one query per catalog, for the estimate and for
    ``large_tables``."""
    found: dict[str, int] = {}
    known = [*situation.plan.sources, situation.plan.target, *situation.plan.state_tables]
    for catalog in {t.catalog for t in known}:
        tables = {
            tid: t.key
            for t in known
            if t.catalog == catalog and (tid := situation.ids.get(t.key)) is not None
        }
        counts = record_counts(situation.con, catalog, set(tables))
        found |= {key: counts.get(tid, 0) for tid, key in tables.items()}
    return found


def large_tables(situation: Situation) -> frozenset[str]:
    """The sources, state tables and model of at least ``LARGE_TABLE_ROWS`` rows."""
    tables = [*situation.plan.sources, *situation.plan.state_tables, situation.plan.target]
    return _large({t.key: situation.table_rows.get(t.key, 0) for t in tables})


def estimate_costs(situation: Situation) -> Estimate:
    """What maintaining this window and rebuilding would cost (``estimate``), corrected
    by what the model's past runs measured (``learned_correction``). A model that usually
    maintains rebuilds its state too, writing its rows again: at TPC-H SF1 Q18's state
    (an aggregate per order) made its rebuild cost twice a bare one's, which the choice
    missed, rebuilding at 0.5x where maintenance ran at 1.1x."""
    found = estimate(
        situation.con,
        situation.plan,
        situation.window,
        situation.changes.spans,
        situation.ids,
        situation.table_rows,
        situation.lake,
    )
    past = situation.last.past if situation.last is not None else ()
    found = replace(found, correction=learned_correction(past, found.changed_rows))
    if not situation.usually_maintains:
        return found
    rows = situation.table_rows
    state = sum(rows.get(t.key, 0) for t in situation.plan.state_tables)
    return replace(found, rebuild_rows=found.rebuild_rows + OUTPUT_WEIGHT * state, state_rows=state)


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
    #: what the window changed, per changed source (key)
    changes: dict[str, WindowRows] = {}
    #: changed sources whose writers captured every row the window ended (``captured``), or
    #: whose delta an earlier model of the process already read (``feeds.cached``): their
    #: ended rows cost what reading the rows themselves costs
    captured: set[str] = set()
    tables = [*plan.sources, plan.target]
    for catalog in windows:
        known = {
            t.key: tid
            for t in tables
            if t.catalog == catalog and (tid := ids.get(t.key)) is not None
        }
        rows |= {key: table_rows.get(key, 0) for key in known}
        touched = {tid: spans[key] for key, tid in known.items() if key in spans}
        found = per_table(con, lake(catalog), catalog, touched)
        changes |= {key: found[tid] for key, tid in known.items() if tid in found}
        ended = touched_keys(known, found)
        captured |= {
            t.key
            for t in plan.sources
            if t.key in ended
            and (
                cached(lake(catalog), known[t.key], spans[t.key], plan.source_reads[t.key])
                or captured_all(con, lake(catalog), t, known[t.key], spans[t.key])
            )
        }
    inserted_rows = sum(c.inserted for c in changes.values())
    deleted_rows = sum(c.deleted for c in changes.values())
    #: deleted rows whose old values DuckLake keeps in its catalog (inlined): cheap to look up
    cheap_deleted = sum(c.inlined_deleted for c in changes.values())
    #: the row groups of data files read for the rows they ended; a change table's rows instead
    pre_images = sum(
        c.deleted if key in captured else PRE_IMAGE_WEIGHT * c.pre_images
        for key, c in changes.items()
    )
    feed_rows = inserted_rows + int(pre_images)
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
    narrowed = {
        read: probed_rows(n, _keys(changes.get(read.by_table))) for read, n in narrowed.items()
    }
    # a join term reads a stored input's state table in place of its source
    reading = rows | stored_rows(plan, table_rows)
    return Estimate(
        inserted_rows + deleted_rows + cheap_deleted,
        feed_rows
        + INSERT_WEIGHT * (inserted_rows + deleted_rows + cheap_deleted)
        + full_reads(plan.root, changed, reading, narrowed, terms, near),
        sum(rows.values()) + OUTPUT_WEIGHT * model_rows,
    )


def stored_rows(plan: IVMPlan, table_rows: dict[str, int]) -> dict[str, int]:
    """The rows of the state tables of the plan's stored inputs (by key; those that exist):
    a join term reads those in place of their sources' (``rows_read``)."""
    return {
        n.state_table.key: table_rows[n.state_table.key]
        for n in plan.root.walk()
        if isinstance(n, StoredInput)
        and n.state_table is not None
        and n.state_table.key in table_rows
    }


def touched_keys(known: dict[str, int], found: dict[int, WindowRows]) -> set[str]:
    """The tables (keys) among ``known`` (key to id) whose window ended rows of data files:
    those whose pre-images a change table may hold."""
    return {key for key, tid in known.items() if tid in found and found[tid].pre_images}


#: maintained and rebuilt runs with an estimate that the correction needs, at least
LEARN_FROM = (2, 1)
#: maintained runs teach the correction when their estimate was at least this share of a
#: rebuild's: a smaller one's time is mostly the run's fixed cost, not its rows'
NEAR_THE_CHOICE = 0.25
#: maintained runs teach the correction for windows that changed within this factor of the
#: rows theirs changed: what a maintained row costs depends on the batch's size. A few keys
#: fall in few row groups of an input clustered on them, whose min/max the reader skips;
#: thousands of random keys fall in all of them (measured at TPC-H SF10: single orders
#: taught x0.31, and 0.1% batches, so priced, were maintained at 0.5-0.8x a rebuild)
SAME_SCALE = 10
#: the correction's bounds: the estimate's weights are never off by more than this
CORRECTION_BOUNDS = (1 / 16, 16.0)


def learned_correction(past: Sequence[PastRun], changed_rows: int | None = None) -> float:
    """How much more a maintained row of the estimate costs than a rebuilt one on this
    model, measured: seconds per estimated row over its recent maintained runs, against the
    same over its recent rebuilds (those chosen for cost, which refill as a bare rebuild does;
    else its builds, which also build its state). Only maintained runs near the choice teach
    it (``NEAR_THE_CHOICE``): a run's fixed cost would price the rows of small batches many
    times over; and, for a window that changed ``changed_rows`` source rows, only those of
    batches of its scale (``SAME_SCALE``). The weights of ``estimate`` were measured on one
    benchmark and one machine; the correction fits them to this model's data and machine.
    1.0 until the model has maintained and rebuilt with estimates (``LEARN_FROM``); a model
    that only ever rebuilds never learns that maintenance got cheaper, one that maintains at
    a loss learns it in a few runs, and tries again once those runs leave its last
    ``runlog.PAST_RUNS``."""
    rebuilt = [p for p in past if p.strategy == "rebuild" and p.estimated_rows] or [
        p for p in past if p.strategy == "initial" and p.estimated_rows
    ]
    if len(rebuilt) < LEARN_FROM[1]:
        return 1.0
    near = NEAR_THE_CHOICE * (rebuilt[0].estimated_rows or 0)
    maintained = [
        p
        for p in past
        if p.strategy == "incremental"
        and p.estimated_rows
        and p.estimated_rows >= near
        and _same_scale(p.changed_rows, changed_rows)
    ]
    if len(maintained) < LEARN_FROM[0]:
        return 1.0

    def rate(runs: list[PastRun]) -> float:
        return sum(p.seconds for p in runs) / sum(p.estimated_rows or 0 for p in runs)

    low, high = CORRECTION_BOUNDS
    return min(max(rate(maintained) / max(rate(rebuilt), 1e-12), low), high)


def _same_scale(theirs: int | None, ours: int | None) -> bool:
    """Whether a past run's window changed rows of the scale of this one's; unknown when
    either was not counted (a run logged before the count was), which teaches only a
    window whose count is unknown too."""
    if ours is None or theirs is None:
        return ours is None
    low, high = sorted((max(theirs, 1), max(ours, 1)))
    return high <= SAME_SCALE * low


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


def _keys(changed: WindowRows | None) -> int:
    """The most keys a delta holds: one per row the window inserted or deleted."""
    if changed is None:
        return 0
    return changed.inserted + changed.deleted + changed.inlined_deleted


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
                # a stored input changes by its source's delta (``StoredInput``)
                if isinstance(other, Scan) and isinstance(changing, Scan | StoredInput):
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
    it again. Each operator but the join says what it reads (``Operator.delta_reads``); rows
    it stores again weigh ``OUTPUT_WEIGHT`` each. An input that several join terms take from
    one read (``Join.whole_reads``)
    counts once. ``terms`` and ``near``: the join terms (``_join_terms``) and the narrowed reads
    (``near_reads``), when the caller has walked them."""
    total = 0
    for node in root.walk():
        if node.reads_changed(changed):
            reads = node.delta_reads(changed, lambda n: rows_read(n, rows))
            total += reads.scanned + OUTPUT_WEIGHT * reads.rewritten
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
