"""What the rewrites read besides the SQL: the catalog a model lives in, behind one small
interface, and where its unqualified names resolve.

The compiler asks the catalog four things and nothing else, so that it stays pure: the runtime
binds the interface to a live connection (``runtime.run.LiveCatalog``), tests and the
``duckstream`` command to a mapping of the sources' columns (``MappingCatalog``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from sqlglot import exp
from sqlglot.schema import MappingSchema

from ..sql import TableRef
from .parse import parse_statement

#: source columns per table: catalog -> schema -> table -> column -> type
Schema = dict[str, dict[str, dict[str, dict[str, str]]]]


class Catalog(Protocol):
    """The facts about a model's catalog that compiling it needs."""

    def spelling(self, table: TableRef) -> list[str] | None:
        """A table's or a view's column names as the catalog spells them; None for a name
        that is neither (a CTE's)."""
        ...

    def views(self, tables: Iterable[TableRef]) -> dict[str, str]:
        """The ``CREATE VIEW`` statements of those of ``tables`` that are views, by key."""
        ...

    def schema(self, sources: Sequence[TableRef]) -> Schema:
        """The columns and types of the tables the model reads."""
        ...

    def output(self, sql: str) -> list[tuple[str, str]] | None:
        """The model's columns as the engine binds its SQL (names, types); None: unknown,
        the maintained table then takes the plan's own query's."""
        ...


@dataclass(frozen=True)
class MappingCatalog:
    """A catalog known from mappings: its tables' columns, its views' definitions (by key);
    nothing bound."""

    tables: Schema
    definitions: dict[str, str] = field(default_factory=dict)

    def spelling(self, table: TableRef) -> list[str] | None:
        columns = self._columns(table)
        return list(columns) if columns is not None else None

    def views(self, tables: Iterable[TableRef]) -> dict[str, str]:
        return {t.key: self.definitions[t.key] for t in tables if t.key in self.definitions}

    def schema(self, sources: Sequence[TableRef]) -> Schema:
        return self.tables

    def output(self, sql: str) -> list[tuple[str, str]] | None:
        return None

    def _columns(self, table: TableRef) -> dict[str, str] | None:
        schemas = self.tables.get(table.catalog, {})
        return schemas.get(table.schema, {}).get(table.name)


@dataclass
class Context:
    """What a rewrite may read besides the expression it rewrites."""

    #: where unqualified table names resolve
    catalog: str = "memory"
    db: str = "main"
    #: the catalog the model lives in
    lookup: Catalog = field(default_factory=lambda: MappingCatalog({}))
    #: the sources' columns, known once the tables the model reads are (the last phase)
    schema: MappingSchema = field(default_factory=MappingSchema)
    #: the views inlined, in the order met (``inline_views`` notes them)
    views: list[str] = field(default_factory=list)
    #: how SQL the catalog holds (a view's definition) is read: as a model's SQL is, through
    #: the rules before ``inline_views`` (``pipeline.parse_sql``)
    read: Callable[[str], exp.Expr] = parse_statement

    def with_schema(self, schema: Mapping[str, object]) -> Context:
        """This context with the sources' columns known."""
        mapping = MappingSchema(dict(schema), dialect="duckdb")
        return replace(self, schema=mapping)
