"""sqlglot's qualification, against the sources' columns: every column names its table, every
``*`` is written out, every identifier quoted. The rules after it read qualified SQL."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify as qualified

from ...errors import ConfigurationError
from ..context import Context


def qualify(expression: exp.Expr, context: Context) -> exp.Expr:
    """The statement qualified (changed in place); a name that resolves to no column, or to
    several, is an error in the model.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> tables = {"t": {"k": "INT", "v": "INT"}}
    >>> print(show(qualify, "SELECT k, sum(v) FROM t GROUP BY k", tables=tables))
    SELECT "t"."k" AS "k", SUM("t"."v") AS "_col_1" FROM "t" AS "t" GROUP BY "t"."k"
    """
    try:
        return qualified(
            expression,
            schema=context.schema,
            catalog=context.catalog or None,
            db=context.db or None,
            dialect="duckdb",
            validate_qualify_columns=True,
            quote_identifiers=True,
        )
    except OptimizeError as error:
        raise ConfigurationError(f"cannot resolve the model SQL: {error}") from error
