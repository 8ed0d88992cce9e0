"""Outer joins (LEFT, RIGHT, FULL): the inner join plus the padded rows of each preserved side.

    view:  SELECT ... FROM l LEFT JOIN r ON p
    delta: SELECT ..., dl._ivm_m FROM delta(l) AS dl LEFT JOIN r@new ON p
           UNION ALL
           SELECT ..., dr._ivm_m FROM l@old JOIN delta(r) AS dr ON p
           UNION ALL
           SELECT l.*, NULL..., +1 if l lost its last match, -1 if it gained a first one
           FROM (l@old SEMI JOIN delta(r) ON p) AS l
           WHERE EXISTS (SELECT FROM r@old WHERE p) <> EXISTS (SELECT FROM r@new WHERE p)

``l LEFT JOIN r`` is, for a fixed ``r``, a function of each row of ``l`` alone (its matches,
or one padded row), so ``l``'s change is ``delta(l) LEFT JOIN r@new``. Then, with ``l`` at the
old snapshot, ``r``'s change brings the inner join ``l@old JOIN delta(r)`` and flips the padded
row of the rows of ``l`` whose match count crossed zero, which can only happen to rows that
match a row of ``delta(r)``: those are retracted or asserted by comparing their existence of a
match over ``r@old`` and ``r@new`` (``touched.flipped_rows``). A RIGHT join is the mirror
image, and a FULL join both: each side's change is joined with the other side (padding its own
unmatched rows), and flips the padded rows of the other side it touches. Exact for any mix of
inserts and deletes on both sides, for bags, and for NULL keys (a NULL never matches, so its
row stays padded); ``p`` is applied unchanged, so conditions on one side only
(``ON l.k = r.k AND r.status = 'x'``) and non-equi conditions need nothing else.

Cost: the terms join each delta with the other side's whole state, as the inner join does.
The flips read the changed side's other input in full (``l@old`` for ``delta(r)``) to find
the rows a delta touches, then ``r@old`` and ``r@new`` once each for the rows matching one of
those (a semi join built on the few touched rows), and judge each touched row over these.
With an equality in ``p`` DuckDB hashes all of these; a non-equi condition alone
(``ON l.a < r.b``) makes each a nested-loop (or range) join: up to ``|l| x |delta(r)|`` and
``|r| x |touched|`` comparisons.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT c.id, o.amount FROM c LEFT JOIN o ON o.cid = c.id",
...     {"c": ("id INTEGER", "(1), (2), (NULL)"),
...      "o": ("cid INTEGER, amount INTEGER", "(1, 10), (1, 20)")},
...     "DELETE FROM o WHERE amount = 10; INSERT INTO o VALUES (2, 5); DELETE FROM o WHERE cid = 1",
... )
-1 (1, 10)
-1 (1, 20)
-1 (2, None)
+1 (1, None)
+1 (2, 5)
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ...sql import expr_sql
from ..render import MULT, RenderContext, Side
from .base import DeltaReads, Operator, RowsOf
from .join import JoinInput, TwoInputs, bind_columns, input_name, join_select_list
from .touched import AFTER, flipped_rows


@dataclass(eq=False)
class OuterJoin(TwoInputs, Operator):
    left: JoinInput
    right: JoinInput
    condition: exp.Expr | None
    #: the sides whose unmatched rows are kept, padded with NULLs
    keep_left: bool
    keep_right: bool
    kind = "outer_join"

    @property
    def join_type(self) -> str:
        return {
            (True, False): "LEFT JOIN",
            (False, True): "RIGHT JOIN",
            (True, True): "FULL JOIN",
        }[(self.keep_left, self.keep_right)]

    def _on(self) -> str:
        bound = bind_columns(self.condition, self.inputs)
        return expr_sql(bound) if bound is not None else "TRUE"

    def delta_reads(self, changed: frozenset[str], rows: RowsOf) -> DeltaReads:
        """A changed side's rows are matched against the other side's state; the padded
        rows of the other side are found in its old state and judged over the changed
        side's old and new states."""
        scanned = 0
        left, right = self.children
        for changing, other, pads_other in (
            (left, right, self.keep_right),
            (right, left, self.keep_left),
        ):
            if changing.reads_changed(changed):
                scanned += rows(other)
                if pads_other:
                    scanned += rows(other) + 2 * rows(changing)
        return DeltaReads(scanned)

    def _join(self, left: str, join: str, right: str, multiplicity: int | None) -> str:
        select = join_select_list(self.inputs)
        if multiplicity is not None:
            select += f", {input_name(multiplicity)}.{MULT} AS {MULT}"
        return (
            f"SELECT {select} FROM {left} AS {input_name(0)} "
            f"{join} {right} AS {input_name(1)} ON {self._on()}"
        )

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        return self._join(
            self.left.node.state(ctx, side),
            self.join_type,
            self.right.node.state(ctx, side),
            None,
        )

    def _matched(self, relation: str, alias: int) -> str:
        """Whether the row of the other input has a match among ``relation``'s rows."""
        return f"EXISTS (SELECT 1 FROM {relation} AS {input_name(alias)} WHERE {self._on()})"

    def _padding_flips(self, ctx: RenderContext, keep: int, delta: str) -> str:
        """The padded rows of input ``keep`` that ``delta`` (a change of the other input)
        adds or removes: rows of ``keep`` at ``other``'s snapshot whose match count crossed
        zero; the other input's columns are typed NULLs (a join on FALSE)."""
        changed = 1 - keep
        node = self.inputs[changed].node
        side: Side = "old" if keep == 0 else "new"
        # the rows a change touches, and the other input's rows that match one of them: a
        # touched row's matches are among those, and finding them builds on the few touched
        # rows instead of the whole other input
        touched = ctx.cte(
            f"{self.name}_touched{keep}",
            f"SELECT {input_name(keep)}.* FROM {self.inputs[keep].node.state(ctx, side)} AS "
            f"{input_name(keep)} SEMI JOIN {delta} AS {input_name(changed)} ON {self._on()}",
            materialized=True,
        )

        def near(at: Side) -> str:
            return ctx.cte(
                f"{self.name}_near{keep}_{at}",
                f"SELECT {input_name(changed)}.* FROM {node.state(ctx, at)} AS "
                f"{input_name(changed)} SEMI JOIN {touched} AS {input_name(keep)} "
                f"ON {self._on()}",
            )

        flips = flipped_rows(
            touched,
            input_name(keep),
            "TRUE",
            f"NOT {self._matched(near('old'), changed)}",
            f"NOT {self._matched(near('new'), changed)}",
        )
        name = ctx.cte(f"{self.name}_flips{keep}", flips)
        null_side = f"{delta} AS {input_name(changed)} ON FALSE"
        select = join_select_list(self.inputs)
        return (
            f"SELECT {select}, CASE WHEN {input_name(keep)}.{AFTER} THEN 1 ELSE -1 END AS {MULT} "
            f"FROM {name} AS {input_name(keep)} LEFT JOIN {null_side}"
        )

    def render_delta(self, ctx: RenderContext) -> str | None:
        terms = []
        left_delta, right_delta = self.left.node.delta(ctx), self.right.node.delta(ctx)
        if left_delta is not None:
            join = "LEFT JOIN" if self.keep_left else "JOIN"
            terms.append(self._join(left_delta, join, self.right.node.state(ctx, "new"), 0))
            if self.keep_right:
                terms.append(self._padding_flips(ctx, 1, left_delta))
        if right_delta is not None:
            join = "RIGHT JOIN" if self.keep_right else "JOIN"
            terms.append(self._join(self.left.node.state(ctx, "old"), join, right_delta, 1))
            if self.keep_left:
                terms.append(self._padding_flips(ctx, 0, right_delta))
        return "\nUNION ALL\n".join(terms) if terms else None


def left_join(left: JoinInput, right: JoinInput, on: exp.Expr | None) -> OuterJoin:
    return OuterJoin(left, right, on, keep_left=True, keep_right=False)


def right_join(left: JoinInput, right: JoinInput, on: exp.Expr | None) -> OuterJoin:
    return OuterJoin(left, right, on, keep_left=False, keep_right=True)


def full_join(left: JoinInput, right: JoinInput, on: exp.Expr | None) -> OuterJoin:
    return OuterJoin(left, right, on, keep_left=True, keep_right=True)
