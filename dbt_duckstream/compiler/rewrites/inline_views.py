"""Views a model reads, replaced by their definitions.

Maintenance reads the change feeds of tables; a view has none. dbt materializes models as
views by default, so a mart often reads staging views over DuckLake tables: each such view
(and each view it reads in turn) becomes a derived table under the view's name, its own names
resolved where the view lives, as DuckDB binds it. The model then reads the tables below, and
a change to a view's definition is a change to the model's SQL (it rebuilds).
"""

from __future__ import annotations

from collections.abc import Callable

import sqlglot
from sqlglot import exp

from ...errors import UnsupportedSQLError
from ...sql import TableRef
from ..context import Context
from ..parse import base_tables, qualify_tables

#: views reading views, at most this deep (a deeper chain is a cycle, or a mistake)
MAX_DEPTH = 32


def inline_views(expression: exp.Expr, context: Context) -> exp.Expr:
    """The statement with every view it reads inlined, its tables qualified, the views noted
    in ``context.views`` in the order met; the statement itself, unchanged, when it reads
    none.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> views = {"lake.main.v": "CREATE VIEW v AS SELECT k, sum(x) AS s FROM t GROUP BY k"}
    >>> print(show(inline_views, "SELECT s FROM v WHERE k > 1", views=views,
    ...     catalog="lake", db="main"))
    SELECT s FROM (SELECT k, SUM(x) AS s FROM lake.main.t AS t GROUP BY k) AS v WHERE k > 1
    """
    named = (
        TableRef(t.catalog or context.catalog, t.db or context.db, t.name)
        for t in expression.find_all(exp.Table)
        if isinstance(t.this, exp.Identifier)
    )
    if not context.lookup.views(named):
        return expression  # most models: no name (a CTE's either) is a view's, nothing copied
    statement = qualify_tables(expression.copy(), context.catalog, context.db)
    inlined = False
    for _ in range(MAX_DEPTH):
        tables = list(base_tables(statement, context.catalog))
        found = context.lookup.views(ref for _, ref in tables)
        if not found:
            return statement if inlined else expression
        for table, ref in tables:
            if ref.key in found:
                table.replace(_derived_table(table, ref, found[ref.key], context.read))
                inlined = True
                if ref.key not in context.views:
                    context.views.append(ref.key)
    raise UnsupportedSQLError(
        f"views nested more than {MAX_DEPTH} deep ({', '.join(context.views)})",
        "a view that reads itself, through others, has no rows to maintain",
    )


def _derived_table(
    table: exp.Table, view: TableRef, definition: str, read: Callable[[str], exp.Expr]
) -> exp.Subquery:
    """The view's query as a derived table, under the name and columns the view gives its
    rows (or the alias the model gives it); its tables qualified where the view lives."""
    create = sqlglot.parse_one(definition, read="duckdb")
    if not isinstance(create, exp.Create) or not isinstance(create.expression, exp.Query):
        raise UnsupportedSQLError(
            f"the view {view.key}", f"its definition is not a query: {definition}"
        )
    # read as a model's SQL is (DuckDB prints count(*) as count_star(), typed back by
    # ``type_aggregate_calls``), its names resolved where the view lives
    body = qualify_tables(read(create.expression.sql(dialect="duckdb")), view.catalog, view.schema)
    names = create.this.expressions if isinstance(create.this, exp.Schema) else []
    alias = table.args.get("alias")
    columns = alias.columns if isinstance(alias, exp.TableAlias) and alias.columns else names
    return exp.Subquery(
        this=body,
        alias=exp.TableAlias(
            this=exp.to_identifier(table.alias_or_name),
            columns=[exp.to_identifier(c.name) for c in columns],
        ),
    )
