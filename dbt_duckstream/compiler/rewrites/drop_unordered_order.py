"""An ORDER BY at the top of a model that picks no rows, dropped: a table has no order, so it
changes nothing that is stored."""

from __future__ import annotations

from sqlglot import exp

from ..context import Context


def drop_unordered_order(expression: exp.Expr, context: Context) -> exp.Expr:
    """The statement without its own ORDER BY, unless a LIMIT, an OFFSET or DISTINCT ON
    picks rows by it.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(drop_unordered_order, "SELECT k, v FROM t ORDER BY v"))
    SELECT k, v FROM t
    >>> print(show(drop_unordered_order, "SELECT k, v FROM t ORDER BY v LIMIT 3"))
    SELECT k, v FROM t ORDER BY v LIMIT 3
    """
    if isinstance(expression, exp.Query) and not _ordered_rows_matter(expression):
        expression.set("order", None)
    return expression


def _ordered_rows_matter(query: exp.Query) -> bool:
    """Whether the ORDER BY picks rows: with LIMIT/OFFSET (a top-N) or DISTINCT ON."""
    distinct = query.args.get("distinct")
    on = distinct.args.get("on") if isinstance(distinct, exp.Distinct) else None
    return any(query.args.get(k) is not None for k in ("limit", "offset")) or on is not None
