"""Aggregate: key-scoped recomputation of the groups the input delta touches.

    view:  SELECT k, SUM(v) FROM r GROUP BY k
    delta: keys AS (SELECT DISTINCT k FROM delta(r))
           SELECT k, SUM(v), -1 FROM r@old SEMI JOIN keys USING (k) GROUP BY k
           UNION ALL
           SELECT k, SUM(v), +1 FROM r@new SEMI JOIN keys USING (k) GROUP BY k

Exact for every deterministic aggregate (MIN/MAX after deletes, COUNT(DISTINCT), ...): each
touched group's old row is retracted and its new row asserted; groups that vanish have no new
row, new groups no old one. Keys match with IS NOT DISTINCT FROM, since GROUP BY puts NULLs
together. A global aggregate (no keys) always has exactly one row, so a change anywhere
retracts the old row and asserts the new one.

Output columns are ``_ivm_g<i>`` for keys and ``_ivm_a<j>`` for aggregate calls; a projection
above maps them to the names the user wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from .base import MULT, Operator, RenderContext, Side, expr_sql, quote


def key_name(i: int) -> str:
    return f"_ivm_g{i}"


def agg_name(j: int) -> str:
    return f"_ivm_a{j}"


@dataclass(eq=False)
class Aggregate(Operator):
    child: Operator
    keys: tuple[exp.Expr, ...]
    aggregates: tuple[exp.Expr, ...]
    kind = "aggregate"

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(key_name(i) for i in range(len(self.keys))) + tuple(
            agg_name(j) for j in range(len(self.aggregates))
        )

    @property
    def children(self) -> tuple[Operator, ...]:
        return (self.child,)

    def _select_list(self) -> str:
        keys = [f"{expr_sql(k)} AS {quote(key_name(i))}" for i, k in enumerate(self.keys)]
        aggs = [f"{expr_sql(a)} AS {quote(agg_name(j))}" for j, a in enumerate(self.aggregates)]
        return ", ".join(keys + aggs)

    def _group_by(self) -> str:
        if not self.keys:
            return ""
        return " GROUP BY " + ", ".join(expr_sql(k) for k in self.keys)

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        return f"SELECT {self._select_list()} FROM {self.child.state(ctx, side)}{self._group_by()}"

    def render_delta(self, ctx: RenderContext) -> str | None:
        child = self.child.delta(ctx)
        if child is None:
            return None
        if not self.keys:
            guard = f" WHERE EXISTS (SELECT 1 FROM {child})"
            old = f"SELECT *, -1 AS {MULT} FROM {self.state(ctx, 'old')}{guard}"
            new = f"SELECT *, 1 AS {MULT} FROM {self.state(ctx, 'new')}{guard}"
            return f"{old}\nUNION ALL\n{new}"
        touched = ctx.cte(
            f"{self.kind}{self.node_id}_keys",
            "SELECT DISTINCT "
            + ", ".join(f"{expr_sql(k)} AS {quote(key_name(i))}" for i, k in enumerate(self.keys))
            + f" FROM {child}",
        )
        match = " AND ".join(
            f"({expr_sql(k)}) IS NOT DISTINCT FROM {quote(touched)}.{quote(key_name(i))}"
            for i, k in enumerate(self.keys)
        )

        def scoped(side: Side, sign: int) -> str:
            source = self.child.state(ctx, side)
            return (
                f"SELECT *, {sign} AS {MULT} FROM ("
                f"SELECT {self._select_list()} FROM {source} SEMI JOIN {quote(touched)} "
                f"ON {match}{self._group_by()})"
            )

        return f"{scoped('old', -1)}\nUNION ALL\n{scoped('new', 1)}"
