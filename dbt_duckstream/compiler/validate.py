"""Reject SQL that cannot be maintained, naming the construct, before any tree is built."""

from __future__ import annotations

from sqlglot import exp

from ..errors import UnsupportedSQLError

#: functions whose value changes from one evaluation to the next
_NON_DETERMINISTIC_NODES: tuple[type[exp.Expr], ...] = (
    exp.Rand,
    exp.Randn,
    exp.CurrentTimestamp,
    exp.CurrentDate,
    exp.CurrentTime,
    exp.CurrentDatetime,
    exp.Uuid,
    exp.Localtime,
    exp.Localtimestamp,
)
_NON_DETERMINISTIC_NAMES = frozenset(
    {
        "random",
        "setseed",
        "uuid",
        "gen_random_uuid",
        "uuidv4",
        "uuidv7",
        "now",
        "get_current_time",
        "get_current_timestamp",
        "transaction_timestamp",
        "current_localtime",
        "current_localtimestamp",
        "today",
        "nextval",
        "currval",
        "txid_current",
        "current_query",
    }
)
#: aggregates whose result depends on the order rows arrive in
_ORDER_DEPENDENT_AGGREGATES: tuple[type[exp.Expr], ...] = (
    exp.ArrayAgg,
    exp.GroupConcat,
    exp.First,
    exp.Last,
    exp.AnyValue,
)
_ORDER_DEPENDENT_NAMES = frozenset(
    {"list", "string_agg", "listagg", "first", "last", "arbitrary", "any_value", "histogram"}
)


def function_name(node: exp.Expr) -> str:
    """The function's name as DuckDB spells it (``random``, not sqlglot's ``rand``)."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return node.sql(dialect="duckdb").split("(")[0].strip().lower()


def check_deterministic(expression: exp.Expr) -> None:
    """Raise when the SQL calls a function whose value is not a function of its inputs."""
    for node in expression.walk():
        is_named = isinstance(node, exp.Anonymous | exp.Func)
        if isinstance(node, _NON_DETERMINISTIC_NODES) or (
            is_named and function_name(node) in _NON_DETERMINISTIC_NAMES
        ):
            raise UnsupportedSQLError(
                f"non-deterministic function {function_name(node)}()",
                "its value changes between runs, so the table could never equal a "
                "recomputation; set ivm_fallback='rebuild' to rebuild the model every run",
            )


def check_aggregate(node: exp.Expr) -> None:
    """Raise for aggregates whose result depends on row order."""
    inner = node.this if isinstance(node, exp.Filter) else node
    if isinstance(inner, _ORDER_DEPENDENT_AGGREGATES) or (
        isinstance(inner, exp.Anonymous) and function_name(inner) in _ORDER_DEPENDENT_NAMES
    ):
        raise UnsupportedSQLError(
            f"order-dependent aggregate {function_name(inner)}()",
            "its result depends on the order rows are read in",
        )


def check_select(select: exp.Select) -> None:
    """Raise for clauses of one SELECT block that no operator handles yet."""
    distinct = select.args.get("distinct")
    if distinct is not None and distinct.args.get("on") is not None:
        raise UnsupportedSQLError("SELECT DISTINCT ON")
    if select.args.get("limit") or select.args.get("offset"):
        raise UnsupportedSQLError("LIMIT/OFFSET", "a limited result is not maintainable")
    if select.args.get("qualify"):
        raise UnsupportedSQLError("QUALIFY")
    group = select.args.get("group")
    if group is not None and any(group.args.get(k) for k in ("grouping_sets", "rollup", "cube")):
        raise UnsupportedSQLError("GROUPING SETS/ROLLUP/CUBE")
    for clause in ("expressions", "where", "having", "group"):
        value = select.args.get(clause)
        for part in value if isinstance(value, list) else [value]:
            if part is None:
                continue
            if part.find(exp.Window):
                raise UnsupportedSQLError("window function")
            for nested in part.find_all(exp.Select):
                raise UnsupportedSQLError(
                    "subquery in an expression (scalar subquery, EXISTS, NOT IN, "
                    "or IN outside a WHERE conjunct)",
                    f"found: {nested.sql(dialect='duckdb')[:80]}",
                )
