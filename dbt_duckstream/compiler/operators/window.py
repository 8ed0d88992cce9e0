"""Window: recompute the partitions the input delta touches, and diff.

    view:   SELECT *, f(...) OVER (PARTITION BY p ORDER BY o) AS w FROM r [QUALIFY q]
    keys:   SELECT DISTINCT p FROM delta(r)
    delta:  the stored rows of the touched partitions                    with -1
            UNION ALL
            SELECT *, f(...) OVER (...) FROM r@new SEMI JOIN keys [QUALIFY q]  with +1

A row's window values depend on every row of its partition and on nothing else, so only the
partitions the delta touches can change. The old rows of those partitions are read from the
operator's state table (``stored``): a second evaluation would not reproduce them bit for bit
where the values depend on the order rows are read in (a running sum over DOUBLEs) or where
ties in the window's ORDER BY let ``row_number()``, ``lag()``, ``first_value()`` or a ROWS
frame pick either row. Windows whose every value is a function of the partition's rows alone
(``rank``, ``dense_rank``, ``percent_rank``, ``cume_dist``, ``count``) keep no state and
recompute the old rows of the touched partitions from the input at the old snapshot.

Ties: each partition is stored as one evaluation of the SQL produced it, so the maintained
table is always a valid result of the model's SQL, and a partition no change touches keeps
its order. Where the ORDER BY leaves rows tied, a recomputation may pick another valid result,
as two runs of the same query may: ``compiler/ties.py`` says which outputs that changes, and
the consistency check compares them by what stays fixed.

A window without PARTITION BY is one partition: any change recomputes it whole (``explain``
and the run line say so, and the choice between maintaining and rebuilding weighs it). A
QUALIFY predicate is applied here, so the state holds only the rows that pass it (one row per
partition for ``QUALIFY row_number() OVER (...) = 1``). The delta is consolidated, so rows of a
touched partition that did not change do not reach the operators above.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT id, g, sum(v) OVER (PARTITION BY g ORDER BY id) AS running FROM t",
...     {"t": ("id INTEGER, g VARCHAR, v DOUBLE", "(1, 'a', 0.1), (2, 'a', 0.2), (3, 'b', 1)")},
...     "INSERT INTO t VALUES (0, 'a', 0.5)",
... )
-1 (1, 'a', 0.1)
-1 (2, 'a', 0.30000000000000004)
+1 (0, 'a', 0.5)
+1 (1, 'a', 0.6)
+1 (2, 'a', 0.8)
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ...sql import expr_sql, quote
from ..render import Mode, RenderContext, Side
from .base import DeltaReads, Operator, RowsOf
from .stored import build_state, consolidated, replace_stored, retract_assert
from .touched import key_scoped_delta, restrict, touched_keys

#: window functions whose value is a function of the partition's rows alone, whatever the
#: order rows are read in and however ties fall
_ORDER_FREE = (exp.Rank, exp.DenseRank, exp.PercentRank, exp.CumeDist, exp.Count)


@dataclass(eq=False)
class Window(Operator):
    child: Operator
    #: PARTITION BY expressions shared by every function, over the child's columns
    partition: tuple[exp.Expr, ...]
    #: (output column, windowed call ``f(...) OVER (...)``) over the child's columns
    functions: tuple[tuple[str, exp.Expr], ...]
    #: QUALIFY predicate over the child's and the functions' columns
    qualify: exp.Expr | None = None
    kind = "window"

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.child.columns, *(name for name, _ in self.functions))

    @property
    def children(self) -> tuple[Operator, ...]:
        return (self.child,)

    @property
    def stored(self) -> bool:
        return not all(_order_free(call) for _, call in self.functions)

    @property
    def strategy(self) -> str:
        scope = (
            "one partition (no PARTITION BY): recomputed in full on every change"
            if not self.partition
            else "touched partitions recomputed"
        )
        return f"{scope}; old rows {'stored' if self.stored else 'recomputed'}"

    def recomputed_in_full(self) -> str | None:
        return None if self.partition else f"{self.name} (window without PARTITION BY)"

    def delta_reads(self, changed: frozenset[str], rows: RowsOf) -> DeltaReads:
        """The touched partitions are recomputed from the input at the new snapshot (and
        at the old one too, without stored rows); without PARTITION BY that is every row,
        stored again."""
        read = rows(self.child)
        return DeltaReads(read * (1 if self.stored else 2), 0 if self.partition else read)

    def _compute(self, source: str) -> str:
        """The window's rows over a FROM item of the child's rows."""
        calls = ", ".join(f"{expr_sql(call)} AS {quote(name)}" for name, call in self.functions)
        rows = f"SELECT *, {calls} FROM {source}"
        if self.qualify is None:
            return rows
        return f"SELECT * FROM ({rows}) WHERE {expr_sql(self.qualify)}"

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        if ctx.mode is Mode.RECOMPUTE or not self.stored:
            return self._compute(self.child.state(ctx, side))
        if ctx.mode is Mode.BUILD:
            rows = self._compute(self.child.state(ctx, side))
            return f"SELECT * FROM {build_state(ctx, self, rows)}"
        if side == "old" or self.child.delta(ctx) is None:
            return f"SELECT * FROM {self.state_table_sql()}"
        keys, recomputed = self._touched(ctx)
        kept = restrict(self.state_table_sql(), self.partition, keys, anti=True)
        return f"SELECT * FROM {kept}\nUNION ALL\nSELECT * FROM {recomputed}"

    def render_delta(self, ctx: RenderContext) -> str | None:
        if self.child.delta(ctx) is None:
            return None
        if not self.stored:
            delta = key_scoped_delta(ctx, self.name, self.child, self.partition, self._compute)
            assert delta is not None
            return consolidated(delta, self.columns)
        keys, recomputed = self._touched(ctx)
        old = f"SELECT * FROM {restrict(self.state_table_sql(), self.partition, keys)}"
        return consolidated(retract_assert(old, f"SELECT * FROM {recomputed}"), self.columns)

    def _touched(self, ctx: RenderContext) -> tuple[str, str]:
        """Temporary tables of the touched partitions' keys and of their rows recomputed at
        the new snapshot; at the end of the run they replace the stored rows of those keys."""

        def compute() -> str:
            delta = self.child.delta(ctx)
            assert delta is not None
            keys = touched_keys(ctx, f"{self.name}_keys", delta, self.partition, temp=True)
            source = restrict(self.child.state(ctx, "new"), self.partition, keys)
            recomputed = ctx.temp(f"{self.name}_recomputed", self._compute(source))
            stale = restrict(f"{self.state_table_sql()} AS s", self.partition, keys)
            replace_stored(ctx, self, f"SELECT s.rowid FROM {stale}", recomputed, touched=keys)
            return f"{keys}\t{recomputed}"

        found = ctx.once(self.node_id, "touched", compute)
        assert found is not None
        keys, recomputed = found.split("\t")
        return keys, recomputed


def _order_free(call: exp.Expr) -> bool:
    """Whether a windowed call's value is a function of its partition's rows alone."""
    function = call.this
    while isinstance(function, exp.Filter | exp.IgnoreNulls | exp.RespectNulls):
        function = function.this
    if isinstance(function, exp.Count):
        spec = call.args.get("spec")
        return spec is None or str(spec.args.get("kind") or "").upper() != "ROWS"
    return isinstance(function, _ORDER_FREE)
