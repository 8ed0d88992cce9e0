"""Algebraic maintenance of a top-level aggregate through stored accumulators.

When a model ends in ``GROUP BY`` (under an optional HAVING and select list) and every aggregate
is COUNT, SUM, AVG, MIN or MAX (optionally with FILTER), a state table beside the model keeps,
per group, the row count and each aggregate's accumulators:

    COUNT(*)  -> the group's row count     COUNT(x) -> non-null count
    SUM(x)    -> sum and non-null count    AVG(x)   -> sum and non-null count
    MIN/MAX(x) -> the current extreme

A run folds the input delta into the accumulators of the touched groups only:

    touched: SELECT k, SUM(_ivm_m) AS d_count, SUM(x * _ivm_m) AS d_sum, ... FROM delta GROUP BY k
    new:     old accumulators (LEFT JOIN on k) + the delta's

so its cost follows the delta, not the input. MIN/MAX take the least/greatest of the old value
and the inserted values; only a group that lost a row at or beyond its extreme is rescanned at
the new snapshot. SUM is NULL when its non-null count is 0, COUNT of an empty table is 0, and
a group whose row count reaches 0 disappears (a global aggregate keeps its one row).

The model's rows are always computed from the accumulators, so the old row of a group can be
found exactly, even where it holds floating-point values.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from .apply import Maintenance, delete_sql, insert_sql
from .operators import MULT, Aggregate, Filter, Operator, Project, RenderContext, TableRef
from .operators.aggregate import agg_name, key_name
from .operators.base import column_list, expr_sql, quote

COUNT = "_ivm_count"


@dataclass(frozen=True)
class Accumulator:
    """One aggregate call, reduced to a kind and the value it accumulates."""

    kind: str  # "count", "sum", "avg", "min" or "max"
    value: exp.Expr | None  # None: COUNT(*)

    def value_sql(self) -> str:
        return "1" if self.value is None else expr_sql(self.value)


def accumulator(call: exp.Expr) -> Accumulator | None:
    """The accumulator of an aggregate call, or None when it has no algebraic rule."""
    predicate = None
    if isinstance(call, exp.Filter):
        predicate = call.expression.this if isinstance(call.expression, exp.Where) else None
        call = call.this
        if predicate is None:
            return None
    kinds = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
    kind = kinds.get(type(call))
    if kind is None or call.args.get("expressions"):
        return None
    argument = call.this
    if isinstance(argument, exp.Distinct) or (kind != "count" and argument is None):
        return None
    if kind == "count" and (argument is None or isinstance(argument, exp.Star)):
        argument = None if predicate is None else exp.Literal.number(1)
    if predicate is not None:
        argument = exp.If(this=predicate.copy(), true=argument.copy()) if argument else None
    return Accumulator(kind, argument)


@dataclass
class AccumulatedAggregate:
    """The state table and statements of a model whose root is an algebraic aggregate."""

    target: TableRef
    aggregate: Aggregate
    having: exp.Expr | None
    project: Project
    accumulators: tuple[Accumulator, ...]

    @classmethod
    def match(cls, root: Operator, target: TableRef) -> AccumulatedAggregate | None:
        if not isinstance(root, Project):
            return None
        below, having = root.child, None
        if isinstance(below, Filter):
            below, having = below.child, below.predicate
        if not isinstance(below, Aggregate):
            return None
        found = [accumulator(call) for call in below.aggregates]
        if any(a is None for a in found):
            return None
        return cls(target, below, having, root, tuple(a for a in found if a is not None))

    # -- names -------------------------------------------------------------------------------

    @property
    def state_table(self) -> str:
        return state_table_for(self.target).sql()

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(key_name(i) for i in range(len(self.aggregate.keys)))

    def _columns(self, j: int) -> list[str]:
        kind = self.accumulators[j].kind
        return [f"_ivm_s{j}", f"_ivm_n{j}"] if kind in ("sum", "avg") else [f"_ivm_v{j}"]

    @property
    def state_columns(self) -> tuple[str, ...]:
        accumulated = [c for j in range(len(self.accumulators)) for c in self._columns(j)]
        return (*self.keys, COUNT, *accumulated)

    # -- SQL ---------------------------------------------------------------------------------

    def _key_select(self) -> list[str]:
        return [f"{expr_sql(k)} AS {quote(key_name(i))}" for i, k in enumerate(self.aggregate.keys)]

    def _group_by(self) -> str:
        return " GROUP BY ALL" if self.keys else ""

    def state_query(self, ctx: RenderContext) -> str:
        """The state table's rows, from the input at the new snapshot."""
        parts = [*self._key_select(), f"count(*) AS {COUNT}"]
        for j, acc in enumerate(self.accumulators):
            value = acc.value_sql()
            if acc.kind in ("sum", "avg"):
                parts += [f"sum({value}) AS _ivm_s{j}", f"count({value}) AS _ivm_n{j}"]
            elif acc.kind == "count":
                parts.append(f"count({value}) AS _ivm_v{j}")
            else:
                parts.append(f"{acc.kind}({value}) AS _ivm_v{j}")
        source = self.aggregate.child.state(ctx, "new")
        query = f"SELECT {', '.join(parts)} FROM {quote(source)}{self._group_by()}"
        return f"{ctx.with_clause()}{query}"

    def outputs_sql(self, state: str) -> str:
        """The model's rows computed from accumulator rows, with the model's expressions."""
        values = [*self.keys]
        for j, acc in enumerate(self.accumulators):
            if acc.kind == "count" and acc.value is None:
                value = COUNT
            elif acc.kind == "avg":
                value = f"CASE WHEN _ivm_n{j} = 0 THEN NULL ELSE _ivm_s{j}::DOUBLE / _ivm_n{j} END"
            elif acc.kind == "sum":
                value = f"_ivm_s{j}"
            else:
                value = f"_ivm_v{j}"
            values.append(f"{value} AS {quote(agg_name(j))}")
        inner = f"SELECT {', '.join(values)} FROM {state}"
        select = ", ".join(f"{expr_sql(e)} AS {quote(n)}" for n, e in self.project.outputs)
        where = f" WHERE {expr_sql(self.having)}" if self.having is not None else ""
        return f"SELECT {select} FROM ({inner}){where}"

    def _live(self, state: str) -> str:
        """State rows that stand for a model row (a global aggregate always has one)."""
        return state if not self.keys else f"(SELECT * FROM {state} WHERE {COUNT} > 0)"

    def _touched_sql(self, ctx: RenderContext, delta: str) -> str:
        """Folded accumulators of every group the delta touches (row count may be 0)."""
        fold = [*self._key_select(), f"SUM({MULT}) AS d_count"]
        for j, acc in enumerate(self.accumulators):
            value = acc.value_sql()
            nonnull = f"SUM(CASE WHEN ({value}) IS NOT NULL THEN {MULT} ELSE 0 END)"
            if acc.kind in ("sum", "avg"):
                fold += [f"SUM(({value}) * {MULT}) AS d_s{j}", f"{nonnull} AS d_n{j}"]
            elif acc.kind == "count":
                fold.append(f"{nonnull} AS d_v{j}")
            else:
                fold += [
                    f"{acc.kind}({value}) FILTER (WHERE {MULT} > 0) AS d_in{j}",
                    f"{acc.kind}({value}) FILTER (WHERE {MULT} < 0) AS d_out{j}",
                ]
        folded = ctx.cte(
            "accumulate_fold", f"SELECT {', '.join(fold)} FROM {delta}" + self._group_by()
        )
        join = " AND ".join(f"s.{quote(k)} IS NOT DISTINCT FROM d.{quote(k)}" for k in self.keys)
        on = join or "TRUE"
        merged = [*(f"d.{quote(k)}" for k in self.keys)]
        merged.append(f"coalesce(s.{COUNT}, 0) + coalesce(d.d_count, 0) AS {COUNT}")
        rescan = []
        for j, acc in enumerate(self.accumulators):
            if acc.kind in ("sum", "avg"):
                n = f"coalesce(s._ivm_n{j}, 0) + coalesce(d.d_n{j}, 0)"
                merged += [
                    f"CASE WHEN {n} = 0 THEN NULL ELSE coalesce(s._ivm_s{j}, 0) "
                    f"+ coalesce(d.d_s{j}, 0) END AS _ivm_s{j}",
                    f"{n} AS _ivm_n{j}",
                ]
            elif acc.kind == "count":
                merged.append(f"coalesce(s._ivm_v{j}, 0) + coalesce(d.d_v{j}, 0) AS _ivm_v{j}")
            else:
                beyond = "<=" if acc.kind == "min" else ">="
                lost = f"d.d_out{j} {beyond} s._ivm_v{j}"
                rescan.append(lost)
                pick = "least" if acc.kind == "min" else "greatest"
                merged.append(f"{pick}(s._ivm_v{j}, d.d_in{j}) AS _ivm_v{j}")
        needs = " OR ".join(f"coalesce({c}, FALSE)" for c in rescan) or "FALSE"
        merged.append(f"{needs} AS _ivm_rescan")
        source = f"{folded} AS d"
        combined = ctx.cte(
            "accumulate_merge",
            f"SELECT {', '.join(merged)} FROM {source} LEFT JOIN {self.state_table} AS s ON {on}",
        )
        if not rescan:
            return f"SELECT {column_list(self.state_columns)} FROM {combined}"
        return self._with_rescan(ctx, combined)

    def _with_rescan(self, ctx: RenderContext, combined: str) -> str:
        """Recompute MIN/MAX at the new snapshot for the groups that lost their extreme."""
        extremes = [j for j, a in enumerate(self.accumulators) if a.kind in ("min", "max")]
        source = self.aggregate.child.state(ctx, "new")
        wanted = ctx.cte(
            "accumulate_rescan_keys",
            f"SELECT {column_list(self.keys) or '1 AS one'} FROM {combined} WHERE _ivm_rescan",
        )
        match = (
            " AND ".join(
                f"({expr_sql(k)}) IS NOT DISTINCT FROM w.{quote(key_name(i))}"
                for i, k in enumerate(self.aggregate.keys)
            )
            or "TRUE"
        )
        values = ", ".join(
            f"{self.accumulators[j].kind}({self.accumulators[j].value_sql()}) AS _ivm_v{j}"
            for j in extremes
        )
        rescanned = ctx.cte(
            "accumulate_rescan",
            f"SELECT {', '.join([*self._key_select(), values])} FROM {quote(source)} "
            f"SEMI JOIN {wanted} AS w ON {match}{self._group_by()}",
        )
        join = " AND ".join(f"c.{quote(k)} IS NOT DISTINCT FROM r.{quote(k)}" for k in self.keys)
        select = [f"c.{quote(c)}" for c in (*self.keys, COUNT)]
        for j in range(len(self.accumulators)):
            if j in extremes:
                select.append(
                    f"CASE WHEN c._ivm_rescan THEN r._ivm_v{j} ELSE c._ivm_v{j} END AS _ivm_v{j}"
                )
            else:
                select += [f"c.{quote(c)}" for c in self._columns(j)]
        return (
            f"SELECT {', '.join(select)} FROM {combined} AS c "
            f"LEFT JOIN {rescanned} AS r ON {join or 'TRUE'}"
        )

    def build_sql(
        self, ctx: RenderContext, columns: tuple[str, ...], *, refill: bool = False
    ) -> list[str]:
        """Rebuild: the state table from the input, then the model's rows from the state."""
        if refill:
            state = [
                f"DELETE FROM {self.state_table}",
                f"INSERT INTO {self.state_table} {self.state_query(ctx)}",
            ]
        else:
            state = [
                f"DROP TABLE IF EXISTS {self.state_table}",
                f"CREATE TABLE {self.state_table} AS {self.state_query(ctx)}",
            ]
        live = self._live(self.state_table)
        return [*state, f"INSERT INTO {self.target.sql()} {self.outputs_sql(live)}"]

    def maintenance(
        self,
        ctx: RenderContext,
        columns: tuple[str, ...],
        keys: tuple[str, ...] | None,
        delta_table: str,
    ) -> Maintenance | None:
        """Fold the delta into the state, derive the model's delta from it, apply both."""
        delta = self.aggregate.child.delta(ctx)
        if delta is None:
            return None
        body = self._touched_sql(ctx, delta)
        touched = quote(f"_ivm_touched_{self.target.name}")
        match = (
            " AND ".join(f"s.{quote(k)} IS NOT DISTINCT FROM t.{quote(k)}" for k in self.keys)
            or "TRUE"
        )
        old_state = f"(SELECT s.* FROM {self.state_table} AS s SEMI JOIN {touched} AS t ON {match})"
        names = column_list(columns)
        old_rows = self.outputs_sql(self._live(old_state))
        new_rows = self.outputs_sql(self._live(touched))
        inner = [quote(n) for n, _ in self.project.outputs]
        renamed = ", ".join(f"{i} AS {quote(c)}" for i, c in zip(inner, columns, strict=True))
        return Maintenance(
            build=[
                f"CREATE OR REPLACE TEMP TABLE {touched} AS\n{ctx.with_clause()}{body}",
                f"CREATE OR REPLACE TEMP TABLE {delta_table} AS\n"
                f"SELECT {names}, SUM({MULT})::BIGINT AS {MULT} FROM (\n"
                f"  SELECT {renamed}, -1 AS {MULT} FROM ({old_rows})\n"
                f"  UNION ALL\n"
                f"  SELECT {renamed}, 1 AS {MULT} FROM ({new_rows})\n"
                f") GROUP BY ALL HAVING SUM({MULT}) <> 0",
            ],
            apply=[
                delete_sql(self.target.sql(), columns, keys, delta_table),
                insert_sql(self.target.sql(), columns, delta_table),
            ],
            always=[
                f"DELETE FROM {self.state_table} WHERE rowid IN (SELECT s.rowid FROM "
                f"{self.state_table} AS s SEMI JOIN {touched} AS t ON {match})",
                f"INSERT INTO {self.state_table} SELECT * FROM {self._live(touched)}",
            ],
            cleanup=[f"DROP TABLE {touched}", f"DROP TABLE {delta_table}"],
        )


def state_table_for(target: TableRef) -> TableRef:
    """Where a model's accumulators live: beside it, invisible to ``select *`` on the model."""
    return TableRef(target.catalog, target.schema, f"_duckstream_state_{target.name}")
