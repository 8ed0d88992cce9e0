"""The functions dbt's macros call: JSON in, JSON out, as DuckDB scalar functions.

A materialization cannot import Python, but it can run SQL. The plugin registers these
functions on the connection dbt uses; each runs on its own cursor of that connection, so a
model's run is one transaction of its own (the runtime's, the same as from Python), and the
macro only orchestrates hooks, logging and dbt's results.

Errors come back as ``{"error": message, "database": ...}`` so that the macro can fail the
model with the message itself, rather than with DuckDB's wrapping of a Python exception: as a
database error when the database failed (a DuckDB error, a catalog contended past every retry),
else as a compilation error (SQL that cannot be maintained, a wrong setting).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import duckdb

from ..errors import ContendedCatalogError, DuckstreamError
from ..runtime import invocation, model_run, runlog
from ..runtime.consistency import differences_sql
from ..runtime.decide import rebuild_above
from ..runtime.lake import describe, disable_for_good, stored_columns, unsound_optimizers
from ..runtime.recorded_ties import recorded_ties
from ..runtime.run import prepare, using
from ..runtime.status import format_status, status
from ..runtime.turns import LAKE, PLANNING
from ..sql import TableRef, literal

Request = dict[str, Any]


def relation(request: Request) -> TableRef:
    """The model's table from a dbt relation's parts."""
    parts = request["relation"]
    return TableRef(parts["database"], parts["schema"], parts["identifier"])


def run_model(con: duckdb.DuckDBPyConnection, request: Request) -> dict[str, Any]:
    """Build or maintain one model (``runtime.model_run``), as a model of the running dbt
    invocation (``invocation``)."""
    with invocation.within(invocation_models()):
        result = model_run.run_model(
            con,
            request["sql"],
            relation(request),
            full_refresh=bool(request.get("full_refresh")),
            empty=bool(request.get("empty")),
            fallback=request.get("fallback"),
            rebuild_above=rebuild_above(request.get("rebuild_above")),
            stored_inputs=request.get("stored_inputs"),
        )
    return result.to_dict()


#: dbt's last selection and the names of its models (``invocation_models``)
_selection: tuple[object, frozenset[str] | None] = (None, None)


def invocation_models() -> frozenset[str] | None:
    """The names of the models the running dbt invocation selected: what its Jinja context
    calls ``selected_resources``, which dbt keeps in ``dbt.selected_resources`` (read here,
    as passing it through the materialization would cost every model of a large project a
    copy of the list). None when dbt has none."""
    global _selection
    selected = getattr(_dbt_selection(), "SELECTED_RESOURCES", None)
    if selected is None:
        return None
    if _selection[0] is not selected:  # dbt sets a new list per invocation
        _selection = (selected, invocation.model_names(selected))
    return _selection[1]


def invocation_schemas() -> frozenset[tuple[str, str]] | None:
    """The (database, schema) pairs, lower case, that the running dbt invocation's selected
    models are built in, from the manifest dbt gave its adapter; None when dbt has none."""
    selected = getattr(_dbt_selection(), "SELECTED_RESOURCES", None)
    if selected is None:
        return None
    try:
        from dbt.adapters.factory import FACTORY

        manifest: Any = FACTORY.lookup_adapter("duckdb").get_macro_resolver()
        nodes = manifest.nodes
    except (ImportError, KeyError, AttributeError):
        return None
    if nodes is None:
        return None
    return frozenset(
        (str(node.database).lower(), str(node.schema).lower())
        for uid in selected
        if str(uid).startswith("model.") and (node := nodes.get(uid)) is not None
    )


def _dbt_selection() -> object:
    """dbt's module holding the invocation's selection (None outside dbt)."""
    try:
        from dbt import selected_resources
    except ImportError:
        return None
    return selected_resources


def explain_model(con: duckdb.DuckDBPyConnection, request: Request) -> dict[str, Any]:
    """The plan's SQL for the given model SQL, or for the SQL the model was last built from."""
    target = relation(request)
    sql = request.get("sql")
    if sql is None:
        recorded = runlog.registered(con, target)
        if recorded.mode == "rebuild":
            return {"text": f"-- {target.key} is rebuilt on every run (ivm_fallback='rebuild')"}
        sql = recorded.sql
    plan = prepare(
        con,
        sql,
        target,
        catalog=target.catalog,
        db=target.schema,
        stored_inputs=model_run.stored_input_names(request.get("stored_inputs")),
    )
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
        request = json.loads(payload)
        # the call's statement is planned: settings may change again (``turns.Planning``)
        PLANNING.began(request.pop("planning", ""))
        cursor = conn.cursor()
        try:
            return json.dumps(function(cursor, request))
        except (DuckstreamError, duckdb.Error) as error:
            database = isinstance(error, (duckdb.Error, ContendedCatalogError))
            return json.dumps(
                {"error": str(error), "kind": type(error).__name__, "database": database}
            )
        finally:
            cursor.close()

    return udf
