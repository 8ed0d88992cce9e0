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
    stored_inputs: object = None,
) -> RunResult:
    """Build or maintain the model ``target`` from ``sql``; see ``RunResult`` for what the
    run did and ``Breakdown`` for where its time went. ``stored_inputs``: the sources whose
    rows its joins keep in a state table (``ivm_stored_inputs``, ``compile_ivm``)."""
    stored = stored_input_names(stored_inputs)
    fallback = str(fallback or "none")
    if fallback not in FALLBACKS:
        raise ConfigurationError(
            f"ivm_fallback={fallback!r} is not a choice: use 'rebuild' or leave it unset"
        )
    started = time.perf_counter()
    with recording() as breakdown:
        if empty:
            result = _run_empty(con, sql, target, fallback, stored)
        else:
            result = _run(con, sql, target, fallback, full_refresh, rebuild_above, stored)
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
    stored_inputs: tuple[str, ...] = (),
) -> RunResult:
    with phase("decide"):
        history = _history(con, target)
        quiet = None if full_refresh else _known_unchanged(con, sql, target, history, stored_inputs)
    if quiet is not None:
        return quiet
    try:
        with phase("bind"):
            known = history if not full_refresh else None
            plan = _bound(con, sql, target, known, stored_inputs)
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
    con: duckdb.DuckDBPyConnection,
    sql: str,
    target: TableRef,
    history: History | None = None,
    stored_inputs: tuple[str, ...] = (),
) -> IVMPlan:
    """The model's plan, compiled against the live catalog; with the run's ``history``, as
    an earlier process compiled it, when it still holds (``plan_cache``)."""

    def bound() -> IVMPlan:
        with LAKE.reading():
            if history is not None:
                found = plan_cache.cached_plan(con, sql, target, history, stored_inputs)
                if found is not None:
                    return found
            plan = prepare(
                con,
                sql,
                target,
                catalog=target.catalog,
                db=target.schema,
                stored_inputs=stored_inputs,
            )
            if history is not None:
                plan_cache.keep(con, sql, target, plan, history)
            return plan

    return retrying(bound, f"incremental_ivm {target.key} binding its SQL")


def stored_input_names(configured: object) -> tuple[str, ...]:
    """``ivm_stored_inputs`` as configured (a source's name, or a list of them) as names.

    >>> stored_input_names(["lineitem", "tpch.orders"])
    ('lineitem', 'tpch.orders')
    >>> stored_input_names("lineitem")
    ('lineitem',)
    >>> stored_input_names(None)
    ()
    """
    if configured is None:
        return ()
    names = [configured] if isinstance(configured, str) else configured
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) and n for n in names):
        raise ConfigurationError(
            f"ivm_stored_inputs={configured!r} is not a source's name or a list of them: "
            "give the tables whose rows the model's joins keep, e.g. ['lineitem']"
        )
    return tuple(names)


def unmaintainable(error: UnsupportedSQLError) -> DuckstreamError:
    return DuckstreamError(
        f"{error}. Rewrite the model, or set ivm_fallback='rebuild' to rebuild it in full on "
        "every run"
    )


def _run_empty(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    target: TableRef,
    fallback: str,
    stored_inputs: tuple[str, ...] = (),
) -> RunResult:
    """dbt's ``--empty``: compile the model's SQL as a run would, so that SQL it cannot
    maintain fails here too; create its table without rows when it has none, for the models
    downstream to bind against. No run is recorded, so the next run builds the table; a table
    that exists is left as it is (what dbt's incremental materialization does)."""
    try:
        with phase("bind"):
            _bound(con, without_empty_reads(sql), target, stored_inputs=stored_inputs)
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
    con: duckdb.DuckDBPyConnection,
    sql: str,
    target: TableRef,
    history: History | None,
    stored_inputs: tuple[str, ...] = (),
) -> RunResult | None:
    """The run, when the lake's metadata proves that nothing changed since the model's last
    one: without compiling its SQL (``runtime.unchanged``)."""
    if history is None:
        return None
    with LAKE.reading():
        found = known_unchanged(
            con,
            sql,
            target,
            catalog=target.catalog,
            db=target.schema,
            history=history,
            stored_inputs=stored_inputs,
        )
    if found is None:
        return None
    reason, window = found
    return RunResult(target.key, Strategy.UNCHANGED.value, reason, window)
