"""The standard ordered-set aggregates, written with ``WITHIN GROUP``, as DuckDB's calls."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from ..context import Context


def within_group_as_calls(expression: exp.Expr, context: Context) -> exp.Expr:
    """The standard ordered-set aggregates, ``percentile_cont(f) WITHIN GROUP (ORDER BY x)``
    and the like, as the DuckDB calls they mean (``quantile_cont(x, f ORDER BY x)``), which
    the compiler reads as any other aggregate; left as written, ``x`` sits outside the call.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(within_group_as_calls,
    ...     "SELECT g, percentile_cont(0.9) WITHIN GROUP (ORDER BY v DESC) FROM r GROUP BY g"))
    SELECT g, QUANTILE_CONT(v, 0.9 ORDER BY v DESC) FROM r GROUP BY g
    >>> print(show(within_group_as_calls,
    ...     "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY v), "
    ...     "mode() WITHIN GROUP (ORDER BY g) FROM r"))
    SELECT QUANTILE_DISC(v, 0.5), MODE(g ORDER BY g) FROM r
    """

    def as_call(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.WithinGroup):
            return node
        call, keys = node.this, node.expression.expressions
        if len(keys) == 1 and isinstance(call, (exp.PercentileCont, exp.PercentileDisc)):
            ordered = keys[0]
            fraction = (
                call.this
                if not ordered.args.get("desc")
                else exp.Order(this=call.this, expressions=[ordered])
            )
            return type(call)(this=ordered.this.copy(), expression=fraction)
        if len(keys) == 1 and isinstance(call, exp.Mode) and call.this is None:
            return exp.Mode(this=exp.Order(this=keys[0].this.copy(), expressions=keys))
        # any other: the DuckDB call sqlglot writes for it, read back
        return sqlglot.parse_one(node.sql("duckdb"), read="duckdb")

    return expression.transform(as_call, copy=False)
