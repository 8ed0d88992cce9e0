"""The run log: one row per run that wrote something, per model, in an append-only table.

Each row holds what the run did (strategy, reason, rows, time) and where it left the model: a
cursor per source (the snapshot applied, the source's table id, the columns the model reads)
and the hash of the plan. A run that (re)builds the model also records the SQL it was built
from, which ``ivm_consistent`` and ``duckstream_explain`` read. The latest row of a model is
its state; older rows are its history (``duckstream status``).

The table lives in DuckLake beside the models, so a run's row commits in the same snapshot as
the rows it accounts for. Rows are only ever appended: DuckLake commits concurrent inserts into
one table, while concurrent deletes of its inlined rows conflict, so models maintained by
several dbt threads at once never contend here. A model's history is trimmed now and then.
"""

from __future__ import annotations

import json
import threading
from contextlib import suppress
from dataclasses import asdict, dataclass
from datetime import datetime

import duckdb

from ..errors import ConfigurationError
from ..sql import TableRef, inlined
from .lake import SnapshotChange, table_id
from .turns import LAKE

RUN_LOG = "_duckstream_runs"
#: the author of every snapshot a run commits
AUTHOR = "dbt-duckstream"
#: trim a model's history to ``KEEP`` rows once it holds ``TRIM_AT``
TRIM_AT, KEEP = 1000, 100

_COLUMNS = (
    "model VARCHAR, run BIGINT, strategy VARCHAR, reason VARCHAR, rows_inserted BIGINT, "
    "rows_deleted BIGINT, seconds DOUBLE, finished_at TIMESTAMP WITH TIME ZONE, "
    "sql_hash VARCHAR, cursors VARCHAR, sql VARCHAR, default_catalog VARCHAR, "
    "default_schema VARCHAR, mode VARCHAR, estimated_rows BIGINT, changed_rows BIGINT"
)
#: the columns by name: an upgraded log holds them in the order it gained them
_NAMES = ", ".join(column.split()[0] for column in _COLUMNS.split(", "))
#: columns added since the first release, each with its type: ``upgrade`` adds them
_ADDED = {"estimated_rows": "BIGINT", "changed_rows": "BIGINT"}
#: the past runs a run reads, newest first, to correct its cost estimate
PAST_RUNS = 50


class OutdatedRunLog(Exception):
    """The run log lacks a column added since it was created: ``upgrade`` it first."""


@dataclass(frozen=True)
class PastRun:
    """What an earlier run did and cost: its strategy, seconds, the rows the cost estimate
    gave its strategy (maintenance, or a rebuild), and the source rows its window changed
    (None when it had no estimate)."""

    strategy: str
    seconds: float
    estimated_rows: int | None
    changed_rows: int | None = None


@dataclass(frozen=True)
class Cursor:
    """Where a model stands against one source."""

    source: str
    catalog: str
    table_id: int | None
    snapshot_id: int
    #: the columns (and types) the model reads from the source, as it read them
    columns: str = ""
    schema: str = ""
    table: str = ""
    #: the source's row count at ``snapshot_id``
    rows: int | None = None

    @property
    def ref(self) -> TableRef:
        return TableRef(self.catalog, self.schema, self.table)


@dataclass(frozen=True)
class RegisteredModel:
    """The SQL a model was last built from, and how names in it resolve."""

    sql: str
    catalog: str
    schema: str
    mode: str  # "incremental" or "rebuild" (ivm_fallback)


@dataclass(frozen=True)
class Entry:
    """One row of the run log."""

    strategy: str
    reason: str
    sql_hash: str = ""
    cursors: tuple[Cursor, ...] = ()
    rows_inserted: int = 0
    rows_deleted: int = 0
    seconds: float = 0.0
    #: recorded when the model is (re)built from new SQL
    registered: RegisteredModel | None = None
    run: int = 0
    finished_at: datetime | None = None
    #: the rows the cost estimate gave the strategy this run carried out
    estimated_rows: int | None = None
    #: the source rows the run's window inserted and deleted, as its estimate counted them
    changed_rows: int | None = None
    #: the model's latest runs, newest first (read with the latest one)
    past: tuple[PastRun, ...] = ()


def commit_prefix(target: TableRef) -> str:
    """How the label of every snapshot a run of this model commits begins."""
    return f"incremental_ivm {target.key}: "


def commit_message(target: TableRef, strategy: str, reason: str) -> str:
    """How a run labels its snapshot, so that later runs know their own commits."""
    return f"{commit_prefix(target)}{strategy} ({reason})"


def is_own_commit(change: SnapshotChange, target: TableRef) -> bool:
    """Whether a snapshot was committed by a run of this model."""
    return change.author == AUTHOR and (change.message or "").startswith(commit_prefix(target))


def labelled(target: TableRef) -> str:
    """``is_own_commit`` as a condition on DuckLake's ``ducklake_snapshot_changes``."""
    return inlined(
        "(author = ? AND starts_with(commit_message, ?))", [AUTHOR, commit_prefix(target)]
    )


def log_table(target: TableRef) -> TableRef:
    """The run log of the models in ``target``'s schema."""
    return target.sibling(RUN_LOG)


def exists(con: duckdb.DuckDBPyConnection, target: TableRef) -> bool:
    return table_id(con, log_table(target)) is not None


#: one creation at a time per process: dbt threads start their first runs together
_creating = threading.Lock()


def ensure(con: duckdb.DuckDBPyConnection, target: TableRef) -> None:
    """Create the run log in its own commit, before a run's transaction begins (models run by
    several threads would otherwise all create it, and all but one commit would fail)."""
    if exists(con, target):
        return
    with _creating, LAKE.writing():
        try:
            con.execute(f"CREATE TABLE IF NOT EXISTS {log_table(target).sql()} ({_COLUMNS})")
        except duckdb.TransactionException:
            if not exists(con, target):  # not a creation by another process: a real failure
                raise


def upgrade(con: duckdb.DuckDBPyConnection, target: TableRef) -> None:
    """Add the columns a run log created by an earlier release lacks, in a commit of its own."""
    with _creating, LAKE.writing():
        for column, kind in _ADDED.items():
            # another process adding it at once fails this commit: the run reads the log again
            with suppress(duckdb.TransactionException):
                con.execute(
                    f"ALTER TABLE {log_table(target).sql()} ADD COLUMN IF NOT EXISTS "
                    f"{column} {kind}"
                )


#: a model's latest run with its past runs, from one scan of the log (arg_max, not ORDER BY ...
#: LIMIT 1: half the time on a DuckLake table, 7 ms against 14)
_LATEST = (
    "arg_max(struct_pack(run, strategy, reason, sql_hash, cursors, rows_inserted, rows_deleted, "
    "seconds, finished_at, estimated_rows, changed_rows), run), "
    "list(struct_pack(strategy, seconds, estimated_rows, changed_rows) ORDER BY run DESC)"
    f"[1:{PAST_RUNS}]"
)


def last(
    con: duckdb.DuckDBPyConnection, target: TableRef, *, logged: bool | None = None
) -> Entry | None:
    """The model's latest run, or None when it never ran (or its log is gone). ``logged``
    says whether the log exists, when the caller knows (a run looks its tables up at once)."""
    if not (exists(con, target) if logged is None else logged):
        return None
    row = _read(con, target, f"SELECT {_LATEST} FROM {log_table(target).sql()} WHERE model = ?")
    return _entry(*row) if row is not None and row[0] is not None else None


def latest_runs(con: duckdb.DuckDBPyConnection, target: TableRef) -> dict[str, Entry]:
    """The latest run of every model in the log of ``target``'s schema (which exists), by
    model name: one scan, as for one model."""
    try:
        rows = con.execute(
            f"SELECT model, {_LATEST} FROM {log_table(target).sql()} GROUP BY model"
        ).fetchall()
    except duckdb.Error as error:
        raise _failed(target, error) from error
    return {model: _entry(latest, past) for model, latest, past in rows}


def _entry(latest: dict, past: list[dict] | None) -> Entry:
    (
        run,
        strategy,
        reason,
        sql_hash,
        cursors,
        inserted,
        deleted,
        seconds,
        finished,
        estimated,
        changed,
    ) = latest.values()
    return Entry(
        strategy,
        reason,
        sql_hash or "",
        tuple(Cursor(**c) for c in json.loads(cursors or "[]")),
        inserted or 0,
        deleted or 0,
        seconds or 0.0,
        run=run,
        finished_at=finished,
        estimated_rows=estimated,
        changed_rows=changed,
        past=tuple(
            PastRun(p["strategy"], p["seconds"] or 0.0, p["estimated_rows"], p["changed_rows"])
            for p in past or []
        ),
    )


def cursors(con: duckdb.DuckDBPyConnection, target: TableRef) -> dict[str, Cursor]:
    """The model's cursors by source key (none when it must be built)."""
    entry = last(con, target)
    return {c.source: c for c in entry.cursors} if entry is not None else {}


def append(
    con: duckdb.DuckDBPyConnection, target: TableRef, entry: Entry, *, run: int | None = None
) -> None:
    """Record a run (inside its transaction; ``ensure`` the log first) as number ``run``,
    by default the one after the latest."""
    if run is None:
        previous = last(con, target)
        run = previous.run + 1 if previous is not None else 1
    registered = entry.registered
    con.execute(
        inlined(
            f"INSERT INTO {log_table(target).sql()} ({_NAMES}) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, now(), ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                target.name,
                run,
                entry.strategy,
                entry.reason,
                entry.rows_inserted,
                entry.rows_deleted,
                round(entry.seconds, 6),
                entry.sql_hash,
                json.dumps([asdict(c) for c in entry.cursors]),
                registered.sql if registered else None,
                registered.catalog if registered else None,
                registered.schema if registered else None,
                registered.mode if registered else None,
                entry.estimated_rows,
                entry.changed_rows,
            ],
        ),
    )
    if run % TRIM_AT == 0:
        _trim(con, target, run)


def _trim(con: duckdb.DuckDBPyConnection, target: TableRef, run: int) -> None:
    """Keep the last ``KEEP`` runs, and the run that recorded the model's SQL."""
    table = log_table(target).sql()
    con.execute(
        inlined(
            f"DELETE FROM {table} WHERE model = ? AND run <= ? AND run < (SELECT max(run) FROM "
            f"{table} WHERE model = ? AND sql IS NOT NULL)",
            [target.name, run - KEEP, target.name],
        ),
    )


def registered(con: duckdb.DuckDBPyConnection, target: TableRef) -> RegisteredModel:
    """The model's recorded SQL; an error that says what to do when it was never built."""
    missing = ConfigurationError(
        f"{target.key} has not been built by incremental_ivm yet: run it first (dbt run)"
    )
    if not exists(con, target):
        raise missing
    row = _read(
        con,
        target,
        f"SELECT sql, default_catalog, default_schema, mode FROM {log_table(target).sql()} "
        "WHERE model = ? AND sql IS NOT NULL ORDER BY run DESC LIMIT 1",
    )
    if row is None:
        raise missing
    return RegisteredModel(*row)


def history(con: duckdb.DuckDBPyConnection, target: TableRef, limit: int = 20) -> list[Entry]:
    """The model's latest runs, newest first."""
    if not exists(con, target):
        return []
    rows = con.execute(
        inlined(
            "SELECT run, strategy, reason, rows_inserted, rows_deleted, seconds, finished_at "
            f"FROM {log_table(target).sql()} WHERE model = ? ORDER BY run DESC LIMIT ?",
            [target.name, limit],
        ),
    ).fetchall()
    return [
        Entry(
            strategy,
            reason,
            rows_inserted=i or 0,
            rows_deleted=d or 0,
            seconds=s or 0.0,
            run=run,
            finished_at=f,
        )
        for run, strategy, reason, i, d, s, f in rows
    ]


def models(con: duckdb.DuckDBPyConnection, catalog: str, schema: str) -> list[TableRef]:
    """The models with runs logged in ``catalog``.``schema``."""
    anchor = TableRef(catalog, schema, RUN_LOG)
    if not exists(con, anchor):
        return []
    rows = con.execute(f"SELECT DISTINCT model FROM {anchor.sql()} ORDER BY model").fetchall()
    return [anchor.sibling(r[0]) for r in rows]


def _read(con: duckdb.DuckDBPyConnection, target: TableRef, sql: str) -> tuple | None:
    try:
        return con.execute(inlined(sql, [target.name])).fetchone()
    except duckdb.Error as error:
        raise _failed(target, error) from error


def _failed(target: TableRef, error: duckdb.Error) -> Exception:
    """A read of the log failed: it lacks a column added since (``upgrade`` it), or it was
    changed by hand."""
    if isinstance(error, duckdb.BinderException) and any(c in str(error) for c in _ADDED):
        return OutdatedRunLog(str(error))
    return _unreadable(target, error)


def _unreadable(target: TableRef, error: duckdb.Error) -> ConfigurationError:
    return ConfigurationError(
        f"the run log {log_table(target).key} cannot be read ({error}); it was changed by "
        "hand: drop it, and every model in its schema rebuilds on its next run"
    )
