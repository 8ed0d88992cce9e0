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
from ..touched import flipped_rows
from .base import Operator
from .join import JoinInput, bind_columns, input_name

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

    def value(self, ctx: RenderContext, side: Side) -> str:
        """The predicate for the row ``_ivm_in0`` over the right input at ``side``."""
        return self.membership.value_sql(self.inputs, self.right.node.state(ctx, side))

    def flips(self, ctx: RenderContext, delta: str, verdict: str = "") -> str:
        """A CTE: the left rows at the old snapshot whose value, followed by ``verdict``
        (e.g. ``IS TRUE``), differs over the right input's old and new state.

        The rows a change touches are few: they are judged over the right input's rows that
        meet the correlation with one of them (a semi join built on the touched rows), which
        are all the rows their subqueries select; uncorrelated, over the whole right input."""
        left = self.left.node.state(ctx, "old")
        correlation = bind_columns(self.membership.correlation, self.inputs)
        if self.membership.quantifier == "exists" and correlation is not None:
            rows = (
                f"SELECT {input_name(0)}.* FROM {left} AS {input_name(0)} "
                f"SEMI JOIN {delta} AS {input_name(1)} ON {expr_sql(correlation)}"
            )
        else:
            touched = self.membership.touched_sql(self.inputs, delta)
            rows = f"SELECT * FROM {left} AS {input_name(0)} WHERE {touched}"
        touched_rows = ctx.cte(f"{self.name}_touched", rows, materialized=True)

        def judged(side: Side) -> str:
            right = self.right.node.state(ctx, side)
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
