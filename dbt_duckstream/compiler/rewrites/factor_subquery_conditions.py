"""A condition repeated in every branch of an OR in a subquery's WHERE, pulled out of the OR.

``WHERE (i_manufact = i1.i_manufact AND a) OR (i_manufact = i1.i_manufact AND b)`` (TPC-DS
q41) correlates by one equality, ``i_manufact = i1.i_manufact AND (a OR b)``, which the
subquery rules decorrelate; written inside the OR it reads as a correlation by a disjunction,
which they refuse.
"""

from __future__ import annotations

from sqlglot import exp

from ...sql import conjuncts, factored
from ..context import Context


def factor_subquery_conditions(expression: exp.Expr, context: Context) -> exp.Expr:
    """Rewrite, in place, the WHERE of every subquery in an expression so that no conjunct is
    an OR whose branches share a condition (``sql.factored``).

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(factor_subquery_conditions,
    ...     "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE (u.k = t.k AND u.a = 1) "
    ...     "OR (u.k = t.k AND u.b = 2))"
    ... ))
    SELECT * FROM t WHERE EXISTS(SELECT 1 FROM u WHERE u.k = t.k AND (u.a = 1 OR u.b = 2))
    """
    for select in list(expression.find_all(exp.Select)):
        where = select.args.get("where")
        if where is None or not _in_an_expression(select):
            continue
        given = conjuncts(where.this)
        rewritten = [factored(c) for c in given]
        if any(new is not old for new, old in zip(rewritten, given, strict=True)):
            terms = [term for r in rewritten for term in conjuncts(r)]
            select.set("where", exp.Where(this=exp.and_(*terms)))
    return expression


def _in_an_expression(select: exp.Select) -> bool:
    """Whether ``select`` is a subquery of a condition or a value (not a FROM item)."""
    parent = select.parent
    if isinstance(parent, exp.Subquery):
        parent = parent.parent
    return isinstance(parent, exp.Expr) and not isinstance(
        parent, exp.From | exp.Join | exp.CTE | exp.Union | exp.Intersect | exp.Except
    )
