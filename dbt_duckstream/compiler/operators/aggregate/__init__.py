"""Aggregate: per-group state in a table beside the model, brought forward by each run.

    view:   SELECT k, SUM(v) FROM r GROUP BY k
    state:  k, _ivm_count, sum, n                      (one row per group, at the cursor)
    delta:  touched := fold(delta(r)) merged into the stored rows of the groups it touches
            SELECT finals FROM state SEMI JOIN touched   with -1
            UNION ALL
            SELECT finals FROM touched WHERE live         with +1

When every call folds, a touched row also carries the stored row it merged (its row id and
values): the retraction reads those, and the state's rows are deleted by id.

Each aggregate call has an accumulator (``accumulators/``): COUNT, SUM and AVG fold the delta
into their state, MIN and MAX too unless a group lost a row at its extreme; anything else
(``COUNT(DISTINCT)``, ``stddev``, ...) is recomputed for the touched groups from the input at
the new snapshot. The choice is made here, once per aggregate: every call folds, or the touched
groups are recomputed whole.

The old rows of the touched groups are read from the state table, never recomputed, and every
row the aggregate emits is computed from a stored state row by the same expressions: a later
retraction matches the stored row exactly, floating-point sums included (a recomputation of the
same sum by another plan may differ in its last bits). A group lives while its row count is
positive; a global aggregate (no keys) always has its one row.

Output columns are ``_ivm_g<i>`` for keys and ``_ivm_a<j>`` for aggregate calls; a projection
above maps them to the names the user wrote.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT k, sum(v) AS s, count(*) AS n FROM t GROUP BY k",
...     {"t": ("k INTEGER, v DOUBLE", "(1, 0.1), (1, 0.2), (2, 5)")},
...     "DELETE FROM t WHERE k = 2; INSERT INTO t VALUES (1, 0.3)",
... )
-1 (1, 0.30000000000000004, 2)
-1 (2, 5.0, 1)
+1 (1, 0.6000000000000001, 3)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ....sql import TableRef, column_list, expr_sql, keyed_join, quote, same_key, same_values
from ...render import MULT, Mode, RenderContext, Side
from ..base import DeltaReads, Operator, RowsOf, narrowed
from ..touched import key_name as touched_key
from ..touched import restrict, touched_keys
from .accumulators import ROW_COUNT, Accumulator, accumulator_for


def key_name(i: int) -> str:
    return f"_ivm_g{i}"


def agg_name(j: int) -> str:
    return f"_ivm_a{j}"


#: in a touched row of a folding aggregate, the row id of the stored row it replaces (NULL
#: for a new group): the run deletes by it, reading no column of the state table
STORED_ROWID = "_ivm_stored"


def before_name(column: str) -> str:
    """A touched row's copy of the stored value of a state column (what the run retracts)."""
    return f"_ivm_before{column.removeprefix('_ivm')}"


@dataclass(eq=False)
class Aggregate(Operator):
    child: Operator
    keys: tuple[exp.Expr, ...]
    aggregates: tuple[exp.Expr, ...]
    #: where the per-group state lives (assigned when the plan is compiled)
    state_table: TableRef | None = None
    accumulators: tuple[Accumulator, ...] = field(init=False)
    kind = "aggregate"

    def __post_init__(self) -> None:
        self.accumulators = tuple(accumulator_for(j, a) for j, a in enumerate(self.aggregates))

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(key_name(i) for i in range(len(self.keys))) + tuple(
            agg_name(j) for j in range(len(self.aggregates))
        )

    @property
    def children(self) -> tuple[Operator, ...]:
        return (self.child,)

    @property
    def stored(self) -> bool:
        return True

    @property
    def folds(self) -> bool:
        """Whether a delta folds into the state (else touched groups are recomputed)."""
        return all(a.folds for a in self.accumulators)

    @property
    def strategy(self) -> str:
        return "accumulators" if self.folds else "key-scoped recomputation"

    def delta_reads(self, changed: frozenset[str], rows: RowsOf) -> DeltaReads:
        """Without a fold, the touched groups are recomputed from the input at the new
        snapshot."""
        return DeltaReads() if self.folds else DeltaReads(rows(self.child))

    # -- names -------------------------------------------------------------------------------

    @property
    def key_columns(self) -> tuple[str, ...]:
        return tuple(key_name(i) for i in range(len(self.keys)))

    @property
    def state_columns(self) -> tuple[str, ...]:
        return (*self.key_columns, ROW_COUNT, *(c for a in self.accumulators for c in a.columns))

    @property
    def carries_stored(self) -> bool:
        """Whether touched rows carry their stored row (id and values): the merge that folds
        the delta reads it anyway, and reading it again to retract and to delete it cost two
        scans of the state table per run (TPC-H Q10 at SF10: 380k groups, 80 ms each; a
        global aggregate's one row, a DuckLake read of 10-15 ms from a fresh process)."""
        return self.folds

    @property
    def stored_columns(self) -> tuple[str, ...]:
        """The state columns a touched row carries the stored values of."""
        return (ROW_COUNT, *(c for a in self.accumulators for c in a.columns))

    def _stored_join(
        self, ctx: RenderContext, select: str, join: str, groups: str, stored_first: bool = True
    ) -> str:
        """The state table ``s`` joined with ``groups`` (aliased ``t``, or ``d`` when it comes
        first) on the group columns. A large state table is read by key range: its rows are
        sorted by the first group column when built, and ``keyed_join`` matches by ``=``."""
        table = self.state_table_sql()
        assert self.state_table is not None
        if self.keys and self.state_table.key in ctx.large:
            if stored_first:
                return keyed_join(select, table, join, groups, self.key_columns)
            return keyed_join(
                select, groups, join, table, self.key_columns, aliases=("d", "s"), split="left"
            )
        if stored_first:
            on = same_key("s", "t", self.key_columns, empty="TRUE")
            return f"SELECT {select} FROM {table} AS s {join} JOIN {groups} AS t ON {on}"
        on = same_key("s", "d", self.key_columns, empty="TRUE")
        return f"SELECT {select} FROM {groups} AS d {join} JOIN {table} AS s ON {on}"

    # -- SQL pieces ----------------------------------------------------------------------------

    def _group_by(self) -> str:
        return " GROUP BY " + ", ".join(expr_sql(k) for k in self.keys) if self.keys else ""

    def _key_select(self) -> list[str]:
        return [f"{expr_sql(k)} AS {quote(key_name(i))}" for i, k in enumerate(self.keys)]

    def _state_query(self, source: str, accumulators: tuple[Accumulator, ...]) -> str:
        """State rows of ``accumulators`` (and the row count) from input rows."""
        parts = [*self._key_select(), f"count(*) AS {ROW_COUNT}"]
        parts += [part for a in accumulators for part in a.initial()]
        return f"SELECT {', '.join(parts)} FROM {source}{self._group_by()}"

    def _finals(self, relation: str) -> str:
        """The aggregate's output rows from live state rows of ``relation``."""
        finals = [quote(c) for c in self.key_columns]
        finals += [f"{a.final()} AS {quote(agg_name(a.index))}" for a in self.accumulators]
        live = f" WHERE {ROW_COUNT} > 0" if self.keys else ""
        return f"SELECT {', '.join(finals)} FROM {relation}{live}"

    # -- renderings ------------------------------------------------------------------------------

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        if ctx.mode is Mode.RECOMPUTE:
            calls = [
                f"{expr_sql(a)} AS {quote(agg_name(j))}" for j, a in enumerate(self.aggregates)
            ]
            select = ", ".join([*self._key_select(), *calls])
            return f"SELECT {select} FROM {self.child.state(ctx, side)}{self._group_by()}"
        if ctx.mode is Mode.BUILD:
            assert side == "new", "a build reads the new snapshot only"
            return self._finals(self._build(ctx))
        return self._maintained_state(ctx, side)

    def _maintained_state(
        self,
        ctx: RenderContext,
        side: Side,
        keys: tuple[tuple[str, str], ...] = (),
        relation: str = "",
    ) -> str:
        """The aggregate's rows at ``side`` in a maintenance run: its stored groups, at the
        new snapshot with the touched ones replaced by their new state; with ``keys``, only
        the groups whose columns ``keys`` occur in ``relation``."""
        stored = narrowed(self.state_table_sql(), keys, relation)
        if side == "old" or not self.changes_in(ctx):
            return self._finals(stored)
        touched = self._touched(ctx)
        match = same_key("s", "t", self.key_columns, empty="TRUE")
        kept = f"SELECT s.* FROM {stored} AS s ANTI JOIN {touched} AS t ON {match}"
        if not self.keys:
            kept = f"SELECT * FROM {stored} WHERE FALSE"
        fresh = f"SELECT {column_list(self.state_columns)} FROM {touched}"
        if keys:
            fresh = f"SELECT * FROM {narrowed(f'({fresh})', keys, relation)}"
        return self._finals(f"({kept} UNION ALL {fresh})")

    def state_near(
        self,
        ctx: RenderContext,
        side: Side,
        keys: tuple[tuple[str, str], ...],
        relation: str,
        above: exp.Expr | None = None,
    ) -> str:
        """Keys among the group columns narrow the reads of the state table (a few groups
        of a large one: TPC-H Q18's ``IN (... GROUP BY ... HAVING ...)``)."""
        if ctx.mode is not Mode.MAINTAIN or not self.narrows_state(keys):
            return super().state_near(ctx, side, keys, relation, above)
        return f"({self._maintained_state(ctx, side, keys, relation)})"

    def narrows_state(self, keys: tuple[tuple[str, str], ...]) -> bool:
        """Whether ``keys`` are group columns, which a maintenance run reads from the state
        table by key."""
        return bool(keys) and all(k in self.key_columns for k, _ in keys)

    def render_delta(self, ctx: RenderContext) -> str | None:
        if self.child.delta(ctx) is None:
            return None
        touched = self._touched(ctx)
        if self.carries_stored:
            before = [quote(c) for c in self.key_columns]
            before += [f"{quote(before_name(c))} AS {quote(c)}" for c in self.stored_columns]
            stored = f"SELECT {', '.join(before)} FROM {touched} WHERE {STORED_ROWID} IS NOT NULL"
            old = self._finals(f"({stored})")
        else:
            old = self._finals(f"({self._stored_join(ctx, 's.*', 'SEMI', touched)})")
        new = self._finals(touched)
        return f"SELECT *, -1 AS {MULT} FROM ({old})\nUNION ALL\nSELECT *, 1 AS {MULT} FROM ({new})"

    # -- build -----------------------------------------------------------------------------------

    def _build(self, ctx: RenderContext) -> str:
        def create() -> str:
            query = ctx.query(self._state_query(self.child.state(ctx, "new"), self.accumulators))
            if self.keys:  # clustered by key: a keyed read skips row groups (``_stored_join``)
                query = f"SELECT * FROM ({query}) ORDER BY {quote(self.key_columns[0])}"
            return ctx.state_table(self.state_table_sql(), query)

        name = ctx.once(self.node_id, "build", create)
        assert name is not None
        return name

    # -- maintenance -----------------------------------------------------------------------------

    def _touched(self, ctx: RenderContext) -> str:
        """A temporary table: the new state rows of every group the delta touches (a group
        that vanished has a row count of 0); and, at the end of the run, the state table
        brought to the new snapshot from it."""

        def compute() -> str:
            delta = self.child.delta(ctx)
            assert delta is not None
            sql = self._folded(ctx, delta) if self.folds else self._recomputed(ctx, delta)
            touched = ctx.temp(f"{self.name}_touched", sql)
            self._write(ctx, touched)
            return touched

        name = ctx.once(self.node_id, "touched", compute)
        assert name is not None
        return name

    def _write(self, ctx: RenderContext, touched: str) -> None:
        table, columns = self.state_table_sql(), column_list(self.state_columns)
        if self.keys and self.carries_stored:
            replaced = f"SELECT {STORED_ROWID} FROM {touched} WHERE {STORED_ROWID} IS NOT NULL"
            ctx.write(f"DELETE FROM {table} WHERE rowid IN ({replaced})", unless_empty=touched)
            live = f" WHERE {ROW_COUNT} > 0"
        elif self.keys:
            matched = self._stored_join(ctx, "s.rowid", "SEMI", touched)
            ctx.write(f"DELETE FROM {table} WHERE rowid IN ({matched})", unless_empty=touched)
            live = f" WHERE {ROW_COUNT} > 0"
        else:  # the one group's row is always touched
            ctx.write(f"DELETE FROM {table}")
            live = ""
        inserted = f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {touched}{live}"
        ctx.write(inserted, unless_empty=touched if self.keys else None)

    def _recomputed(self, ctx: RenderContext, delta: str) -> str:
        """Every touched group's state, recomputed from the input at the new snapshot."""
        source = self.child.state(ctx, "new")
        if not self.keys:
            return self._state_query(source, self.accumulators)
        keys = touched_keys(ctx, f"{self.name}_keys", delta, self.keys)
        recomputed = ctx.cte(
            f"{self.name}_recomputed",
            self._state_query(restrict(source, self.keys, keys), self.accumulators),
        )
        on = same_values(
            (f"k.{quote(touched_key(i))}", f"r.{quote(key_name(i))}") for i in range(len(self.keys))
        )
        values = [
            f"k.{quote(touched_key(i))} AS {quote(key_name(i))}" for i in range(len(self.keys))
        ]
        values.append(f"coalesce(r.{ROW_COUNT}, 0) AS {ROW_COUNT}")
        values += [f"r.{quote(c)}" for a in self.accumulators for c in a.columns]
        return f"SELECT {', '.join(values)} FROM {keys} AS k LEFT JOIN {recomputed} AS r ON {on}"

    def _folded(self, ctx: RenderContext, delta: str) -> str:
        """Every touched group's state: the stored one plus the folded delta; groups that lost
        an extreme are rescanned."""
        fold = [*self._key_select(), f"SUM({MULT}) AS {ROW_COUNT}"]
        fold += [part for a in self.accumulators for part in a.fold()]
        folded = ctx.cte(
            f"{self.name}_fold", f"SELECT {', '.join(fold)} FROM {delta}{self._group_by()}"
        )
        merged = [f"d.{quote(k)}" for k in self.key_columns]
        merged.append(f"coalesce(s.{ROW_COUNT}, 0) + coalesce(d.{ROW_COUNT}, 0) AS {ROW_COUNT}")
        merged += [part for a in self.accumulators for part in a.merge("s", "d")]
        rescans = [p for a in self.accumulators if (p := a.rescan("s", "d")) is not None]
        merged.append(f"{' OR '.join(rescans) or 'FALSE'} AS _ivm_rescan")
        if self.carries_stored:
            merged.append(f"s.rowid AS {STORED_ROWID}")
            merged += [f"s.{quote(c)} AS {quote(before_name(c))}" for c in self.stored_columns]
        merge = self._stored_join(ctx, ", ".join(merged), "LEFT", folded, stored_first=False)
        combined = ctx.cte(f"{self.name}_merge", merge)
        if not rescans:
            return f"SELECT {column_list(self._touched_columns)} FROM {combined}"
        return self._rescanned(ctx, combined)

    @property
    def _carried_columns(self) -> tuple[str, ...]:
        """The touched rows' columns beyond the state's: the stored row they replace."""
        if not self.carries_stored:
            return ()
        return (STORED_ROWID, *map(before_name, self.stored_columns))

    @property
    def _touched_columns(self) -> tuple[str, ...]:
        return self.state_columns + self._carried_columns

    def _rescanned(self, ctx: RenderContext, combined: str) -> str:
        """Recompute the extremes of the groups whose delta removed one, at the new snapshot."""
        extremes = tuple(a for a in self.accumulators if a.rescan("s", "d") is not None)
        source = self.child.state(ctx, "new")
        if self.keys:
            wanted = ctx.cte(
                f"{self.name}_rescan_keys",
                "SELECT "
                + ", ".join(
                    f"{quote(key_name(i))} AS {quote(touched_key(i))}"
                    for i in range(len(self.keys))
                )
                + f" FROM {combined} WHERE _ivm_rescan",
            )
            source = restrict(source, self.keys, wanted)
        rescanned = ctx.cte(f"{self.name}_rescan", self._state_query(source, extremes))
        rescanned_columns = {c for a in extremes for c in a.columns}
        select = [f"c.{quote(c)}" for c in (*self.key_columns, ROW_COUNT)]
        for c in (c for a in self.accumulators for c in a.columns):
            name = quote(c)
            if c in rescanned_columns:
                name = f"CASE WHEN c._ivm_rescan THEN r.{name} ELSE c.{name} END AS {name}"
            select.append(name if c in rescanned_columns else f"c.{name}")
        select += [f"c.{quote(c)}" for c in self._carried_columns]
        on = same_key("c", "r", self.key_columns)
        return f"SELECT {', '.join(select)} FROM {combined} AS c LEFT JOIN {rescanned} AS r ON {on}"
