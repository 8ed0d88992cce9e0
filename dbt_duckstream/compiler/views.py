"""Views a model reads, replaced by their definitions.

Maintenance reads the change feeds of tables; a view has none. dbt materializes models as
views by default, so a mart often reads staging views over DuckLake tables: each such view
(and each view it reads in turn) becomes a derived table under the view's name, its own names
resolved where the view lives, as DuckDB binds it. The model then reads the tables below, and
a change to a view's definition is a change to the model's SQL (it rebuilds).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import sqlglot
from sqlglot import exp

from ..errors import UnsupportedSQLError
from ..sql import TableRef
from .parse import base_tables, tables_qualified

#: views reading views, at most this deep (a deeper chain is a cycle, or a mistake)
MAX_DEPTH = 32

#: the ``CREATE VIEW`` statements of those of the given tables that are views, by key
Definitions = Callable[[Iterable[TableRef]], dict[str, str]]


def inline_views(
    sql: str, catalog: str, db: str, definitions: Definitions
) -> tuple[str, tuple[str, ...]]:
    """``sql`` with every view it reads inlined, and the keys of those views, in the order
    met; ``sql`` itself, unchanged, when it reads none."""
    inlined: list[str] = []
    for _ in range(MAX_DEPTH):
        statement = tables_qualified(sql, catalog, db).copy()
        tables = list(base_tables(statement, catalog))
        found = definitions(ref for _, ref in tables)
        if not found:
            return sql, tuple(inlined)
        for table, ref in tables:
            if ref.key in found:
                table.replace(_derived_table(table, ref, found[ref.key]))
                if ref.key not in inlined:
                    inlined.append(ref.key)
        sql = statement.sql(dialect="duckdb")
    raise UnsupportedSQLError(
        f"views nested more than {MAX_DEPTH} deep ({', '.join(inlined)})",
        "a view that reads itself, through others, has no rows to maintain",
    )


def _derived_table(table: exp.Table, view: TableRef, definition: str) -> exp.Subquery:
    """The view's query as a derived table, under the name and columns the view gives its
    rows (or the alias the model gives it); its tables qualified where the view lives."""
    create = sqlglot.parse_one(definition, read="duckdb")
    if not isinstance(create, exp.Create) or not isinstance(create.expression, exp.Query):
        raise UnsupportedSQLError(
            f"the view {view.key}", f"its definition is not a query: {definition}"
        )
    # parsed as a model's SQL is: DuckDB prints count(*) as count_star(), typed back by
    # ``aggregates.type_aggregate_calls``
    body = tables_qualified(create.expression.sql(dialect="duckdb"), view.catalog, view.schema)
    names = create.this.expressions if isinstance(create.this, exp.Schema) else []
    alias = table.args.get("alias")
    columns = alias.columns if isinstance(alias, exp.TableAlias) and alias.columns else names
    return exp.Subquery(
        this=body.copy(),
        alias=exp.TableAlias(
            this=exp.to_identifier(table.alias_or_name),
            columns=[exp.to_identifier(c.name) for c in columns],
        ),
    )
