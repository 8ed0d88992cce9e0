"""DuckDB's PIVOT and UNPIVOT statements, written as the queries they stand for.

``PIVOT t ON s IN ('a', 'b') USING sum(x) GROUP BY g`` is an aggregate with one filtered call
per value and aggregate, which is how DuckDB plans it::

    SELECT g, sum(x) FILTER (WHERE s IS NOT DISTINCT FROM 'a') AS a,
              sum(x) FILTER (WHERE s IS NOT DISTINCT FROM 'b') AS b FROM t GROUP BY g

Without ``GROUP BY`` it groups by every column the ``ON`` and ``USING`` do not name. Without
an ``IN`` list its columns would depend on the data: refused.

``UNPIVOT t ON x, y INTO NAME k VALUE v`` is a ``UNION ALL`` of one branch per column, the
column's name as ``k`` and its non-NULL values as ``v``, beside the columns it does not name.
DuckDB spells the name as the source spells the column (``ON X`` of a column ``x`` gives
``'x'``): a table's spelling is the catalog's (``Catalog.spelling``); a CTE's or a subquery's
is its select list as written.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ...errors import UnsupportedSQLError
from ...sql import TableRef
from ..context import Context

#: the names of a FROM item's columns as its source spells them, when they can be known
Spelling = Callable[[exp.Expr], list[str] | None]


def expand_pivots(expression: exp.Expr, context: Context) -> exp.Expr:
    """Each PIVOT and UNPIVOT replaced by its query (in place below the root; the root itself
    is returned replaced when it is one), a table's columns spelled as ``context``'s catalog
    spells them (as written in the ``ON`` list when it does not say).

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(expand_pivots, "PIVOT t ON s IN ('a', 'b') USING sum(x) GROUP BY g"
    ... ))  # doctest: +NORMALIZE_WHITESPACE
    SELECT g, SUM(x) FILTER(WHERE s IS NOT DISTINCT FROM 'a') AS "a", SUM(x) FILTER(WHERE s IS
    NOT DISTINCT FROM 'b') AS "b" FROM t GROUP BY g
    """

    def columns(table: exp.Table) -> list[str] | None:
        ref = TableRef(table.catalog or context.catalog, table.db or context.db, table.name)
        return context.lookup.spelling(ref)

    if expression.find(exp.Pivot) is None:
        return expression
    spelling = spelling_from(expression, columns)
    for pivot in reversed(list(expression.find_all(exp.Pivot))):
        holder = pivot.parent
        after = holder is not None and any(p is pivot for p in holder.args.get("pivots") or [])
        written = _statement_form(pivot, holder) if after and holder is not None else pivot
        query = _unpivoted(written, spelling) if written.args.get("unpivot") else _pivoted(written)
        if pivot is expression:
            return query
        if after and holder is not None:  # FROM t PIVOT (...) [AS p]
            alias = pivot.args.get("alias")
            holder.replace(exp.Subquery(this=query, alias=alias.copy() if alias else None))
        else:  # a CTE's body or a parenthesized FROM item
            pivot.replace(query)
    return expression


def _statement_form(pivot: exp.Pivot, source: exp.Expr) -> exp.Pivot:
    """``FROM t PIVOT (agg FOR c IN (...))`` and ``FROM t UNPIVOT (v FOR k IN (...))`` as
    the PIVOT and UNPIVOT statements they mean."""
    fields = pivot.args.get("fields") or []
    if len(source.args.get("pivots") or []) != 1 or len(fields) != 1:
        raise UnsupportedSQLError(
            "PIVOT or UNPIVOT of several columns or repeated", "pivot one column at a time"
        )
    table = source.copy()
    table.set("pivots", None)
    if not pivot.args.get("unpivot"):
        return exp.Pivot(
            this=table,
            expressions=[fields[0].copy()],
            using=[e.copy() for e in pivot.expressions],
            group=pivot.args.get("group"),
        )
    names = fields[0]
    return exp.Pivot(
        this=table,
        expressions=[e.copy() for e in names.expressions],
        unpivot=True,
        include_nulls=pivot.args.get("include_nulls"),
        into=exp.UnpivotColumns(
            this=exp.column(names.this.name), expressions=[exp.column(pivot.expressions[0].name)]
        ),
    )


def _pivoted(pivot: exp.Pivot) -> exp.Select:
    ons = pivot.expressions
    if len(ons) != 1 or not isinstance(ons[0], exp.In):
        raise UnsupportedSQLError(
            "PIVOT without an IN list on one column",
            "its columns would depend on the data; list the values: ON c IN ('a', 'b')",
        )
    on, values = ons[0].this, ons[0].expressions
    usings = list(pivot.args.get("using") or [])
    if not values or not usings:
        raise UnsupportedSQLError("PIVOT without values or aggregates", "give both")
    group = pivot.args.get("group")
    keys = [k.copy() for k in group.expressions] if group is not None else []
    if not keys:
        named = {c.name.lower() for e in [on, *usings] for c in e.find_all(exp.Column)}
        excluded = [exp.column(n, quoted=True) for n in sorted(named)]
        keys = [exp.Star(except_=excluded) if excluded else exp.Star()]
    pivoted: list[exp.Expr] = []
    for value in values:
        label = value.name if isinstance(value, exp.Literal) else value.sql(dialect="duckdb")
        for using in usings:
            call = using.unalias() if isinstance(using, exp.Alias) else using
            suffix = using.alias if isinstance(using, exp.Alias) else call.sql(dialect="duckdb")
            filtered = exp.Filter(
                this=call.copy(),
                expression=exp.Where(this=exp.NullSafeEQ(this=on.copy(), expression=value.copy())),
            )
            name = label if len(usings) == 1 and not isinstance(using, exp.Alias) else None
            pivoted.append(exp.alias_(filtered, name or f"{label}_{suffix}", quoted=True))
    select = exp.Select(expressions=[*keys, *pivoted]).from_(pivot.this.copy())
    if group is None:
        return select.group_by("ALL")
    return select.group_by(*(k.copy() for k in keys))


def _unpivoted(pivot: exp.Pivot, spelling: Spelling) -> exp.Query:
    ons = pivot.expressions
    if not ons or not all(isinstance(c, exp.Column) for c in ons):
        raise UnsupportedSQLError(
            "UNPIVOT of column groups or expressions", "list the columns: ON a, b"
        )
    into = pivot.args.get("into")
    name = into.this.name if into is not None else "name"
    values = into.expressions if into is not None else []
    if len(values) > 1:
        raise UnsupportedSQLError("UNPIVOT into several value columns", "unpivot one at a time")
    value = values[0].name if values else "value"
    source = pivot.this
    known = {n.lower(): n for n in spelling(source) or []}
    others = exp.Star(except_=[exp.column(c.name, quoted=True) for c in ons])
    branches = [
        exp.Select(
            expressions=[
                others.copy(),
                exp.alias_(
                    exp.Literal.string(known.get(c.name.lower(), c.name)), name, quoted=True
                ),
                exp.alias_(c.copy(), value, quoted=True),
            ]
        )
        .from_(source.copy())
        .where(
            exp.true()
            if pivot.args.get("include_nulls")
            else exp.Not(this=exp.Is(this=c.copy(), expression=exp.Null()))
        )
        for c in ons
    ]
    query: exp.Query = branches[0]
    for branch in branches[1:]:
        query = exp.union(query, branch, distinct=False)
    return query


def spelling_from(
    statement: exp.Expr, columns: Callable[[exp.Table], list[str] | None]
) -> Spelling:
    """How a FROM item of ``statement`` spells its columns: a table's from ``columns`` (its
    catalog's), a CTE's or a subquery's from its select list as written."""
    ctes = {
        cte.alias.lower(): cte.this
        for with_ in statement.find_all(exp.With)
        for cte in with_.expressions
    }

    def names(item: exp.Expr) -> list[str] | None:
        if isinstance(item, exp.Table):
            if not item.db and item.name.lower() in ctes:
                return names(ctes[item.name.lower()])
            return columns(item)
        if isinstance(item, exp.Subquery):
            return names(item.this)
        if isinstance(item, exp.Union):
            return names(item.this)
        if not isinstance(item, exp.Select):
            return None
        spelled: list[str] = []
        for projection in item.expressions:
            if isinstance(projection, exp.Star):
                source = item.args.get("from_") or item.args.get("from")
                alone = source is not None and not item.args.get("joins")
                inner = names(source.this) if alone else None
                if inner is None:
                    return None
                excluded = {c.name.lower() for c in projection.args.get("except_") or []}
                spelled += [n for n in inner if n.lower() not in excluded]
            elif projection.alias_or_name:
                spelled.append(projection.alias_or_name)
            else:
                return None
        return spelled

    return names
