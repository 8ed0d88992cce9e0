"""A correlated subquery that groups (``EXISTS (SELECT ... WHERE o.k = c.id GROUP BY o.k
HAVING sum(o.v) > 50)``, ``SELECT DISTINCT``), written as a subquery correlated by
equalities alone over its body keyed by the correlation (``keyed``)::

    EXISTS (SELECT 1 FROM (SELECT 1, o.k AS _ivm_key0 FROM o GROUP BY o.k, o.k
                           HAVING sum(o.v) > 50) AS _ivm_keyed0
            WHERE _ivm_keyed0._ivm_key0 = c.id)

which the subquery rules decorrelate like any other. Each outer row sees the groups of its
own key, as before. Refused: a LIMIT in such a subquery (it would pick among every key's
groups at once), and outer columns outside the WHERE's equalities.
"""

from __future__ import annotations

import itertools

from sqlglot import exp

from ...errors import UnsupportedSQLError
from ..context import Context
from ..keyed import KEY, keyed_body
from ..scopes import outer_columns


def key_grouped_subqueries(expression: exp.Expr, context: Context) -> exp.Expr:
    """Rewrite, in place, each correlated subquery in an expression that groups.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> print(show(key_grouped_subqueries,
    ...     'SELECT "c"."id" AS "id" FROM "c" AS "c" WHERE EXISTS(SELECT 1 FROM "o" AS "o" '
    ...     'WHERE "o"."k" = "c"."id" GROUP BY "o"."k" HAVING SUM("o"."v") > 50)'
    ... ))  # doctest: +NORMALIZE_WHITESPACE
    SELECT "c"."id" AS "id" FROM "c" AS "c" WHERE EXISTS(SELECT "_ivm_keyed0"."_ivm_v0" AS "1"
    FROM (SELECT 1 AS "_ivm_v0", "o"."k" AS "_ivm_key0" FROM "o" AS "o" GROUP BY "o"."k",
    "o"."k" HAVING SUM("o"."v") > 50) AS _ivm_keyed0 WHERE "_ivm_keyed0"."_ivm_key0" = "c"."id")
    """
    names = (f"_ivm_keyed{i}" for i in itertools.count())
    for query in reversed(list(expression.find_all(exp.Select))):
        holder = query.parent
        derived = isinstance(holder, exp.Subquery) and isinstance(
            holder.parent, exp.From | exp.Join
        )
        groups = query.args.get("group") is not None or (
            query.args.get("distinct") is not None and not query.args["distinct"].args.get("on")
        )
        if derived or not groups or not outer_columns(query):
            continue
        if isinstance(holder, exp.SetOperation):
            continue  # the subquery rules refuse it, naming it
        if query.args.get("limit") is not None or query.args.get("offset") is not None:
            raise UnsupportedSQLError("LIMIT in a correlated subquery that groups")
        query.replace(_keyed(query, next(names)))
    return expression


def _keyed(query: exp.Select, alias: str) -> exp.Select:
    body, _, outers = keyed_body(query, "correlated subquery")
    written = len(query.expressions)
    outputs: list[exp.Expr] = []
    for j, projection in enumerate(body.expressions[:written]):
        name = f"_ivm_v{j}"
        body.expressions[j].replace(exp.alias_(projection.unalias().copy(), name, quoted=True))
        value = exp.column(name, table=alias, quoted=True)
        label = projection.alias_or_name
        outputs.append(exp.alias_(value, label, quoted=True) if label else value)
    body.set("order", None)
    matches = [
        exp.EQ(this=exp.column(KEY.format(i), table=alias, quoted=True), expression=o.copy())
        for i, o in enumerate(outers)
    ]
    derived = exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(alias)))
    return exp.select(*outputs).from_(derived).where(exp.and_(*matches))
