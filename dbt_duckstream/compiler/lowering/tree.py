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

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sqlglot import exp

from ...errors import UnsupportedSQLError
from ...sql import TableRef, expr_sql, unique_names
from ..context import Schema
from ..operators import (
    SET_OPERATIONS,
    Aggregate,
    Constant,
    Expand,
    Filter,
    Join,
    JoinInput,
    Operator,
    Project,
    RecursiveCTE,
    Scan,
    TopN,
    UnionAll,
    Window,
)
from ..operators.aggregate import agg_name, key_name
from ..operators.anti_join import anti_join
from ..operators.asof_join import asof_join, asof_left_join
from ..operators.base import number
from ..operators.outer_join import full_join, left_join, right_join
from ..operators.scan import check_row_identity
from ..operators.semi_join import semi_join
from ..scopes import has_subquery, is_window_function, outside_subqueries, owner, parenthesized
from ..validate import check_aggregate, check_recursive_body, check_select, limit_value
from .grouping_sets import grouping_sets, grouping_value, has_grouping_sets
from .subquery_joins import Subqueries, new_counter
from .window_calls import (
    inline_named_windows,
    partition_key,
    replace_calls,
    window_calls,
)

#: builders of the joins that do not collapse into an N-ary inner join, by kind:
#: ``builder(left, right, on)`` where ``left`` is everything to the join's left
JoinBuilder = Callable[[JoinInput, JoinInput, "exp.Expr | None"], Operator]
JOIN_KINDS: dict[str, JoinBuilder] = {
    "LEFT OUTER JOIN": left_join,
    "RIGHT OUTER JOIN": right_join,
    "FULL OUTER JOIN": full_join,
    "SEMI JOIN": semi_join,
    "ANTI JOIN": anti_join,
    "ASOF JOIN": asof_join,
    "ASOF LEFT OUTER JOIN": asof_left_join,
}


def build_tree(qualified: exp.Expr, schema: Schema | None = None) -> Operator:
    """Convert a query qualified by sqlglot's ``qualify`` into an operator tree.

    ``schema`` gives every column of the sources (not only those read), when known.
    """
    root = _Builder(schema or {}).query(qualified, {})
    if not root.sources():
        raise UnsupportedSQLError(
            "a model that reads no table", "there is nothing to maintain: materialize it as a table"
        )
    number(root)
    return root


@dataclass
class _Builder:
    schema: Schema
    #: numbers the model's subqueries
    counter: Iterator[int] = field(default_factory=new_counter)

    def query(self, node: exp.Expr, ctes: dict[str, Operator]) -> Operator:
        if isinstance(node, exp.Subquery):
            return self.query(node.this, ctes)
        scope = dict(ctes)
        with_ = node.args.get("with_") or node.args.get("with")
        if with_ is not None:
            for cte in with_.expressions:
                if with_.args.get("recursive") and _reads(cte.this, cte.alias):
                    scope[cte.alias] = self.recursive_cte(cte, scope)
                else:
                    scope[cte.alias] = self.query(cte.this, scope)
        if isinstance(node, exp.SetOperation):
            return self.set_operation(node, scope)
        if not isinstance(node, exp.Select):
            raise UnsupportedSQLError(f"{type(node).__name__} statement", "a model is one SELECT")
        return self.select(node, scope)

    def set_operation(self, node: exp.SetOperation, ctes: dict[str, Operator]) -> Operator:
        """``left <op> right`` by the operator ``SET_OPERATIONS`` registers for ``<op>``."""
        name = set_operation_name(node)
        left, right = self.query(node.this, ctes), self.query(node.expression, ctes)
        if node.args.get("by_name"):
            left, right = _by_name(left, right)
        if len(left.columns) != len(right.columns):
            raise UnsupportedSQLError(
                f"{name} of {len(left.columns)} and {len(right.columns)} columns",
                "both sides must select as many columns",
            )
        relation = SET_OPERATIONS[name.removesuffix(" BY NAME")](left, right)
        order = [
            _resolve_term(o, relation.columns, {}, []) for o in _order_terms(node, limited=True)
        ]
        return _limited(node, relation, order)

    def recursive_cte(self, cte: exp.CTE, ctes: dict[str, Operator]) -> Operator:
        """A CTE of WITH RECURSIVE that reads itself: recomputed in full when its inputs
        change (``RecursiveCTE``); the CTEs and tables it reads are its inputs."""
        body = cte.this
        if not isinstance(body, exp.Union):
            raise UnsupportedSQLError(
                f"recursive CTE {cte.alias} without UNION", "write: anchor UNION [ALL] step"
            )
        check_recursive_body(cte.alias, body)
        columns = [c.name for c in cte.args["alias"].columns] or list(body.this.named_selects)
        inputs: dict[str, Operator] = {}
        tables: dict[str, TableRef] = {}
        for table in body.find_all(exp.Table):
            if not isinstance(table.this, exp.Identifier) or table.name == cte.alias:
                continue
            if not table.db and table.name in ctes:
                inputs[table.name] = ctes[table.name]
            elif table.db:
                ref = TableRef(table.catalog, table.db, table.name)
                columns_of = self.schema.get(ref.catalog, {}).get(ref.schema, {}).get(ref.name, {})
                check_row_identity(ref, list(columns_of))
                tables[ref.key] = ref
        return RecursiveCTE(
            cte.alias, tuple(columns), body, tuple(inputs.items()), tuple(tables.values())
        )

    def select(self, select: exp.Select, ctes: dict[str, Operator]) -> Operator:
        check_select(select)
        select = inline_named_windows(select)
        subqueries = Subqueries(self, ctes, self.counter)
        relation = self.from_clause(select, ctes)
        where = select.args.get("where")
        if where is not None:
            relation = subqueries.where(relation, where.this, _flatten)

        having = select.args.get("having")
        group = select.args.get("group")
        distinct_clause = select.args.get("distinct")
        on = distinct_clause.args.get("on") if distinct_clause is not None else None
        distinct = distinct_clause is not None and on is None
        qualify_clause = select.args.get("qualify")
        for clause, name in ((qualify_clause, "QUALIFY"), (select.args.get("order"), "ORDER BY")):
            if clause is not None and has_subquery(clause):
                raise UnsupportedSQLError(f"subquery in {name}")
        if group is not None and has_subquery(group):
            raise UnsupportedSQLError("subquery in GROUP BY")
        written = [e.unalias() for e in select.expressions]
        ordered = (
            [o.this for o in select.args["order"].expressions] if select.args.get("order") else []
        )
        aggregated = group is not None or _has_aggregate(
            [*written, *ordered, *([qualify_clause.this] if qualify_clause is not None else [])],
            having.this if having is not None else None,
        )
        # subqueries join below the aggregate, except those outside aggregate calls above it
        replaced = [subqueries.replace(e, above=aggregated) for e in written]
        relation = subqueries.attach(relation, _flatten, above=False)
        outputs = [
            (e.alias_or_name, _flatten(r))
            for e, r in zip(select.expressions, replaced, strict=True)
        ]
        having_predicate = (
            _flatten(subqueries.replace(having.this, above=True)) if having is not None else None
        )
        names = unique_names(n for n, _ in outputs)
        qualify = _flatten(qualify_clause.this) if qualify_clause is not None else None
        # ORDER BY and DISTINCT ON terms name outputs, or compute hidden outputs
        hidden: list[tuple[str, exp.Expr]] = []
        limited = select.args.get("limit") is not None or select.args.get("offset") is not None
        named = dict(zip(names, [e for _, e in outputs], strict=True))
        order = [
            _resolve_term(o, names, named, hidden)
            for o in _order_terms(select, limited=limited or on is not None)
        ]
        distinct_on = [
            _resolve_term(e, names, named, hidden)
            for e in (on.expressions if on is not None else [])
        ]
        expressions = [e for _, e in outputs]
        extra = [e for _, e in hidden] + ([qualify] if qualify is not None else [])
        windowed = bool(window_calls([*expressions, *extra]))
        plain_distinct = distinct and group is None and not aggregated and not windowed
        if plain_distinct or aggregated:
            # SELECT DISTINCT is a GROUP BY of every selected expression
            keys = expressions if plain_distinct else _group_keys(group, expressions)
            relation, rewrite = self.aggregate(
                relation, group, keys, [*expressions, *extra], having_predicate
            )
            relation = subqueries.attach(relation, lambda e: rewrite(_flatten(e)), above=True)
            outputs = [(name, rewrite(e)) for name, e in outputs]
            hidden = [(name, rewrite(e)) for name, e in hidden]
            qualify = rewrite(qualify) if qualify is not None else None
            if having_predicate is not None:
                relation = Filter(relation, rewrite(having_predicate))
        elif having_predicate is not None:
            raise UnsupportedSQLError("HAVING without aggregation")
        relation, outputs, hidden = _windows(relation, outputs, hidden, qualify)
        result: Operator = Project(
            relation,
            (*zip(names, [e for _, e in outputs], strict=True), *hidden),
        )
        if distinct and not plain_distinct:
            result = _distinct(result)
        if on is not None:
            result = _distinct_on(result, distinct_on, order)
        result = _limited(select, result, order)
        if hidden:
            result = Project(result, tuple((n, _plain_column(n)) for n in names))
        return result

    def aggregate(
        self,
        relation: Operator,
        group: exp.Group | None,
        keys: list[exp.Expr],
        expressions: list[exp.Expr],
        having: exp.Expr | None,
    ) -> tuple[Operator, Callable[[exp.Expr], exp.Expr]]:
        """The aggregation of a SELECT block (one Aggregate, or one per grouping set), and the
        rewrite of an expression above it in terms of its columns."""
        calls = _grouping_calls([*expressions, *([having] if having is not None else [])])
        if not has_grouping_sets(group) and not calls:
            aggregates = _aggregate_calls(expressions, having)
            aggregate = Aggregate(relation, tuple(keys), tuple(aggregates))
            return aggregate, lambda e: _over_aggregate(e, keys, aggregates)
        if has_grouping_sets(group):
            assert group is not None
            found, sets = grouping_sets(group)
            keys = [_flatten(k) for k in found]
        else:
            sets = [tuple(range(len(keys)))]
        replaced = {expr_sql(c): f"_ivm_x{i}" for i, c in enumerate(calls)}

        def without_calls(expression: exp.Expr) -> exp.Expr:
            def replace(node: exp.Expr) -> exp.Expr:
                if isinstance(node, _GROUPING_CALLS) and expr_sql(node) in replaced:
                    return _plain_column(replaced[expr_sql(node)])
                return node

            return expression.copy().transform(replace)

        aggregates = _aggregate_calls(
            [without_calls(e) for e in expressions],
            without_calls(having) if having is not None else None,
        )
        branches: list[Operator] = []
        for grouping_set in sets:
            inner = Aggregate(relation, tuple(keys[i] for i in grouping_set), tuple(aggregates))
            columns: list[tuple[str, exp.Expr]] = [
                (
                    key_name(i),
                    _plain_column(key_name(grouping_set.index(i)))
                    if i in grouping_set
                    else exp.Null(),
                )
                for i in range(len(keys))
            ]
            columns += [(agg_name(j), _plain_column(agg_name(j))) for j in range(len(aggregates))]
            columns += [
                (replaced[expr_sql(c)], exp.Literal.number(grouping_value(c, keys, grouping_set)))
                for c in calls
            ]
            branches.append(Project(inner, tuple(columns)))
        union = branches[0]
        for branch in branches[1:]:
            union = UnionAll(union, branch)
        return union, lambda e: _over_aggregate(without_calls(e), keys, aggregates)

    def from_clause(self, select: exp.Select, ctes: dict[str, Operator]) -> Operator:
        """The FROM clause as a join tree: inner runs collapse, other kinds nest in order."""
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:  # one row of constants
            return Constant("(SELECT TRUE AS _ivm_row)", ("_ivm_row",))
        referenced = _referenced_columns(select)
        return self.join_tree(from_.this, select.args.get("joins") or [], ctes, referenced)

    def join_tree(
        self,
        first: exp.Expr,
        joins: list[exp.Join],
        ctes: dict[str, Operator],
        referenced: dict[str, list[str]],
    ) -> Operator:
        run = [self.input(first, ctes, referenced)]
        conditions: list[exp.Expr] = []
        for join in joins:
            kind = join_kind(join)
            if _is_lateral_function(join.this):
                left = JoinInput(None, _inner_join(run, conditions))
                run, conditions = [JoinInput(None, _expand(left, join, kind))], []
                continue
            right = self.input(join.this, ctes, referenced)
            on = join.args.get("on")
            if on is not None and has_subquery(on):
                raise UnsupportedSQLError("subquery in a JOIN's ON condition")
            on = _flatten(on) if on is not None else None
            if kind in ("INNER", "CROSS"):
                run.append(right)
                conditions += [on] if on is not None else []
                continue
            builder = JOIN_KINDS.get(kind)
            if builder is None:
                raise UnsupportedSQLError(kind)
            left = JoinInput(None, _inner_join(run, conditions))
            run, conditions = [JoinInput(None, builder(left, right, on))], []
        return _inner_join(run, conditions)

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
        nested = parenthesized(item)
        if nested is not None:
            # a parenthesized join, ``a LEFT JOIN (b JOIN c ON ...) ON ...``: its columns keep
            # their tables' names
            tree = self.join_tree(nested, nested.args.get("joins") or [], ctes, referenced)
            return JoinInput(None, tree)
        if isinstance(item, exp.Subquery):
            return JoinInput(item.alias, self.query(item.this, ctes))
        if isinstance(item, exp.Lateral):
            raise UnsupportedSQLError("LATERAL")
        constant = _constant(item)
        if constant is not None:
            return JoinInput(item.alias_or_name or None, constant)
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


#: ``grouping(...)`` and ``grouping_id(...)``
_GROUPING_CALLS = (exp.Grouping, exp.GroupingId)
#: the row number that picks the first row of each DISTINCT ON group
_ROW_NUMBER = "_ivm_rn"


def set_operation_name(node: exp.SetOperation) -> str:
    """The set operation as SQL names it: ``UNION ALL``, ``EXCEPT``, ``UNION ALL BY NAME``..."""
    names = {exp.Union: "UNION", exp.Intersect: "INTERSECT", exp.Except: "EXCEPT"}
    name = names.get(type(node), type(node).__name__.upper())
    if not node.args.get("distinct"):
        name += " ALL"
    return f"{name} BY NAME" if node.args.get("by_name") else name


def _by_name(left: Operator, right: Operator) -> tuple[Operator, Operator]:
    """Both sides of ``... BY NAME`` with the same columns: the left's, then the right's
    others (names match case-insensitively), NULL where a side lacks one."""
    names = list(left.columns)
    names += [c for c in right.columns if c.lower() not in {n.lower() for n in names}]

    def aligned(node: Operator) -> Operator:
        own = {c.lower(): c for c in node.columns}
        return Project(
            node,
            tuple(
                (n, _plain_column(own[n.lower()]) if n.lower() in own else exp.Null())
                for n in names
            ),
        )

    return aligned(left), aligned(right)


def _reads(query: exp.Expr, name: str) -> bool:
    """Whether ``query`` reads the CTE ``name``."""
    return any(not t.db and t.name == name for t in query.find_all(exp.Table))


def _order_terms(node: exp.Expr, *, limited: bool) -> list[exp.Ordered]:
    """The ORDER BY terms that matter: those of a top-N or a DISTINCT ON (a table has no
    order otherwise)."""
    order = node.args.get("order")
    return list(order.expressions) if limited and order is not None else []


def _outputs_named(expression: exp.Expr, outputs: dict[str, exp.Expr]) -> exp.Expr:
    """An ORDER BY or DISTINCT ON expression with the names of the block's outputs it uses
    (left unqualified: ``bind_order_names`` has bound those that name an input column to it)
    replaced by the expressions they name (``ORDER BY CASE WHEN lvl = 0 THEN a END`` where
    ``lvl`` is selected)."""

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name in outputs:
            return outputs[node.name].copy()
        return node

    return expression.copy().transform(replace)


def _resolve_term(
    term: exp.Expr,
    names: list[str] | tuple[str, ...],
    outputs: dict[str, exp.Expr],
    hidden: list[tuple[str, exp.Expr]],
) -> exp.Expr:
    """An ORDER BY or DISTINCT ON term over the block's output columns: a bare name is an
    output, an expression equal to an output is that output, and any other expression over
    the block's input is computed as a hidden output (appended to ``hidden``)."""
    expression = term.this if isinstance(term, exp.Ordered) else term
    if isinstance(expression, exp.Column) and not expression.table:
        if expression.name not in names:
            raise UnsupportedSQLError(
                f"ORDER BY {expression.name}", "it is not a column of the result"
            )
        resolved: exp.Expr = _plain_column(expression.name)
    else:
        flat = _flatten(_outputs_named(expression, outputs))
        same = [n for n, e in outputs.items() if expr_sql(e) == expr_sql(flat)]
        if same:
            resolved = _plain_column(same[0])
        elif not outputs:
            raise UnsupportedSQLError(
                f"ORDER BY {expr_sql(expression)} over a set operation",
                "order by the result's columns",
            )
        else:
            name = f"_ivm_o{len(hidden)}"
            hidden.append((name, flat))
            resolved = _plain_column(name)
    if isinstance(term, exp.Ordered):
        ordered = term.copy()
        ordered.set("this", resolved)
        return ordered
    return resolved


def _limited(node: exp.Expr, relation: Operator, order: list[exp.Expr]) -> Operator:
    """``relation`` under the node's LIMIT and OFFSET (a top-N), if it has them."""
    limit, offset = limit_value(node, "limit"), limit_value(node, "offset")
    if limit is None and offset is None:
        return relation
    if not order:
        raise UnsupportedSQLError(
            "LIMIT without ORDER BY",
            "which rows it keeps is arbitrary; ORDER BY columns that identify a row",
        )
    return TopN(relation, tuple(o for o in order if isinstance(o, exp.Ordered)), limit, offset or 0)


def _windows(
    relation: Operator,
    outputs: list[tuple[str, exp.Expr]],
    hidden: list[tuple[str, exp.Expr]],
    qualify: exp.Expr | None,
) -> tuple[Operator, list[tuple[str, exp.Expr]], list[tuple[str, exp.Expr]]]:
    """The block's window calls as Window operators over ``relation`` (one per partitioning,
    stacked; QUALIFY in the last), and the outputs reading their columns."""
    calls = window_calls([*(e for _, e in outputs), *(e for _, e in hidden), qualify])
    if not calls:
        if qualify is not None:
            relation = Filter(relation, qualify)
        return relation, outputs, hidden
    columns = {expr_sql(c): f"_ivm_w{i}" for i, c in enumerate(calls)}
    groups: dict[tuple[str, ...], list[exp.Window]] = {}
    for call in calls:
        groups.setdefault(partition_key(call), []).append(call)
    for position, group in enumerate(groups.values()):
        last = position == len(groups) - 1
        relation = Window(
            relation,
            tuple(group[0].args.get("partition_by") or []),
            tuple((columns[expr_sql(c)], c.copy()) for c in group),
            replace_calls(qualify, columns) if last and qualify is not None else None,
        )
    return (
        relation,
        [(n, replace_calls(e, columns)) for n, e in outputs],
        [(n, replace_calls(e, columns)) for n, e in hidden],
    )


def _distinct(relation: Operator) -> Operator:
    """SELECT DISTINCT over computed rows (windows, aggregates): a GROUP BY of every column."""
    keys = tuple(_plain_column(c) for c in relation.columns)
    return Project(
        Aggregate(relation, keys, ()),
        tuple((c, _plain_column(key_name(i))) for i, c in enumerate(relation.columns)),
    )


def _distinct_on(relation: Operator, on: list[exp.Expr], order: list[exp.Expr]) -> Operator:
    """DISTINCT ON (e): the first row of each group of ``e`` in the ORDER BY, i.e.
    ``QUALIFY row_number() OVER (PARTITION BY e ORDER BY ...) = 1``."""
    call = exp.Window(
        this=exp.RowNumber(),
        partition_by=[e.copy() for e in on],
        order=exp.Order(expressions=[o.copy() for o in order]) if order else None,
        over="OVER",
    )
    first = exp.EQ(this=_plain_column(_ROW_NUMBER), expression=exp.Literal.number(1))
    window = Window(relation, tuple(on), ((_ROW_NUMBER, call),), first)
    return Project(window, tuple((c, _plain_column(c)) for c in relation.columns))


def _grouping_calls(expressions: list[exp.Expr]) -> list[exp.Expr]:
    found: dict[str, exp.Expr] = {}
    for expression in expressions:
        for node in expression.find_all(*_GROUPING_CALLS):
            found.setdefault(expr_sql(node), node)
    return list(found.values())


def _function_call(item: exp.Expr) -> exp.Expr | None:
    """The table function a FROM item calls (``range``, ``generate_series``, ``unnest``)."""
    if isinstance(item, exp.Table) and isinstance(item.this, exp.GenerateSeries | exp.Unnest):
        return item.this.copy()
    if isinstance(item, exp.Unnest):
        call = item.copy()
        call.set("alias", None)
        return call
    return None


def _function_columns(item: exp.Expr) -> tuple[str, ...]:
    alias = item.args.get("alias")
    names = tuple(c.name for c in alias.columns) if isinstance(alias, exp.TableAlias) else ()
    if not names:
        raise UnsupportedSQLError(f"{expr_sql(item)} in FROM", "name its columns: AS f(x)")
    return names


def _is_lateral_function(item: exp.Expr) -> bool:
    """A table function of each row of the FROM items to its left (its arguments read them)."""
    call = _function_call(item)
    return call is not None and call.find(exp.Column) is not None


def _expand(left: JoinInput, join: exp.Join, kind: str) -> Operator:
    on = join.args.get("on")
    if kind not in ("INNER", "CROSS") or not (on is None or on == exp.true()):
        raise UnsupportedSQLError(
            f"{kind} of a table function of each row", "write FROM t, unnest(t.list) AS u(x)"
        )
    call = _function_call(join.this)
    assert call is not None
    return Expand(left.node, _flatten(call), join.this.alias_or_name, _function_columns(join.this))


def _constant(item: exp.Expr) -> Constant | None:
    """VALUES, or a table function whose arguments are constants, as a relation."""
    call = _function_call(item)
    if not isinstance(item, exp.Values) and (call is None or call.find(exp.Column)):
        return None
    return Constant(expr_sql(item), _function_columns(item))


def join_kind(join: exp.Join) -> str:
    """The join's kind as SQL names it: ``INNER``, ``CROSS``, ``LEFT OUTER JOIN``, ..."""
    side = (join.args.get("side") or "").upper()
    kind = (join.args.get("kind") or "").upper()
    if join.args.get("method"):
        return f"{join.args['method'].upper()} {side + ' OUTER ' if side else ''}JOIN"
    if join.args.get("using"):
        raise UnsupportedSQLError("JOIN ... USING that could not be resolved")
    if side:
        return f"{side} OUTER JOIN"
    if kind in ("", "INNER"):
        return "INNER"
    if kind == "CROSS":
        return "CROSS"
    return f"{kind} JOIN"


def _plain_column(name: str) -> exp.Column:
    return exp.column(exp.to_identifier(name, quoted=True))


def _referenced_columns(select: exp.Select) -> dict[str, list[str]]:
    """Columns each FROM alias must provide, in first-use order (those that correlated
    subqueries read included, those of the subqueries' own tables not)."""
    found: dict[str, list[str]] = {}
    parts: list[exp.Expr] = list(select.expressions)
    clauses = ("where", "group", "having", "qualify", "order", "distinct")
    parts += [select.args[k] for k in clauses if select.args.get(k)]
    joins = list(select.find_all(exp.Join))
    parts += [j.args["on"] for j in joins if j.args.get("on")]
    parts += [j.this for j in joins if _is_lateral_function(j.this)]
    for part in parts:
        for column in part.find_all(exp.Column):
            if column.table and owner(column) is not select:
                continue
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


def _is_aggregate_call(node: exp.Expr) -> bool:
    return isinstance(node, exp.AggFunc) or (
        isinstance(node, exp.Filter) and isinstance(node.this, exp.AggFunc)
    )


def _has_aggregate(expressions: list[exp.Expr], having: exp.Expr | None) -> bool:
    candidates = [*expressions, *([having] if having is not None else [])]
    return any(_is_aggregate(n) for e in candidates for n in outside_subqueries(e))


def _is_aggregate(node: exp.Expr) -> bool:
    """An aggregate of the SELECT block (``sum`` of ``sum(x) OVER ()`` is a window's)."""
    return isinstance(node, exp.AggFunc) and not is_window_function(node)


def _group_keys(group: exp.Group | None, outputs: list[exp.Expr]) -> list[exp.Expr]:
    if group is None:
        return []
    if group.args.get("all"):
        return [
            e
            for e in outputs
            if not e.find(exp.Window) and not any(_is_aggregate(n) for n in e.walk())
        ]
    return [_flatten(e) for e in group.expressions]


def _aggregate_calls(outputs: list[exp.Expr], having: exp.Expr | None) -> list[exp.Expr]:
    calls: dict[str, exp.Expr] = {}
    for expression in [*outputs, *([having] if having is not None else [])]:
        for node in expression.walk():
            if (
                _is_aggregate_call(node)
                and not _inside_aggregate(node)
                and not is_window_function(node)
            ):
                check_aggregate(node)
                calls.setdefault(node.sql(dialect="duckdb"), node)
    return list(calls.values())


def _inside_aggregate(node: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None:
        if _is_aggregate_call(parent) and not is_window_function(parent):
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
        if _is_aggregate_call(node) and text in agg_index and not is_window_function(node):
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
