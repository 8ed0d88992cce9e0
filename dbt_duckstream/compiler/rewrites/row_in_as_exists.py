"""A row of values in a subquery, ``WHERE (a, b) IN (SELECT x, y ...)``, as the EXISTS it
means there: the latest row per key (``(customer_id, ordered_at) IN (SELECT customer_id,
max(ordered_at) ... GROUP BY 1)``) is written so.

In a condition of WHERE or HAVING that is a conjunct of its own, a row is kept when some row
of the subquery equals it column by column; where a comparison is NULL and none is true, IN
is NULL, which keeps no row either. So it is ``EXISTS (SELECT 1 FROM (<subquery>) AS s(c0,
c1) WHERE s.c0 = a AND s.c1 = b)``, correlated by equalities, which the subquery rules
decorrelate as a semi join. Elsewhere (``NOT (a, b) IN``, a selected value) that NULL would
be seen, and the form stays refused.
"""

from __future__ import annotations

from sqlglot import exp

from ...sql import conjuncts
from ..context import Context

_ALIAS = "_ivm_row_in"


def row_in_as_exists(expression: exp.Expr, context: Context) -> exp.Expr:
    """Rewrite, in place, every ``(a, b, ...) IN (subquery)`` that is a conjunct of a WHERE
    or HAVING.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(row_in_as_exists,
    ...     "SELECT * FROM o WHERE o.k > 1 AND (o.c, o.d) IN (SELECT c, max(d) FROM o GROUP BY c)"
    ... ))  # doctest: +NORMALIZE_WHITESPACE
    SELECT * FROM o WHERE o.k > 1 AND EXISTS(SELECT 1 FROM (SELECT c, MAX(d) FROM o GROUP BY c)
    AS _ivm_row_in1(_ivm_c0, _ivm_c1) WHERE _ivm_row_in1._ivm_c0 = o.c AND
    _ivm_row_in1._ivm_c1 = o.d)
    """
    count = 0
    for clause in list(expression.find_all(exp.Where, exp.Having)):
        terms = conjuncts(clause.this)
        rewritten = []
        for term in terms:
            row = _row_and_query(term)
            if row is None:
                rewritten.append(term)
                continue
            count += 1
            rewritten.append(_exists(*row, alias=f"{_ALIAS}{count}"))
        if any(new is not old for new, old in zip(rewritten, terms, strict=True)):
            clause.set("this", exp.and_(*rewritten))
    return expression


def _row_and_query(term: exp.Expr) -> tuple[list[exp.Expr], exp.Query] | None:
    if not isinstance(term, exp.In) or not isinstance(term.this, exp.Tuple):
        return None
    query = term.args.get("query")
    if isinstance(query, exp.Subquery):
        query = query.this
    values = term.this.expressions
    if not isinstance(query, exp.Query) or len(values) < 2:
        return None
    # a star's width is known only once bound; DuckDB binds the model's SQL as written first,
    # and refuses a row and a subquery of different widths
    if len(query.selects) != len(values) and not any(s.is_star for s in query.selects):
        return None
    return values, query


def _exists(values: list[exp.Expr], query: exp.Query, *, alias: str) -> exp.Expr:
    names = [f"_ivm_c{i}" for i in range(len(values))]
    derived = exp.Subquery(
        this=query.copy(),
        alias=exp.TableAlias(
            this=exp.to_identifier(alias), columns=[exp.to_identifier(n) for n in names]
        ),
    )
    matches = [
        exp.EQ(this=exp.column(name, table=alias), expression=value.copy())
        for name, value in zip(names, values, strict=True)
    ]
    inner = exp.select("1").from_(derived).where(exp.and_(*matches))
    return exp.Exists(this=inner)
