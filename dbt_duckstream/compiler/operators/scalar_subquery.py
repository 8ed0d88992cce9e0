"""Scalar subquery: each row of the left input with the one row of the right input that has
its key (a correlated subquery, decorrelated), or with the right's single row (uncorrelated).

    view:  SELECT ..., (SELECT count(*) FROM p WHERE p.o = o.id) AS n FROM o
    tree:  the subquery becomes v = SELECT p.o, count(*) FROM p GROUP BY p.o (an Aggregate:
           one row per key, or exactly one row without a key); the view reads
           o LEFT JOIN v ON v.o = o.id, and COUNT of an empty group (no row of v) is 0
    delta: SELECT dl.*, v.* FROM delta(l) AS dl LEFT JOIN v@new ON <keys>
           UNION ALL
           SELECT l.*, v_old.*, -1 ... UNION ALL SELECT l.*, v_new.*, +1
           FROM l@old JOIN (the keys of delta(v) whose row differs in v@old and v@new) ON <keys>

For a fixed ``v`` each row of ``l`` is joined on its own, so ``l``'s change joins ``v@new``.
With ``l`` at the old snapshot, a key of ``v``'s change (``touched.touched_keys``) whose row
differs over the window retracts the rows of ``l@old`` with that key together with its old
row, and asserts them with its new one (no row: NULLs, which the view's expression turns into
the value of an empty group). Keys match with ``=``: a NULL key selects no row of the
subquery, as in SQL. The values joined are always read from ``v`` at a snapshot (an
aggregate's stored state), never recomputed, so a later retraction finds them bit for bit.

When the subquery is not an aggregate, ``v`` counts its rows per key and keeps their least
value, and the view's expression raises DuckDB's error when a row of the outer query meets
more than one, as a recomputation does.

Cost: ``l``'s change looks its keys up in ``v@new``; a change of ``v`` reads ``l@old`` for the
rows with its changed keys (all of ``l`` when uncorrelated: every row's value changed).

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT o.id, (SELECT count(*) FROM p WHERE p.o = o.id) AS n FROM o",
...     {"o": ("id INTEGER", "(1), (2), (NULL)"), "p": ("o INTEGER", "(1), (1), (2)")},
...     "DELETE FROM p WHERE o = 2; INSERT INTO p VALUES (1), (NULL)",
... )
-1 (1, 2)
-1 (2, 1)
+1 (1, 3)
+1 (2, 0)
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ...sql import expr_sql, quote
from ..render import MULT, RenderContext, Side
from .base import DeltaReads, Operator, RowsOf
from .join import JoinInput, TwoInputs, bind_columns, input_name, join_select_list
from .touched import key_name, touched_keys


@dataclass(eq=False)
class ScalarSubquery(TwoInputs, Operator):
    left: JoinInput
    #: one row per value of its key columns (exactly one row when there are none)
    right: JoinInput
    #: pairs of an expression over the left's columns and the right's key column it equals
    keys: tuple[tuple[exp.Expr, str], ...]
    kind = "scalar_subquery"

    def delta_reads(self, changed: frozenset[str], rows: RowsOf) -> DeltaReads:
        """A change of the outer rows reads the subquery's rows, and a change of the
        subquery's re-reads its outer rows."""
        left, right = self.children
        return DeltaReads(
            (rows(right) if left.reads_changed(changed) else 0)
            + (rows(left) if right.reads_changed(changed) else 0)
        )

    def _outer(self, i: int) -> str:
        bound = bind_columns(self.keys[i][0], self.inputs)
        assert bound is not None
        return f"({expr_sql(bound)})"

    def _on(self, right: str) -> str:
        """The left row ``_ivm_in0`` meets the row of ``right`` (named so) with its key."""
        pairs = [f"{self._outer(i)} = {right}.{quote(k)}" for i, (_, k) in enumerate(self.keys)]
        return " AND ".join(pairs) or "TRUE"

    def _join(self, left: str, right: str, multiplicity: bool) -> str:
        select = join_select_list(self.inputs)
        if multiplicity:
            select += f", {input_name(0)}.{MULT} AS {MULT}"
        return (
            f"SELECT {select} FROM {left} AS {input_name(0)} "
            f"LEFT JOIN {right} AS {input_name(1)} ON {self._on(input_name(1))}"
        )

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        return self._join(self.left.node.state(ctx, side), self.right.node.state(ctx, side), False)

    def _changed(self, ctx: RenderContext, delta: str) -> str:
        """The keys of ``delta`` whose row differs over the window, with both rows."""
        node = self.right.node
        keys = [exp.column(exp.to_identifier(k, quoted=True)) for _, k in self.keys]
        columns = node.columns
        select = [f"o.{quote(c)} AS {quote('_ivm_old.' + c)}" for c in columns]
        select += [f"n.{quote(c)} AS {quote('_ivm_new.' + c)}" for c in columns]
        differs = " OR ".join(f"o.{quote(c)} IS DISTINCT FROM n.{quote(c)}" for c in columns)
        old, new = node.state(ctx, "old"), node.state(ctx, "new")
        if not keys:
            source = f"{old} AS o, {new} AS n"
        else:
            touched = touched_keys(ctx, f"{self.name}_keys", delta, keys)
            select[:0] = [f"t.{quote(key_name(i))}" for i in range(len(keys))]

            def on(alias: str) -> str:
                return " AND ".join(
                    f"{alias}.{quote(k)} = t.{quote(key_name(i))}"
                    for i, (_, k) in enumerate(self.keys)
                )

            source = f"{touched} AS t LEFT JOIN {old} AS o ON {on('o')} "
            source += f"LEFT JOIN {new} AS n ON {on('n')}"
        return ctx.cte(
            f"{self.name}_changed", f"SELECT {', '.join(select)} FROM {source} WHERE {differs}"
        )

    def render_delta(self, ctx: RenderContext) -> str | None:
        terms = []
        left_delta = self.left.node.delta(ctx)
        if left_delta is not None:
            terms.append(self._join(left_delta, self.right.node.state(ctx, "new"), True))
        right_delta = self.right.node.delta(ctx)
        if right_delta is not None:
            changed = self._changed(ctx, right_delta)
            on = " AND ".join(
                f"{self._outer(i)} = c.{quote(key_name(i))}" for i in range(len(self.keys))
            )
            left = self.left.node.state(ctx, "old")
            left_select = ", ".join(
                f"{input_name(0)}.{quote(c)} AS {quote(c)}" for c in self.left.columns
            )
            for version, sign in (("_ivm_old", -1), ("_ivm_new", 1)):
                right_select = ", ".join(
                    f"c.{quote(version + '.' + c)} AS {quote(self.right.output(c))}"
                    for c in self.right.node.columns
                )
                terms.append(
                    f"SELECT {left_select}, {right_select}, {sign} AS {MULT} "
                    f"FROM {left} AS {input_name(0)} JOIN {changed} AS c ON {on or 'TRUE'}"
                )
        return "\nUNION ALL\n".join(terms) if terms else None
