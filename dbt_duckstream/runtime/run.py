"""Execute a plan against a DuckDB connection: first run, maintenance, or rebuild.

Each run writes in one transaction, so it lands as one DuckLake snapshot or not at all: the
model's rows, its operators' state and its cursors always move together, and a crash leaves
the model as it was. What the run does is decided first (``decide``), from metadata alone; a
maintenance run then computes its delta at its pin into temporary tables (``compute``), and
its transaction only writes it, short enough that other writers' commits rarely overlap it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field, replace
from functools import partial

import duckdb

from ..compiler import STATE_PREFIX, IVMPlan, Maintenance, Schema, compile_ivm, parse_table
from ..compiler.operators.scan import AMBIGUOUS_ROWIDS
from ..compiler.operators.stored_input import STORED_ROWS_MISSING
from ..compiler.plan import StagedBuild
from ..compiler.render import MULT
from ..errors import ConcurrentRunError, ConfigurationError, UnsupportedSQLError
from ..retry import (
    LOGGER,
    RetryPolicy,
    ducklake_paths,
    is_retryable,
    lost_commit,
    retrying,
    sqlite_catalogs,
)
from ..sql import TableRef, bare_statement, inlined, literal, quote
from . import invocation, known_runs, runlog
from .breakdown import Breakdown, phase, tally
from .counts import CountRead, counts_at_pins, remember
from .decide import REBUILD_ABOVE, Decision, Situation, Strategy, decide, estimated_rows
from .feeds import Feed, FeedRequest, held
from .history import History
from .inlining import exact_floats, holds_floats, restored, rounds_inlined_floats
from .lake import (
    BUILTIN,
    begun,
    current_snapshot,
    describe,
    ducklake_catalogs,
    feed_safe_optimizers,
    is_ducklake,
    lake_identity,
    latest_snapshot,
    metadata_catalog,
    row_counts,
    sound_optimizers,
    stored_columns,
    table_ids,
    table_names,
    tables_columns,
    transaction,
    view_definitions,
    without_refused_join_filters,
)
from .turns import LAKE
from .unchanged import commit_info


@dataclass
class RunResult:
    """What one run did, for logs and run results."""

    model: str
    strategy: str  # "initial", "incremental", "rebuild" or "unchanged"
    reason: str
    snapshots: dict[str, tuple[int, int]]
    rows_inserted: int = 0
    rows_deleted: int = 0
    seconds: float = 0.0
    statements: list[str] = field(default_factory=list)
    #: where the run's time went (``runtime.model_run`` records it)
    breakdown: Breakdown = field(default_factory=Breakdown)

    def summary(self) -> str:
        window = ", ".join(f"{c} {a}->{b}" for c, (a, b) in sorted(self.snapshots.items()))
        timed = self.breakdown.describe()
        return (
            f"{self.strategy} ({self.reason}): +{self.rows_inserted} -{self.rows_deleted} rows, "
            f"snapshots {window or 'none'}" + (f"; {timed}" if timed else "")
        )

    def to_dict(self) -> dict:
        """The result as plain data (for dbt's run results and logs)."""
        return {
            "model": self.model,
            "strategy": self.strategy,
            "reason": self.reason,
            "rows_inserted": self.rows_inserted,
            "rows_deleted": self.rows_deleted,
            "snapshots": {c: list(window) for c, window in sorted(self.snapshots.items())},
            "seconds": round(self.seconds, 6),
            "breakdown": self.breakdown.to_dict(),
            "summary": self.summary(),
        }


def prepare(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    target: str | TableRef,
    *,
    catalog: str,
    db: str = "main",
    stored_inputs: tuple[str, ...] = (),
) -> IVMPlan:
    """Compile model SQL against the live catalog: source schemas and exact output types;
    ``stored_inputs``: see ``compile_ivm``."""
    target_ref = parse_table(target, catalog, db) if isinstance(target, str) else target
    lakes = ducklake_catalogs(con)
    if target_ref.catalog not in lakes:
        raise ConfigurationError(
            f"model {target_ref.key} must live in a DuckLake catalog, so that its rows and its "
            "cursors commit as one snapshot: materialize it in the attached DuckLake "
            "(dbt: set the profile's database, or the model's database, to the DuckLake alias)"
        )
    live = LiveCatalog(con, target_ref, catalog, db, lakes)
    plan = compile_ivm(
        bare_statement(sql),
        target=target_ref,
        schema=live,
        catalog=catalog,
        db=db,
        stored_inputs=stored_inputs,
    )
    return replace(plan, described_at=live.described_at)


@dataclass
class LiveCatalog:
    """The catalog a model compiles against (``compiler.Catalog``), read from a connection:
    its sources checked to be DuckLake tables other than the model's own."""

    con: duckdb.DuckDBPyConnection
    target: TableRef
    catalog: str
    db: str
    lakes: set[str]
    #: the target catalog's snapshot before the sources' schemas were read (``schema``)
    described_at: int | None = None

    def spelling(self, table: TableRef) -> list[str] | None:
        try:
            return [name for name, _ in describe(self.con, table.sql())]
        except duckdb.Error:
            return None

    def views(self, tables: Iterable[TableRef]) -> dict[str, str]:
        return view_definitions(self.con, tables)

    def schema(self, sources: Sequence[TableRef]) -> Schema:
        for source in sources:
            if source.key.lower() == self.target.key.lower():
                raise UnsupportedSQLError(
                    f"a model that reads its own table {self.target.key}",
                    "a run finds what changed in the sources itself: drop the filter on the "
                    "model's rows ({{ this }}, an is_incremental() block)",
                )
            if source.catalog not in self.lakes:
                raise ConfigurationError(
                    f"source {source.key} is not in a DuckLake catalog: incremental maintenance "
                    "reads DuckLake's change feed, so attach the source's catalog with ducklake:"
                )
        self.described_at = latest_snapshot(self.con, self.target.catalog)
        ids = table_ids(self.con, list(sources))
        schema: Schema = {}
        for source in sources:
            if ids[source.key] is None:
                raise ConfigurationError(f"source table {source.key} does not exist")
            schema.setdefault(source.catalog, {}).setdefault(source.schema, {})[source.name] = dict(
                describe(self.con, source.sql())
            )
        return schema

    def output(self, sql: str) -> list[tuple[str, str]]:
        with using(self.con, self.catalog, self.db):
            try:
                output = stored_columns(self.con, sql)  # as DuckDB binds it, PIVOT included
            except duckdb.Error as error:
                raise ConfigurationError(
                    f"the SQL of model {self.target.key} does not bind against its sources "
                    f"({error}); if a source's columns changed, update the model to match"
                ) from error
        if any(name.lower() == "rowid" for name, _ in output):
            raise UnsupportedSQLError(
                "a model column named rowid",
                "it would hide the row ids that maintenance deletes by; rename the column",
            )
        return output


@contextmanager
def using(con: duckdb.DuckDBPyConnection, catalog: str, db: str) -> Generator[None]:
    """Resolve unqualified names in ``catalog``.``db`` for a while, as the model's SQL expects."""
    row = con.execute(f"SELECT {BUILTIN}.current_database(), {BUILTIN}.current_schema()").fetchone()
    assert row is not None
    con.execute(f"USE {quote(catalog)}.{quote(db)}")
    try:
        yield
    finally:
        con.execute(f"USE {quote(row[0])}.{quote(row[1])}")


def refresh(
    con: duckdb.DuckDBPyConnection,
    plan: IVMPlan,
    *,
    full_refresh: bool = False,
    rebuild_above: float | None = REBUILD_ABOVE,
    history: History | None = None,
) -> RunResult:
    """Bring the model up to date in one transaction; see ``RunResult`` for what happened.

    A run whose estimated maintenance work exceeds ``rebuild_above`` of a rebuild's rebuilds
    instead (see ``decide``); None always maintains. The decision is taken in a read-only
    transaction; the sources' deltas are then read once into the shared feed cache (``feeds``)
    and the model's delta computed from them (``compute``), and the run writes in a
    transaction of its own, which it abandons if another run of the same model committed in
    between. A write that loses its commit to another writer is redone alone: what it writes
    holds at the pin. ``history``: the model's lake's snapshots as the run read them before
    (``history``), extended to the pin and asked before the catalog.
    """
    started = time.perf_counter()

    tables, log = [*plan.sources, plan.target, *plan.state_tables], runlog.log_table(plan.target)

    def decided() -> tuple[Situation, Decision]:
        pinned = {catalog: current_snapshot(con, catalog) for catalog in plan.catalogs}
        ids = table_ids(con, [*tables, log])
        if ids[log.key] is None:
            raise _NoRunLog
        own = plan.target.catalog
        known = history if history is not None and own in pinned else None
        if known is not None:
            known.extend(con, pinned[own])
        identity = known.identity if known is not None else None
        lakes = {own: identity or lake_identity(con, own)} if own in pinned else {}
        situation = Situation(
            con,
            plan,
            pinned=pinned,
            ids=ids,
            lakes=lakes,
            last=_latest_run(con, plan.target, lakes, pinned, ids[log.key], known),
            full_refresh=full_refresh,
            rebuild_above=rebuild_above,
            history=known,
        )
        return situation, decide(situation)

    def carried_out(
        situation: Situation,
        decision: Decision,
        feeds: dict[str, str],
        computed: Computed | None = None,
    ) -> tuple[RunResult, Callable[[], None]]:
        """The decision carried out inside the run's transaction, and what the process
        learns once that transaction commits (the model's latest run: ``known_runs``)."""
        result = execute(
            con, plan, decision, situation, feeds, lake_path=lake_path, computed=computed
        )
        if result.strategy == Strategy.UNCHANGED and not decision.advance:
            return result, lambda: None
        result.seconds = time.perf_counter() - started
        registered = result.strategy != Strategy.UNCHANGED and not decision.refills
        with phase("write"):
            entry = _record(con, plan, situation, decision, result, feeds, registered=registered)
            token = commit_info(
                plan, known_runs.new_token(), situation.pinned, situation.ids
            ).text()
            _label(con, plan.target, result, token)
        catalog = plan.target.catalog
        if catalog not in situation.pinned:
            return result, lambda: None
        return result, partial(
            known_runs.wrote,
            plan.target,
            entry,
            lake=situation.lake(catalog),
            log_id=situation.ids[log.key] or 0,
            as_of=situation.pinned[catalog],
            token=token,
        )

    def run() -> RunResult:
        try:
            return decided_and_carried_out(files)
        except _NoRunLog:
            runlog.ensure(con, plan.target)  # in a commit of its own: then the run starts over
            return run()
        except runlog.OutdatedRunLog:
            runlog.upgrade(con, plan.target)
            return run()
        except UnmatchedRetractions as error:
            return rebuilt(files, f"{error} (it held rows its runs did not write as they are)")
        except duckdb.Error as error:
            if AMBIGUOUS_ROWIDS not in str(error):
                raise
            return rebuilt(
                files,
                f"{str(error).split(AMBIGUOUS_ROWIDS)[-1].strip()} has two live rows under one "
                "row id (DuckLake committed rows inserted and updated in one transaction under "
                "transaction-local ids), so its change feed cannot say which row changed",
            )

    def rebuilt(files: list[str], reason: str) -> RunResult:
        """The run, abandoned, taken again as a rebuild."""
        LOGGER.warning("incremental_ivm %s rebuilds: %s", plan.target.key, reason)
        with transaction(con, sqlite=files):
            situation, _ = decided()
            result, learned = carried_out(situation, situation.rebuild(reason), {})
        learned()
        return result

    def decided_and_carried_out(files: list[str]) -> RunResult:
        with phase("decide"), transaction(con, writes=False, sqlite=files):
            situation, decision = decided()
        if decision.strategy is Strategy.UNCHANGED and not decision.advance:
            return RunResult(plan.target.key, decision.strategy, decision.reason, decision.windows)
        # feeds are read outside the run's transaction (see ``feeds``)
        with ExitStack() as holding:
            requests = _feed_requests(plan, decision, situation)
            entries: dict[str, Feed] = {}
            if requests:
                with phase("read"), feed_safe_optimizers(con), LAKE.reading():
                    entries = holding.enter_context(held(con, requests, situation.lakes))
            feeds = {key: entry.relation for key, entry in entries.items()}
            decision = _noting_time_travel(plan, decision, entries)
            computed = None
            if decision.strategy is Strategy.INCREMENTAL:
                # the delta, at the pin, into temporary tables: the write transaction only
                # writes it, so other writers' commits rarely overlap it
                with LAKE.reading(), one_read(con):
                    computed = compute(con, plan, decision, feeds)
            elif decision.refills:  # a rebuild for cost, likewise
                with LAKE.reading():
                    computed = refill_rows(con, plan, decision)
            elif decision.strategy is Strategy.REBUILD:  # and with its state, likewise
                with LAKE.reading():
                    computed = staged_build(con, plan, decision)

            def written() -> tuple[RunResult, Callable[[], None]]:
                with transaction(con, sqlite=files):
                    _check_no_run_since(con, plan.target, situation)
                    return carried_out(situation, decision, feeds, computed)

            # a lost commit redoes the write alone: what it writes holds at the pin, unless
            # another run of the model committed (``ConcurrentRunError``: then all is redone)
            try:
                result, learned = retrying(
                    written,
                    f"incremental_ivm {plan.target.key} writing",
                    redo=partial(_counted, lost_commit),
                    catalogs=lake_catalog,
                    policy=RetryPolicy.from_environment(patience=WRITE_PATIENCE),
                )
            finally:
                cleaned_up(con, computed)
        learned()
        return result

    paths = ducklake_paths(con)
    files, lake_path = sqlite_catalogs(con, paths), paths.get(plan.target.catalog)
    lake_catalog = {plan.target.catalog: lake_path} if lake_path else None
    # a run that loses a commit race to another writer (or to another run of the same model)
    # reruns whole: new pin, new decision
    with sound_optimizers(con, plan.sql), restored(con):
        result = without_refused_join_filters(
            con,
            partial(
                retrying,
                run,
                f"incremental_ivm {plan.target.key}",
                catalogs=lake_catalog,
                redo=partial(_counted, is_retryable),
                policy=RetryPolicy.from_environment(patience=WRITE_PATIENCE),
            ),
        )
    result.seconds = time.perf_counter() - started
    return result


#: how long a run keeps redoing a write (or, for a build, the whole run) that loses its commit
#: to other writers, in seconds (``DUCKSTREAM_COMMIT_WAIT``): beside a writer that commits
#: several times a second on a SQLite catalog most attempts lose, and the run waits rather
#: than fails, saying why at each retry (``retry``)
WRITE_PATIENCE = 120.0


def _counted(retryable: Callable[[BaseException], bool], error: BaseException) -> bool:
    """``retryable(error)``, counting the run's retries in its breakdown."""
    if found := retryable(error):
        tally("retries")
    return found


def _latest_run(
    con: duckdb.DuckDBPyConnection,
    target: TableRef,
    lakes: dict[str, str],
    pinned: dict[str, int],
    log_id: int | None,
    history: History | None = None,
) -> runlog.Entry | None:
    """The model's latest run: as the process knows it, when the model's catalog is pinned
    (``known_runs``), else read from the log."""
    if target.catalog not in pinned or log_id is None:
        return runlog.last(con, target, logged=True)
    return known_runs.latest(
        con,
        target,
        lake=lakes[target.catalog],
        log_id=log_id,
        pinned=pinned[target.catalog],
        history=history,
    )


class _NoRunLog(Exception):
    """The model's schema has no run log yet: a run creates it first (``runlog.ensure``)."""


def _feed_requests(
    plan: IVMPlan, decision: Decision, situation: Situation
) -> dict[str, FeedRequest]:
    """The changed sources' deltas a maintenance run reads, by source."""
    if decision.strategy is not Strategy.INCREMENTAL:
        return {}
    requests = {}
    log_id = situation.ids.get(runlog.log_table(plan.target).key)
    lake = situation.lakes.get(plan.target.catalog)
    invoked = invocation.models()
    listed = situation.changes.listed
    for source in plan.sources:
        tid = situation.ids[source.key]
        if source.key in decision.changed and tid is not None:
            span = decision.spans.get(source.key, decision.windows[source.catalog])
            pinned = situation.pinned.get(source.catalog)
            # read at the pin when nothing after the span's end touched the table
            quiet_after = listed.get(source.key) == span[1] and pinned and pinned > span[1]
            read_at = pinned if quiet_after else None
            others = (
                known_runs.columns_read(lake, log_id, source.key, tid, among=invoked)
                if lake is not None and log_id is not None
                else ()
            )
            requests[source.key] = FeedRequest(
                source,
                tid,
                span,
                plan.source_reads[source.key],
                plan.hides_snapshot_id(source.key),
                source.key in decision.reorganized,
                source.key in decision.appended,
                others,
                others_invoked=invoked is not None,
                read_at=read_at,
            )
    return requests


def _noting_time_travel(plan: IVMPlan, decision: Decision, entries: dict[str, Feed]) -> Decision:
    """The decision, its reason saying which sources' ended rows were read from captured
    pre-images, and which by time travel (whole data files) rather than from the positions
    deleted, and why."""
    notes = [
        note
        for key, entry in sorted(entries.items())
        for note in (
            entry.preimages,
            f"ended rows of {key} read by time travel ({entry.time_travel})"
            if entry.time_travel
            else "",
        )
        if note
    ]
    for note in notes:
        LOGGER.info("incremental_ivm %s: %s", plan.target.key, note)
    return replace(decision, reason="; ".join([decision.reason, *notes])) if notes else decision


def _check_no_run_since(
    con: duckdb.DuckDBPyConnection, target: TableRef, situation: Situation
) -> None:
    """Another run of this model committed since the decision: this one must not apply.

    Every run commits under its own label (``runlog.commit_message``), so DuckLake's snapshot
    metadata after the decision's pin tells, without reading the run log."""
    pinned = situation.pinned.get(target.catalog)
    if pinned is not None:
        row = con.execute(
            inlined(
                f"SELECT count(*) FROM {metadata_catalog(target.catalog)}"
                f".ducklake_snapshot_changes WHERE snapshot_id > ? AND {runlog.labelled(target)}",
                [pinned],
            ),
        ).fetchone()
        since = bool(row and row[0])
    else:
        last = runlog.last(con, target, logged=True)
        then = situation.last.run if situation.last is not None else 0
        since = (last.run if last is not None else 0) != then
    if since:
        raise ConcurrentRunError(
            f"another run of {target.key} committed while this one was deciding; run it again"
        )


def execute(
    con: duckdb.DuckDBPyConnection,
    plan: IVMPlan,
    decision: Decision,
    situation: Situation,
    feeds: dict[str, str] | None = None,
    *,
    lake_path: str | None = None,
    computed: Computed | None = None,
) -> RunResult:
    """Carry a decision out, inside the run's transaction; ``lake_path``: where the model's
    DuckLake keeps its catalog (``inlining``); ``computed``: a maintenance run's delta, when
    computed before the transaction (``compute``)."""
    result = RunResult(plan.target.key, decision.strategy, decision.reason, decision.windows)
    if decision.strategy is Strategy.UNCHANGED:
        return result
    building = decision.strategy is not Strategy.INCREMENTAL
    tables = [plan.target, *plan.state_tables]
    new = building or any(situation.ids.get(t.key) is None for t in tables)
    exact = rounds_inlined_floats(lake_path) and (new or holds_floats(con, tables))
    with exact_floats(con, exact):
        if building:
            with phase("write"):
                _rebuild(con, plan, decision, result, computed)
        else:
            _maintain(con, plan, decision, result, feeds or {}, computed)
    return result


def _record(
    con: duckdb.DuckDBPyConnection,
    plan: IVMPlan,
    situation: Situation,
    decision: Decision,
    result: RunResult,
    feeds: dict[str, str],
    *,
    registered: bool,
) -> runlog.Entry:
    """Log the run with the model's new cursors (and its SQL, when it was built anew)."""
    pinned, ids, reads = situation.pinned, situation.ids, plan.source_reads
    # the window was read whole (by maintenance, or by a rebuild chosen for cost: the same
    # SQL and columns, no source recreated): what it did not change is as the cursors say
    built = decision.strategy in (Strategy.INITIAL, Strategy.REBUILD)
    windowed = not built or decision.refills

    def kept_rows(source: TableRef) -> int | None:
        """The source's row count at the pin, when known without counting: the recorded one
        when the source did not change; when it did, the recorded one plus the net rows of
        its delta, read once this run (the count at the start of the delta's span is the
        recorded one: ``decide`` checks it)."""
        previous = situation.cursors.get(source.key)
        if not windowed or previous is None or previous.rows is None:
            return None
        if source.key not in decision.changed:
            return previous.rows
        if source.key in feeds:
            net = con.execute(f"SELECT sum({MULT}) FROM {feeds[source.key]}").fetchone()
            return previous.rows + int((net[0] if net else 0) or 0)
        return None

    def kept_columns(source: TableRef, tid: int | None) -> str | None:
        """The columns the model reads from the source, as they were at the pin, when the
        recorded ones still hold: the window, seen whole, did not alter the same table."""
        previous = situation.cursors.get(source.key)
        if (
            windowed
            and tid is not None
            and previous
            and previous.columns
            and previous.table_id == tid
            and source.key not in situation.changes.altered
            and source.catalog not in situation.changes.expired
        ):
            return previous.columns
        return None

    kept = {s.key: kept_rows(s) for s in plan.sources}
    rows = _counts_at_pin(con, situation, kept, situation.changes.listed if windowed else {})
    columns = {s.key: kept_columns(s, ids[s.key]) for s in plan.sources}
    for catalog in sorted({s.catalog for s in plan.sources}):
        unknown = {
            tid: s
            for s in plan.sources
            if s.catalog == catalog and columns[s.key] is None and (tid := ids[s.key]) is not None
        }
        reading = {tid: reads[s.key] for tid, s in unknown.items()}
        found = tables_columns(con, catalog, reading, at=pinned[catalog])
        columns.update({s.key: found[tid] for tid, s in unknown.items()})
    cursors = tuple(
        runlog.Cursor(
            s.key,
            s.catalog,
            ids[s.key],
            pinned[s.catalog],
            columns[s.key] or "",
            s.schema,
            s.name,
            rows[s.key],
        )
        for s in plan.sources
    )
    catalog, db = plan.default_schema
    entry = runlog.Entry(
        result.strategy,
        result.reason,
        plan.sql_hash,
        cursors,
        result.rows_inserted,
        result.rows_deleted,
        result.seconds,
        runlog.RegisteredModel(plan.sql, catalog, db, "incremental") if registered else None,
        estimated_rows=estimated_rows(decision, cursors, result.rows_inserted),
        changed_rows=decision.estimate.changed_rows if decision.estimate is not None else None,
    )
    # the run after the one the decision read: none committed since (``_check_no_run_since``,
    # or the decision was taken in this same transaction)
    entry = replace(entry, run=(situation.last.run if situation.last else 0) + 1)
    runlog.append(con, plan.target, entry, run=entry.run)
    return entry


def _counts_at_pin(
    con: duckdb.DuckDBPyConnection,
    situation: Situation,
    known: dict[str, int | None],
    listed: dict[str, int],
) -> dict[str, int]:
    """The sources' row counts at the run's pin, ``known`` ones (by key) and the others
    counted. A source its window changed (``listed``: the window's last snapshot listing a
    change to it, by key) has the count it has there, which the models of a run share
    (``counts``): known or counted by one, kept for the others."""
    pinned = situation.pinned
    sources = [s for s in situation.plan.sources if s.key in known]
    shared = [s for s in sources if s.key in listed and situation.ids.get(s.key) is not None]

    def read(s: TableRef) -> CountRead:
        at = listed[s.key]
        return CountRead(
            situation.lake(s.catalog), s, situation.ids[s.key] or 0, at, pinned[s.catalog], at
        )

    found = {key: rows for key, rows in known.items() if rows is not None}
    remembered = [s for s in shared if s.key in found]
    remember([read(s) for s in remembered], [found[s.key] for s in remembered])
    counting = [s for s in shared if s.key not in found]
    counted = counts_at_pins(con, [read(s) for s in counting])
    found |= {s.key: rows for s, rows in zip(counting, counted, strict=True)}
    scanning = [s for s in sources if s.key not in found]
    scanned = row_counts(con, [(s, pinned[s.catalog]) for s in scanning])
    found |= {s.key: rows for s, rows in zip(scanning, scanned, strict=True)}
    return found


def _label(
    con: duckdb.DuckDBPyConnection, target: TableRef, result: RunResult, token: str = ""
) -> None:
    """Name the model and what the run did in the snapshot's commit message; ``token`` (the
    commit's extra info) tells the process its own commit (``known_runs``)."""
    message = runlog.commit_message(target, result.strategy, result.reason)
    extra = f", extra_info => {literal(token)}" if token else ""
    con.execute(
        f"CALL {quote(target.catalog)}.set_commit_message("
        f"{literal(runlog.AUTHOR)}, {literal(message)}{extra})"
    )


def rebuild_unmaintainable(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    target: TableRef,
    *,
    catalog: str,
    db: str = "main",
    reason: str,
) -> RunResult:
    """Rebuild a model whose SQL cannot be maintained (``ivm_fallback='rebuild'``).

    One transaction, like a maintenance run: the table is replaced, and any cursors and state
    of an earlier maintainable version are dropped, so a later maintainable version starts over.
    The rows are computed before it, into a temporary table, so that it only writes them.
    """
    started = time.perf_counter()
    sql = bare_statement(sql)
    if not is_ducklake(con, target.catalog):
        raise ConfigurationError(f"model {target.key} must live in a DuckLake catalog")
    result = RunResult(target.key, Strategy.REBUILD, reason, {})
    runlog.ensure(con, target)
    rows = f"temp.main.{quote(f'_ivm_{target.name}_rebuilt')}"
    with phase("delta"), LAKE.reading(), using(con, catalog, db), sound_optimizers(con, sql):
        con.execute(f"CREATE OR REPLACE TEMP TABLE {rows} AS {sql}")
    try:
        with transaction(con):
            _drop_view_in_the_way(con, target)
            con.execute(f"DROP TABLE IF EXISTS {target.sql()}")
            with phase("write"):
                row = con.execute(f"CREATE TABLE {target.sql()} AS FROM {rows}").fetchone()
            _drop_state_tables(con, target, keep=set())
            result.rows_inserted = int(row[0]) if row else 0
            result.seconds = time.perf_counter() - started
            registered = runlog.RegisteredModel(sql, catalog, db, "rebuild")
            runlog.append(
                con,
                target,
                runlog.Entry(
                    result.strategy,
                    reason,
                    rows_inserted=result.rows_inserted,
                    seconds=result.seconds,
                    registered=registered,
                ),
            )
            _label(con, target, result)
    finally:
        con.execute(f"DROP TABLE IF EXISTS {rows}")
    result.seconds = time.perf_counter() - started
    return result


@dataclass(frozen=True)
class Computed:
    """A maintenance run's delta at its pin, in temporary tables of the session (not the
    lake), with the rows it inserts and deletes: all its write transaction needs, and still
    right after a lost commit unless another run of the model committed."""

    maintenance: Maintenance | None
    inserted: int = 0
    deleted: int = 0
    #: a rebuild for cost's rows, in a temporary table (``refill_rows``)
    refill: str | None = None
    #: a rebuild's model and state, in temporary tables (``staged_build``)
    build: StagedBuild | None = None
    #: the rows of each temporary table the computation filled (``Maintenance.fills``)
    filled: dict[str, int] = field(default_factory=dict)


def refill_rows(con: duckdb.DuckDBPyConnection, plan: IVMPlan, decision: Decision) -> Computed:
    """The rows a rebuild for cost writes, at the pin, into a temporary table: its write
    transaction then copies them, as short beside other writers as a maintenance run's."""
    rows = f"temp.main.{quote(f'_ivm_{plan.target.name}_refill')}"
    with phase("delta"):
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {rows} AS {plan.refill_rows_sql(decision.windows)}"
        )
    return Computed(None, refill=rows)


def staged_build(con: duckdb.DuckDBPyConnection, plan: IVMPlan, decision: Decision) -> Computed:
    """A rebuild's model and state, at the pin, into temporary tables: its write transaction
    then only recreates the tables from them (a rebuild of TPC-H Q10 at SF1 held its
    transaction 360 ms computing them inside)."""
    staged = plan.staged_build(decision.windows)
    with phase("delta"):
        try:
            for statement in staged.compute:
                con.execute(statement)
        except BaseException:
            with suppress(duckdb.Error):  # the failure itself says more than a failed drop
                for statement in staged.cleanup:
                    con.execute(statement)
            raise
    return Computed(None, build=staged)


def compute(
    con: duckdb.DuckDBPyConnection, plan: IVMPlan, decision: Decision, feeds: dict[str, str]
) -> Computed:
    """Compute the delta a maintenance run writes (``Maintenance.build``)."""
    maintenance = plan.maintenance(
        decision.windows,
        decision.changed,
        feeds,
        decision.reorganized,
        decision.appended,
        decision.large_tables,
    )
    if maintenance is None:
        return Computed(None)
    filled: dict[str, int] = {}
    with phase("delta"), feed_safe_optimizers(con):  # only feed reads need them off
        for index, statement in enumerate(maintenance.build):
            executed = con.execute(statement)
            if index in maintenance.fills:  # CREATE TABLE AS: its row count
                created = executed.fetchone()
                if created is not None:
                    filled[maintenance.fills[index]] = int(created[0])
        row = con.execute(
            "SELECT coalesce(sum(_ivm_m) FILTER (WHERE _ivm_m > 0), 0), "
            f"coalesce(-sum(_ivm_m) FILTER (WHERE _ivm_m < 0), 0) FROM {maintenance.delta_table}"
        ).fetchone()
    assert row is not None
    return Computed(maintenance, int(row[0]), int(row[1]), filled=filled)


@contextmanager
def one_read(con: duckdb.DuckDBPyConnection) -> Generator[None]:
    """The block's statements in one transaction that only reads the lake (and writes
    temporary tables): each statement of its own began a DuckLake transaction, which looked
    up the latest snapshot and read every table's statistics again (two catalog queries,
    4-9 ms at SF1; a join's delta issues two to four such statements)."""
    with begun(con):
        yield
    con.execute("COMMIT")


def _maintain(
    con: duckdb.DuckDBPyConnection,
    plan: IVMPlan,
    decision: Decision,
    result: RunResult,
    feeds: dict[str, str],
    computed: Computed | None = None,
) -> None:
    if computed is None:  # computed inside the transaction: its temporary tables stay
        computed = compute(con, plan, decision, feeds)
    if computed.maintenance is None:
        return
    with phase("write"):
        _apply(con, plan, computed, result)


def _apply(
    con: duckdb.DuckDBPyConnection, plan: IVMPlan, computed: Computed, result: RunResult
) -> None:
    """Write the computed delta to the model and its state tables."""
    maintenance = computed.maintenance
    assert maintenance is not None
    result.rows_inserted, result.rows_deleted = computed.inserted, computed.deleted
    if result.rows_deleted or (result.rows_inserted and not maintenance.deletes_only_retracted):
        row = apply_statement(con, maintenance.delete).fetchone()
        deleted = int(row[0]) if row else 0
        if deleted < result.rows_deleted and maintenance.delete_rest:
            row = apply_statement(con, maintenance.delete_rest).fetchone()
            deleted += int(row[0]) if row else 0
        if deleted != result.rows_deleted:
            raise UnmatchedRetractions(
                f"it found {deleted} of the {result.rows_deleted} rows its maintenance "
                f"retracts in {plan.target.key}"
            )
    if result.rows_inserted:
        apply_statement(con, maintenance.insert)
    for write in maintenance.always:
        if write.unless_empty is not None and computed.filled.get(write.unless_empty) == 0:
            continue
        try:
            apply_statement(con, write.sql)
        except duckdb.Error as error:
            if STORED_ROWS_MISSING not in str(error):
                raise
            raise UnmatchedRetractions(str(error).split("Error: ", 1)[-1]) from error
    result.statements = maintenance.all()


def cleaned_up(con: duckdb.DuckDBPyConnection, computed: Computed | None) -> None:
    """Drop a maintenance run's temporary tables, once its transaction has ended: a commit
    that fails in the lake has committed the session's own catalog already, so a drop inside
    it would leave a retried write without its delta."""
    with LAKE.reading():  # no lake table, but a statement on the instance all the same
        for statement in computed.maintenance.cleanup if computed and computed.maintenance else []:
            con.execute(statement)
        if computed and computed.refill:
            con.execute(f"DROP TABLE IF EXISTS {computed.refill}")
        for statement in computed.build.cleanup if computed and computed.build else ():
            con.execute(statement)


class UnmatchedRetractions(Exception):
    """A maintenance run did not find, in the model, every row it retracts (matched by
    value): the model does not hold what its last run wrote (a float stored one bit off by
    an inlining limit set on the lake, see ``inlining``; a write by another hand), so the run
    applies nothing and rebuilds instead."""


def apply_statement(con: duckdb.DuckDBPyConnection, statement: str) -> duckdb.DuckDBPyConnection:
    """Execute one statement that writes the model (a seam for crash tests)."""
    return con.execute(statement)


def _drop_view_in_the_way(con: duckdb.DuckDBPyConnection, target: TableRef) -> None:
    """A model switched from ``view`` to ``incremental_ivm`` replaces its view."""
    row = con.execute(
        inlined(
            f"SELECT count(*) FROM {BUILTIN}.duckdb_views() "
            "WHERE database_name = ? AND schema_name = ? AND view_name = ?",
            [target.catalog, target.schema, target.name],
        ),
    ).fetchone()
    if row and row[0]:
        con.execute(f"DROP VIEW {target.sql()}")


def _drop_state_tables(
    con: duckdb.DuckDBPyConnection, target: TableRef, keep: set[TableRef]
) -> None:
    """Drop the model's state tables that the plan does not use (left by an earlier plan)."""
    prefix = f"{STATE_PREFIX}{target.name}"
    for name in table_names(con, target.catalog, target.schema, prefix):
        table = target.sibling(name)
        if table not in keep and re.fullmatch(r"(_\d+)?", name[len(prefix) :]):
            con.execute(f"DROP TABLE IF EXISTS {table.sql()}")


def _check_duckdb_plans(con: duckdb.DuckDBPyConnection, plan: IVMPlan, decision: Decision) -> None:
    """Reject, when the model is built, SQL that binds but that DuckDB cannot plan (some
    correlated subqueries): the operator tree could maintain it, but nothing could ever
    recompute it, so neither a rebuild chosen for cost nor ``ivm_consistent`` could run, and
    a ``table`` materialization of the same SQL fails the same way."""
    try:
        con.execute(f"EXPLAIN {plan.pinned_query(decision.windows)}")
    except duckdb.NotImplementedException as error:
        raise UnsupportedSQLError(
            "SQL that DuckDB itself cannot run",
            f"{error}; a table materialization of the model fails the same way",
        ) from error


def _rebuild(
    con: duckdb.DuckDBPyConnection,
    plan: IVMPlan,
    decision: Decision,
    result: RunResult,
    computed: Computed | None = None,
) -> None:
    if decision.refills:
        refill = computed.refill if computed else None
        result.statements = plan.refill_sql(decision.windows, refill)
    else:
        _check_duckdb_plans(con, plan, decision)
        _drop_view_in_the_way(con, plan.target)
        _drop_state_tables(con, plan.target, keep=set(plan.state_tables))
        if computed and computed.build:
            result.statements = list(computed.build.copy)
        else:
            result.statements = plan.build_sql(decision.windows)
    fills = f"INSERT INTO {plan.target.sql()} "  # the one statement writing the model's rows
    for statement in result.statements:
        done = con.execute(statement)
        if statement.startswith(fills):
            row = done.fetchone()
            result.rows_inserted = int(row[0]) if row else 0
