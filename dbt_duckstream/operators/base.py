"""The operator interface shared by every differentiation rule.

Every operator describes a relation with named columns. It renders two kinds of SQL:

* ``state(ctx, side)``: the relation as it was at the old snapshot (``"old"``) or is at the
  new one (``"new"``), read through DuckLake time travel;
* ``delta(ctx)``: its signed change between the two snapshots, the relation's columns plus an
  ``_ivm_m`` column of non-zero multiplicities (+n: n copies gained, -n: n copies lost), or
  ``None`` when no source below it changed.

Rules compose bottom-up: an operator only ever asks its children for their state and delta.
Each rendering is registered as a named CTE, so the generated SQL reads in tree order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Literal

from sqlglot import exp

Side = Literal["old", "new"]
MULT = "_ivm_m"


@dataclass(frozen=True)
class TableRef:
    """A base table in a DuckLake catalog."""

    catalog: str
    schema: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.catalog}.{self.schema}.{self.name}"

    def sql(self) -> str:
        return ".".join(quote(part) for part in (self.catalog, self.schema, self.name))


def quote(name: str) -> str:
    """Quote an identifier for DuckDB."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


@dataclass
class RenderContext:
    """What one maintenance run knows: its snapshot window and which sources changed.

    ``snapshots`` maps a catalog name to ``(old, new)``: the snapshot the model was last brought
    to, and the snapshot pinned at the start of this run.
    """

    snapshots: dict[str, tuple[int, int]]
    changed: frozenset[str]
    ctes: list[tuple[str, str, bool]] = field(default_factory=list)
    _memo: dict[tuple[int, str], str | None] = field(default_factory=dict)

    def version(self, catalog: str, side: Side) -> int:
        old, new = self.snapshots[catalog]
        return old if side == "old" else new

    def cte(self, name: str, sql: str, materialized: bool = False) -> str:
        """Register ``sql`` as a CTE and return the name to select from.

        A materialized CTE is computed once and shields its query from filters pushed down
        from outside.
        """
        self.ctes.append((name, sql, materialized))
        return name

    def with_clause(self) -> str:
        if not self.ctes:
            return ""
        body = ",\n".join(
            f"{quote(name)} AS {'MATERIALIZED ' if materialized else ''}(\n{indent(sql)}\n)"
            for name, sql, materialized in self.ctes
        )
        return f"WITH {body}\n"


def indent(sql: str, by: str = "  ") -> str:
    return "\n".join(by + line if line else line for line in sql.splitlines())


class Operator(ABC):
    """A node of the relational operator tree."""

    #: position of the node in tree order; names its CTEs
    node_id: int = 0
    kind: str = "operator"

    @property
    @abstractmethod
    def columns(self) -> tuple[str, ...]:
        """Output column names, in order."""

    @property
    @abstractmethod
    def children(self) -> tuple[Operator, ...]: ...

    @abstractmethod
    def render_state(self, ctx: RenderContext, side: Side) -> str:
        """SQL of the relation at one side of the window."""

    @abstractmethod
    def render_delta(self, ctx: RenderContext) -> str | None:
        """SQL of the signed delta, or None when nothing below changed."""

    def sources(self) -> set[TableRef]:
        found: set[TableRef] = set()
        for child in self.children:
            found |= child.sources()
        return found

    def changes_in(self, ctx: RenderContext) -> bool:
        return any(source.key in ctx.changed for source in self.sources())

    def state(self, ctx: RenderContext, side: Side) -> str:
        """The name of a CTE holding this relation at ``side`` (rendered once per run)."""
        memo_key = (self.node_id, side)
        if memo_key not in ctx._memo:
            sql = self.render_state(ctx, side)
            ctx._memo[memo_key] = ctx.cte(f"{self.kind}{self.node_id}_{side}", sql)
        name = ctx._memo[memo_key]
        assert name is not None
        return name

    #: deltas read straight from the change feed are materialized (see ``Scan``)
    materialize_delta: bool = False

    def delta(self, ctx: RenderContext) -> str | None:
        """The name of a CTE holding this relation's delta, or None when nothing changed."""
        memo_key = (self.node_id, "delta")
        if memo_key not in ctx._memo:
            sql = self.render_delta(ctx) if self.changes_in(ctx) else None
            name = f"{self.kind}{self.node_id}_delta"
            ctx._memo[memo_key] = (
                None if sql is None else ctx.cte(name, sql, self.materialize_delta)
            )
        return ctx._memo[memo_key]


def column_list(columns: tuple[str, ...] | list[str], prefix: str = "") -> str:
    return ", ".join(f"{prefix}{quote(c)}" for c in columns)


def expr_sql(expression: exp.Expr) -> str:
    return expression.sql(dialect="duckdb")
