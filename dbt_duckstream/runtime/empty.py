"""dbt's ``--empty`` (``dbt run --empty``, ``dbt build --empty``): dbt renders every ``ref``
and ``source`` as ``(select * from x where false limit 0)`` so that a project's SQL is checked
without reading rows. A model's own SQL is what its maintenance compiles, so the check reads
the SQL with those reads put back."""

from __future__ import annotations

import sqlglot
from sqlglot import exp


def without_empty_reads(sql: str) -> str:
    """The model's SQL as a run without ``--empty`` renders it.

    >>> without_empty_reads(
    ...     'select o.id from (select * from "lake"."main"."orders" where false limit 0) as o'
    ... )
    'SELECT o.id FROM "lake"."main"."orders" AS o'
    """
    statement = sqlglot.parse_one(sql, read="duckdb")
    for subquery in list(statement.find_all(exp.Subquery)):
        table = _emptied_table(subquery.this)
        if table is not None:
            read = table.copy()
            alias = subquery.args.get("alias")
            if alias is not None:
                read.set("alias", alias.copy())
            subquery.replace(read)
    return statement.sql(dialect="duckdb")


def _emptied_table(query: exp.Expr) -> exp.Table | None:
    """The table of ``select * from t where false limit 0``, dbt's empty read; else None."""
    if not isinstance(query, exp.Select) or query.args.get("joins"):
        return None
    star = len(query.expressions) == 1 and isinstance(query.expressions[0], exp.Star)
    where = query.args.get("where")
    limit = query.args.get("limit")
    source = query.args.get("from_") or query.args.get("from")
    table = source.this if isinstance(source, exp.From) else None
    if not (
        star
        and isinstance(table, exp.Table)
        and not table.args.get("alias")
        and isinstance(where, exp.Where)
        and isinstance(where.this, exp.Boolean)
        and not where.this.this
        and isinstance(limit, exp.Limit)
        and limit.expression.sql() == "0"
    ):
        return None
    return table
