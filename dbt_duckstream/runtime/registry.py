"""The model registry: the SQL each maintained model was last built from.

``ivm_consistent`` and ``duckstream_explain`` read it to recompute or explain a model without
compiling the dbt project again. It is written only when a model is (re)built, so a run that
maintains incrementally costs no extra statement.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from ..errors import ConfigurationError
from ..sql import TableRef, quote
from .lake import table_id

REGISTRY_TABLE = "_duckstream_models"


@dataclass(frozen=True)
class RegisteredModel:
    sql: str
    catalog: str
    schema: str
    mode: str  # "incremental" or "rebuild" (ivm_fallback)


def registry_table(target: TableRef) -> str:
    return f"{quote(target.catalog)}.{quote(target.schema)}.{quote(REGISTRY_TABLE)}"


def record(
    con: duckdb.DuckDBPyConnection, target: TableRef, model: RegisteredModel, sql_hash: str
) -> None:
    table = registry_table(target)
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {table} (model VARCHAR, sql VARCHAR, "
        "default_catalog VARCHAR, default_schema VARCHAR, mode VARCHAR, sql_hash VARCHAR, "
        "updated_at TIMESTAMP WITH TIME ZONE)"
    )
    con.execute(f"DELETE FROM {table} WHERE model = ?", [target.key])
    con.execute(
        f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, ?, now())",
        [target.key, model.sql, model.catalog, model.schema, model.mode, sql_hash],
    )


def lookup(con: duckdb.DuckDBPyConnection, target: TableRef) -> RegisteredModel:
    """The model's recorded SQL; an error that says what to do when it was never built."""
    missing = ConfigurationError(
        f"{target.key} has not been built by incremental_ivm yet: run it first (dbt run)"
    )
    if table_id(con, TableRef(target.catalog, target.schema, REGISTRY_TABLE)) is None:
        raise missing
    row = con.execute(
        f"SELECT sql, default_catalog, default_schema, mode FROM {registry_table(target)} "
        "WHERE model = ?",
        [target.key],
    ).fetchone()
    if row is None:
        raise missing
    return RegisteredModel(*row)
