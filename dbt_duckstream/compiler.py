"""``compile_ivm``: model SQL in, an ``IVMPlan`` out.

The plan holds the operator tree and renders, for a given snapshot window, the DDL of the
maintained table, its initial load, and the maintenance statements.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from .accumulate import AccumulatedAggregate
from .apply import Maintenance, delete_sql, insert_sql
from .errors import ConfigurationError, DuckstreamError, UnsupportedSQLError
from .operators import MULT, Aggregate, Filter, Operator, Project, RenderContext, TableRef
from .operators.aggregate import key_name
from .operators.base import quote
from .tree import build_tree
from .validate import check_deterministic

#: bumped whenever generated SQL changes meaning: maintained tables then rebuild once
PLAN_FORMAT = 1

#: sqlglot's schema mapping: catalog -> schema -> table -> column -> type
Schema = dict[str, dict[str, dict[str, dict[str, str]]]]


@dataclass
class IVMPlan:
    """Everything needed to create and maintain one model."""

    sql: str
    target: TableRef
    root: Operator
    columns: tuple[str, ...]
    column_types: tuple[str, ...] | None
    key_columns: tuple[str, ...] | None
    sql_hash: str
    qualified_sql: str
    sources: tuple[TableRef, ...] = field(default=())
    accumulated: AccumulatedAggregate | None = None
    #: the catalog and schema that unqualified names in ``sql`` resolve to
    default_schema: tuple[str, str] = ("memory", "main")

    @property
    def catalogs(self) -> tuple[str, ...]:
        return tuple(sorted({s.catalog for s in self.sources}))

    @property
    def delta_table(self) -> str:
        return quote(f"_ivm_delta_{self.target.name}")

    def create_table_sql(self, snapshots: dict[str, tuple[int, int]]) -> str:
        if self.column_types is not None:
            cols = ", ".join(
                f"{quote(c)} {t}" for c, t in zip(self.columns, self.column_types, strict=True)
            )
            return f"CREATE TABLE {self.target.sql()} ({cols})"
        return f"CREATE TABLE {self.target.sql()} AS {self.recompute_sql(snapshots)} LIMIT 0"

    def _renamed_columns(self) -> str:
        """The tree's output columns under the model's column names."""
        return ", ".join(
            f"{quote(inner)} AS {quote(outer)}"
            for inner, outer in zip(self.root.columns, self.columns, strict=True)
        )

    def recompute_sql(self, snapshots: dict[str, tuple[int, int]]) -> str:
        """The model's rows at the new snapshot, with the model's column names."""
        ctx = RenderContext(snapshots, frozenset())
        state = self.root.state(ctx, "new")
        renamed = self._renamed_columns()
        return f"{ctx.with_clause()}SELECT {renamed} FROM {quote(state)}"

    def build_sql(
        self, snapshots: dict[str, tuple[int, int]], *, refill: bool = False
    ) -> list[str]:
        """Statements that (re)create the model, and its state, at the new snapshot.

        ``refill`` empties and refills the existing tables instead of recreating them: the
        same rows, a much cheaper DuckLake commit, and the tables keep their ids. Only for a
        plan whose tables were created by this same plan.
        """
        if refill:
            statements = [f"DELETE FROM {self.target.sql()}"]
        else:
            statements = [
                f"DROP TABLE IF EXISTS {self.target.sql()}",
                self.create_table_sql(snapshots),
            ]
        if self.accumulated is not None:
            ctx = RenderContext(snapshots, frozenset())
            return statements + self.accumulated.build_sql(ctx, self.columns, refill=refill)
        return [*statements, f"INSERT INTO {self.target.sql()} {self.recompute_sql(snapshots)}"]

    def delta_sql(self, snapshots: dict[str, tuple[int, int]], changed: frozenset[str]) -> str:
        """The consolidated delta of the model: its columns plus a net multiplicity."""
        ctx = RenderContext(snapshots, changed)
        delta = self.root.delta(ctx)
        if delta is None:
            return ""
        renamed = self._renamed_columns()
        return (
            f"{ctx.with_clause()}SELECT {renamed}, SUM({MULT})::BIGINT AS {MULT} "
            f"FROM {quote(delta)}\n"
            f"GROUP BY ALL HAVING SUM({MULT}) <> 0"
        )

    def maintenance(
        self, snapshots: dict[str, tuple[int, int]], changed: frozenset[str]
    ) -> Maintenance | None:
        """Statements that bring the model from the old to the new snapshot (None: no change)."""
        if self.accumulated is not None:
            ctx = RenderContext(snapshots, changed)
            return self.accumulated.maintenance(
                ctx, self.columns, self.key_columns, self.delta_table
            )
        delta = self.delta_sql(snapshots, changed)
        if not delta:
            return None
        target = self.target.sql()
        return Maintenance(
            build=[f"CREATE OR REPLACE TEMP TABLE {self.delta_table} AS\n{delta}"],
            apply=[
                delete_sql(target, self.columns, self.key_columns, self.delta_table),
                insert_sql(target, self.columns, self.delta_table),
            ],
            cleanup=[f"DROP TABLE {self.delta_table}"],
        )

    def explain(self) -> str:
        """The plan's SQL for a window in which every source changed, for reading."""
        snapshots = {c: (0, 1) for c in self.catalogs}
        changed = frozenset(s.key for s in self.sources)
        maintenance = self.maintenance(snapshots, changed)
        assert maintenance is not None
        strategy = "accumulators" if self.accumulated else "key-scoped recomputation"
        parts = [
            f"-- model {self.target.key}: keyed on {self.key_columns}; aggregates: {strategy}",
            "-- build (snapshot 1)",
            *(s + ";" for s in self.build_sql(snapshots)),
            "-- maintenance (snapshots 0 -> 1)",
            *(s + ";" for s in maintenance.all()),
        ]
        return "\n".join(parts)


def compile_ivm(
    sql: str,
    *,
    target: TableRef | str,
    schema: Schema,
    catalog: str,
    db: str = "main",
    output_columns: list[tuple[str, str]] | None = None,
) -> IVMPlan:
    """Compile model SQL into an ``IVMPlan``.

    ``schema`` gives the columns of every source table (catalog -> schema -> table -> column ->
    type); unqualified table names resolve to ``catalog``.``db``. ``output_columns`` (names and
    types, as DuckDB describes the query) fixes the maintained table's exact column names and
    types; without it the table is created from the plan's own query.
    """
    if isinstance(target, str):
        target = parse_table(target, catalog, db)
    qualified = qualify_sql(sql, schema=schema, catalog=catalog, db=db)
    root = build_tree(qualified)
    columns = root.columns
    types: tuple[str, ...] | None = None
    if output_columns is not None:
        if len(output_columns) != len(columns):
            raise DuckstreamError(
                f"the model has {len(output_columns)} columns but the plan {len(columns)}"
            )
        columns = tuple(name for name, _ in output_columns)
        types = tuple(t for _, t in output_columns)
    qualified_sql = qualified.sql(dialect="duckdb")
    digest = hashlib.sha256(f"{PLAN_FORMAT}\n{target.key}\n{qualified_sql}".encode()).hexdigest()
    return IVMPlan(
        sql=sql,
        target=target,
        root=root,
        columns=columns,
        column_types=types,
        key_columns=_key_columns(root, columns),
        sql_hash=digest[:16],
        qualified_sql=qualified_sql,
        sources=tuple(sorted(root.sources(), key=lambda s: s.key)),
        accumulated=AccumulatedAggregate.match(root, target),
        default_schema=(catalog, db),
    )


def parse_sql(sql: str) -> exp.Expr:
    try:
        parsed = sqlglot.parse(sql, read="duckdb")
    except ParseError as error:
        raise DuckstreamError(f"cannot parse the model SQL: {error}") from error
    statements = [p for p in parsed if p is not None]
    if len(statements) != 1:
        raise UnsupportedSQLError(f"{len(statements)} statements", "a model is one SELECT")
    statement = statements[0]
    check_deterministic(statement)
    if isinstance(statement, exp.Query):
        # A table has no order; ORDER BY at the top changes nothing that is stored.
        statement.set("order", None)
    return statement


def source_tables(sql: str, catalog: str, db: str) -> list[TableRef]:
    """The base tables a model reads (CTE names excluded), fully qualified."""
    statement = qualify(
        parse_sql(sql),
        catalog=catalog,
        db=db,
        dialect="duckdb",
        qualify_columns=False,
        validate_qualify_columns=False,
        quote_identifiers=False,
        expand_stars=False,
    )
    found: dict[str, TableRef] = {}
    for table in statement.find_all(exp.Table):
        if table.db and isinstance(table.this, exp.Identifier):
            ref = TableRef(table.catalog or catalog, table.db, table.name)
            found.setdefault(ref.key, ref)
    return list(found.values())


def qualify_sql(sql: str, *, schema: Schema, catalog: str, db: str) -> exp.Expr:
    try:
        return qualify(
            parse_sql(sql),
            schema=MappingSchema(cast("dict[str, object]", schema), dialect="duckdb"),
            catalog=catalog,
            db=db,
            dialect="duckdb",
            validate_qualify_columns=True,
            quote_identifiers=True,
        )
    except OptimizeError as error:
        raise ConfigurationError(f"cannot resolve the model SQL: {error}") from error


def parse_table(name: str, catalog: str, db: str) -> TableRef:
    table = exp.to_table(name, dialect="duckdb")
    return TableRef(table.catalog or catalog, table.db or db, table.name)


def _key_columns(root: Operator, columns: tuple[str, ...]) -> tuple[str, ...] | None:
    """Output columns that identify a row, when the model is one row per group key."""
    if not isinstance(root, Project):
        return None
    below = root.child.child if isinstance(root.child, Filter) else root.child
    if not isinstance(below, Aggregate):
        return None
    positions: dict[str, str] = {}
    for (_, expression), column in zip(root.outputs, columns, strict=True):
        if isinstance(expression, exp.Column) and not expression.table:
            positions.setdefault(expression.name, column)
    keys = [positions.get(key_name(i)) for i in range(len(below.keys))]
    if any(k is None for k in keys):
        return None
    return tuple(k for k in keys if k is not None)
