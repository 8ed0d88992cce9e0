"""Window calls of a SELECT block, for the tree builder: named windows inlined, window
functions told apart from aggregates, and the calls grouped by their partitioning.

Windows of one block with the same PARTITION BY become one ``Window`` operator; windows with
different ones stack, each over the one before, so each recomputes only its own touched
partitions.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

from ...errors import UnsupportedSQLError
from ...sql import expr_sql


def inline_named_windows(select: exp.Select) -> exp.Select:
    """``OVER w ... WINDOW w AS (...)`` written out at each use (a use may extend ``w``)."""
    definitions = {d.name: d for d in select.args.get("windows") or []}
    if not definitions:
        return select
    select = select.copy()

    def resolved(name: str, seen: tuple[str, ...] = ()) -> dict[str, exp.Expr | None]:
        if name not in definitions or name in seen:
            raise UnsupportedSQLError(f"window {name}", "no such named window")
        definition = definitions[name]
        base = definition.args.get("alias")
        parts = resolved(base.name, (*seen, name)) if base is not None else {}
        for key in ("partition_by", "order", "spec"):
            if definition.args.get(key):
                parts[key] = definition.args[key]
        return parts

    for window in list(select.find_all(exp.Window)):
        if window.parent is select and window.arg_key == "windows":
            continue
        base = window.args.get("alias")
        if base is None or not isinstance(window.this, exp.Expr):
            continue
        parts = resolved(base.name)
        for key, value in parts.items():
            if not window.args.get(key) and value is not None:
                window.set(key, value.copy() if isinstance(value, exp.Expr) else value)
        window.set("alias", None)
    select.set("windows", None)
    return select


def window_calls(expressions: Iterable[exp.Expr | None]) -> list[exp.Window]:
    """The window calls in ``expressions``, each once (by its SQL), in order."""
    found: dict[str, exp.Window] = {}
    for expression in expressions:
        if expression is None:
            continue
        for node in expression.find_all(exp.Window):
            if node.find_ancestor(exp.Window) is not None:
                raise UnsupportedSQLError("window function inside a window function")
            found.setdefault(expr_sql(node), node)
    return list(found.values())


def partition_key(call: exp.Window) -> tuple[str, ...]:
    """The partitioning of a window call, as a comparable value."""
    return tuple(sorted(expr_sql(e) for e in call.args.get("partition_by") or []))


def replace_calls(expression: exp.Expr, columns: dict[str, str]) -> exp.Expr:
    """``expression`` with each window call replaced by the column computing it."""

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Window) and expr_sql(node) in columns:
            return exp.column(exp.to_identifier(columns[expr_sql(node)], quoted=True))
        return node

    return expression.copy().transform(replace)
