"""``compile_ivm``: model SQL in, an ``IVMPlan`` out.

The plan holds the operator tree and renders, for a given snapshot window, the DDL of the
maintained table, its build (with the state tables of the operators that keep state), and the
maintenance statements.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from sqlglot import exp

from ..errors import UnsupportedSQLError
from ..sql import TableRef, quote
from .apply import Maintenance, delete_sql, deleted_by_key, insert_sql
from .context import Catalog, MappingCatalog, Schema
from .lowering.tree import build_tree
from .operators import Aggregate, AsofJoin, Filter, Operator, Project, Scan
from .operators.aggregate import key_name
from .parse import parse_statement, parse_table
from .pipeline import RESOLVED, WRITTEN, new_context, run
from .render import MULT, Mode, RenderContext
from .sources import pinned_sql, source_tables
from .store_inputs import identity, normalized, store_inputs
from .ties import Ties, find_ties

#: bumped whenever generated SQL or state changes meaning: maintained tables then rebuild once
PLAN_FORMAT = 3

#: the prefix of every state table of a model (``<prefix><model>_<node>``)
STATE_PREFIX = "_duckstream_state_"

Snapshots = dict[str, tuple[int, int]]


@dataclass(frozen=True)
class StagedBuild:
    """A build computed before its write transaction (``IVMPlan.staged_build``)."""

    #: compute the model's rows and its state into temporary tables
    compute: tuple[str, ...]
    #: recreate the model and its state tables from them
    copy: tuple[str, ...]
    #: drop the temporary tables
    cleanup: tuple[str, ...]


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
    #: the catalog and schema that unqualified names in ``sql`` resolve to
    default_schema: tuple[str, str] = ("memory", "main")
    #: the snapshot of the model's catalog before its sources' schemas were read, when known:
    #: a change to them after it may be missing from the plan (``runtime.unchanged``)
    described_at: int | None = None
    #: the views the model's SQL read, inlined (``inline_views``): ``sql`` holds their definitions
    views: tuple[str, ...] = ()
    #: the sources whose rows its joins read from a state table (``store_inputs``)
    stored_inputs: tuple[str, ...] = ()

    @property
    def catalogs(self) -> tuple[str, ...]:
        return tuple(sorted({s.catalog for s in self.sources}))

    @property
    def source_reads(self) -> dict[str, tuple[str, ...]]:
        """The columns the model reads from each source (by key), in first-read order."""
        reads: dict[str, list[str]] = {s.key: [] for s in self.sources}
        for node in self.root.walk():
            if isinstance(node, Scan):
                names = reads[node.table.key]
                names += [c for c in node.read if c not in names]
        return {key: tuple(names) for key, names in reads.items()}

    def hides_snapshot_id(self, source: str) -> bool:
        """Whether a source has a column named ``snapshot_id`` (DuckLake's virtual one then
        cannot be read)."""
        return any(
            n.hides_snapshot_id
            for n in self.root.walk()
            if isinstance(n, Scan) and n.table.key == source
        )

    @property
    def stored(self) -> tuple[Operator, ...]:
        """The operators that keep state in a table beside the model, in tree order."""
        return tuple(n for n in self.root.walk() if n.stored)

    @property
    def state_tables(self) -> tuple[TableRef, ...]:
        return tuple(n.state_table for n in self.stored if n.state_table is not None)

    def create_table_sql(self, snapshots: Snapshots) -> str:
        if self.column_types is not None:
            cols = ", ".join(
                f"{quote(c)} {t}" for c, t in zip(self.columns, self.column_types, strict=True)
            )
            return f"CREATE TABLE {self.target.sql()} ({cols})"
        return f"CREATE TABLE {self.target.sql()} AS {self.recompute_sql(snapshots)} LIMIT 0"

    def _renamed_columns(self, *, typed: bool = False) -> str:
        """The tree's output columns under the model's column names; ``typed``: cast to the
        model's column types (a delta in which only one side of a UNION changed has that
        side's types, or NULL where ``BY NAME`` pads a column)."""
        types = self.column_types if typed and self.column_types else (None,) * len(self.columns)
        return ", ".join(
            f"{f'CAST({quote(inner)} AS {kind})' if kind else quote(inner)} AS {quote(outer)}"
            for inner, outer, kind in zip(self.root.columns, self.columns, types, strict=True)
        )

    def recompute_sql(self, snapshots: Snapshots) -> str:
        """The model's rows at the new snapshot, from its sources alone."""
        ctx = RenderContext(snapshots, mode=Mode.RECOMPUTE)
        return ctx.query(f"SELECT {self._renamed_columns()} FROM {self.root.state(ctx, 'new')}")

    def build_sql(self, snapshots: Snapshots) -> list[str]:
        """Statements that (re)create the model, and its state, at the new snapshot."""
        model = [f"DROP TABLE IF EXISTS {self.target.sql()}", self.create_table_sql(snapshots)]
        ctx = RenderContext(snapshots, mode=Mode.BUILD, prefix=self.target.name)
        rows = self.root.state(ctx, "new")
        rows_sql = ctx.query(f"SELECT {self._renamed_columns()} FROM {rows}")
        ctx.statement(f"INSERT INTO {self.target.sql()} {rows_sql}")
        return [*model, *ctx.statements]

    def staged_build(self, snapshots: Snapshots) -> StagedBuild:
        """``build_sql``'s work split in two: what computes the model's rows and its state
        into temporary tables at the new snapshot (run before the write transaction), and
        what recreates the tables from them (the transaction: copies only)."""
        ctx = RenderContext(snapshots, mode=Mode.BUILD, prefix=self.target.name, staged=True)
        rows = self.root.state(ctx, "new")
        staged = ctx.temp("stage_rows", f"SELECT {self._renamed_columns()} FROM {rows}")
        copies = [
            f"DROP TABLE IF EXISTS {self.target.sql()}",
            self.create_table_sql(snapshots),
            *(write.sql for write in ctx.writes),
            f"INSERT INTO {self.target.sql()} SELECT * FROM {staged}",
        ]
        return StagedBuild(tuple(ctx.statements), tuple(copies), tuple(ctx.cleanup()))

    def pinned_query(self, snapshots: Snapshots) -> str:
        """The model's own SQL with its sources read at the new snapshot."""
        versions = {s.key: snapshots[s.catalog][1] for s in self.sources}
        catalog, db = self.default_schema
        return pinned_sql(self.sql, catalog, db, versions)

    def refill_sql(self, snapshots: Snapshots, rows: str | None = None) -> list[str]:
        """Statements that refill the model's existing table at the new snapshot with the
        model's own SQL, and drop its state tables.

        For a rebuild chosen for cost: emptying and refilling keeps the table's id and costs
        a much cheaper DuckLake commit than recreating it, and the model's SQL (its sources
        pinned) without the state costs about a bare ``CREATE TABLE AS`` (an aggregate's state
        may hold a row per group of a large input, and the operator tree's query can plan
        worse than the SQL it came from). A later run that maintains builds the state first
        (its tables are missing), so no maintenance ever retracts a row this query wrote
        unless the model keeps no state (every row then is a function of its inputs).

        A model with an ASOF join is refilled from the operator tree instead: DuckDB 1.5.5's
        own ASOF join sometimes matches a row whose time is NULL (``operators.asof_join``),
        which maintenance never does.

        ``rows``: a relation holding ``refill_rows_sql``'s rows already (computed before the
        write transaction, which then only copies them)."""
        query = f"SELECT * FROM {rows}" if rows else self.refill_rows_sql(snapshots)
        return [
            f"DELETE FROM {self.target.sql()}",
            f"INSERT INTO {self.target.sql()} {query}",
            *(f"DROP TABLE IF EXISTS {table.sql()}" for table in self.state_tables),
        ]

    def refill_rows_sql(self, snapshots: Snapshots) -> str:
        """The rows a refill writes (``refill_sql``)."""
        asof = any(isinstance(n, AsofJoin) for n in self.root.walk())
        return self.recompute_sql(snapshots) if asof else self.pinned_query(snapshots)

    def maintenance(
        self,
        snapshots: Snapshots,
        changed: frozenset[str],
        feeds: dict[str, str] | None = None,
        reorganized: frozenset[str] = frozenset(),
        appended: frozenset[str] = frozenset(),
        large: frozenset[str] = frozenset(),
    ) -> Maintenance | None:
        """Statements that bring the model from the old to the new snapshot (None: no change).

        ``feeds`` names relations already holding some sources' deltas (see ``Scan``);
        ``reorganized`` names the changed sources whose files a rewrite, compaction or flush
        reorganized in the window (their scans then take the delta per rowid); ``appended``
        names those the window only inserted into (their deltas end no row); ``large`` the
        tables worth another scan to read fewer of their rows (``RenderContext.large``)."""
        ctx = RenderContext(
            snapshots,
            changed,
            prefix=self.target.name,
            feeds=feeds or {},
            reorganized=reorganized,
            appended=appended,
            large=large,
        )
        delta = self.root.delta(ctx)
        if delta is None:
            return None
        consolidated = ctx.temp(
            "delta",
            f"SELECT {self._renamed_columns(typed=True)}, SUM({MULT})::BIGINT AS {MULT} "
            f"FROM {delta}\n"
            f"GROUP BY ALL HAVING SUM({MULT}) <> 0",
        )
        target = self.target.sql()
        keys = deleted_by_key(self.columns, self.key_columns, self.column_types)
        delete, rest = delete_sql(
            target,
            self.columns,
            keys,
            consolidated,
            self.column_types,
            large=self.target.key in large,
        )
        return Maintenance(
            build=ctx.statements,
            delete=delete,
            insert=insert_sql(target, self.columns, consolidated),
            delta_table=consolidated,
            always=ctx.writes,
            fills=ctx.fills,
            cleanup=ctx.cleanup(),
            deletes_only_retracted=keys is None,
            delete_rest=rest,
        )

    def strategies(self) -> dict[str, str]:
        """How each operator without a row-by-row rule is maintained, by its node name."""
        return {n.name: n.strategy for n in self.root.walk() if n.strategy is not None}

    @property
    def ties(self) -> Ties:
        """The windows whose result the order of rows tied in their ORDER BY may change."""
        return find_ties(self.root, self.columns)

    def recomputed_in_full(self, changed: frozenset[str]) -> list[str]:
        """What a window in which the sources ``changed`` (keys) changed recomputes in full."""
        return [
            note
            for n in self.root.walk()
            if (note := n.recomputed_in_full()) is not None
            and any(s.key in changed for s in n.sources())
        ]

    def explain(self) -> str:
        """The plan's SQL for a window in which every source changed, for reading."""
        snapshots = {c: (0, 1) for c in self.catalogs}
        changed = frozenset(s.key for s in self.sources)
        maintenance = self.maintenance(snapshots, changed)
        assert maintenance is not None
        strategies = "; ".join(f"{n}: {s}" for n, s in self.strategies().items())
        parts = [
            f"-- model {self.target.key}: keyed on {self.key_columns}"
            + (f"; {strategies}" if strategies else ""),
            *self.ties.notes(),
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
    schema: Schema | Catalog,
    catalog: str,
    db: str = "main",
    output_columns: list[tuple[str, str]] | None = None,
    stored_inputs: tuple[str, ...] = (),
) -> IVMPlan:
    """Compile model SQL into an ``IVMPlan``.

    ``schema`` is the catalog the model lives in (``context.Catalog``), or the columns of
    every source table (catalog -> schema -> table -> column -> type); unqualified table names
    resolve to ``catalog``.``db``. ``output_columns`` (names and types, as DuckDB describes
    the query) fixes the maintained table's exact column names and types (the catalog's
    ``output`` when not given); without either the table is created from the plan's own query.
    The SQL is parsed once, and goes through the rewrites' phases (``pipeline``).
    ``stored_inputs`` names the sources whose rows, where a join reads them under conditions
    of their own, are kept in a state table (``store_inputs``).
    """
    if isinstance(target, str):
        target = parse_table(target, catalog, db)
    lookup = MappingCatalog(schema) if isinstance(schema, dict) else schema
    context = new_context(catalog, db, lookup)
    statement = parse_statement(sql)
    pivoted = statement.find(exp.Pivot) is not None
    statement = run(WRITTEN, statement, context)
    # the SQL the model stands for, as DuckDB runs it: as written unless rewritten for it
    model_sql = statement.sql(dialect="duckdb") if pivoted or context.views else sql
    tables = lookup.schema(source_tables(statement, catalog, db))
    if output_columns is None:
        output_columns = lookup.output(sql)
    qualified = run(RESOLVED, statement, context.with_schema(tables))
    root = build_tree(qualified, tables)
    stored_inputs = normalized(stored_inputs)
    store_inputs(root, stored_inputs)
    for node in root.walk():
        if node.stored:
            node.state_table = state_table(target, node.node_id)
    columns = root.columns
    types: tuple[str, ...] | None = None
    if output_columns is not None:
        if len(output_columns) != len(columns):
            raise UnsupportedSQLError(
                "an expression that stands for several columns (DuckDB's columns: "
                f"{', '.join(name for name, _ in output_columns)}; the compiler's: "
                f"{', '.join(columns)})",
                "a STRUCT's fields by s.* or unnest(s); select each field by name, "
                "s.a AS a, s.b AS b",
            )
        columns = tuple(name for name, _ in output_columns)
        types = tuple(t for _, t in output_columns)
    qualified_sql = qualified.sql(dialect="duckdb")
    # the inputs stored change the state a model keeps: a model built without them rebuilds
    stored = identity(stored_inputs)
    digest = hashlib.sha256(
        f"{PLAN_FORMAT}\n{target.key}\n{qualified_sql}{stored}".encode()
    ).hexdigest()
    return IVMPlan(
        sql=model_sql,
        target=target,
        root=root,
        columns=columns,
        column_types=types,
        key_columns=_key_columns(root, columns),
        sql_hash=digest[:16],
        qualified_sql=qualified_sql,
        sources=tuple(sorted(root.sources(), key=lambda s: s.key)),
        default_schema=(catalog, db),
        views=tuple(context.views),
        stored_inputs=stored_inputs,
    )


def state_table(target: TableRef, node_id: int) -> TableRef:
    """Where an operator of a model keeps its state: beside the model."""
    return target.sibling(f"{STATE_PREFIX}{target.name}_{node_id}")


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
