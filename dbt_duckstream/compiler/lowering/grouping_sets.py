"""GROUPING SETS, ROLLUP and CUBE, for the tree builder: a GROUP BY as its list of grouping
sets, and the value of ``grouping()`` in each.

``GROUP BY a, ROLLUP(b, c)`` groups by (a, b, c), (a, b) and (a): the cross product of its
elements, where a plain expression is one set of itself, ``ROLLUP(x, y)`` the sets (x, y), (x)
and (), ``CUBE(x, y)`` every subset, and ``GROUPING SETS (...)`` the sets it lists. The model
is then the UNION ALL of one aggregate per set, each key outside the set NULL.

>>> import sqlglot
>>> group = sqlglot.parse_one("SELECT 1 FROM t GROUP BY a, ROLLUP(b, c)").args["group"]
>>> keys, sets = grouping_sets(group)
>>> [k.sql() for k in keys], sets
(['a', 'b', 'c'], [(0, 1, 2), (0, 1), (0,)])
"""

from __future__ import annotations

from itertools import combinations

from sqlglot import exp

from ...errors import UnsupportedSQLError
from ...sql import expr_sql

#: the elements of a GROUP BY that make more than one grouping set
_SET_NODES = (exp.GroupingSets, exp.Rollup, exp.Cube)


def has_grouping_sets(group: exp.Group | None) -> bool:
    if group is None:
        return False
    extra = any(group.args.get(k) for k in ("grouping_sets", "rollup", "cube"))
    return extra or any(isinstance(e, _SET_NODES) for e in group.expressions)


def grouping_sets(group: exp.Group) -> tuple[list[exp.Expr], list[tuple[int, ...]]]:
    """The distinct key expressions of ``group``, and each grouping set as key positions."""
    elements = list(group.expressions)
    for key in ("grouping_sets", "rollup", "cube"):
        elements += list(group.args.get(key) or [])
    sets: list[list[exp.Expr]] = [[]]
    for element in elements:
        sets = [a + b for a in sets for b in _sets_of(element)]
    keys: dict[str, exp.Expr] = {}
    for expressions in sets:
        for e in expressions:
            keys.setdefault(expr_sql(e), e)
    order = list(keys)
    positions = [tuple(sorted({order.index(expr_sql(e)) for e in s})) for s in sets]
    return list(keys.values()), positions


def _sets_of(element: exp.Expr) -> list[list[exp.Expr]]:
    if isinstance(element, exp.GroupingSets):
        return [s for e in element.expressions for s in _sets_of(e)]
    if isinstance(element, exp.Rollup):
        items = [_items(e) for e in element.expressions]
        return [[e for item in items[:n] for e in item] for n in range(len(items), -1, -1)]
    if isinstance(element, exp.Cube):
        items = [_items(e) for e in element.expressions]
        return [
            [e for item in chosen for e in item]
            for n in range(len(items), -1, -1)
            for chosen in combinations(items, n)
        ]
    return [_items(element)]


def _items(element: exp.Expr) -> list[exp.Expr]:
    """The expressions of one set element: ``(a, b)``, ``(a)``, ``()`` or ``a``."""
    if isinstance(element, exp.Tuple):
        return list(element.expressions)
    if isinstance(element, exp.Paren):
        return [element.this]
    if isinstance(element, _SET_NODES):
        raise UnsupportedSQLError(
            f"{type(element).__name__.upper()} nested inside a grouping set element"
        )
    return [element]


def grouping_value(call: exp.Expr, keys: list[exp.Expr], grouping_set: tuple[int, ...]) -> int:
    """``grouping(x, y, ...)`` in the rows of ``grouping_set``: one bit per argument, most
    significant first, set when the argument is not grouped there."""
    index = {expr_sql(k): i for i, k in enumerate(keys)}
    arguments = call.expressions
    value = 0
    for argument in arguments:
        position = index.get(expr_sql(argument))
        if position is None:
            raise UnsupportedSQLError(
                f"grouping({expr_sql(argument)})", "its argument must be a GROUP BY key"
            )
        value = value * 2 + (0 if position in grouping_set else 1)
    return value
