"""One model's run, from its SQL to its commit: what dbt's materialization and the Python API
both call.

The sequence: a model whose lake metadata proves nothing changed since its last run returns
at once, without compiling its SQL (``unchanged``); otherwise its SQL is bound against the
live catalog (retried when a concurrent commit moves the catalog under it) and the run is
decided and carried out in one transaction (``run.refresh``). SQL that cannot be maintained
fails naming the construct, or, with ``fallback='rebuild'``, is rebuilt in full. dbt's
``--empty`` compiles the SQL as a run would and creates a new model's table without rows.
Every run's phases are timed (``breakdown``).
"""

from __future__ import annotations

import time

import duckdb

from ..compiler import IVMPlan
from ..errors import ConfigurationError, DuckstreamError, UnsupportedSQLError
from ..retry import RetryPolicy, ducklake_paths, retrying
from ..sql import TableRef
from . import plan_cache
from .breakdown import phase, recording
from .decide import REBUILD_ABOVE, Strategy
from .empty import without_empty_reads
from .history import History
from .history import read as read_history
from .lake import table_ids
from .run import WRITE_PATIENCE, RunResult, prepare, rebuild_unmaintainable, refresh, using
from .turns import LAKE
from .unchanged import known_unchanged

#: what ``fallback`` may be: fail on SQL that cannot be maintained, or rebuild it every run
FALLBACKS = ("none", "rebuild")


def run_model(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    target: TableRef,
    *,
    full_refresh: bool = False,
    empty: bool = False,
    fallback: str | None = None,
    rebuild_above: float | None = REBUILD_ABOVE,
) -> RunResult:
    """Build or maintain the model ``target`` from ``sql``; see ``RunResult`` for what the
    run did and ``Breakdown`` for where its time went."""
    fallback = str(fallback or "none")
    if fallback not in FALLBACKS:
        raise ConfigurationError(
            f"ivm_fallback={fallback!r} is not a choice: use 'rebuild' or leave it unset"
        )
    started = time.perf_counter()
    with recording() as breakdown:
        if empty:
            result = _run_empty(con, sql, target, fallback)
        else:
            result = _run(con, sql, target, fallback, full_refresh, rebuild_above)
    result.breakdown = breakdown
    result.seconds = time.perf_counter() - started
    return result


def _run(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    target: TableRef,
    fallback: str,
    full_refresh: bool,
    rebuild_above: float | None,
) -> RunResult:
    with phase("decide"):
        history = _history(con, target)
        quiet = None if full_refresh else _known_unchanged(con, sql, target, history)
    if quiet is not None:
        return quiet
    try:
        with phase("bind"):
            plan = _bound(con, sql, target, history if not full_refresh else None)
    except UnsupportedSQLError as error:
        if fallback != "rebuild":
            raise unmaintainable(error) from error
        reason = f"ivm_fallback='rebuild': {error.construct} cannot be maintained"
        # one transaction, like refresh: a lost commit race reruns it whole
        return retrying(
            lambda: rebuild_unmaintainable(
                con, sql, target, catalog=target.catalog, db=target.schema, reason=reason
            ),
            f"incremental_ivm {target.key}",
            catalogs={k: v for k, v in ducklake_paths(con).items() if k == target.catalog},
            policy=RetryPolicy.from_environment(patience=WRITE_PATIENCE),
        )
    return refresh(
        con, plan, full_refresh=full_refresh, rebuild_above=rebuild_above, history=history
    )


def _bound(
    con: duckdb.DuckDBPyConnection, sql: str, target: TableRef, history: History | None = None
) -> IVMPlan:
    """The model's plan, compiled against the live catalog; with the run's ``history``, as
    an earlier process compiled it, when it still holds (``plan_cache``)."""

    def bound() -> IVMPlan:
        with LAKE.reading():
            if history is not None:
                found = plan_cache.cached_plan(con, sql, target, history)
                if found is not None:
                    return found
            plan = prepare(con, sql, target, catalog=target.catalog, db=target.schema)
            if history is not None:
                plan_cache.keep(con, sql, target, plan, history)
            return plan

    return retrying(bound, f"incremental_ivm {target.key} binding its SQL")


def unmaintainable(error: UnsupportedSQLError) -> DuckstreamError:
    return DuckstreamError(
        f"{error}. Rewrite the model, or set ivm_fallback='rebuild' to rebuild it in full on "
        "every run"
    )


def _run_empty(
    con: duckdb.DuckDBPyConnection, sql: str, target: TableRef, fallback: str
) -> RunResult:
    """dbt's ``--empty``: compile the model's SQL as a run would, so that SQL it cannot
    maintain fails here too; create its table without rows when it has none, for the models
    downstream to bind against. No run is recorded, so the next run builds the table; a table
    that exists is left as it is (what dbt's incremental materialization does)."""
    try:
        with phase("bind"):
            _bound(con, without_empty_reads(sql), target)
    except UnsupportedSQLError as error:
        if fallback != "rebuild":
            raise unmaintainable(error) from error
    with phase("write"), LAKE.writing(), using(con, target.catalog, target.schema):
        exists = table_ids(con, [target])[target.key] is not None
        if not exists:
            con.execute(f"CREATE TABLE IF NOT EXISTS {target.sql()} AS {sql}")
    reason = "--empty: SQL checked, " + (
        "table left as it is" if exists else "table created without rows; the next run builds it"
    )
    return RunResult(target.key, Strategy.EMPTY.value, reason, {})


def _history(con: duckdb.DuckDBPyConnection, target: TableRef) -> History | None:
    """The model's lake's snapshots, read once for the run (``history``); None outside a
    DuckLake, or with a catalog that cannot be read now (the run says why later)."""
    with LAKE.reading():
        try:
            return read_history(con, target)
        except duckdb.Error:
            return None


def _known_unchanged(
    con: duckdb.DuckDBPyConnection, sql: str, target: TableRef, history: History | None
) -> RunResult | None:
    """The run, when the lake's metadata proves that nothing changed since the model's last
    one: without compiling its SQL (``runtime.unchanged``)."""
    if history is None:
        return None
    with LAKE.reading():
        found = known_unchanged(
            con, sql, target, catalog=target.catalog, db=target.schema, history=history
        )
    if found is None:
        return None
    reason, window = found
    return RunResult(target.key, Strategy.UNCHANGED.value, reason, window)
