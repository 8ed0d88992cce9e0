"""Inner join of N inputs: the telescoping sum over time-travelled states.

    view:  SELECT ... FROM r JOIN s ON p
    delta: SELECT ..., dr._ivm_m FROM delta(r) AS r, s@old AS s WHERE p
           UNION ALL
           SELECT ..., ds._ivm_m FROM r@new AS r, delta(s) AS s WHERE p

For N inputs term i joins inputs before i at the new snapshot, the delta of input i, and inputs
after i at the old snapshot; inputs whose delta is empty contribute no term. This is exact for
any mix of inserts and deletes on every side (unlike the "subtract the cross-delta" formula),
and works for equi, non-equi and self joins alike, since ``p`` is applied unchanged.

Output columns are named ``"alias.column"`` so that inputs never collide.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from .base import MULT, Operator, RenderContext, Side, expr_sql, quote


@dataclass(eq=False)
class Join(Operator):
    inputs: tuple[tuple[str, Operator], ...]
    condition: exp.Expr | None
    kind = "join"

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(f"{alias}.{c}" for alias, child in self.inputs for c in child.columns)

    @property
    def children(self) -> tuple[Operator, ...]:
        return tuple(child for _, child in self.inputs)

    def _select_list(self) -> str:
        return ", ".join(
            f"{quote(alias)}.{quote(c)} AS {quote(f'{alias}.{c}')}"
            for alias, child in self.inputs
            for c in child.columns
        )

    def _query(self, relations: list[str], multiplicity: str | None) -> str:
        select = self._select_list()
        if multiplicity is not None:
            select += f", {multiplicity}.{MULT} AS {MULT}"
        froms = ", ".join(
            f"{relation} AS {quote(alias)}"
            for relation, (alias, _) in zip(relations, self.inputs, strict=True)
        )
        where = f" WHERE {expr_sql(self.condition)}" if self.condition is not None else ""
        return f"SELECT {select} FROM {froms}{where}"

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        return self._query([child.state(ctx, side) for _, child in self.inputs], None)

    def render_delta(self, ctx: RenderContext) -> str | None:
        terms = []
        for i, (alias, child) in enumerate(self.inputs):
            changed = child.delta(ctx)
            if changed is None:
                continue
            relations = [
                changed if j == i else other.state(ctx, "new" if j < i else "old")
                for j, (_, other) in enumerate(self.inputs)
            ]
            terms.append(self._query(relations, quote(alias)))
        return "\nUNION ALL\n".join(terms) if terms else None
