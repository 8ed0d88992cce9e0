"""Names inside an ORDER BY or DISTINCT ON expression, bound to an input column first, as
DuckDB binds them."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope

from ..context import Context


def bind_order_names(expression: exp.Expr, context: Context) -> exp.Expr:
    """Qualify, in place, the names inside an ORDER BY or DISTINCT ON expression that the
    qualifier took for the select list's but that name an input column of one FROM item:
    DuckDB binds a name inside an expression to the input first (``SELECT v AS k FROM r
    ORDER BY -k`` orders by ``r.k``); a bare ``ORDER BY k`` stays the output.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(bind_order_names, "SELECT v AS k FROM r ORDER BY -k LIMIT 1",
    ...     tables={"r": {"k": "INT", "v": "INT"}}, first=("qualify",)))
    SELECT "r"."v" AS "k" FROM "r" AS "r" ORDER BY -"r"."k" LIMIT 1
    """
    schema = context.schema
    for scope in traverse_scope(expression):
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        order = select.args.get("order")
        distinct = select.args.get("distinct")
        on = distinct.args.get("on") if isinstance(distinct, exp.Distinct) else None
        terms = [
            *(o.this for o in (order.expressions if order is not None else [])),
            *(on.expressions if on is not None else []),
        ]
        columns: dict[str, set[str]] = {}
        for alias, source in scope.sources.items():
            if isinstance(source, exp.Table):
                names = schema.column_names(source)
            else:
                query = source.expression
                names = query.named_selects if isinstance(query, exp.Query) else []
            columns[alias] = {n.lower() for n in names}
        for term in terms:
            if isinstance(term, exp.Column):
                continue
            for column in term.find_all(exp.Column):
                if column.table:
                    continue
                owners = [a for a, names in columns.items() if column.name.lower() in names]
                if len(owners) == 1:
                    column.set("table", exp.to_identifier(owners[0], quoted=True))
    return expression
