"""The functions dbt's macros call: JSON in, JSON out, as DuckDB scalar functions.

A materialization cannot import Python, but it can run SQL. The plugin registers these
functions on the connection dbt uses; each runs on its own cursor of that connection, so a
model's run is one transaction of its own (the runtime's, the same as from Python), and the
macro only orchestrates hooks, logging and dbt's results.

Errors come back as ``{"error": message}`` so that the macro can fail the model with the
message itself, rather than with DuckDB's wrapping of a Python exception.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import duckdb

from ..compiler import IVMPlan
from ..errors import ConfigurationError, DuckstreamError, UnsupportedSQLError
from ..retry import retrying
from ..runtime import runlog
from ..runtime.consistency import differences_sql
from ..runtime.decide import Strategy, rebuild_above
from ..runtime.lake import (
    describe,
    disable_for_good,
    stored_columns,
    table_ids,
    unsound_optimizers,
)
from ..runtime.recorded_ties import recorded_ties
from ..runtime.run import RunResult, prepare, rebuild_unmaintainable, refresh, using
from ..runtime.status import format_status, status
from ..runtime.turns import LAKE
from ..runtime.unchanged import known_unchanged
from ..sql import TableRef, literal
from .empty import without_empty_reads

Request = dict[str, Any]

FALLBACKS = ("none", "rebuild")


def relation(request: Request) -> TableRef:
    """The model's table from a dbt relation's parts."""
    parts = request["relation"]
    return TableRef(parts["database"], parts["schema"], parts["identifier"])


def run_model(con: duckdb.DuckDBPyConnection, request: Request) -> dict[str, Any]:
    """Build or maintain one model; ``ivm_fallback='rebuild'`` rebuilds unsupported SQL."""
    target = relation(request)
    fallback = str(request.get("fallback") or "none")
    if fallback not in FALLBACKS:
        raise ConfigurationError(
            f"ivm_fallback={fallback!r} is not a choice: use 'rebuild' or leave it unset"
        )
    if request.get("empty"):
        return _run_empty(con, request, target, fallback)
    return _run_model(con, request, target, fallback)


def _bound(con: duckdb.DuckDBPyConnection, sql: str, target: TableRef) -> IVMPlan:
    """The model's plan, compiled against the live catalog."""

    def bound() -> IVMPlan:
        with LAKE.reading():
            return prepare(con, sql, target, catalog=target.catalog, db=target.schema)

    return retrying(bound, f"incremental_ivm {target.key} binding its SQL")


def _unmaintainable(error: UnsupportedSQLError) -> DuckstreamError:
    return DuckstreamError(
        f"{error}. Rewrite the model, or set ivm_fallback='rebuild' to rebuild it in full on "
        "every run"
    )


def _run_empty(
    con: duckdb.DuckDBPyConnection, request: Request, target: TableRef, fallback: str
) -> dict[str, Any]:
    """dbt's ``--empty``: compile the model's SQL as a run would, so that SQL it cannot
    maintain fails here too; create its table without rows when it has none, for the models
    downstream to bind against. No run is recorded, so the next run builds the table; a table
    that exists is left as it is (what dbt's incremental materialization does)."""
    started = time.perf_counter()
    try:
        _bound(con, without_empty_reads(request["sql"]), target)
    except UnsupportedSQLError as error:
        if fallback != "rebuild":
            raise _unmaintainable(error) from error
    with LAKE.writing(), using(con, target.catalog, target.schema):
        exists = table_ids(con, [target])[target.key] is not None
        if not exists:
            con.execute(f"CREATE TABLE IF NOT EXISTS {target.sql()} AS {request['sql']}")
    reason = "--empty: SQL checked, " + (
        "table left as it is" if exists else "table created without rows; the next run builds it"
    )
    result = RunResult(
        target.key, Strategy.EMPTY.value, reason, {}, seconds=time.perf_counter() - started
    )
    return result.to_dict()


def _run_model(
    con: duckdb.DuckDBPyConnection, request: Request, target: TableRef, fallback: str
) -> dict[str, Any]:
    threshold = rebuild_above(request.get("rebuild_above"))
    full_refresh = bool(request.get("full_refresh"))
    if not full_refresh:
        quiet = _known_unchanged(con, request["sql"], target)
        if quiet is not None:
            return quiet.to_dict()
    try:
        plan = _bound(con, request["sql"], target)
    except UnsupportedSQLError as error:
        if fallback != "rebuild":
            raise _unmaintainable(error) from error
        reason = f"ivm_fallback='rebuild': {error.construct} cannot be maintained"
        # one transaction, like refresh: a lost commit race reruns it whole
        result = retrying(
            lambda: rebuild_unmaintainable(
                con, request["sql"], target, catalog=target.catalog, db=target.schema, reason=reason
            ),
            f"incremental_ivm {target.key}",
        )
        return result.to_dict()
    result = refresh(con, plan, full_refresh=full_refresh, rebuild_above=threshold)
    return result.to_dict()


def _known_unchanged(
    con: duckdb.DuckDBPyConnection, sql: str, target: TableRef
) -> RunResult | None:
    """The run, when the lake's metadata proves that nothing changed since the model's last
    one: without compiling its SQL (``runtime.unchanged``)."""
    started = time.perf_counter()
    with LAKE.reading():
        found = known_unchanged(con, sql, target, catalog=target.catalog, db=target.schema)
    if found is None:
        return None
    reason, window = found
    seconds = time.perf_counter() - started
    return RunResult(target.key, Strategy.UNCHANGED.value, reason, window, seconds=seconds)


def explain_model(con: duckdb.DuckDBPyConnection, request: Request) -> dict[str, Any]:
    """The plan's SQL for the given model SQL, or for the SQL the model was last built from."""
    target = relation(request)
    sql = request.get("sql")
    if sql is None:
        recorded = runlog.registered(con, target)
        if recorded.mode == "rebuild":
            return {"text": f"-- {target.key} is rebuilt on every run (ivm_fallback='rebuild')"}
        sql = recorded.sql
    plan = prepare(con, sql, target, catalog=target.catalog, db=target.schema)
    return {"text": plan.explain()}


def consistency_sql(con: duckdb.DuckDBPyConnection, request: Request) -> dict[str, Any]:
    """A query returning every row where the model differs from its SQL recomputed now."""
    target = relation(request)
    recorded = runlog.registered(con, target)
    table_columns = describe(con, target.sql())
    with using(con, recorded.catalog, recorded.schema):
        query_columns = stored_columns(con, recorded.sql)
    if table_columns != query_columns:
        detail = f"table has {table_columns}, the model SQL gives {query_columns}"
        return {"sql": f"SELECT 'columns differ' AS _side, {literal(detail)} AS detail"}
    # dbt runs the query after this call returns, outside any block of the package
    disable_for_good(con, unsound_optimizers(recorded.sql))
    # a window whose ORDER BY ties may order rows either way: not a difference
    ties = recorded_ties(con, target)
    # The recomputation is fully qualified by dbt; in-catalog names resolve as at build time.
    return {"sql": differences_sql(target.sql(), recorded.sql, table_columns, ties)}


def model_status(con: duckdb.DuckDBPyConnection, request: Request) -> dict[str, Any]:
    """Each maintained model of a schema: its last run, and snapshots behind its sources."""
    rows = status(con, request["database"], request["schema"])
    return {"text": format_status(rows) if rows else "no incremental_ivm model has run here"}


def _reading(
    function: Callable[[duckdb.DuckDBPyConnection, Request], dict[str, Any]],
) -> Callable[[duckdb.DuckDBPyConnection, Request], dict[str, Any]]:
    """A function that only reads the lake, reading in the process's turns (``turns``)."""

    def read(con: duckdb.DuckDBPyConnection, request: Request) -> dict[str, Any]:
        with LAKE.reading():
            return function(con, request)

    return read


FUNCTIONS: dict[str, Callable[[duckdb.DuckDBPyConnection, Request], dict[str, Any]]] = {
    "duckstream_run": run_model,  # takes its turns itself
    "duckstream_explain": _reading(explain_model),
    "duckstream_consistency_sql": _reading(consistency_sql),
    "duckstream_status": _reading(model_status),
}


def register(conn: duckdb.DuckDBPyConnection) -> None:
    """Register every bridge function on ``conn`` (visible to all of its cursors)."""
    for name, function in FUNCTIONS.items():
        conn.create_function(
            name,
            _json_udf(conn, function),
            [duckdb.sqltype("VARCHAR")],
            duckdb.sqltype("VARCHAR"),
            side_effects=True,
        )


def _json_udf(
    conn: duckdb.DuckDBPyConnection,
    function: Callable[[duckdb.DuckDBPyConnection, Request], dict[str, Any]],
) -> Callable[[str], str]:
    def udf(payload: str) -> str:
        cursor = conn.cursor()
        try:
            return json.dumps(function(cursor, json.loads(payload)))
        except (DuckstreamError, duckdb.Error) as error:
            return json.dumps({"error": str(error), "kind": type(error).__name__})
        finally:
            cursor.close()

    return udf
