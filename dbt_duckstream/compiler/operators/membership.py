"""What a subquery predicate says about one row of the outer query: the part that the semi,
anti and mark joins share.

A predicate ``EXISTS (SELECT ... WHERE q)``, ``x IN (SELECT y ... WHERE q)``,
``x > ANY (...)`` or ``x <= ALL (...)`` gives each row of its left input (the outer query) a
value over the rows of its right input (the subquery, decorrelated: ``q`` is its condition
on the pair of rows). The value is SQL's, three-valued: ``x IN (...)`` is NULL, not false,
when ``x`` is NULL or the subquery yields a NULL and no match; empty subqueries make it
false (and ``ALL`` true). Each operator renders the predicate itself, over a relation at one
snapshot, so DuckDB evaluates it exactly as it evaluates the view.

The value of a row can only change when a row of the right input's delta could change it: a
row satisfying ``q`` (EXISTS), one whose comparison is not false (ANY, IN) or not true (ALL).
``touched`` selects those rows of the left input; ``touched.flipped_rows`` keeps the ones
whose value differs over the old and the new right input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlglot import exp

from ...sql import column_list, expr_sql
from ..render import RenderContext, Side
from .base import Operator
from .join import JoinInput, bind_columns, equated_columns, input_name
from .touched import flipped_rows

Quantifier = Literal["exists", "any", "all"]


@dataclass(frozen=True)
class Membership:
    """A subquery predicate over the output names of a join's two inputs.

    ``EXISTS``: ``correlation`` alone. ``x <comparison> ANY|ALL (SELECT y ...)`` (``IN`` is
    ``= ANY``): ``operand`` is ``x`` over the left input, ``value`` is ``y`` over the right.
    """

    quantifier: Quantifier
    correlation: exp.Expr | None
    operand: exp.Expr | None = None
    comparison: str = "="
    value: exp.Expr | None = None

    def _where(self, inputs: tuple[JoinInput, JoinInput]) -> str:
        bound = bind_columns(self.correlation, inputs)
        return f" WHERE {expr_sql(bound)}" if bound is not None else ""

    def _quantified(self, inputs: tuple[JoinInput, JoinInput], relation: str) -> str:
        assert self.operand is not None and self.value is not None
        operand = bind_columns(self.operand, inputs)
        value = bind_columns(self.value, inputs)
        assert operand is not None and value is not None
        return (
            f"({expr_sql(operand)} {self.comparison} {self.quantifier.upper()} "
            f"(SELECT {expr_sql(value)} FROM {relation} AS {input_name(1)}"
            f"{self._where(inputs)}))"
        )

    def value_sql(self, inputs: tuple[JoinInput, JoinInput], relation: str) -> str:
        """The predicate for the left row ``_ivm_in0`` over the rows of ``relation``."""
        if self.quantifier == "exists":
            return f"EXISTS (SELECT 1 FROM {relation} AS {input_name(1)}{self._where(inputs)})"
        return self._quantified(inputs, relation)

    def _touching(
        self, inputs: tuple[JoinInput, JoinInput], verdict: str
    ) -> tuple[exp.Expr | None, tuple[exp.Expr, exp.Expr] | None] | None:
        """The parts, bound, of a condition on a left row and a row of the right input's
        change that every change row able to move the row's ``verdict`` meets: the
        correlation, and the operand and value compared; None when no such condition exists.

        ``x = ANY`` is TRUE only through a row whose comparison is TRUE, so a TRUE verdict
        (a semi join) can only move through such rows; NULL and FALSE verdicts also move
        through NULLs, and ``ALL`` through the rows whose comparison is not TRUE."""
        correlation = bind_columns(self.correlation, inputs)
        if self.quantifier == "exists":
            return correlation, None
        if self.quantifier == "any" and verdict == "IS TRUE":
            operand = bind_columns(self.operand, inputs)
            value = bind_columns(self.value, inputs)
            assert operand is not None and value is not None
            return correlation, (operand, value)
        return None

    def touching_sql(self, inputs: tuple[JoinInput, JoinInput], verdict: str) -> str | None:
        """The condition of ``_touching``, when one exists: a semi join on it finds the
        touched rows, and DuckDB plans it as a hash join on its equalities, filtering the left
        input before it is built (``(x = ANY (...)) IS NOT FALSE`` is judged over every row of
        the left input, a whole join at the old snapshot for TPC-H Q18)."""
        parts = self._touching(inputs, verdict)
        if parts is None:
            return None
        correlation, compared = parts
        conditions = [expr_sql(correlation)] if correlation is not None else []
        if compared is not None:
            operand, value = compared
            conditions.append(f"{expr_sql(operand)} {self.comparison} {expr_sql(value)}")
        return " AND ".join(f"({c})" for c in conditions) or None

    def touching_keys(
        self, inputs: tuple[JoinInput, JoinInput], verdict: str
    ) -> tuple[tuple[str, str], ...]:
        """Pairs of columns (left, right) that the correlation equates, and ``x = y`` where a
        ``verdict`` moves only through rows whose comparison is TRUE (``_touching``): a row's
        value over the right input depends only on the right rows meeting them, so either
        input is read narrowed by the other's values."""
        correlation = bind_columns(self.correlation, inputs)
        implied = [correlation] if correlation is not None else []
        parts = self._touching(inputs, verdict)
        if parts is not None and parts[1] is not None and self.comparison == "=":
            operand, value = parts[1]
            implied.append(exp.EQ(this=operand, expression=value))
        return equated_columns(exp.and_(*implied)).get((0, 1), ()) if implied else ()

    def touched_sql(self, inputs: tuple[JoinInput, JoinInput], delta: str) -> str:
        """Whether a row of ``delta`` (a change of the right input) may change the value."""
        if self.quantifier == "exists":
            return self.value_sql(inputs, delta)
        if self.quantifier == "any":
            return f"{self._quantified(inputs, delta)} IS NOT FALSE"
        return f"{self._quantified(inputs, delta)} IS NOT TRUE"


@dataclass(eq=False)
class MembershipJoin(Operator):
    """A left input whose rows are judged by a subquery predicate over a right input; the
    output keeps the left's columns (named as they are)."""

    left: JoinInput
    right: JoinInput
    membership: Membership
    #: which values of the predicate let a row through ("": all three are told apart)
    verdict = ""

    def __post_init__(self) -> None:
        assert self.left.alias is None, "the left input keeps its own column names"

    @property
    def inputs(self) -> tuple[JoinInput, JoinInput]:
        return (self.left, self.right)

    @property
    def children(self) -> tuple[Operator, ...]:
        return (self.left.node, self.right.node)

    def left_columns(self) -> str:
        return column_list(self.left.columns, f"{input_name(0)}.")

    def value(self, ctx: RenderContext, side: Side, near: str | None = None) -> str:
        """The predicate for the row ``_ivm_in0`` over the right input at ``side``; for the
        rows of ``near`` only (a relation with the left's columns), as far as ``verdict``
        tells them apart, the right input read narrowed to what they can meet."""
        return self.membership.value_sql(self.inputs, self._right_near(ctx, side, near))

    def _right_near(self, ctx: RenderContext, side: Side, near: str | None) -> str:
        """The right input at ``side`` narrowed to what the rows of ``near`` can meet, as a
        materialized CTE: a correlated subquery over it is judged over its rows alone (DuckDB
        cannot flatten one over the anti join of an aggregate's state)."""
        keys = self.membership.touching_keys(self.inputs, self.verdict) if near else ()
        if not keys:
            return self.right.node.state(ctx, side)
        assert near is not None
        swapped = tuple((theirs, mine) for mine, theirs in keys)

        def render() -> str:
            rows = self.right.node.state_near(ctx, side, swapped, near)
            name = f"{self.name}_{side}_for_{near.strip(chr(34))}"
            return ctx.cte(name, f"SELECT * FROM {rows}", materialized=True)

        found = ctx.once(self.node_id, f"{side} for {near}", render)
        assert found is not None
        return found

    def flips(self, ctx: RenderContext, delta: str) -> str:
        """A CTE: the left rows at the old snapshot whose value, followed by ``verdict``
        (e.g. ``IS TRUE``), differs over the right input's old and new state.

        The rows a change touches are few: they are judged over the right input's rows that
        meet the correlation with one of them (a semi join built on the touched rows), which
        are all the rows their subqueries select; uncorrelated, over the whole right input.
        Both inputs are read narrowed (``state_near``) by the columns that the test equates:
        the left by the change's values, the right by the touched rows'."""
        left = self.left.node.state(ctx, "old")
        correlation = bind_columns(self.membership.correlation, self.inputs)
        verdict = self.verdict
        touching = self.membership.touching_sql(self.inputs, verdict)
        if touching is not None:
            keys = self.membership.touching_keys(self.inputs, verdict)
            near = self.left.node.state_near(ctx, "old", keys, delta) if keys else left
            rows = (
                f"SELECT {input_name(0)}.* FROM {near} AS {input_name(0)} "
                f"SEMI JOIN {delta} AS {input_name(1)} ON {touching}"
            )
        else:
            touched = self.membership.touched_sql(self.inputs, delta)
            rows = f"SELECT * FROM {left} AS {input_name(0)} WHERE {touched}"
        touched_rows = ctx.cte(f"{self.name}_touched", rows, materialized=True)

        def judged(side: Side) -> str:
            right = self._right_near(ctx, side, touched_rows)
            if correlation is None:
                return right
            return ctx.cte(
                f"{self.name}_near_{side}",
                f"SELECT {input_name(1)}.* FROM {right} AS {input_name(1)} "
                f"SEMI JOIN {touched_rows} AS {input_name(0)} ON {expr_sql(correlation)}",
            )

        before = f"({self.membership.value_sql(self.inputs, judged('old'))}) {verdict}".strip()
        after = f"({self.membership.value_sql(self.inputs, judged('new'))}) {verdict}".strip()
        flips = flipped_rows(touched_rows, input_name(0), "TRUE", before, after)
        return ctx.cte(f"{self.name}_flips", flips)
