"""``ASOF JOIN r USING (k, t)``: DuckDB compares the last USING column as ``l.t >= r.t``, where
sqlglot's qualification writes an equality for every USING column. The join is marked before
qualification and its last comparison put back after it."""

from __future__ import annotations

from sqlglot import exp

from ..sql import conjuncts, is_asof

_TIME = "duckstream_asof_time"


def mark_asof_using(statement: exp.Expr) -> None:
    """Note, in place, the time column of every ``ASOF JOIN ... USING``."""
    for join in statement.find_all(exp.Join):
        using = join.args.get("using")
        if is_asof(join) and using:
            join.meta[_TIME] = using[-1].name


def restore_asof_times(qualified: exp.Expr) -> None:
    """Turn, in place, the equality qualification wrote for a marked time column into
    ``left.t >= right.t``.

    >>> import sqlglot
    >>> from sqlglot.optimizer.qualify import qualify
    >>> statement = sqlglot.parse_one("SELECT id FROM o ASOF JOIN r USING (k, t)", "duckdb")
    >>> mark_asof_using(statement)
    >>> schema = {"o": {"id": "INT", "k": "INT", "t": "INT"}, "r": {"k": "INT", "t": "INT"}}
    >>> qualified = qualify(statement, schema=schema, dialect="duckdb")
    >>> restore_asof_times(qualified)
    >>> qualified.args["joins"][0].args["on"].sql("duckdb")
    '"o"."k" = "r"."k" AND "o"."t" >= "r"."t"'
    """
    for join in qualified.find_all(exp.Join):
        time = join.meta.get(_TIME)
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
