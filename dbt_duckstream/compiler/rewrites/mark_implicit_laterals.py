"""A derived table that names an earlier item of its FROM clause, marked LATERAL as DuckDB
reads it; ``decorrelate_laterals`` writes it out after qualification."""

from __future__ import annotations

from sqlglot import exp

from ..context import Context
from ..scopes import sources


def mark_implicit_laterals(expression: exp.Expr, context: Context) -> exp.Expr:
    """Wrap, in place, in LATERAL each derived table of a FROM clause that names an earlier
    item of that clause (``FROM o, (SELECT ... WHERE p.k = o.id) AS x``): DuckDB reads it as
    a LATERAL item, which the qualifier must know to resolve ``o.id``.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(mark_implicit_laterals,
    ...     "SELECT * FROM o, (SELECT p.v FROM p WHERE p.k = o.id) AS x"))
    SELECT * FROM o, LATERAL (SELECT p.v FROM p WHERE p.k = o.id) AS x
    """
    for join in list(expression.find_all(exp.Join)):
        item, outer = join.this, join.parent
        if (
            not isinstance(item, exp.Subquery)
            or not item.alias
            or not isinstance(outer, exp.Select)
        ):
            continue
        inner = {name for select in item.find_all(exp.Select) for name in sources(select)}
        named = {c.table for c in item.find_all(exp.Column) if c.table}
        if (named - inner) & sources(outer):
            alias = item.args["alias"].copy()
            item.set("alias", None)
            join.set("this", exp.Lateral(this=item.copy(), alias=alias))
    return expression
