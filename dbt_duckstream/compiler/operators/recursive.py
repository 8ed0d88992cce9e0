"""Recursive CTE: evaluated again in full when any of its inputs changed, and diffed against
its stored rows.

    view:   WITH RECURSIVE p AS (anchor UNION [ALL] step(p)) SELECT ... FROM p ...
    state:  the rows of p at the cursor
    delta:  SELECT *, +1 FROM p@new  UNION ALL  SELECT *, -1 FROM stored p   (netted per row)

A fixpoint has no cheap rule for deletes (a row may be derived along several paths), so the
recursive CTE itself is recomputed at the new snapshot whenever a table or CTE it reads
changed; every run that does so says it in its run line. The rest of the model stays
incremental: the operators above it receive only the rows that changed. Its rows are stored,
so the old ones are never recomputed.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "WITH RECURSIVE reach(node) AS (SELECT 1 UNION "
...     "SELECT e.dst FROM reach JOIN edges AS e ON e.src = reach.node) "
...     "SELECT node FROM reach",
...     {"edges": ("src INTEGER, dst INTEGER", "(1, 2), (2, 3), (5, 6)")},
...     "INSERT INTO edges VALUES (3, 5); DELETE FROM edges WHERE src = 1",
... )
-1 (2,)
-1 (3,)
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from ...sql import TableRef, column_list, expr_sql, quote
from ..render import Mode, RenderContext, Side
from .base import DeltaReads, Operator, RowsOf
from .stored import build_state, consolidated, retract_assert


@dataclass(eq=False)
class RecursiveCTE(Operator):
    cte: str
    names: tuple[str, ...]
    #: the CTE's body (anchor UNION [ALL] recursive step), qualified
    body: exp.Expr
    #: CTEs of the model the body reads, by name
    inputs: tuple[tuple[str, Operator], ...]
    #: base tables the body reads
    tables: tuple[TableRef, ...]
    kind = "recursive"

    @property
    def columns(self) -> tuple[str, ...]:
        return self.names

    @property
    def children(self) -> tuple[Operator, ...]:
        return tuple(node for _, node in self.inputs)

    def own_sources(self) -> set[TableRef]:
        return set(self.tables)

    @property
    def stored(self) -> bool:
        return True

    @property
    def strategy(self) -> str:
        return "recomputed in full when an input changes; rows stored"

    def recomputed_in_full(self) -> str | None:
        return f"{self.name} (recursive CTE {self.cte})"

    def delta_reads(self, changed: frozenset[str], rows: RowsOf) -> DeltaReads:
        """Every change recomputes the whole recursion and stores it again."""
        return DeltaReads(rows(self), rows(self))

    def _evaluate(self, ctx: RenderContext, side: Side) -> str:
        """The recursive CTE's rows at ``side``: base tables time-travelled, CTEs rendered."""
        inputs = dict(self.inputs)

        def bind(node: exp.Expr) -> exp.Expr:
            if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
                return node
            alias = exp.TableAlias(this=exp.to_identifier(node.alias_or_name, quoted=True))
            if not node.db and node.name in inputs:
                name = inputs[node.name].state(ctx, side)
                return exp.Subquery(this=sqlglot.parse_one(f"SELECT * FROM {name}"), alias=alias)
            if not node.db:
                return node
            table = TableRef(node.catalog, node.db, node.name)
            version = ctx.version(table.catalog, side)
            read = f"SELECT * FROM {table.sql()} AT (VERSION => {version})"
            return exp.Subquery(this=sqlglot.parse_one(read, read="duckdb"), alias=alias)

        body = expr_sql(self.body.copy().transform(bind))
        name = quote(self.cte)
        # a subquery: the statement may put its own WITH clause in front
        columns = column_list(self.names)
        return f"SELECT * FROM (WITH RECURSIVE {name}({columns}) AS ({body}) SELECT * FROM {name})"

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        if ctx.mode is Mode.RECOMPUTE:
            return self._evaluate(ctx, side)
        if ctx.mode is Mode.BUILD:
            return f"SELECT * FROM {build_state(ctx, self, self._evaluate(ctx, side))}"
        if side == "old" or not self.changes_in(ctx):
            return f"SELECT * FROM {self.state_table_sql()}"
        return f"SELECT * FROM {self._new(ctx)}"

    def render_delta(self, ctx: RenderContext) -> str | None:
        old, new = f"SELECT * FROM {self.state_table_sql()}", f"SELECT * FROM {self._new(ctx)}"
        return consolidated(retract_assert(old, new), self.columns)

    def _new(self, ctx: RenderContext) -> str:
        def compute() -> str:
            new = ctx.temp(f"{self.name}_new", self._evaluate(ctx, "new"))
            ctx.write(f"DELETE FROM {self.state_table_sql()}")
            ctx.write(f"INSERT INTO {self.state_table_sql()} SELECT * FROM {new}")
            return new

        found = ctx.once(self.node_id, "stored rows", compute)
        assert found is not None
        return found
