"""Accumulators, one kind per module; ``accumulator_for`` picks the kind of an aggregate call.

A new kind is a module with one ``Accumulator`` subclass and a line in ``FOLDABLE``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from sqlglot import exp

from .avg import Avg
from .base import ROW_COUNT, Accumulator
from .count import Count, RowCount
from .extreme import Extreme
from .recomputed import Recomputed
from .sum import Sum

Factory = Callable[..., Accumulator]

#: aggregate functions whose delta folds into stored state, and the accumulator of each
FOLDABLE: dict[type[exp.Expr], Factory] = {
    exp.Count: Count,
    exp.Sum: Sum,
    exp.Avg: Avg,
    exp.Min: partial(Extreme, function="min"),
    exp.Max: partial(Extreme, function="max"),
}


def accumulator_for(index: int, call: exp.Expr) -> Accumulator:
    """The accumulator of aggregate call number ``index`` (``Recomputed`` when none folds)."""
    inner, predicate = call, None
    if isinstance(call, exp.Filter):
        where = call.expression
        predicate = where.this if isinstance(where, exp.Where) else None
        inner = call.this
    factory = FOLDABLE.get(type(inner))
    argument = inner.this
    plain = (
        factory is not None
        and not inner.args.get("expressions")
        and not inner.args.get("count")  # max(x, n): the n largest, a list
        and not isinstance(argument, exp.Distinct)
        and (predicate is not None or not isinstance(call, exp.Filter))
    )
    if not plain or factory is None:
        return Recomputed(index, None, call)
    if isinstance(inner, exp.Count) and (argument is None or isinstance(argument, exp.Star)):
        if predicate is None:
            return RowCount(index, None, call)
        argument = exp.Literal.number(1)
    if argument is None:
        return Recomputed(index, None, call)
    value = argument.copy()
    if predicate is not None:
        value = exp.If(this=predicate.copy(), true=value)
    return factory(index, value, call)


__all__ = [
    "ROW_COUNT",
    "Accumulator",
    "Avg",
    "Count",
    "Extreme",
    "Recomputed",
    "RowCount",
    "Sum",
    "accumulator_for",
]
