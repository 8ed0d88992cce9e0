"""Parentheses that change nothing, dropped: later rules then see the column, the literal or
the expression itself (``SELECT DISTINCT(k)`` selects ``k``, ``GROUP BY (k)`` groups by it)."""

from __future__ import annotations

from sqlglot import exp

from ..context import Context

#: where parentheses around a whole expression change nothing
_WHOLE = (exp.Select, exp.Alias, exp.Group, exp.Ordered, exp.Distinct)


def drop_idle_parentheses(expression: exp.Expr, context: Context) -> exp.Expr:
    """Drop, in place, the parentheses around a column or a literal, a second pair, and those
    around a whole selected, grouped or ordered expression.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(drop_idle_parentheses,
    ...     "SELECT DISTINCT(k), ((a + b)) * 2 AS c FROM t WHERE (k > 1) AND ((v < 3) OR (w))"))
    SELECT DISTINCT k, (a + b) * 2 AS c FROM t WHERE (k > 1) AND ((v < 3) OR w)
    """
    for paren in list(expression.find_all(exp.Paren)):
        inner = paren.this
        if isinstance(inner, exp.Column | exp.Literal | exp.Paren) or isinstance(
            paren.parent, _WHOLE
        ):
            paren.replace(inner)
    return expression
