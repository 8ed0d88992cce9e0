"""Subqueries in expressions, decorrelated into joins of the SELECT block that holds them.

A subquery in the WHERE clause, the select list or HAVING of a SELECT block becomes an
operator over the block's relation, and the expression that held it reads that operator's
columns:

* a WHERE conjunct ``[NOT] EXISTS (...)``, ``[NOT] x IN (SELECT ...)`` or
  ``[NOT] x <op> ANY|ALL (SELECT ...)`` is a ``SemiJoin`` (``AntiJoin`` under an odd number
  of NOTs) that keeps the rows for which the predicate is TRUE (FALSE);
* such a predicate anywhere else (inside OR, CASE, the select list) is a ``MarkJoin``: a
  boolean column holding its three-valued result;
* a scalar subquery is a ``ScalarSubquery``: a join with a relation holding one row per
  correlation key, or one row in all. A subquery that aggregates (``SELECT avg(v) ...``)
  keeps its aggregate calls in an ``Aggregate`` grouped by the keys it is correlated on, and
  the expression reads ``CASE WHEN <no group> THEN <the expression over an empty group>
  ELSE <the expression over the group's aggregates> END`` (COUNT of an empty group is 0,
  every other aggregate NULL). Any other subquery keeps, per key, its row count and least
  value, and the expression raises DuckDB's "More than one row returned by a subquery" error
  when a row meets more than one.

A subquery is correlated when it names a column of an enclosing query. Its WHERE conjuncts
that do (``p.o = o.id``, ``l2.l_suppkey <> l1.l_suppkey``) leave the subquery and become the
join's condition; what remains is an ordinary query, built like any other (aggregates,
joins, its own subqueries). A scalar subquery is correlated by equalities only, which become
its group keys. Refused, naming the column: an outer column anywhere else in a correlated
subquery (its select list, a JOIN's ON, GROUP BY, a nested subquery), and GROUP BY, HAVING,
DISTINCT or set operations in a correlated subquery.

Subqueries inside aggregate calls join below the block's Aggregate; the others of an
aggregating block join above it, where outer columns are its group keys (``HAVING sum(v) >
(SELECT ...)``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from sqlglot import exp

from ...errors import UnsupportedSQLError
from ...sql import conjuncts
from ..operators import Aggregate, Filter, JoinInput, Operator
from ..operators.anti_join import AntiJoin
from ..operators.mark_join import MarkJoin
from ..operators.membership import Membership, Quantifier
from ..operators.scalar_subquery import ScalarSubquery
from ..operators.semi_join import SemiJoin
from ..scopes import column_key, has_subquery, outer_columns, outside_subqueries, sources, within

#: maps an expression over the outer query's columns to one over its relation's columns
Mapper = Callable[[exp.Expr], exp.Expr]

#: DuckDB's error when a scalar subquery yields more than one row for a row of the query
TOO_MANY_ROWS = (
    "More than one row returned by a subquery used as an expression - scalar subqueries can "
    "only return a single row."
)

_COMPARISONS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
}


class Builds(Protocol):
    """What decorrelation needs from the tree builder."""

    def query(self, node: exp.Expr, ctes: dict[str, Operator]) -> Operator: ...

    def select(self, select: exp.Select, ctes: dict[str, Operator]) -> Operator: ...


# -- helpers -----------------------------------------------------------------------------------


def _name(name: str) -> exp.Column:
    """A column reference to a relation's column, by its full (unqualified) name."""
    return exp.column(exp.to_identifier(name, quoted=True))


def _is_aggregate_call(node: exp.Expr) -> bool:
    return isinstance(node, exp.AggFunc) or (
        isinstance(node, exp.Filter) and isinstance(node.this, exp.AggFunc)
    )


def _aggregate_calls(expression: exp.Expr) -> list[exp.Expr]:
    """The outermost aggregate calls of ``expression``, in order, once each."""
    found: dict[str, exp.Expr] = {}
    for node in outside_subqueries(expression):
        if _is_aggregate_call(node) and not any(
            _is_aggregate_call(a) for a in _ancestors(node, expression)
        ):
            found.setdefault(node.sql(dialect="duckdb"), node)
    return list(found.values())


def _ancestors(node: exp.Expr, root: exp.Expr) -> Iterator[exp.Expr]:
    parent = node.parent
    while parent is not None and node is not root:
        yield parent
        if parent is root:
            return
        node, parent = parent, parent.parent


def _query_of(node: exp.Expr) -> exp.Expr:
    """The query a predicate's argument holds (``(SELECT ...)`` or a bare SELECT)."""
    return node.this if isinstance(node, exp.Subquery) else node


def _predicate_parts(node: exp.Expr) -> tuple[Quantifier, exp.Expr, exp.Expr | None, str] | None:
    """``(quantifier, query, operand, comparison)`` when ``node`` is a subquery predicate."""
    if isinstance(node, exp.Exists):
        return "exists", _query_of(node.this), None, "="
    if isinstance(node, exp.In) and node.args.get("query") is not None:
        return "any", _query_of(node.args["query"]), node.this, "="
    comparison = _COMPARISONS.get(type(node))
    if comparison is not None and isinstance(node.expression, exp.Any | exp.All):
        argument = _query_of(node.expression.this)
        if isinstance(argument, exp.Query):
            quantifier: Quantifier = "all" if isinstance(node.expression, exp.All) else "any"
            return quantifier, argument, node.this, comparison
    return None


def _refuse_outer(column: exp.Column, where: str) -> UnsupportedSQLError:
    return UnsupportedSQLError(
        "correlated subquery",
        f"{column.sql(dialect='duckdb')} refers to the outer query from {where}; only the "
        "subquery's WHERE conditions may refer to it",
    )


# -- the subqueries of one SELECT block ------------------------------------------------------------


@dataclass
class _Pending:
    """A subquery found in an expression and built, waiting to join the block's relation."""

    right: JoinInput
    #: subqueries outside aggregate calls of an aggregating block join above its Aggregate
    above: bool
    #: a predicate (MarkJoin): its parts, outer columns still as written
    membership: Membership | None = None
    mark: str = ""
    #: a scalar subquery: (outer expression as written, the right's key column)
    keys: tuple[tuple[exp.Expr, str], ...] = ()


@dataclass
class _Correlated:
    """A correlated subquery split in two: what stays inside, and what joins it to the outer
    query (its WHERE conjuncts that name outer columns)."""

    select: exp.Select  # a copy, without the correlated conjuncts
    correlated: list[exp.Expr]  # the conjuncts, as written
    #: the subquery's own columns in the conjuncts, and the name each gets as an output
    inner: dict[str, str]


@dataclass
class Subqueries:
    """The subqueries of one SELECT block, built and joined to its relation."""

    builder: Builds
    ctes: dict[str, Operator]
    #: numbers the subqueries of a whole model (their aliases must not collide)
    counter: Iterator[int]
    pending: list[_Pending] = field(default_factory=list)

    def _alias(self) -> str:
        return f"_ivm_sq{next(self.counter)}"

    # -- WHERE ---------------------------------------------------------------------------------

    def where(self, relation: Operator, predicate: exp.Expr, mapper: Mapper) -> Operator:
        """The WHERE clause over ``relation``: plain conjuncts filter first, then each
        subquery predicate conjunct is a semi or anti join, then the conjuncts that hold
        subqueries elsewhere filter over the columns their subqueries add."""
        plain, joins, others = [], [], []
        for conjunct in conjuncts(predicate):
            if not has_subquery(conjunct):
                plain.append(conjunct)
            elif _semi_or_anti(conjunct) is not None:
                joins.append(conjunct)
            else:
                others.append(conjunct)
        if plain:
            relation = Filter(relation, mapper(exp.and_(*plain)))
        for conjunct in joins:
            found = _semi_or_anti(conjunct)
            assert found is not None
            negated, core = found
            right, membership = self._predicate(core)
            kind = AntiJoin if negated else SemiJoin
            relation = kind(JoinInput(None, relation), right, _mapped(membership, mapper))
        if others:
            replaced = [self.replace(c, above=False) for c in others]
            relation = self.attach(relation, mapper, above=False)
            relation = Filter(relation, mapper(exp.and_(*replaced)))
        return relation

    # -- expressions ---------------------------------------------------------------------------

    def replace(self, expression: exp.Expr, *, above: bool) -> exp.Expr:
        """``expression`` with each subquery replaced by the columns that will hold it.

        With ``above``, subqueries outside aggregate calls join above the block's Aggregate.
        """
        expression = expression.copy()
        while True:
            node = _first_subquery(expression)
            if node is None:
                return expression
            inside = any(_is_aggregate_call(a) for a in _ancestors(node, expression))
            replacement = self._build(node, above=above and not inside)
            if node is expression:
                return replacement
            node.replace(replacement)

    def _build(self, node: exp.Expr, *, above: bool) -> exp.Expr:
        parts = _predicate_parts(node)
        if parts is not None:
            right, membership = self._predicate(node)
            mark = f"{right.alias}.mark"
            self.pending.append(_Pending(right, above, membership, mark))
            return _name(mark)
        if isinstance(node, exp.Subquery):
            right, keys, value = self._scalar(node.this)
            self.pending.append(_Pending(right, above, keys=keys))
            return value
        raise UnsupportedSQLError(
            "subquery in an expression",
            f"only EXISTS, IN, ANY/ALL and scalar subqueries are maintained; found "
            f"{node.sql(dialect='duckdb')[:80]}",
        )

    def attach(self, relation: Operator, mapper: Mapper, *, above: bool) -> Operator:
        """Join the pending subqueries of one group (below or above the Aggregate)."""
        for pending in [p for p in self.pending if p.above == above]:
            left = JoinInput(None, relation)
            if pending.membership is not None:
                membership = _mapped(pending.membership, mapper)
                relation = MarkJoin(left, pending.right, membership, mark=pending.mark)
            else:
                keys = tuple((mapper(outer), key) for outer, key in pending.keys)
                relation = ScalarSubquery(left, pending.right, keys)
        self.pending = [p for p in self.pending if p.above != above]
        return relation

    # -- predicates ----------------------------------------------------------------------------

    def _predicate(self, node: exp.Expr) -> tuple[JoinInput, Membership]:
        parts = _predicate_parts(node)
        assert parts is not None
        quantifier, query, operand, comparison = parts
        if operand is not None and has_subquery(operand):
            raise UnsupportedSQLError(
                "subquery on the left of IN, ANY or ALL", node.sql(dialect="duckdb")[:80]
            )
        if isinstance(operand, exp.Tuple):
            raise UnsupportedSQLError(
                f"a row of values compared with a subquery ({node.sql(dialect='duckdb')[:80]}) "
                "other than as a WHERE or HAVING condition of its own",
                "where it may be NULL (NOT IN, a selected value), write [NOT] EXISTS (SELECT "
                "... WHERE x = a AND y = b) with the NULL handling you mean",
            )
        alias = self._alias()
        if not outer_columns(query):
            inner = self.builder.query(query, self.ctes)
            value = None
            if quantifier != "exists":
                _one_column(inner, "IN, ANY or ALL")
                value = _name(f"{alias}.{inner.columns[0]}")
            membership = Membership(quantifier, None, operand, comparison, value)
            return JoinInput(alias, inner), membership
        if isinstance(query, exp.Select) and any(_aggregate_calls(e) for e in query.expressions):
            raise UnsupportedSQLError(
                "correlated subquery with aggregates in a predicate",
                "it yields one row per outer row whatever matches; compare with a scalar "
                "subquery instead",
            )
        split = _split(query, allow_outer_select=quantifier == "exists")
        outputs = [exp.alias_(_name_in(c), name, quoted=True) for c, name in split.inner.items()]
        if quantifier != "exists":
            expressions = split.select.expressions
            if len(expressions) != 1:
                raise UnsupportedSQLError(
                    f"subquery selecting {len(expressions)} columns", "select one column"
                )
            outputs.append(exp.alias_(expressions[0].unalias(), "_ivm_v", quoted=True))
        if not outputs:
            outputs = [exp.alias_(exp.true(), "_ivm_v", quoted=True)]
        split.select.set("expressions", outputs)
        inner = self.builder.select(split.select, self.ctes)
        correlation = exp.and_(*(_inner_named(c, split, alias) for c in split.correlated))
        value = _name(f"{alias}._ivm_v") if quantifier != "exists" else None
        return JoinInput(alias, inner), Membership(
            quantifier, correlation, operand, comparison, value
        )

    # -- scalar subqueries -----------------------------------------------------------------------

    def _scalar(
        self, query: exp.Expr
    ) -> tuple[JoinInput, tuple[tuple[exp.Expr, str], ...], exp.Expr]:
        alias = self._alias()
        correlated = bool(outer_columns(query))
        if not correlated and not _simple_aggregate(query):
            inner = self.builder.query(query, self.ctes)
            _one_column(inner, "a scalar subquery")
            values = Aggregate(
                inner, (), (exp.Count(this=exp.Star()), exp.Min(this=_name(inner.columns[0])))
            )
            count, value = (_name(f"{alias}.{c}") for c in values.columns)
            return JoinInput(alias, values), (), _at_most_one(count, value)
        assert isinstance(query, exp.Select)
        split = _split(query, allow_outer_select=False) if correlated else None
        select = split.select if split is not None else query.copy()
        if len(select.expressions) != 1:
            raise UnsupportedSQLError(
                f"scalar subquery selecting {len(select.expressions)} columns",
                "select one column",
            )
        expression = select.expressions[0].unalias()
        keys: list[tuple[exp.Expr, exp.Expr]] = []
        if split is not None:
            if select.args.get("group") or select.args.get("having") or select.args.get("distinct"):
                raise UnsupportedSQLError(
                    "correlated scalar subquery with GROUP BY, HAVING or DISTINCT"
                )
            keys = [_equality(c, split) for c in split.correlated]
        outputs: list[exp.Expr] = [
            exp.alias_(inner, f"_ivm_k{i}", quoted=True) for i, (inner, _) in enumerate(keys)
        ]
        outputs.append(exp.alias_(exp.Count(this=exp.Star()), "_ivm_n", quoted=True))
        calls = _aggregate_calls(expression)
        if calls:
            outputs += [
                exp.alias_(c.copy(), f"_ivm_a{j}", quoted=True) for j, c in enumerate(calls)
            ]
        else:
            outputs.append(exp.alias_(exp.Min(this=expression.copy()), "_ivm_v", quoted=True))
        select.set("expressions", outputs)
        if keys:
            select.set("group", exp.Group(expressions=[inner.copy() for inner, _ in keys]))
        inner = self.builder.select(select, self.ctes)
        right = JoinInput(alias, inner)
        outer_keys = tuple((outer, f"_ivm_k{i}") for i, (_, outer) in enumerate(keys))
        count = _name(f"{alias}._ivm_n")
        if not calls:
            return right, outer_keys, _at_most_one(count, _name(f"{alias}._ivm_v"))
        texts = {c.sql(dialect="duckdb"): j for j, c in enumerate(calls)}
        over_group = _replace_calls(expression, lambda c: _name(f"{alias}._ivm_a{texts[c]}"))
        stray = next(iter(_replace_calls(expression, _empty_value).find_all(exp.Column)), None)
        if stray is not None:
            raise UnsupportedSQLError(
                f"column {stray.sql(dialect='duckdb')} outside the aggregates of a scalar subquery"
            )
        if not keys:  # parenthesized: it stands for the subquery in any expression
            return right, outer_keys, exp.Paren(this=over_group)
        over_empty = _replace_calls(expression, _empty_value)
        value = exp.Case(
            ifs=[exp.If(this=exp.Is(this=count, expression=exp.null()), true=over_empty)],
            default=over_group,
        )
        return right, outer_keys, exp.Paren(this=value)


def _semi_or_anti(conjunct: exp.Expr) -> tuple[bool, exp.Expr] | None:
    """``(negated, predicate)`` when a WHERE conjunct is ``[NOT ...] <subquery predicate>``."""
    negated = False
    node = conjunct
    while isinstance(node, exp.Not | exp.Paren):
        negated ^= isinstance(node, exp.Not)
        node = node.this
    parts = _predicate_parts(node)
    if parts is None or (parts[2] is not None and has_subquery(parts[2])):
        return None
    return negated, node


def _first_subquery(expression: exp.Expr) -> exp.Expr | None:
    """The first subquery predicate, scalar subquery or stray query in ``expression``."""
    for node in outside_subqueries(expression):
        parts = _predicate_parts(node)
        if parts is not None:
            if parts[2] is not None and has_subquery(parts[2]):
                continue  # the operand's own subquery first
            return node
        if isinstance(node, exp.Subquery) or (
            isinstance(node, exp.Query) and node is not expression
        ):
            return node
    return None


def _mapped(membership: Membership, mapper: Mapper) -> Membership:
    def mapped(e: exp.Expr | None) -> exp.Expr | None:
        return mapper(e) if e is not None else None

    return Membership(
        membership.quantifier,
        mapped(membership.correlation),
        mapped(membership.operand),
        membership.comparison,
        membership.value,
    )


def _one_column(node: Operator, what: str) -> None:
    if len(node.columns) != 1:
        raise UnsupportedSQLError(
            f"subquery selecting {len(node.columns)} columns in {what}", "select one column"
        )


def _simple_aggregate(query: exp.Expr) -> bool:
    """``SELECT <one expression over aggregate calls> FROM ... [WHERE ...]``: one row always."""
    if not isinstance(query, exp.Select) or len(query.expressions) != 1:
        return False
    if any(query.args.get(k) for k in ("group", "having", "distinct", "qualify", "limit")):
        return False
    expression = query.expressions[0].unalias()
    if expression.find(exp.Window) or any(
        isinstance(n, exp.Query) for n in outside_subqueries(expression) if n is not expression
    ):
        return False
    calls = _aggregate_calls(expression)
    if not calls:
        return False
    # every column of the expression must be inside an aggregate call
    stripped = _replace_calls(expression, lambda _: exp.null())
    return stripped.find(exp.Column) is None


def _replace_calls(expression: exp.Expr, by: Callable[[str], exp.Expr]) -> exp.Expr:
    """``expression`` with each outermost aggregate call replaced by ``by(its SQL)``."""

    def replace(node: exp.Expr) -> exp.Expr:
        if _is_aggregate_call(node):
            return by(node.sql(dialect="duckdb"))
        return node

    return _transform_outermost(expression.copy(), replace)


def _transform_outermost(expression: exp.Expr, fun: Callable[[exp.Expr], exp.Expr]) -> exp.Expr:
    """Replace top-down, without descending into a replaced node."""
    replaced = fun(expression)
    if replaced is not expression:
        return replaced
    for child in list(expression.iter_expressions()):
        new = _transform_outermost(child, fun)
        if new is not child:
            child.replace(new)
    return expression


def _empty_value(call: str) -> exp.Expr:
    """An aggregate's value over no rows: 0 for COUNT, NULL for every other."""
    return exp.Literal.number(0) if call.lower().startswith("count(") else exp.null()


def _at_most_one(count: exp.Expr, value: exp.Expr) -> exp.Expr:
    """``value``, or DuckDB's error when the subquery had more than one row."""
    error = exp.Anonymous(this="error", expressions=[exp.Literal.string(TOO_MANY_ROWS)])
    too_many = exp.GT(this=count.copy(), expression=exp.Literal.number(1))
    return exp.Paren(this=exp.Case(ifs=[exp.If(this=too_many, true=error)], default=value))


# -- splitting a correlated subquery ---------------------------------------------------------------


def _split(query: exp.Expr, *, allow_outer_select: bool) -> _Correlated:
    """Check a correlated subquery's shape and split its WHERE clause."""
    if not isinstance(query, exp.Select):
        raise UnsupportedSQLError("correlated subquery that is not a plain SELECT")
    for clause in ("group", "having", "distinct", "qualify", "limit", "with", "with_"):
        if query.args.get(clause):
            name = clause.rstrip("_").upper().replace("GROUP", "GROUP BY")
            raise UnsupportedSQLError(f"correlated subquery with {name}")
    where = query.args.get("where")
    terms = conjuncts(where.this) if where is not None else []
    correlated_ids: set[int] = set()
    allowed: list[exp.Expr] = list(query.expressions) if allow_outer_select else []
    for column in outer_columns(query):
        conjunct = next((c for c in terms if within(column, c)), None)
        if conjunct is not None and not any(
            isinstance(n, exp.Query) for n in conjunct.walk() if n is not conjunct
        ):
            correlated_ids.add(id(conjunct))
            continue
        if any(within(column, e) for e in allowed):
            continue
        nested = next(
            (a for a in _ancestors(column, query) if isinstance(a, exp.Query) and a is not query),
            None,
        )
        if nested is not None:
            raise _refuse_outer(column, "a nested subquery")
        if conjunct is not None:
            raise _refuse_outer(column, "a WHERE condition that holds a subquery")
        raise _refuse_outer(column, "outside its WHERE conditions")
    local = [c for c in terms if id(c) not in correlated_ids]
    correlated = [c for c in terms if id(c) in correlated_ids]
    names = sources(query)
    inner: dict[str, str] = {}
    for conjunct in correlated:
        for column in conjunct.find_all(exp.Column):
            if column.table in names:
                inner.setdefault(column_key(column), f"_ivm_c{len(inner)}")
    select = query.copy()
    select.set("where", exp.Where(this=exp.and_(*(c.copy() for c in local))) if local else None)
    return _Correlated(select, correlated, inner)


def _name_in(key: str) -> exp.Column:
    """The subquery's column ``table.name`` as a qualified reference inside it."""
    table, name = key.split(".", 1)
    return exp.column(exp.to_identifier(name, quoted=True), exp.to_identifier(table, quoted=True))


def _inner_named(conjunct: exp.Expr, split: _Correlated, alias: str) -> exp.Expr:
    """A correlated conjunct with the subquery's columns read from its output (the outer
    columns stay as written)."""
    names = sources(split.select)

    def rename(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table in names:
            return _name(f"{alias}.{split.inner[column_key(node)]}")
        return node

    return conjunct.copy().transform(rename)


def _equality(conjunct: exp.Expr, split: _Correlated) -> tuple[exp.Expr, exp.Expr]:
    """``(inner expression, outer expression)`` of a correlation ``inner = outer``."""
    names = sources(split.select)

    def side(e: exp.Expr) -> str:
        tables = {c.table in names for c in e.find_all(exp.Column)}
        return {frozenset({True}): "inner", frozenset({False}): "outer"}.get(
            frozenset(tables), "mixed"
        )

    if isinstance(conjunct, exp.EQ):
        sides = (side(conjunct.this), side(conjunct.expression))
        if sides == ("inner", "outer"):
            return conjunct.this.copy(), conjunct.expression.copy()
        if sides == ("outer", "inner"):
            return conjunct.expression.copy(), conjunct.this.copy()
    raise UnsupportedSQLError(
        "correlated scalar subquery whose correlation is not an equality",
        f"{conjunct.sql(dialect='duckdb')[:80]}: a scalar subquery may only be correlated by "
        "conditions inner_expression = outer_expression",
    )


def new_counter() -> Iterator[int]:
    return itertools.count(1)
