"""The tables a model reads, and its SQL with them pinned at a snapshot."""

from __future__ import annotations

from functools import lru_cache

from sqlglot import exp

from ..sql import TableRef
from .parse import base_tables, qualify_tables
from .pipeline import parse_sql


def source_tables(statement: exp.Expr, catalog: str, db: str) -> list[TableRef]:
    """The base tables a statement reads (CTE names excluded), fully qualified, once each."""
    found: dict[str, TableRef] = {}
    for _, ref in base_tables(qualify_tables(statement.copy(), catalog, db), catalog):
        found.setdefault(ref.key, ref)
    return list(found.values())


def pinned_sql(sql: str, catalog: str, db: str, versions: dict[str, int]) -> str:
    """The model's SQL with each source in ``versions`` (by key) read at its snapshot there:
    the query as written, so that DuckDB plans it as it plans the model."""
    statement = tables_qualified(sql, catalog, db).copy()
    for table, ref in base_tables(statement, catalog):
        if ref.key in versions:
            table.set(
                "when",
                exp.HistoricalData(
                    this="AT", kind="VERSION", expression=exp.Literal.number(versions[ref.key])
                ),
            )
    return statement.sql(dialect="duckdb")


@lru_cache(maxsize=256)
def tables_qualified(sql: str, catalog: str, db: str) -> exp.Expr:
    """Shared by every caller with the same arguments (parsing and qualifying take a few ms,
    and a run rebuilding for cost pins the SQL its plan was compiled from): copy to change."""
    return qualify_tables(parse_sql(sql), catalog, db)
