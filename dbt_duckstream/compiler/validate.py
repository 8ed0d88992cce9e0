"""Reject SQL that cannot be maintained, naming the construct, before any tree is built."""

from __future__ import annotations

from sqlglot import exp

from ..errors import UnsupportedSQLError

#: aggregates whose result depends on the order rows arrive in (``mode`` breaks a tie
#: between equally frequent values by the first read; the sketches of ``approx_quantile``
#: and ``approx_top_k`` and the sample of ``reservoir_quantile`` differ with the order)
_ORDER_DEPENDENT_AGGREGATES: tuple[type[exp.Expr], ...] = (
    exp.Mode,
    exp.ArrayAgg,
    exp.GroupConcat,
    exp.First,
    exp.Last,
    exp.AnyValue,
    exp.ApproxQuantile,
    exp.ApproxTopK,
)
_ORDER_DEPENDENT_NAMES = frozenset(
    {"list", "string_agg", "listagg", "first", "last", "arbitrary", "any_value"}
    | {"reservoir_quantile"}  # sqlglot has no class for it
)
#: order-dependent aggregates that an ORDER BY inside the call does not make exact, and what
#: to use instead
_UNORDERABLE = {
    "any_value": "; where every row of a group holds the same value, max(x) gives it",
    "arbitrary": "; where every row of a group holds the same value, max(x) gives it",
    "approx_quantile": "; quantile_cont() and quantile_disc() are exact",
    "reservoir_quantile": "; quantile_cont() and quantile_disc() are exact",
    "approx_top_k": "; count the values and keep a top-N of the counts instead",
}


def function_name(node: exp.Expr) -> str:
    """The function's name as DuckDB spells it (``random``, not sqlglot's ``rand``)."""
    if isinstance(node, exp.Anonymous | exp.AnonymousAggFunc):
        return str(node.this).lower()
    return node.sql(dialect="duckdb").split("(")[0].strip().lower()


#: how the order-dependent aggregates are named in messages (sqlglot renames some)
_AGGREGATE_NAMES: dict[type[exp.Expr], str] = {
    exp.Mode: "mode",
    exp.ArrayAgg: "list",
    exp.GroupConcat: "string_agg",
    exp.First: "first",
    exp.Last: "last",
    exp.AnyValue: "any_value",
    exp.ApproxQuantile: "approx_quantile",
    exp.ApproxTopK: "approx_top_k",
}


def check_aggregate(node: exp.Expr) -> None:
    """Raise for aggregates whose result depends on row order: those that cannot be given an
    order, and the others when the call does not give one (``string_agg(x, ',' ORDER BY y)``
    is maintained, ``string_agg(x, ',')`` is not)."""
    inner = node.this if isinstance(node, exp.Filter) else node
    if isinstance(inner, exp.ArrayAgg) and _sorted_right_away(node):
        return
    if isinstance(inner, _ORDER_DEPENDENT_AGGREGATES) or (
        isinstance(inner, exp.Anonymous | exp.AnonymousAggFunc)
        and function_name(inner) in _ORDER_DEPENDENT_NAMES
    ):
        name = _AGGREGATE_NAMES.get(type(inner)) or function_name(inner)
        orderable = name not in _UNORDERABLE
        if orderable and isinstance(inner.this, exp.Order):
            return
        detail = "its result depends on the order rows are read in"
        raise UnsupportedSQLError(
            f"order-dependent aggregate {name}()" + (" without ORDER BY" if orderable else ""),
            detail
            + (
                f"; order it inside the call, e.g. {name}(x ORDER BY y)"
                if orderable
                else _UNORDERABLE[name]
            ),
        )


def _sorted_right_away(call: exp.Expr) -> bool:
    """Whether the list an aggregate call builds is sorted at once (``list_sort(list(x))``,
    ``array_sort(array_agg(DISTINCT x))``): its order is then its values' own.

    >>> import sqlglot
    >>> call = sqlglot.parse_one("SELECT list_sort(list(DISTINCT x)) FROM t", "duckdb")
    >>> _sorted_right_away(call.find(exp.ArrayAgg))
    True
    """
    parent = call.parent
    return isinstance(parent, exp.ArraySort) and parent.this is call


def limit_value(node: exp.Expr, clause: str) -> int | None:
    """The row count of a LIMIT or OFFSET clause (None without one): a constant integer."""
    part = node.args.get(clause)
    if part is None:
        return None
    value = part.args.get("expression") or part.this
    options = part.args.get("limit_options")
    if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
        raise UnsupportedSQLError(
            f"{clause.upper()} {value.sql(dialect='duckdb')} "
            + ("PERCENT" if options.args.get("percent") else "WITH TIES"),
            "a maintained top-N keeps a constant number of rows",
        )
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return int(value.this)
    raise UnsupportedSQLError(
        f"{clause.upper()} {value.sql(dialect='duckdb')}",
        "a maintained top-N keeps a constant number of rows",
    )


def check_recursive_body(cte: str, body: exp.Expr) -> None:
    """Raise for what a recursive CTE's body may not hold. DuckDB evaluates the body again in
    full, so any deterministic body is maintained (windows too), but a LIMIT without ORDER BY
    or an order-dependent aggregate without ORDER BY picks rows arbitrarily."""
    for node in body.walk():
        if isinstance(node, exp.Query) and not node.args.get("order"):
            for clause in ("limit", "offset"):
                if node.args.get(clause) is not None:
                    raise UnsupportedSQLError(
                        f"{clause.upper()} without ORDER BY inside the recursive CTE {cte}",
                        "which rows it keeps is arbitrary; ORDER BY columns that identify a row",
                    )
        if isinstance(node, exp.AggFunc | exp.Anonymous) and not isinstance(
            node.parent, exp.Window
        ):
            check_aggregate(node)


def check_select(select: exp.Select) -> None:
    """Raise for clauses of one SELECT block that no operator handles yet."""
    for clause in ("expressions", "where", "having", "group", "qualify"):
        value = select.args.get(clause)
        for part in value if isinstance(value, list) else [value]:
            if part is None:
                continue
            if clause in ("where", "group", "having") and any(
                isinstance(node, exp.Window)
                for node in part.walk(prune=lambda node: isinstance(node, exp.Query))
            ):  # a subquery's windows are its own
                raise UnsupportedSQLError(
                    f"window function in {clause.upper()}", "window functions belong in QUALIFY"
                )
