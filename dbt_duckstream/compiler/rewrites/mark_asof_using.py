"""``ASOF JOIN r USING (k, t)``: DuckDB compares the last USING column as ``l.t >= r.t``, where
sqlglot's qualification writes an equality for every USING column. The join is marked here,
before qualification, and its last comparison put back after it (``restore_asof_times``)."""

from __future__ import annotations

from sqlglot import exp

from ...sql import is_asof
from ..context import Context

#: the meta key of a marked join's time column
TIME = "duckstream_asof_time"


def mark_asof_using(expression: exp.Expr, context: Context) -> exp.Expr:
    """Note, in place, the time column of every ``ASOF JOIN ... USING`` (in its meta: the SQL
    reads the same).

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(mark_asof_using, "SELECT id FROM o ASOF JOIN r USING (k, t)"))
    SELECT id FROM o ASOF JOIN r USING (k, t)
    """
    for join in expression.find_all(exp.Join):
        using = join.args.get("using")
        if is_asof(join) and using:
            join.meta[TIME] = using[-1].name
    return expression
