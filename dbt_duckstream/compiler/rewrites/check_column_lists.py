"""Refuse a ``COLUMNS(...)`` that no rule wrote out (in ``GROUP BY``, ``HAVING``, ``ORDER
BY``, or one that matches no column)."""

from __future__ import annotations

from sqlglot import exp

from ...errors import UnsupportedSQLError
from ..context import Context


def check_column_lists(expression: exp.Expr, context: Context) -> exp.Expr:
    """Raise for a ``COLUMNS(...)`` left after ``expand_column_lists``: it stands for columns
    chosen when DuckDB binds the query, and the compiler must know every column an expression
    reads.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> show(check_column_lists, "SELECT max(COLUMNS(*)) FROM t GROUP BY COLUMNS(*)")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dbt_duckstream.errors.UnsupportedSQLError: ...: COLUMNS(*) expression ...
    """
    for node in expression.find_all(exp.Columns):
        raise UnsupportedSQLError(
            f"{node.sql(dialect='duckdb')} expression", "name the columns it stands for"
        )
    return expression
