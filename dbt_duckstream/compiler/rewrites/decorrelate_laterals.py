"""LATERAL join items, written as the joins and subqueries they stand for (after the model's
SQL is qualified, so that every column names its table and no ``*`` is left).

* A derived table that names an earlier FROM item is LATERAL, as in DuckDB.
* ``LATERAL unnest(o.tags)``, ``LATERAL generate_series(s.start, s.stop, INTERVAL 1 DAY)`` is
  the table function itself, a function of each row already (``unwrap_lateral_functions``,
  when the model is parsed, so that its columns are named as DuckDB names them).
* A derived table marked LATERAL by ``mark_implicit_laterals``, before qualification.
* ``LATERAL (SELECT o.a * 2 AS v)``, expressions without FROM, is one row per outer row:
  each ``x.v`` reads the expression itself.
* ``LATERAL (SELECT count(*) AS n, sum(p.v) AS s FROM p WHERE p.k = o.id)``, aggregates
  without GROUP BY, is one row per outer row too: each ``x.n`` reads the scalar subquery
  ``(SELECT count(*) FROM p WHERE p.k = o.id)``, which the subquery rules decorrelate.
* Any other body correlated by equalities in its WHERE (``p.k = o.id``) is a derived table
  that keeps its keys, joined on them: ``ORDER BY ... LIMIT n`` (the latest row per key)
  becomes ``QUALIFY row_number() OVER (PARTITION BY p.k ORDER BY ...) <= n``, a GROUP BY
  groups by the keys too, and ``LEFT JOIN LATERAL ... ON TRUE`` keeps the outer rows without
  a match.

Refused, naming the column: an outer column anywhere else in the body (its select list, an
ORDER BY, a comparison other than equality), and the bodies these rules do not cover.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import UnsupportedSQLError
from ..context import Context
from ..keyed import KEY, keyed_body
from ..validate import limit_value


def decorrelate_laterals(expression: exp.Expr, context: Context) -> exp.Expr:
    """Replace, in place, each LATERAL join item by what it stands for (module docstring).

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(decorrelate_laterals,
    ...     'SELECT "o"."id" AS "id", "x"."n" AS "n" FROM "o" AS "o", LATERAL (SELECT COUNT(*) '
    ...     'AS "n" FROM "p" AS "p" WHERE "p"."k" = "o"."id") AS "x"'
    ... ))  # doctest: +NORMALIZE_WHITESPACE
    SELECT "o"."id" AS "id", (SELECT COUNT(*) FROM "p" AS "p" WHERE "p"."k" = "o"."id") AS "n"
    FROM "o" AS "o"
    """
    for lateral in reversed(list(expression.find_all(exp.Lateral))):
        join = lateral.parent
        if not isinstance(join, exp.Join) or not isinstance(join.parent, exp.Select):
            raise UnsupportedSQLError("LATERAL outside a join of a SELECT's FROM clause")
        body = lateral.this
        if not isinstance(body, exp.Subquery):  # Hive's LATERAL VIEW
            raise UnsupportedSQLError(lateral.sql(dialect="duckdb"))
        query = body.this
        if not isinstance(query, exp.Select):
            raise UnsupportedSQLError("LATERAL over a set operation")
        if _one_row(query):
            _substitute(join, lateral.alias, query)
        else:
            _decorrelate(join, lateral, query)
    return expression


def _one_row(query: exp.Select) -> bool:
    """Whether the body returns exactly one row: expressions, or aggregates without GROUP
    BY, with nothing that could drop that row."""
    if any(query.args.get(k) for k in ("group", "having", "qualify", "distinct", "offset")):
        return False
    limit = query.args.get("limit")
    if limit is not None and limit.expression.sql() == "0":
        return False
    from_ = query.args.get("from_") or query.args.get("from")
    if from_ is None:
        return not query.args.get("where")
    return any(isinstance(n, exp.AggFunc) for e in query.expressions for n in e.walk()) and not any(
        isinstance(n, exp.Window) for e in query.expressions for n in e.walk()
    )


def _substitute(join: exp.Join, alias: str, query: exp.Select) -> None:
    """Read each ``alias.name`` of the outer block as the body's expression of that name (a
    scalar subquery of the body when it reads a table), and drop the join item."""
    outer = join.parent
    assert isinstance(outer, exp.Select)
    on = join.args.get("on")
    if on is not None and not (isinstance(on, exp.Boolean) and on.this):
        if join.side:
            raise UnsupportedSQLError(
                f"{join.side} JOIN LATERAL with a condition", "join ON TRUE, filter in WHERE"
            )
        outer.where(on.copy(), copy=False)
    reads = (query.args.get("from_") or query.args.get("from")) is not None
    values: dict[str, exp.Expr] = {}
    for projection in query.expressions:
        value = projection.unalias() if isinstance(projection, exp.Alias) else projection
        if reads:
            single = query.copy()
            single.set("expressions", [value.copy()])
            single.set("order", None)
            single.set("limit", None)
            values[projection.alias_or_name.lower()] = exp.Subquery(this=single)
        else:
            values[projection.alias_or_name.lower()] = exp.paren(value.copy(), copy=False)
    join.pop()
    for column in list(outer.find_all(exp.Column)):
        if column.table == alias and column.name.lower() in values:
            column.replace(values[column.name.lower()].copy())


def _decorrelate(join: exp.Join, lateral: exp.Lateral, query: exp.Select) -> None:
    """The body as a derived table with its correlation keys, joined on them."""
    if query.args.get("distinct") is not None and query.args["distinct"].args.get("on"):
        raise UnsupportedSQLError("DISTINCT ON in a LATERAL subquery")
    body, inners, outers = keyed_body(query, "LATERAL subquery")
    _limit_per_key(body, inners)
    alias = lateral.alias
    derived = exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(alias)))
    lateral.replace(derived)
    matches = [
        exp.EQ(this=exp.column(KEY.format(i), table=alias, quoted=True), expression=outer.copy())
        for i, outer in enumerate(outers)
    ]
    on = join.args.get("on")
    if on is not None and not (isinstance(on, exp.Boolean) and on.this):
        matches.append(on.copy())
    join.set("on", exp.and_(*matches))


def _limit_per_key(body: exp.Select, keys: list[exp.Expr]) -> None:
    """``ORDER BY ... LIMIT n OFFSET m`` of the body, per correlation key."""
    limit, offset = body.args.get("limit"), body.args.get("offset")
    order = body.args.get("order")
    body.set("order", None)
    if limit is None and offset is None:
        return
    if body.args.get("qualify") is not None or order is None:
        raise UnsupportedSQLError(
            "LIMIT in a LATERAL subquery " + ("with QUALIFY" if order else "without ORDER BY"),
            "order the rows it keeps",
        )
    first = limit_value(body, "offset") or 0
    count = limit_value(body, "limit")
    named = {e.alias.lower(): e.unalias() for e in body.expressions if isinstance(e, exp.Alias)}
    for term in order.expressions:  # a name of the select list stands for its expression
        for column in list(term.find_all(exp.Column)):
            if not column.table and column.name.lower() in named:
                column.replace(named[column.name.lower()].copy())
    number = exp.Window(this=exp.RowNumber(), partition_by=[k.copy() for k in keys], order=order)
    kept: exp.Expr = exp.GT(this=number, expression=exp.Literal.number(first))
    if count is not None:
        kept = exp.and_(
            kept, exp.LTE(this=number.copy(), expression=exp.Literal.number(first + count))
        )
    body.set("limit", None)
    body.set("offset", None)
    body.set("qualify", exp.Qualify(this=kept))
