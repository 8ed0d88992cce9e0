"""Refuse SQL whose rows are not a function of its sources: a maintained table could never
equal a recomputation."""

from __future__ import annotations

from sqlglot import exp

from ...errors import UnsupportedSQLError
from ..context import Context
from ..validate import function_name

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


def check_deterministic(expression: exp.Expr, context: Context) -> exp.Expr:
    """Raise when the SQL calls a function whose value is not a function of its inputs, or
    samples a table; the SQL unchanged otherwise.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(check_deterministic, "SELECT k, now() AS t FROM r"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dbt_duckstream.errors.UnsupportedSQLError: ...: non-deterministic function now() ...
    """
    for node in expression.walk():
        if isinstance(node, exp.TableSample):
            raise UnsupportedSQLError(
                "a sample of a table (USING SAMPLE, TABLESAMPLE)",
                "it picks other rows as the table changes, so the table could never equal a "
                "recomputation; set ivm_fallback='rebuild' to rebuild the model every run",
            )
        is_named = isinstance(node, exp.Anonymous | exp.Func)
        if isinstance(node, _NON_DETERMINISTIC_NODES) or (
            is_named and function_name(node) in _NON_DETERMINISTIC_NAMES
        ):
            raise UnsupportedSQLError(
                f"non-deterministic function {function_name(node)}()",
                "its value changes between runs, so the table could never equal a "
                "recomputation; set ivm_fallback='rebuild' to rebuild the model every run",
            )
    return expression
