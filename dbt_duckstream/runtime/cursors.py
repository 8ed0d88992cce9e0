"""The cursor table: per model and source, the last snapshot applied and the plan's hash.

It lives in DuckLake beside the model, so a cursor moves in the same transaction (the same
snapshot) as the rows it accounts for.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from ..sql import TableRef, quote
from .lake import table_id

CURSOR_TABLE = "_duckstream_cursors"


@dataclass(frozen=True)
class Cursor:
    source: str
    catalog: str
    table_id: int | None
    snapshot_id: int
    sql_hash: str


def cursor_table(target: TableRef) -> str:
    return f"{quote(target.catalog)}.{quote(target.schema)}.{quote(CURSOR_TABLE)}"


def exists(con: duckdb.DuckDBPyConnection, target: TableRef) -> bool:
    return table_id(con, TableRef(target.catalog, target.schema, CURSOR_TABLE)) is not None


def ensure(con: duckdb.DuckDBPyConnection, target: TableRef) -> None:
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {cursor_table(target)} (model VARCHAR, source VARCHAR, "
        "source_catalog VARCHAR, table_id BIGINT, snapshot_id BIGINT, sql_hash VARCHAR, "
        "updated_at TIMESTAMP WITH TIME ZONE)"
    )


def read(con: duckdb.DuckDBPyConnection, target: TableRef) -> list[Cursor]:
    if not exists(con, target):
        return []
    rows = con.execute(
        f"SELECT source, source_catalog, table_id, snapshot_id, sql_hash "
        f"FROM {cursor_table(target)} WHERE model = ? ORDER BY source",
        [target.key],
    ).fetchall()
    return [Cursor(*row) for row in rows]


def write(con: duckdb.DuckDBPyConnection, target: TableRef, cursors: list[Cursor]) -> None:
    ensure(con, target)
    table = cursor_table(target)
    con.execute(f"DELETE FROM {table} WHERE model = ?", [target.key])
    con.executemany(
        f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, ?, now())",
        [[target.key, c.source, c.catalog, c.table_id, c.snapshot_id, c.sql_hash] for c in cursors],
    )


def drop(con: duckdb.DuckDBPyConnection, target: TableRef) -> None:
    if exists(con, target):
        con.execute(f"DELETE FROM {cursor_table(target)} WHERE model = ?", [target.key])
