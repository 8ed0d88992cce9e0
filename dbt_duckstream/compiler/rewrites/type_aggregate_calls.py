"""DuckDB's aggregate functions that sqlglot parses as unknown calls (``product``,
``histogram``, ``mad``, the macro ``geomean``, ...), typed as aggregates: the compiler tells a
grouped block from a projection by its aggregate calls, and would otherwise read ``SELECT
product(v) FROM r`` as a function of each row."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from ...errors import UnsupportedSQLError
from ..context import Context
from ..validate import check_aggregate


@dataclass(frozen=True)
class _Catalog:
    #: DuckDB's aggregate functions and its built-in macros that aggregate
    aggregates: frozenset[str]
    #: the macros among them whose value depends on row order, and the aggregate that makes it
    #: so (``json_group_array``: ``string_agg`` without ORDER BY)
    order_dependent: dict[str, str]


@lru_cache(maxsize=1)
def _catalog() -> _Catalog:
    """Read from DuckDB's own catalog, not a list kept here."""
    with duckdb.connect() as con:
        functions = {
            name.lower()
            for (name,) in con.execute(
                "SELECT function_name FROM duckdb_functions() WHERE function_type = 'aggregate'"
            ).fetchall()
        }
        macros = con.execute(
            "SELECT function_name, macro_definition FROM duckdb_functions() "
            "WHERE function_type = 'macro' AND database_name = 'system'"
        ).fetchall()
    calls = re.compile(r"\b([a-z_][a-z0-9_]*)\s*\(")
    maybe_aggregating = functions | {name.lower() for name, _ in macros}
    bodies: dict[str, exp.Expr] = {}
    for name, definition in macros:
        if not set(calls.findall(definition.lower())) & maybe_aggregating:
            continue  # parsing each of DuckDB's macros would cost ~100 ms a process
        try:
            bodies[name.lower()] = sqlglot.parse_one(definition, read="duckdb")
        except ParseError:
            continue
    aggregates = set(functions)
    grown = True
    while grown:  # a macro may aggregate through another (geometric_mean calls geomean)
        grown = False
        for name, body in bodies.items():
            if name not in aggregates and any(
                isinstance(call, exp.AggFunc)
                or (isinstance(call, exp.Anonymous) and str(call.this).lower() in aggregates)
                for call in body.find_all(exp.Func)
            ):
                aggregates.add(name)
                grown = True
    order_dependent: dict[str, str] = {}
    for name, body in bodies.items():
        for call in body.find_all(exp.AggFunc):
            try:
                check_aggregate(call)
            except UnsupportedSQLError as error:
                order_dependent[name] = error.construct
    return _Catalog(frozenset(aggregates), order_dependent)


def type_aggregate_calls(expression: exp.Expr, context: Context) -> exp.Expr:
    """Turn, in place, calls of DuckDB aggregates that sqlglot left unknown into aggregate
    calls; ``mean(x)`` and ``count_star()`` become the ``avg(x)`` and ``count(*)`` they are.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(type_aggregate_calls, "SELECT mean(v), count_star(), product(v) FROM r"))
    SELECT AVG(v), COUNT(*), PRODUCT(v) FROM r
    >>> statement = type_aggregate_calls(
    ...     sqlglot.parse_one("SELECT mean(v), product(v), upper(g) FROM r", "duckdb"), Context()
    ... )
    >>> [type(e).__name__ for e in statement.expressions]
    ['Avg', 'AnonymousAggFunc', 'Upper']
    """
    catalog = _catalog()
    for call in list(expression.find_all(exp.Anonymous)):
        name = str(call.this).lower()
        if name not in catalog.aggregates:
            continue
        if name in catalog.order_dependent:
            raise UnsupportedSQLError(
                f"order-dependent aggregate {name}()",
                f"DuckDB defines it with {catalog.order_dependent[name]}, whose result depends "
                "on the order rows are read in",
            )
        arguments = call.expressions
        if name == "mean" and len(arguments) == 1:
            call.replace(exp.Avg(this=arguments[0]))
        elif name == "count_star" and not arguments:
            call.replace(exp.Count(this=exp.Star()))
        else:
            call.replace(exp.AnonymousAggFunc(this=call.this, expressions=arguments))
    return expression
