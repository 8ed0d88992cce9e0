"""The operator interface shared by every differentiation rule.

Every operator describes a relation with named columns. It renders two kinds of SQL:

* ``state(ctx, side)``: the relation as it was at the old snapshot (``"old"``) or is at the
  new one (``"new"``), read through DuckLake time travel (or, for operators that keep state,
  from their state table);
* ``delta(ctx)``: its signed change between the two snapshots, the relation's columns plus an
  ``_ivm_m`` column of non-zero multiplicities (+n: n copies gained, -n: n copies lost), or
  ``None`` when no source below it changed.

Rules compose bottom-up: an operator only ever asks its children for their state and delta.
Each rendering is registered once per run as a named CTE, so the generated SQL reads in tree
order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import NamedTuple

from sqlglot import exp

from ...sql import TableRef, quote
from ..render import RenderContext, Side


class DeltaReads(NamedTuple):
    """What an operator's delta reads beyond its inputs' deltas, in rows of its sources:
    rows ``scanned`` (an input's whole state, or its touched part bounded by it) and rows
    ``rewritten`` (recomputed and stored again). The runtime's cost model weighs them
    (``runtime.decide.costs``)."""

    scanned: int = 0
    rewritten: int = 0


#: the rows of the sources a subtree reads, as the cost model knows them
RowsOf = Callable[["Operator"], int]


class Operator(ABC):
    """A node of the relational operator tree."""

    #: position of the node in tree order (children first); names its CTEs
    node_id: int = 0
    kind: str = "operator"
    #: read the state where it is referenced, never materialized (a plain table read)
    inline_state: bool = False
    #: where a stored operator keeps its state (assigned when the plan is compiled)
    state_table: TableRef | None = None

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

    @property
    def source_table(self) -> str | None:
        """The source (key) this relation reads as it is, if it is a plain read of one."""
        return None

    @property
    def stored(self) -> bool:
        """Whether the operator keeps state in a table beside the model (``state_table``)."""
        return False

    @property
    def strategy(self) -> str | None:
        """How the operator is maintained, for ``explain`` (None: row by row)."""
        return None

    def recomputed_in_full(self) -> str | None:
        """What a change below this operator recomputes in full, for the run line (None:
        only what the change touches)."""
        return None

    def reads_changed(self, changed: frozenset[str]) -> bool:
        """Whether this relation reads a source of ``changed`` (keys)."""
        return any(s.key in changed for s in self.sources())

    def delta_reads(self, changed: frozenset[str], rows: RowsOf) -> DeltaReads:
        """What this operator's delta reads beyond its inputs' deltas when the sources
        ``changed`` (it reads one of them); ``rows`` gives a subtree's source rows. Nothing,
        for a row-by-row rule; a join's terms are weighed by the cost model itself, which
        knows how they narrow their reads."""
        return DeltaReads()

    @property
    def name(self) -> str:
        """The stem of this node's CTE names, e.g. ``join3``."""
        return f"{self.kind}{self.node_id}"

    def state_table_sql(self) -> str:
        """The SQL name of a stored operator's state table (assigned when the plan compiles)."""
        assert self.state_table is not None, f"{self.name}: state table not assigned"
        return self.state_table.sql()

    def walk(self) -> Iterator[Operator]:
        """Every node of the tree below and including this one, once, children first."""
        seen: set[int] = set()

        def visit(node: Operator) -> Iterator[Operator]:
            if id(node) in seen:
                return
            seen.add(id(node))
            for child in node.children:
                yield from visit(child)
            yield node

        return visit(self)

    def sources(self) -> set[TableRef]:
        """The base tables this relation reads."""
        return {table for node in self.walk() for table in node.own_sources()}

    def own_sources(self) -> set[TableRef]:
        """Base tables this node reads itself (a scan reads one)."""
        return set()

    def changes_in(self, ctx: RenderContext) -> bool:
        return any(source.key in ctx.changed for source in self.sources())

    def state(self, ctx: RenderContext, side: Side) -> str:
        """The name of a CTE holding this relation at ``side`` (rendered once per run)."""
        name = ctx.once(
            self.node_id,
            side,
            lambda: ctx.cte(
                f"{self.name}_{side}", self.render_state(ctx, side), inline=self.inline_state
            ),
        )
        assert name is not None
        return name

    def delta(self, ctx: RenderContext) -> str | None:
        """The name of a relation holding this relation's delta, or None when nothing changed."""

        def render() -> str | None:
            sql = self.render_delta(ctx) if self.changes_in(ctx) else None
            if sql is None:
                return None
            if self.materializes_delta(ctx):
                return ctx.temp(f"{self.name}_delta", sql)
            return ctx.cte(f"{self.name}_delta", sql)

        return ctx.once(self.node_id, "delta", render)

    def materializes_delta(self, ctx: RenderContext) -> bool:
        """Whether this run computes the delta once into a temporary table (it is read by
        several statements, or DuckDB plans better with its exact row count)."""
        return False

    def state_near(
        self,
        ctx: RenderContext,
        side: Side,
        keys: tuple[tuple[str, str], ...],
        relation: str,
        above: exp.Expr | None = None,
    ) -> str:
        """This relation at ``side``, only the rows whose columns ``keys`` (mine, theirs) occur
        in ``relation``'s: an operator may push the test down to its inputs (a filter, a
        projection and a join do), so that a few keys read a few rows of a large source
        whatever plan DuckDB picks. ``above``: a predicate that the caller applies to the
        result (a filter's), whose equalities a join may narrow by too."""
        return narrowed(self.state(ctx, side), keys, relation)

    def delta_under(self, ctx: RenderContext, predicate: exp.Expr) -> str | None:
        """This relation's delta where only the rows passing ``predicate`` matter (a filter
        above applies it): an operator may narrow its inputs by it (a join does)."""
        return self.delta(ctx)


def number(root: Operator) -> None:
    """Give every node its position in tree order (children first); shared nodes once."""
    for position, node in enumerate(root.walk(), start=1):
        node.node_id = position


def narrowed(relation: str, keys: tuple[tuple[str, str], ...], other: str) -> str:
    """``relation`` keeping the rows whose key columns occur in ``other``'s."""
    if not keys:
        return relation
    tests = " AND ".join(
        f"{quote(mine)} IN (SELECT {quote(theirs)} FROM {other})" for mine, theirs in keys
    )
    return f"(SELECT * FROM {relation} WHERE {tests})"
