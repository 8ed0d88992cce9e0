"""VALUES lists and table functions in FROM, given the column names DuckDB gives them, so that
columns resolve as they do in DuckDB."""

from __future__ import annotations

from sqlglot import exp

from ..context import Context

#: the column DuckDB names the output of a table function called without column names
_FUNCTION_COLUMNS = {"RANGE": "range", "GENERATE_SERIES": "generate_series", "UNNEST": "unnest"}


def name_function_columns(expression: exp.Expr, context: Context) -> exp.Expr:
    """Name, in place, the columns of each VALUES list (``col0``, ``col1``, ...) and table
    function (``range``, ``generate_series``, ``unnest``) in FROM that the SQL leaves
    unnamed.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(name_function_columns, "SELECT * FROM (VALUES (1, 'a')), range(3)"))
    SELECT * FROM (VALUES (1, 'a')) AS valueslist(col0, col1), RANGE(0, 3) AS range(range)
    """
    for clause in list(expression.find_all(exp.From, exp.Join)):
        item = clause.this
        if isinstance(item, exp.Values):
            first = item.expressions[0] if item.expressions else None
            width = len(first.expressions) if isinstance(first, exp.Tuple) else 1
            names, default = [f"col{i}" for i in range(width)], "valueslist"
        elif isinstance(item, exp.Unnest) or (
            isinstance(item, exp.Table) and isinstance(item.this, exp.GenerateSeries | exp.Unnest)
        ):
            call = item if isinstance(item, exp.Unnest) else item.this
            key = call.sql(dialect="duckdb").split("(")[0].upper()
            names = [_FUNCTION_COLUMNS.get(key, key.lower())]
            default = names[0]
        else:
            continue
        alias = item.args.get("alias")
        if isinstance(alias, exp.TableAlias) and alias.columns:
            continue
        if not isinstance(alias, exp.TableAlias):
            alias = exp.TableAlias(this=exp.to_identifier(default))
        alias.set("columns", [exp.to_identifier(n) for n in names])
        item.set("alias", alias)
    return expression
