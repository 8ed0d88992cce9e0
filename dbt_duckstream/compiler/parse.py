"""Model SQL in: one statement parsed, and the tables it names qualified."""

from __future__ import annotations

from collections.abc import Iterator

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError
from sqlglot.optimizer.qualify import qualify

from ..errors import DuckstreamError, UnsupportedSQLError
from ..sql import TableRef


def parse_statement(sql: str) -> exp.Expr:
    """The one statement of a model's SQL, as written."""
    try:
        parsed = sqlglot.parse(sql, read="duckdb")
    except ParseError as error:
        raise DuckstreamError(f"cannot parse the model SQL: {error}") from error
    statements = [p for p in parsed if p is not None]
    if len(statements) != 1:
        raise UnsupportedSQLError(f"{len(statements)} statements", "a model is one SELECT")
    return statements[0]


def parse_table(name: str, catalog: str, db: str) -> TableRef:
    table = exp.to_table(name, dialect="duckdb")
    return TableRef(table.catalog or catalog, table.db or db, table.name)


def qualify_tables(statement: exp.Expr, catalog: str, db: str) -> exp.Expr:
    """The statement (changed in place) with each table it names qualified by its catalog and
    schema, ``catalog``.``db`` for an unqualified one; its columns left as written."""
    return qualify(
        statement,
        catalog=catalog,
        db=db,
        dialect="duckdb",
        qualify_columns=False,
        validate_qualify_columns=False,
        quote_identifiers=False,
        expand_stars=False,
    )


def base_tables(statement: exp.Expr, catalog: str) -> Iterator[tuple[exp.Table, TableRef]]:
    """The tables of a statement that ``qualify_tables`` qualified, and what they name."""
    for table in statement.find_all(exp.Table):
        if table.db and isinstance(table.this, exp.Identifier):
            yield table, TableRef(table.catalog or catalog, table.db, table.name)
