"""Touched keys: the step every key-scoped rule shares.

An operator whose output for a key (a group, a window partition, a join key) depends on all of
its input rows with that key has no row-by-row rule; but only the keys its input delta touches
can change. So: find the touched keys, retract the operator's old rows of those keys, assert
its new rows of those keys, both computed from the input restricted to them.

    keys:  SELECT DISTINCT k FROM delta(r)
    delta: f(r@new SEMI JOIN keys) with +1  UNION ALL  f(r@old SEMI JOIN keys) with -1

Key values match with IS NOT DISTINCT FROM: GROUP BY, PARTITION BY and set operations put NULLs
together. Without keys (a window without PARTITION BY, a global top-N) the whole input is one
key: it is touched when the delta has any row, and then all of it is retracted and asserted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlglot import exp

from ...sql import expr_sql, quote, same_values
from ..render import MULT, RenderContext
from .base import Operator


def key_name(i: int) -> str:
    """The column holding the i-th key in a touched-keys relation."""
    return f"_ivm_k{i}"


#: the column of the one touched "key" of an operator without keys
ANY_KEY = "_ivm_any"


def touched_keys(
    ctx: RenderContext,
    name: str,
    delta: str,
    keys: Sequence[exp.Expr],
    *,
    temp: bool = False,
) -> str:
    """The distinct values of ``keys`` (expressions over ``delta``'s columns): a CTE, or a
    temporary table when ``temp`` (statements that write state read it after the delta).

    Without keys: one row when the delta has any, none otherwise."""
    select = ", ".join(f"{expr_sql(k)} AS {quote(key_name(i))}" for i, k in enumerate(keys))
    sql = f"SELECT DISTINCT {select or f'TRUE AS {ANY_KEY}'} FROM {delta}"
    return ctx.temp(name, sql) if temp else ctx.cte(name, sql)


def key_match(keys: Sequence[exp.Expr], touched: str) -> str:
    """The join condition of a row with its touched key (``keys`` read the row's columns)."""
    return same_values(
        (f"({expr_sql(k)})", f"{touched}.{quote(key_name(i))}") for i, k in enumerate(keys)
    )


def restrict(relation: str, keys: Sequence[exp.Expr], touched: str, *, anti: bool = False) -> str:
    """``relation``'s rows whose ``keys`` are among the touched ones (a FROM item); with
    ``anti``, the rows whose keys are not."""
    return f"{relation} {'ANTI' if anti else 'SEMI'} JOIN {touched} ON {key_match(keys, touched)}"


def key_scoped_delta(
    ctx: RenderContext,
    name: str,
    child: Operator,
    keys: Sequence[exp.Expr],
    compute: Callable[[str], str],
) -> str | None:
    """Retract ``compute`` over the old input of the touched keys, assert it over the new.

    ``keys`` are expressions over ``child``'s columns; ``compute`` maps a FROM item (the
    child's rows of the touched keys, at one side) to the operator's rows (a SELECT).
    """
    delta = child.delta(ctx)
    if delta is None:
        return None
    touched = touched_keys(ctx, f"{name}_keys", delta, keys)
    old = compute(restrict(child.state(ctx, "old"), keys, touched))
    new = compute(restrict(child.state(ctx, "new"), keys, touched))
    return f"SELECT *, -1 AS {MULT} FROM ({old})\nUNION ALL\nSELECT *, 1 AS {MULT} FROM ({new})"


#: the columns ``flipped_rows`` adds: a row's verdict before and after the window
BEFORE, AFTER = "_ivm_before", "_ivm_after"


def flipped_rows(rows: str, alias: str, touched: str, before: str, after: str) -> str:
    """Row-scoped: the rows of ``rows`` whose verdict over another relation changed.

    Some operators give each row of one input a verdict over the rows of the other (has it a
    match? is ``x IN (...)`` true?). Such a verdict can only change for the rows that match
    a row of the other input's delta: ``touched`` selects them (a superset does no harm),
    ``before`` and ``after`` give the verdict over the other input's old and new state, and
    only the rows whose verdict differs are kept, with both verdicts in ``_ivm_before`` and
    ``_ivm_after``. Each is a SQL expression over the row, named ``alias``.
    """
    return (
        f"SELECT * FROM (\n"
        f"  SELECT {alias}.*, {before} AS {BEFORE}, {after} AS {AFTER}\n"
        f"  FROM {rows} AS {alias} WHERE {touched}\n"
        f") WHERE {BEFORE} IS DISTINCT FROM {AFTER}"
    )
