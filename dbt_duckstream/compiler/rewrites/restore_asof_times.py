"""The time column of ``ASOF JOIN ... USING (k, t)``, compared as DuckDB compares it
(``l.t >= r.t``) where qualification wrote an equality; ``mark_asof_using`` marked it."""

from __future__ import annotations

from sqlglot import exp

from ...sql import conjuncts
from ..context import Context
from .mark_asof_using import TIME


def restore_asof_times(expression: exp.Expr, context: Context) -> exp.Expr:
    """Turn, in place, the equality qualification wrote for a marked time column into
    ``left.t >= right.t``.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> tables = {"o": {"id": "INT", "k": "INT", "t": "INT"}, "r": {"k": "INT", "t": "INT"}}
    >>> print(show(restore_asof_times, "SELECT id FROM o ASOF JOIN r USING (k, t)",
    ...     tables=tables, first=("mark_asof_using", "qualify")))  # doctest: +NORMALIZE_WHITESPACE
    SELECT "o"."id" AS "id" FROM "o" AS "o" ASOF JOIN "r" AS "r" ON "o"."k" = "r"."k" AND
    "o"."t" >= "r"."t"
    """
    for join in expression.find_all(exp.Join):
        time = join.meta.get(TIME)
        on = join.args.get("on")
        if time is None or on is None:
            continue
        right = join.this.alias_or_name
        for term in conjuncts(on):
            if not isinstance(term, exp.EQ):
                continue
            a, b = term.this, term.expression
            if not all(isinstance(s, exp.Column) and s.name == time for s in (a, b)):
                continue
            if (a.table == right) != (b.table == right):
                mine, theirs = (b, a) if a.table == right else (a, b)
                term.replace(exp.GTE(this=mine.copy(), expression=theirs.copy()))
                break
    return expression
