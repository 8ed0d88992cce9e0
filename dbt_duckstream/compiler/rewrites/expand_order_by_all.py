"""``ORDER BY ALL``, written out as the select list's outputs it orders by."""

from __future__ import annotations

from sqlglot import exp

from ..context import Context


def expand_order_by_all(expression: exp.Expr, context: Context) -> exp.Expr:
    """Replace, in place, ``ORDER BY ALL`` by the select list's outputs, left to right, each
    in the direction given (DuckDB's meaning); an output whose name repeats is ordered by its
    expression.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(expand_order_by_all,
    ...     'SELECT "t"."k" AS "k", "t"."v" AS "v" FROM "t" AS "t" ORDER BY ALL DESC LIMIT 2'))
    SELECT "t"."k" AS "k", "t"."v" AS "v" FROM "t" AS "t" ORDER BY "k" DESC, "v" DESC LIMIT 2
    """
    for select in expression.find_all(exp.Select):
        order = select.args.get("order")
        terms = order.expressions if order is not None else []
        if order is None or not (len(terms) == 1 and _is_all(terms[0].this)):
            continue
        names = [e.alias_or_name.lower() for e in select.expressions]
        ordered = []
        for output, name in zip(select.expressions, names, strict=True):
            term = terms[0].copy()
            term.set(
                "this",
                exp.column(output.alias_or_name, quoted=True)
                if name and names.count(name) == 1
                else output.unalias().copy(),
            )
            ordered.append(term)
        order.set("expressions", ordered)
    return expression


def _is_all(term: exp.Expr) -> bool:
    return isinstance(term, exp.Var) and term.name.upper() == "ALL"
