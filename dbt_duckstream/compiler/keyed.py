"""A correlated subquery's body apart from its correlation: the equalities of its WHERE
between its own columns and an enclosing query's (``p.k = o.id``) leave it, and the body
selects (and groups by) its sides of them instead, so that it holds its rows for every key at
once and a join on the keys gives each outer row its own. What LATERAL items and correlated
subqueries that group are decorrelated by."""

from __future__ import annotations

from sqlglot import exp

from ..errors import UnsupportedSQLError
from ..sql import conjuncts
from .scopes import column_key, outer_columns, within

#: the column a keyed body adds for its i-th correlation key
KEY = "_ivm_key{}"


def keyed_body(query: exp.Select, what: str) -> tuple[exp.Select, list[exp.Expr], list[exp.Expr]]:
    """The body with its correlations taken out and its keys selected as ``KEY``, and the
    keys' sides: the body's and the enclosing query's. ``what`` names the subquery in errors."""
    outside = {id(c) for c in outer_columns(query)}
    inners: list[exp.Expr] = []
    outers: list[exp.Expr] = []
    kept: list[exp.Expr] = []
    where = query.args.get("where")
    for conjunct in conjuncts(where.this) if where is not None else []:
        columns = list(conjunct.find_all(exp.Column))
        if not any(id(c) in outside for c in columns):
            kept.append(conjunct.copy())
            continue
        sides = _sides(conjunct, outside)
        if sides is None:
            column = next(c for c in columns if id(c) in outside)
            raise UnsupportedSQLError(
                f"{what} correlated by {_written(conjunct)} (column {column_key(column)})",
                "correlate by equalities in the subquery's WHERE, p.k = o.id",
            )
        inners.append(sides[0])
        outers.append(sides[1])
    remaining = [c for c in outer_columns(query) if not within(c, where)]
    if remaining or not inners:
        column = column_key(remaining[0]) if remaining else "none"
        raise UnsupportedSQLError(
            f"{what} naming an outer column outside its WHERE equalities ({column})",
            "name outer columns only in equalities of its WHERE, p.k = o.id",
        )
    body = query.copy()
    body.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
    keys = [exp.alias_(k.copy(), KEY.format(i), quoted=True) for i, k in enumerate(inners)]
    body.set("expressions", [*body.expressions, *keys])
    group = body.args.get("group")
    if group is not None:
        group.set("expressions", [*group.expressions, *(k.copy() for k in inners)])
    return body, inners, outers


def _sides(conjunct: exp.Expr, outside: set[int]) -> tuple[exp.Expr, exp.Expr] | None:
    """The body's side and the outer side of an equality between them, else None."""
    if not isinstance(conjunct, exp.EQ):
        return None
    left, right = conjunct.this, conjunct.expression

    def outer_only(side: exp.Expr) -> bool:
        columns = list(side.find_all(exp.Column))
        return bool(columns) and all(id(c) in outside for c in columns)

    def inner_only(side: exp.Expr) -> bool:
        return not any(id(c) in outside for c in side.find_all(exp.Column))

    if inner_only(left) and outer_only(right):
        return left, right
    if inner_only(right) and outer_only(left):
        return right, left
    return None


def _written(expression: exp.Expr) -> str:
    """The expression as the model writes it, without the qualifier's quotes."""
    plain = expression.copy()
    for identifier in plain.find_all(exp.Identifier):
        identifier.set("quoted", False)
    return plain.sql(dialect="duckdb")
