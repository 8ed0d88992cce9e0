"""A LIMIT over a query of at most one row keeps every row: dropped.

``SELECT sum(x) FROM t LIMIT 100`` (as TPC-DS writes its one-row queries) is no top-N: an
aggregate without GROUP BY yields one row (none when its HAVING fails), and so does a cross
join of such queries. Without the LIMIT the query has one result whatever the order, and no
ORDER BY is needed to maintain it.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import UnsupportedSQLError
from ..context import Context
from ..scopes import is_window_function, outside_subqueries
from ..validate import limit_value


def drop_idle_limits(expression: exp.Expr, context: Context) -> exp.Expr:
    """Drop, in place, every LIMIT of one row or more, without OFFSET, over a SELECT that
    yields at most one row.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> def dropped(sql):
    ...     return show(drop_idle_limits, sql)
    >>> dropped("SELECT * FROM (SELECT sum(x) AS s FROM t) AS a, (SELECT 1 AS o) AS b LIMIT 100")
    'SELECT * FROM (SELECT SUM(x) AS s FROM t) AS a, (SELECT 1 AS o) AS b'
    >>> dropped("SELECT sum(x) FROM t GROUP BY y LIMIT 10")
    'SELECT SUM(x) FROM t GROUP BY y LIMIT 10'
    >>> dropped("SELECT max(x) FROM t LIMIT 1 OFFSET 1")
    'SELECT MAX(x) FROM t LIMIT 1 OFFSET 1'
    >>> dropped("SELECT * FROM (SELECT sum(x) AS s FROM t) AS a LEFT JOIN u ON u.k = a.s LIMIT 3")
    'SELECT * FROM (SELECT SUM(x) AS s FROM t) AS a LEFT JOIN u ON u.k = a.s LIMIT 3'
    """
    for select in list(expression.find_all(exp.Select)):
        if select.args.get("offset") is not None:
            continue
        limit = _constant_limit(select)
        if limit is not None and limit >= 1 and at_most_one_row(select, below_limit=True):
            select.set("limit", None)
    return expression


def at_most_one_row(query: exp.Expr, *, below_limit: bool = False) -> bool:
    """Whether ``query`` yields at most one row, whatever its tables hold: an aggregate
    without GROUP BY, a LIMIT 1 or 0, or rows of such queries joined (not FULL: it keeps an
    unmatched row of each side). ``below_limit``: the query's own LIMIT is not counted."""
    if isinstance(query, exp.Subquery):
        return at_most_one_row(query.this)
    if not isinstance(query, exp.Select):
        return False
    limit = None if below_limit else _constant_limit(query)
    if limit is not None and limit <= 1:
        return True
    if query.args.get("group") is not None or _returns_sets(query):
        return False
    if _aggregates(query):
        return True
    from_ = query.args.get("from_") or query.args.get("from")
    joins: list[exp.Join] = query.args.get("joins") or []
    if any(j.side.upper() == "FULL" for j in joins):
        return False
    return all(at_most_one_row(item.this) for item in [*([from_] if from_ else []), *joins])


def _aggregates(query: exp.Select) -> bool:
    having = query.args.get("having")
    return any(
        isinstance(n, exp.AggFunc) and not is_window_function(n)
        for e in [*query.expressions, *([having] if having is not None else [])]
        for n in outside_subqueries(e)
    )


def _returns_sets(query: exp.Select) -> bool:
    """A set-returning call in the select list (``unnest``) yields a row per element."""
    return any(
        isinstance(n, exp.Unnest | exp.Explode)
        or (isinstance(n, exp.Anonymous) and n.name.lower() in ("unnest", "generate_subscripts"))
        for e in query.expressions
        for n in outside_subqueries(e)
    )


def _constant_limit(select: exp.Select) -> int | None:
    """The SELECT's LIMIT when it is a constant row count (``validate.limit_value``); None
    without one, or for a LIMIT a top-N refuses later, naming it."""
    try:
        return limit_value(select, "limit")
    except UnsupportedSQLError:
        return None
