"""``LATERAL f(...)`` of a table function, as the call itself: DuckDB reads a table function
of an earlier FROM item's columns laterally with the keyword or without."""

from __future__ import annotations

from sqlglot import exp

from ..context import Context


def unwrap_lateral_functions(expression: exp.Expr, context: Context) -> exp.Expr:
    """Replace, in place, each ``LATERAL f(...)`` FROM item that calls a table function by the
    call as the item it is without the keyword (``unnest(...)``, or a table of the function):
    DuckDB reads a table function of an earlier item's columns laterally either way.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(unwrap_lateral_functions,
    ...     "SELECT * FROM s, LATERAL generate_series(s.a, s.b) AS d(day)"))
    SELECT * FROM s, GENERATE_SERIES(s.a, s.b) AS d(day)
    """
    for lateral in list(expression.find_all(exp.Lateral)):
        call = lateral.this
        if isinstance(call, exp.Subquery) or lateral.args.get("view"):
            continue
        item = call.copy() if isinstance(call, exp.Unnest) else exp.Table(this=call.copy())
        item.set("alias", lateral.args.get("alias"))
        lateral.replace(item)
    return expression
