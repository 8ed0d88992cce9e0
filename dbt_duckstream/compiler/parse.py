"""Model SQL in: parsed, checked for determinism, qualified against the sources' columns."""

from __future__ import annotations

from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from ..errors import ConfigurationError, DuckstreamError, UnsupportedSQLError
from ..sql import TableRef
from .tree import Schema
from .validate import check_deterministic


def parse_sql(sql: str) -> exp.Expr:
    try:
        parsed = sqlglot.parse(sql, read="duckdb")
    except ParseError as error:
        raise DuckstreamError(f"cannot parse the model SQL: {error}") from error
    statements = [p for p in parsed if p is not None]
    if len(statements) != 1:
        raise UnsupportedSQLError(f"{len(statements)} statements", "a model is one SELECT")
    statement = statements[0]
    check_deterministic(statement)
    if isinstance(statement, exp.Query):
        # A table has no order; ORDER BY at the top changes nothing that is stored.
        statement.set("order", None)
    return statement


def source_tables(sql: str, catalog: str, db: str) -> list[TableRef]:
    """The base tables a model reads (CTE names excluded), fully qualified."""
    statement = qualify(
        parse_sql(sql),
        catalog=catalog,
        db=db,
        dialect="duckdb",
        qualify_columns=False,
        validate_qualify_columns=False,
        quote_identifiers=False,
        expand_stars=False,
    )
    found: dict[str, TableRef] = {}
    for table in statement.find_all(exp.Table):
        if table.db and isinstance(table.this, exp.Identifier):
            ref = TableRef(table.catalog or catalog, table.db, table.name)
            found.setdefault(ref.key, ref)
    return list(found.values())


def qualify_sql(sql: str, *, schema: Schema, catalog: str, db: str) -> exp.Expr:
    try:
        return qualify(
            parse_sql(sql),
            schema=MappingSchema(cast("dict[str, object]", schema), dialect="duckdb"),
            catalog=catalog,
            db=db,
            dialect="duckdb",
            validate_qualify_columns=True,
            quote_identifiers=True,
        )
    except OptimizeError as error:
        raise ConfigurationError(f"cannot resolve the model SQL: {error}") from error


def parse_table(name: str, catalog: str, db: str) -> TableRef:
    table = exp.to_table(name, dialect="duckdb")
    return TableRef(table.catalog or catalog, table.db or db, table.name)
