"""What one rendering of a plan knows, and the SQL statements it accumulates.

Operators render themselves into named CTEs; a few relations are worth computing once and
reading from several statements (a source's delta, an aggregate's touched groups), and those
become temporary tables. Every statement carries exactly the CTEs it refers to, so the SQL of
a run reads top to bottom in tree order.

A rendering is for one of three purposes (``Mode``): recomputing the model from its sources
alone, building it (stored operators create their state tables), or maintaining it over a
snapshot window (stored operators read their state and write the change to it at the end).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from ..sql import indent, quote

Side = Literal["old", "new"]
#: the column of signed multiplicities in every delta
MULT = "_ivm_m"


class Mode(StrEnum):
    RECOMPUTE = "recompute"
    BUILD = "build"
    MAINTAIN = "maintain"


@dataclass(frozen=True)
class Write:
    """A statement that brings stored state forward, and the temporary table (filled by a
    statement of the run's computation) whose emptiness makes it change nothing: a run skips
    it then, since a DuckLake write, even of no row, costs catalog round trips (a DELETE
    four to seven)."""

    sql: str
    unless_empty: str | None = None


@dataclass
class RenderContext:
    """A snapshot window, the sources that changed in it, and the statements rendered so far.

    ``snapshots`` maps a catalog name to ``(old, new)``: the snapshot the model was last brought
    to, and the snapshot pinned at the start of this run. ``prefix`` keeps temporary table
    names of different models apart.
    """

    snapshots: dict[str, tuple[int, int]]
    changed: frozenset[str] = frozenset()
    mode: Mode = Mode.MAINTAIN
    prefix: str = ""
    #: relations the runtime computed once for several models: a source's netted delta over
    #: this window, with at least the columns any scan of it reads (by source key)
    feeds: dict[str, str] = field(default_factory=dict)
    #: statements that compute, in order, what the final query reads
    statements: list[str] = field(default_factory=list)
    #: statements that bring stored state to the new snapshot, after the model is written
    writes: list[Write] = field(default_factory=list)
    #: the temporary table each statement that fills one fills, by its index in ``statements``
    fills: dict[int, str] = field(default_factory=dict)
    #: temporary tables to drop when the run ends
    temps: list[str] = field(default_factory=list)
    #: sources whose files a rewrite, compaction or flush reorganized in the window
    reorganized: frozenset[str] = frozenset()
    #: sources that the window only inserted into
    appended: frozenset[str] = frozenset()
    #: tables (keys) large enough that reading fewer of their rows is worth another scan: a
    #: state table read by key range (``sql.keyed_join``), a source narrowed through the
    #: inputs a join term narrows (``Join``)
    large: frozenset[str] = frozenset()
    #: a build whose state tables and rows are computed into temporary tables first
    #: (``statements``), and only copied into the lake by ``writes``: a rebuild's write
    #: transaction as short as a maintenance run's
    staged: bool = False
    #: each CTE's query and its keyword (``MATERIALIZED``, ``NOT MATERIALIZED`` or none)
    _ctes: dict[str, tuple[str, str]] = field(default_factory=dict)
    _memo: dict[tuple[int, str], str | None] = field(default_factory=dict)

    def version(self, catalog: str, side: Side) -> int:
        old, new = self.snapshots[catalog]
        return old if side == "old" else new

    def once(self, node_id: int, what: str, render: Callable[[], str | None]) -> str | None:
        """The name ``render`` returns for this node and purpose, rendered once per context.

        ``Operator.state`` and ``delta`` use the purposes ``old``, ``new`` and ``delta``: an
        operator's own steps take other names."""
        key = (node_id, what)
        if key not in self._memo:
            self._memo[key] = render()
        return self._memo[key]

    def cte(self, name: str, sql: str, *, materialized: bool = False, inline: bool = False) -> str:
        """Register ``sql`` as a CTE and return the name to select from.

        A materialized CTE is computed once and shields its query from filters pushed down
        from outside. An inlined one is read where it is referenced, with the filters and
        joins there pushed into it (a table read that several terms filter differently);
        otherwise DuckDB chooses.
        """
        keyword = "MATERIALIZED " if materialized else "NOT MATERIALIZED " if inline else ""
        self._ctes[name] = (sql, keyword)
        return quote(name)

    def temp(self, name: str, select: str) -> str:
        """Compute ``select`` into a temporary table now; return its name."""
        return self._temp_table(name, self.query(select))

    def _temp_table(self, name: str, query: str) -> str:
        """``temp`` of a query that carries its CTEs already."""
        table = quote(f"_ivm_{self.prefix}_{name}")
        self.statement(f"CREATE OR REPLACE TEMP TABLE {table} AS\n{query}")
        self.fills[len(self.statements) - 1] = table
        self.temps.append(table)
        return table

    def state_table(self, table: str, query: str) -> str:
        """Create the state table ``table`` from the SELECT ``query`` (its CTEs included) in
        a build; return the relation the build's later statements read its rows from."""
        if not self.staged:
            self.statement(f"DROP TABLE IF EXISTS {table}")
            self.statement(f"CREATE TABLE {table} AS {query}")
            return table
        staged = self._temp_table(f"stage_{len(self.temps)}", query)
        self.write(f"DROP TABLE IF EXISTS {table}")
        self.write(f"CREATE TABLE {table} AS SELECT * FROM {staged}")
        return staged

    def statement(self, sql: str) -> None:
        """Add a statement; a SELECT inside it comes with its CTEs through ``query``."""
        self.statements.append(sql)

    def write(self, sql: str, *, unless_empty: str | None = None) -> None:
        """Add a statement that changes stored state after the model is written; one that
        changes nothing when the temporary table ``unless_empty`` is empty is skipped then."""
        self.writes.append(Write(sql, unless_empty))

    def query(self, sql: str) -> str:
        """A SELECT preceded by a WITH clause of exactly the CTEs it reads, in order."""
        needed = self._referenced(sql)
        if not needed:
            return sql
        body = ",\n".join(
            f"{quote(name)} AS {self._ctes[name][1]}(\n{indent(self._ctes[name][0])}\n)"
            for name in self._ctes
            if name in needed
        )
        return f"WITH {body}\n{sql}"

    def cleanup(self) -> list[str]:
        return [f"DROP TABLE IF EXISTS {table}" for table in self.temps]

    def _referenced(self, sql: str) -> set[str]:
        """CTE names ``sql`` reads, directly or through other CTEs."""
        found: set[str] = set()
        pending = [sql]
        while pending:
            text = pending.pop()
            for name in _quoted_names(text):
                if name in self._ctes and name not in found:
                    found.add(name)
                    pending.append(self._ctes[name][0])
        return found


#: a string literal or a quoted identifier, each with its doubled-quote escapes
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"((?:[^\"]|\"\")+)\"")


def _quoted_names(sql: str) -> set[str]:
    """Quoted identifiers in ``sql``, string literals skipped."""
    return {m.group(1).replace('""', '"') for m in _QUOTED.finditer(sql) if m.group(1)}
