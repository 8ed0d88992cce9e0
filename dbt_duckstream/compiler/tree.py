"""From qualified SQL to a tree of relational operators.

Each SELECT block becomes ``Project(Filter?(Aggregate?(Filter?(joins))))``: the FROM clause
becomes a join tree, WHERE filters it, GROUP BY and the aggregate calls form an Aggregate,
HAVING filters that, and the select list projects. The join tree keeps the order and kind of
each join: a run of inner (and cross) joins is one N-ary ``Join`` with its ON conditions
ANDed, and every other kind of join is the operator ``JOIN_KINDS`` registers for it, taking
everything to its left as one input. Subqueries in FROM and CTEs are converted recursively and
plugged in as join inputs, so any nesting composes; a CTE referenced twice is one shared node,
rendered once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from ..errors import UnsupportedSQLError
from ..sql import TableRef
from .operators import Aggregate, Filter, Join, JoinInput, Operator, Project, Scan
from .operators.aggregate import agg_name, key_name
from .operators.base import number
from .operators.scan import check_row_identity
from .validate import check_aggregate, check_select

#: source columns per table: catalog -> schema -> table -> column -> type
Schema = dict[str, dict[str, dict[str, dict[str, str]]]]

#: builders of the joins that do not collapse into an N-ary inner join, by kind:
#: ``builder(left, right, on)`` where ``left`` is everything to the join's left
JoinBuilder = Callable[[JoinInput, JoinInput, "exp.Expr | None"], Operator]
JOIN_KINDS: dict[str, JoinBuilder] = {}


def build_tree(qualified: exp.Expr, schema: Schema | None = None) -> Operator:
    """Convert a query qualified by sqlglot's ``qualify`` into an operator tree.

    ``schema`` gives every column of the sources (not only those read), when known.
    """
    root = _Builder(schema or {}).query(qualified, {})
    number(root)
    return root


@dataclass
class _Builder:
    schema: Schema

    def query(self, node: exp.Expr, ctes: dict[str, Operator]) -> Operator:
        if isinstance(node, exp.Subquery):
            return self.query(node.this, ctes)
        if isinstance(node, exp.Union | exp.Intersect | exp.Except):
            name = type(node).__name__.upper()
            raise UnsupportedSQLError(f"{name} (set operation)")
        if not isinstance(node, exp.Select):
            raise UnsupportedSQLError(f"{type(node).__name__} statement", "a model is one SELECT")
        scope = dict(ctes)
        with_ = node.args.get("with_") or node.args.get("with")
        if with_ is not None:
            if with_.args.get("recursive"):
                raise UnsupportedSQLError("WITH RECURSIVE")
            for cte in with_.expressions:
                scope[cte.alias] = self.query(cte.this, scope)
        return self.select(node, scope)

    def select(self, select: exp.Select, ctes: dict[str, Operator]) -> Operator:
        select, semi_inputs, semi_conditions = self.semi_joins(select, ctes)
        check_select(select)
        relation = self.from_clause(select, ctes, semi_inputs, semi_conditions)
        where = select.args.get("where")
        if where is not None:
            relation = Filter(relation, _flatten(where.this))

        outputs = [(e.alias_or_name, _flatten(_unalias(e))) for e in select.expressions]
        having = select.args.get("having")
        having_predicate = _flatten(having.this) if having is not None else None
        group = select.args.get("group")
        distinct = select.args.get("distinct") is not None
        expressions = [e for _, e in outputs]
        if distinct and (group is not None or _has_aggregate(expressions, None)):
            raise UnsupportedSQLError("SELECT DISTINCT with GROUP BY or aggregates")
        if distinct or group is not None or _has_aggregate(expressions, having_predicate):
            # SELECT DISTINCT is a GROUP BY of every selected expression
            keys = expressions if distinct else _group_keys(group, expressions)
            aggregates = _aggregate_calls(expressions, having_predicate)
            relation = Aggregate(relation, tuple(keys), tuple(aggregates))
            outputs = [(name, _over_aggregate(e, keys, aggregates)) for name, e in outputs]
            if having_predicate is not None:
                relation = Filter(relation, _over_aggregate(having_predicate, keys, aggregates))
        elif having_predicate is not None:
            raise UnsupportedSQLError("HAVING without aggregation")
        names = _unique(n for n, _ in outputs)
        return Project(relation, tuple(zip(names, [e for _, e in outputs], strict=True)))

    def from_clause(
        self,
        select: exp.Select,
        ctes: dict[str, Operator],
        semi_inputs: list[JoinInput],
        semi_conditions: list[exp.Expr],
    ) -> Operator:
        """The FROM clause as a join tree: inner runs collapse, other kinds nest in order."""
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:
            raise UnsupportedSQLError("SELECT without FROM")
        referenced = _referenced_columns(select, semi_conditions)
        run = [self.input(from_.this, ctes, referenced)]
        conditions: list[exp.Expr] = []
        for join in select.args.get("joins") or []:
            kind = join_kind(join)
            right = self.input(join.this, ctes, referenced)
            on = _flatten(join.args["on"]) if join.args.get("on") is not None else None
            if kind in ("INNER", "CROSS"):
                run.append(right)
                conditions += [on] if on is not None else []
                continue
            builder = JOIN_KINDS.get(kind)
            if builder is None:
                raise UnsupportedSQLError(kind)
            left = JoinInput(None, _inner_join(run, conditions))
            run, conditions = [JoinInput(None, builder(left, right, on))], []
        return _inner_join(run + semi_inputs, conditions + [_flatten(c) for c in semi_conditions])

    def semi_joins(
        self, select: exp.Select, ctes: dict[str, Operator]
    ) -> tuple[exp.Select, list[JoinInput], list[exp.Expr]]:
        """``x IN (SELECT k ...)`` conjuncts of WHERE, as inner joins with the distinct ``k``.

        In a WHERE conjunct, IN holds exactly when ``x`` equals one of the subquery's non-null
        values, which is what a join with its distinct values computes (NULLs match nothing on
        either side). NOT IN differs on NULLs and stays unsupported.
        """
        where = select.args.get("where")
        if where is None:
            return select, [], []
        kept: list[exp.Expr] = []
        inputs: list[JoinInput] = []
        conditions: list[exp.Expr] = []
        for conjunct in _conjuncts(where.this):
            query = conjunct.args.get("query") if isinstance(conjunct, exp.In) else None
            if query is None:
                kept.append(conjunct)
                continue
            subquery = query.this if isinstance(query, exp.Subquery) else query
            _check_uncorrelated(subquery)
            inner = self.query(subquery, ctes)
            if len(inner.columns) != 1:
                raise UnsupportedSQLError(
                    f"IN subquery selecting {len(inner.columns)} columns", "select one column"
                )
            distinct = Aggregate(inner, (_plain_column(inner.columns[0]),), ())
            alias = f"_ivm_in{len(inputs) + 1}"
            name = inner.columns[0]
            values = Project(distinct, ((name, _plain_column(key_name(0))),))
            inputs.append(JoinInput(alias, values))
            conditions.append(
                exp.EQ(this=conjunct.this.copy(), expression=exp.column(name, alias, quoted=True))
            )
        if not inputs:
            return select, [], []
        rewritten = select.copy()
        rewritten.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
        return rewritten, inputs, conditions

    def input(
        self, item: exp.Expr, ctes: dict[str, Operator], referenced: dict[str, list[str]]
    ) -> JoinInput:
        if isinstance(item, exp.Table) and isinstance(item.this, exp.Identifier):
            if item.args.get("when") is not None:
                raise UnsupportedSQLError("time travel (AT/VERSION) in the model SQL")
            alias = item.alias_or_name
            if not item.args.get("db") and item.name in ctes:
                return JoinInput(alias, ctes[item.name])
            table = TableRef(item.catalog, item.db, item.name)
            return JoinInput(alias, self.scan(table, tuple(referenced.get(alias, []))))
        if isinstance(item, exp.Subquery):
            return JoinInput(item.alias, self.query(item.this, ctes))
        if isinstance(item, exp.Lateral):
            raise UnsupportedSQLError("LATERAL")
        kind = {exp.Values: "VALUES", exp.Unnest: "UNNEST"}.get(type(item))
        if isinstance(item, exp.Table):
            kind = f"table function {item.this.sql(dialect='duckdb')}"
        raise UnsupportedSQLError(f"{kind or type(item).__name__} in FROM")

    def scan(self, table: TableRef, read: tuple[str, ...]) -> Scan:
        columns = list(self.schema.get(table.catalog, {}).get(table.schema, {}).get(table.name, {}))
        check_row_identity(table, columns)
        hides = any(c.lower() == "snapshot_id" for c in columns)
        return Scan(table, read, hides_snapshot_id=hides)


def _inner_join(inputs: list[JoinInput], conditions: list[exp.Expr]) -> Operator:
    """One N-ary inner join (the telescoping rule), or the input itself when it stands alone."""
    if len(inputs) == 1 and not conditions and inputs[0].alias is None:
        return inputs[0].node
    return Join(tuple(inputs), exp.and_(*conditions) if conditions else None)


def join_kind(join: exp.Join) -> str:
    """The join's kind as SQL names it: ``INNER``, ``CROSS``, ``LEFT OUTER JOIN``, ..."""
    side = (join.args.get("side") or "").upper()
    kind = (join.args.get("kind") or "").upper()
    if join.args.get("method"):
        return f"{join.args['method'].upper()} JOIN"
    if join.args.get("using"):
        raise UnsupportedSQLError("JOIN ... USING that could not be resolved")
    if side:
        return f"{side} OUTER JOIN"
    if kind in ("", "INNER"):
        return "INNER"
    if kind == "CROSS":
        return "CROSS"
    return f"{kind} JOIN"


def _conjuncts(predicate: exp.Expr) -> list[exp.Expr]:
    if isinstance(predicate, exp.And):
        return [*_conjuncts(predicate.this), *_conjuncts(predicate.expression)]
    if isinstance(predicate, exp.Paren):
        return _conjuncts(predicate.this)
    return [predicate]


def _check_uncorrelated(subquery: exp.Expr) -> None:
    """A subquery may only name its own tables (and CTEs)."""
    own = {t.alias_or_name for t in subquery.find_all(exp.Table)}
    own |= {s.alias for s in subquery.find_all(exp.Subquery) if s.alias}
    for column in subquery.find_all(exp.Column):
        if column.table and column.table not in own:
            raise UnsupportedSQLError(
                "correlated subquery", f"{column.sql(dialect='duckdb')} refers to the outer query"
            )


def _plain_column(name: str) -> exp.Column:
    return exp.column(exp.to_identifier(name, quoted=True))


def _referenced_columns(select: exp.Select, extra: list[exp.Expr]) -> dict[str, list[str]]:
    """Columns each FROM alias must provide, in first-use order."""
    found: dict[str, list[str]] = {}
    parts: list[exp.Expr] = [*select.expressions, *extra]
    parts += [select.args[k] for k in ("where", "group", "having") if select.args.get(k)]
    parts += [j.args["on"] for j in select.args.get("joins") or [] if j.args.get("on")]
    for part in parts:
        for column in part.find_all(exp.Column):
            names = found.setdefault(column.table, [])
            if column.name not in names:
                names.append(column.name)
    return found


def _flatten(expression: exp.Expr) -> exp.Expr:
    """Point ``"alias"."col"`` at the join's flattened output column ``"alias.col"``."""

    def rename(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table:
            return exp.column(exp.to_identifier(f"{node.table}.{node.name}", quoted=True))
        return node

    return expression.copy().transform(rename)


def _unalias(expression: exp.Expr) -> exp.Expr:
    return expression.this if isinstance(expression, exp.Alias) else expression


def _is_aggregate_call(node: exp.Expr) -> bool:
    return isinstance(node, exp.AggFunc) or (
        isinstance(node, exp.Filter) and isinstance(node.this, exp.AggFunc)
    )


def _has_aggregate(expressions: list[exp.Expr], having: exp.Expr | None) -> bool:
    candidates = [*expressions, *([having] if having is not None else [])]
    return any(e.find(exp.AggFunc) for e in candidates)


def _group_keys(group: exp.Group | None, outputs: list[exp.Expr]) -> list[exp.Expr]:
    if group is None:
        return []
    if group.args.get("all"):
        return [e for e in outputs if not e.find(exp.AggFunc)]
    return [_flatten(e) for e in group.expressions]


def _aggregate_calls(outputs: list[exp.Expr], having: exp.Expr | None) -> list[exp.Expr]:
    calls: dict[str, exp.Expr] = {}
    for expression in [*outputs, *([having] if having is not None else [])]:
        for node in expression.walk():
            if _is_aggregate_call(node) and not _inside_aggregate(node):
                check_aggregate(node)
                calls.setdefault(node.sql(dialect="duckdb"), node)
    return list(calls.values())


def _inside_aggregate(node: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None:
        if _is_aggregate_call(parent):
            return True
        parent = parent.parent
    return False


def _over_aggregate(
    expression: exp.Expr, keys: list[exp.Expr], aggregates: list[exp.Expr]
) -> exp.Expr:
    """Rewrite an expression above GROUP BY in terms of the Aggregate's output columns."""
    key_index = {k.sql(dialect="duckdb"): i for i, k in enumerate(keys)}
    agg_index = {a.sql(dialect="duckdb"): j for j, a in enumerate(aggregates)}

    def replace(node: exp.Expr) -> exp.Expr:
        text = node.sql(dialect="duckdb")
        if _is_aggregate_call(node) and text in agg_index:
            return exp.column(exp.to_identifier(agg_name(agg_index[text]), quoted=True))
        if text in key_index and not isinstance(node, exp.Literal):
            return exp.column(exp.to_identifier(key_name(key_index[text]), quoted=True))
        return node

    rewritten = expression.copy().transform(replace)
    for column in rewritten.find_all(exp.Column):
        if not column.name.startswith("_ivm_"):
            raise UnsupportedSQLError(
                f"column {column.name} outside GROUP BY",
                "every selected column must be grouped or aggregated",
            )
    return rewritten


def _unique(names) -> list[str]:
    """Disambiguate repeated output names the way DuckDB does (``id``, ``id_1``, ...)."""
    seen: set[str] = set()
    result = []
    for name in names:
        candidate, n = name, 0
        while candidate in seen:
            n += 1
            candidate = f"{name}_{n}"
        seen.add(candidate)
        result.append(candidate)
    return result
