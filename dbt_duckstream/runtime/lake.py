"""DuckLake access: the extension from its wheel, snapshots, and table identities."""

from __future__ import annotations

import importlib.util
import re
import threading
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import duckdb

from ..errors import ConfigurationError
from ..retry import commits_lost, ducklake_paths, sqlite_write_turn
from ..sql import (
    BUILTIN,
    TableRef,
    compares_unequal,
    inlined,
    literal,
    picks_rows,
    quote,
    unique_names,
)
from .breakdown import phase, span
from .sqlite_hold import SqliteWriteHold
from .turns import LAKE, PLANNING

T = TypeVar("T")


def extension_path(name: str) -> Path:
    """A DuckDB extension shipped in its ``duckdb-extension-<name>`` wheel."""
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or spec.origin is None:
        raise ConfigurationError(f"duckdb-extension-{name} is not installed")
    version = duckdb.__version__
    found = sorted(Path(spec.origin).parent.rglob(f"{name}.duckdb_extension"))
    matching = [p for p in found if f"v{version}" in p.parts] or found
    if not matching:
        raise ConfigurationError(f"the duckdb-extension-{name} wheel holds no extension")
    return matching[0]


def ducklake_extension_path() -> Path:
    return extension_path("ducklake")


def load_extension(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Load an extension from its wheel, so nothing is ever downloaded."""
    loaded = con.execute(
        inlined(
            f"SELECT loaded FROM {BUILTIN}.duckdb_extensions() WHERE extension_name = ?", [name]
        )
    ).fetchone()
    if loaded and loaded[0]:
        return
    con.execute(f"LOAD {literal(str(extension_path(name)))}")


def load_ducklake(con: duckdb.DuckDBPyConnection) -> None:
    """Load DuckLake, and turn off the optimizers that give wrong results (``UNSOUND``)."""
    load_extension(con, "ducklake")
    disable_unsound_optimizers(con)


#: optimizers that return wrong rows in DuckDB 1.5.5: ``top_n_window_elimination`` turns a
#: filter ``row_number() OVER (ORDER BY ...) <= n`` into an aggregate, which returns one row
#: of NULLs for an empty input (``SELECT x FROM empty_table QUALIFY row_number() OVER (ORDER
#: BY x) = 1`` gives ``(NULL)``, duckdb/duckdb#23675) and drops rows whose ORDER BY
#: expression is NULL (#23677, #24363). Off for the whole instance, the model's maintenance
#: and its recomputation agree, and both are right.
UNSOUND_OPTIMIZERS = ("top_n_window_elimination",)


def disable_unsound_optimizers(con: duckdb.DuckDBPyConnection) -> None:
    _disable(con, disabled_optimizers(con), UNSOUND_OPTIMIZERS)


#: catalog backends other than a DuckDB file, and the extension each needs
CATALOG_EXTENSIONS = {"sqlite:": "sqlite_scanner", "postgres:": "postgres_scanner"}

#: the ATTACH option that puts a SQLite catalog in write-ahead-log mode
SQLITE_JOURNAL_OPTION = "meta_journal_mode"


def catalog_defaults(location: str) -> dict[str, str]:
    """ATTACH options a catalog needs beside dbt and pipelines, unless the user set them.

    A SQLite catalog in its default rollback-journal mode cannot commit while another
    connection holds a read transaction, and DuckLake holds one for every DuckDB transaction
    that reads the lake: a commit waits out SQLite's busy timeout, fails, and (DuckLake 0.4)
    keeps its lock, so every later read of the lake fails "database is locked" until the
    process ends. In WAL mode readers and the one writer never block each other.

    >>> catalog_defaults("sqlite:/data/lake.sqlite")
    {'meta_journal_mode': 'WAL'}
    >>> catalog_defaults("postgres:dbname=lake")
    {}
    """
    return {SQLITE_JOURNAL_OPTION: "WAL"} if location.startswith("sqlite:") else {}


def attach_lake(
    con: duckdb.DuckDBPyConnection,
    metadata: str,
    *,
    alias: str = "lake",
    data_path: str | None = None,
    read_only: bool = False,
) -> None:
    """Attach a DuckLake whose catalog is a DuckDB file, ``sqlite:<file>`` or ``postgres:<dsn>``."""
    load_ducklake(con)
    location = metadata.removeprefix("ducklake:")
    for prefix, extension in CATALOG_EXTENSIONS.items():
        if location.startswith(prefix):
            load_extension(con, extension)
    options = [f"DATA_PATH {literal(data_path)}"] if data_path else []
    options += [
        f"{key.upper()} {literal(value)}" for key, value in catalog_defaults(location).items()
    ]
    if read_only:
        options.append("READ_ONLY")
    suffix = f" ({', '.join(options)})" if options else ""
    con.execute(f"ATTACH {literal('ducklake:' + location)} AS {quote(alias)}{suffix}")


@contextmanager
def transaction(
    con: duckdb.DuckDBPyConnection, *, writes: bool = True, sqlite: list[str] | None = None
) -> Generator[None]:
    """One DuckLake snapshot, or none: commit when the block ends, roll back when it fails.

    Writing transactions of one process go alone (``turns.LAKE``): DuckLake 0.4 does not
    keep concurrent writers of one DuckDB instance apart (measured: a transaction committing
    beside others stamped its deletions of inlined rows with an earlier snapshot than its own,
    so the change feed placed them in a window already maintained), nor a commit apart from
    other statements (see ``turns``), and dbt runs several models at once on one instance.
    Writers of a SQLite catalog also take turns across processes, even to read (see
    ``retry``), and a writing transaction taken after a lost commit holds the catalog's write
    lock against other processes until its commit (``sqlite_hold``). ``writes=False`` is for
    transactions that only read: they pin a snapshot and read alongside each other.
    ``sqlite``: the SQLite catalog files attached to ``con``, when the caller has looked them
    up already.
    """
    with ExitStack() as turns:
        turns.enter_context(sqlite_write_turn(con, files=sqlite))  # first, as every caller does
        turns.enter_context(LAKE.writing() if writes else LAKE.reading())
        contended = writes and commits_lost() and sqlite != []
        hold = SqliteWriteHold(con, _sqlite_aliases(con) if contended else ())
        hold.acquire()
        started = time.perf_counter()  # its turns taken: its own length
        try:
            with begun(con):
                yield
        finally:
            hold.release()
        with phase("commit" if writes else "decide"):
            con.execute("COMMIT")
        if writes:  # the run's transaction that committed, not the attempts that lost
            span("transaction", time.perf_counter() - started)


@contextmanager
def begun(con: duckdb.DuckDBPyConnection) -> Generator[None]:
    """The block inside a transaction begun on ``con``, rolled back when the block fails;
    the caller commits."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _sqlite_aliases(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The attached DuckLakes whose catalog is a SQLite file."""
    return [alias for alias, path in ducklake_paths(con).items() if path.startswith("sqlite:")]


def describe(con: duckdb.DuckDBPyConnection, relation: str) -> list[tuple[str, str]]:
    """Column names and types of a table or a query, as DuckDB describes them."""
    return [(r[0], r[1]) for r in con.execute(f"DESCRIBE {relation}").fetchall()]


def stored_columns(con: duckdb.DuckDBPyConnection, query: str) -> list[tuple[str, str]]:
    """The columns a query's rows are stored under: its description, with repeated names
    made unique as ``CREATE TABLE AS`` makes them (``unique_names``)."""
    described = describe(con, query)
    return list(zip(unique_names(n for n, _ in described), (t for _, t in described), strict=True))


def is_ducklake(con: duckdb.DuckDBPyConnection, catalog: str) -> bool:
    return catalog in ducklake_catalogs(con)


def ducklake_catalogs(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The attached DuckLake catalogs, in one query (a model checks all its catalogs)."""
    rows = con.execute(
        f"SELECT database_name FROM {BUILTIN}.duckdb_databases() WHERE type = 'ducklake'"
    ).fetchall()
    return {row[0] for row in rows}


def current_snapshot(con: duckdb.DuckDBPyConnection, catalog: str) -> int:
    row = con.execute(f"SELECT id FROM {quote(catalog)}.current_snapshot()").fetchone()
    assert row is not None
    return int(row[0])


def latest_snapshot(con: duckdb.DuckDBPyConnection, catalog: str) -> int:
    """The catalog's latest snapshot, from its metadata catalog: unlike ``current_snapshot``,
    it does not load the lake's catalog (25-80 ms on a process's first use)."""
    row = con.execute(
        f"SELECT {BUILTIN}.max(snapshot_id) FROM {metadata_catalog(catalog)}.ducklake_snapshot"
    ).fetchone()
    assert row is not None
    return int(row[0])


def metadata_catalog(catalog: str) -> str:
    """The attached metadata catalog of a DuckLake: indexed tables, cheap to filter."""
    return quote(f"__ducklake_metadata_{catalog}")


def live_at(at: int | str, alias: str = "") -> str:
    """SQL: a row of the metadata (a file, table, schema, inlined row; of ``alias``) is live
    at snapshot ``at`` (a number, or an SQL expression giving one)."""
    of = f"{alias}." if alias else ""
    return f"{of}begin_snapshot <= {at} AND ({of}end_snapshot IS NULL OR {of}end_snapshot > {at})"


def lake_identity(con: duckdb.DuckDBPyConnection, catalog: str) -> str:
    """What tells lakes apart (table ids and snapshots repeat across lakes, and a catalog name
    is reused when another lake is attached under it): where the lake keeps its data, and
    when it was created (a lake created again in the same place). Read from the metadata
    catalog: DuckLake's ``options()`` costs a transaction of its own, several milliseconds."""
    meta = metadata_catalog(catalog)
    row = con.execute(
        f"SELECT (SELECT {BUILTIN}.max(value) FROM {meta}.ducklake_metadata "
        f"WHERE key = 'data_path' AND scope IS NULL), "
        f"(SELECT {BUILTIN}.min(snapshot_time) FROM {meta}.ducklake_snapshot)"
    ).fetchone()
    path, created = row if row else (None, None)
    return identity_text(catalog, path, created)


def identity_text(catalog: str, path: object, created: object) -> str:
    """A lake's identity from its data path and the time of its oldest snapshot."""
    return f"{path or catalog}@{created}"


def inlined_tables(
    con: duckdb.DuckDBPyConnection, meta: str, tables: Iterable[int]
) -> dict[int, list[str]]:
    """The tables that hold the rows DuckLake inlined into its catalog (``meta``), per table
    id of ``tables``: one per schema version that had inlined rows."""
    ids = ", ".join(str(int(t)) for t in sorted(set(tables)))
    if not ids:
        return {}
    found: dict[int, list[str]] = {}
    for table, name in con.execute(
        f"SELECT table_id, table_name FROM {meta}.ducklake_inlined_data_tables "
        f"WHERE table_id IN ({ids}) ORDER BY table_name"
    ).fetchall():
        found.setdefault(int(table), []).append(str(name))
    return found


def has_inlined_deletions(con: duckdb.DuckDBPyConnection, meta: str, table: int) -> bool:
    """Whether deletions of ``table``'s data file rows were ever inlined into the catalog
    (``meta``): DuckLake creates their table, ``ducklake_inlined_delete_<id>``, on the first
    and lists it nowhere, so it is looked for. A missing table fails in the binder, which
    leaves the caller's transaction usable (on DuckDB, SQLite and PostgreSQL catalogs alike);
    the table is never dropped."""
    try:
        con.execute(f"SELECT 1 FROM {meta}.ducklake_inlined_delete_{int(table)} LIMIT 0")
    except duckdb.CatalogException:
        return False
    return True


def snapshot_exists(con: duckdb.DuckDBPyConnection, catalog: str, snapshot: int) -> bool:
    row = con.execute(
        inlined(
            f"SELECT count(*) FROM {metadata_catalog(catalog)}.ducklake_snapshot "
            "WHERE snapshot_id = ?",
            [snapshot],
        ),
    ).fetchone()
    return bool(row and row[0])


def record_counts(con: duckdb.DuckDBPyConnection, catalog: str, tables: set[int]) -> dict[int, int]:
    """The tables' (ids) rows, from the lake's table statistics."""
    if not tables:
        return {}
    found = con.execute(
        f"SELECT table_id, record_count FROM {metadata_catalog(catalog)}.ducklake_table_stats "
        f"WHERE table_id IN ({', '.join(str(int(i)) for i in sorted(tables))})"
    ).fetchall()
    return {int(t): int(n or 0) for t, n in found}


def snapshots_present(con: duckdb.DuckDBPyConnection, catalog: str, after: int, upto: int) -> bool:
    """Whether every snapshot in ``(after, upto]`` is still there (none expired)."""
    row = con.execute(
        inlined(
            f"SELECT count(*) FROM {metadata_catalog(catalog)}.ducklake_snapshot "
            "WHERE snapshot_id > ? AND snapshot_id <= ?",
            [after, upto],
        )
    ).fetchone()
    return row is not None and row[0] == upto - after


def table_id(con: duckdb.DuckDBPyConnection, table: TableRef) -> int | None:
    """The current DuckLake id of a table: a new id means the table was recreated."""
    return table_ids(con, [table])[table.key]


def table_ids(con: duckdb.DuckDBPyConnection, tables: list[TableRef]) -> dict[str, int | None]:
    """The current ids of several tables, one metadata query per catalog.

    Names match as DuckDB matches identifiers: without regard to case, quoted or not."""
    found: dict[str, int | None] = {t.key: None for t in tables}
    for catalog in sorted({t.catalog for t in tables}):
        wanted: dict[tuple[str, str], list[str]] = {}
        for t in tables:
            if t.catalog == catalog:
                wanted.setdefault((t.schema.lower(), t.name.lower()), []).append(t.key)
        schemas = sorted({schema for schema, _ in wanted})
        marks = ", ".join("?" for _ in schemas)
        meta = metadata_catalog(catalog)
        rows = con.execute(
            inlined(
                f"SELECT lower(s.schema_name), lower(t.table_name), t.table_id "
                f"FROM {meta}.ducklake_table AS t "
                f"JOIN {meta}.ducklake_schema AS s USING (schema_id) "
                f"WHERE lower(s.schema_name) IN ({marks}) "
                "AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL",
                schemas,
            ),
        ).fetchall()
        for schema, name, tid in rows:
            for key in wanted.get((schema, name), []):
                found[key] = int(tid)
    return found


def view_definitions(con: duckdb.DuckDBPyConnection, tables: Iterable[TableRef]) -> dict[str, str]:
    """The ``CREATE VIEW`` statements of those of ``tables`` that are views, by key, in one
    query; names match without regard to case, as DuckDB matches them."""
    wanted: dict[tuple[str, str, str], list[str]] = {}
    for t in tables:
        wanted.setdefault((t.catalog.lower(), t.schema.lower(), t.name.lower()), []).append(t.key)
    if not wanted:
        return {}
    rows = con.execute(
        f"SELECT lower(database_name), lower(schema_name), lower(view_name), sql "
        f"FROM {BUILTIN}.duckdb_views() WHERE NOT internal AND NOT temporary"
    ).fetchall()
    return {
        key: definition
        for catalog, schema, name, definition in rows
        for key in wanted.get((catalog, schema, name), [])
    }


def table_names(
    con: duckdb.DuckDBPyConnection, catalog: str, schema: str, prefix: str
) -> list[str]:
    """Committed tables of a schema whose names start with ``prefix``, from the metadata
    catalog (``duckdb_tables()`` lists every attached catalog's tables: 10x slower)."""
    meta = metadata_catalog(catalog)
    rows = con.execute(
        inlined(
            f"SELECT t.table_name FROM {meta}.ducklake_table AS t "
            f"JOIN {meta}.ducklake_schema AS s USING (schema_id) "
            "WHERE s.schema_name = ? AND starts_with(t.table_name, ?) "
            "AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL",
            [schema, prefix],
        ),
    ).fetchall()
    return sorted(name for (name,) in rows)


#: one ``kind:table_id`` entry of ``ducklake_snapshot_changes.changes_made``; entries naming
#: tables or schemas carry quoted names instead, which this never mistakes for an id
_TABLE_CHANGE = re.compile(r"(?:^|,)([a-z_]+):(\d+)(?=,|$)")


@dataclass(frozen=True)
class SnapshotChange:
    """What one snapshot did to one table, and who committed it."""

    snapshot_id: int
    kind: str  # DuckLake's word: inlined_insert, deleted_from_table, altered_table, ...
    table_id: int
    author: str | None
    message: str | None


def snapshot_changes(
    con: duckdb.DuckDBPyConnection, catalog: str, after: int, upto: int, tables: set[int]
) -> list[SnapshotChange]:
    """The changes to ``tables`` (ids) in the snapshots ``(after, upto]``, from metadata."""
    if not tables:
        return []
    rows = con.execute(
        inlined(
            f"SELECT snapshot_id, changes_made, author, commit_message FROM "
            f"{metadata_catalog(catalog)}.ducklake_snapshot_changes "
            "WHERE snapshot_id > ? AND snapshot_id <= ? ORDER BY snapshot_id",
            [after, upto],
        ),
    ).fetchall()
    return [
        change
        for snapshot_id, changes, author, message in rows
        for change in table_changes(snapshot_id, changes, author, message, tables)
    ]


def table_changes(
    snapshot_id: int, changes: str | None, author: str | None, message: str | None, tables: set[int]
) -> list[SnapshotChange]:
    """What one snapshot's ``changes_made`` did to ``tables`` (ids)."""
    return [
        SnapshotChange(snapshot_id, kind, int(value), author, message)
        for kind, value in _TABLE_CHANGE.findall(changes or "")
        if int(value) in tables
    ]


#: a rewrite of a table's files without their deleted rows (``ducklake_rewrite_data_files``),
#: and a flush of its inlined rows and deletions to files: a flush after a rewrite dates the
#: delete files it writes back, onto the files the rewrite retired, and time travel to any
#: snapshot before the rewrite then reads wrong rows (duckdb/ducklake#1406, DuckLake d8a1881e)
REWRITE, FLUSH = "rewrite_delete", "inline_flush"


def rewritten_history(
    changes: Sequence[SnapshotChange], tables: set[int]
) -> tuple[int, int, int] | None:
    """A table (id) whose files were rewritten and whose inlined data was flushed after, with
    both snapshots: time travel to a snapshot before the rewrite is wrong from then on
    (``REWRITE``), so a window starting there cannot be maintained, nor such a snapshot read."""
    for rewrite in changes:
        if rewrite.kind != REWRITE or rewrite.table_id not in tables:
            continue
        for flush in changes:
            if (
                flush.kind == FLUSH
                and flush.table_id == rewrite.table_id
                and flush.snapshot_id > rewrite.snapshot_id
            ):
                return rewrite.table_id, rewrite.snapshot_id, flush.snapshot_id
    return None


def rewritten_since(
    con: duckdb.DuckDBPyConnection, catalog: str, table: int, snapshot: int
) -> tuple[int, int, int] | None:
    """``rewritten_history`` of one table (id) after ``snapshot``, up to the catalog's current
    one: whether DuckLake now reads the table at ``snapshot`` wrongly."""
    changes = snapshot_changes(con, catalog, snapshot, current_snapshot(con, catalog), {table})
    return rewritten_history(changes, {table})


def read_columns(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    table: int,
    columns: tuple[str, ...],
    *,
    at: int | None = None,
) -> str:
    """The identity of the columns a model reads from a table: DuckLake's column ids, names
    and types. A column dropped and added again has a new id; a type change shows too. As of
    the snapshot ``at`` (a run records them with its pin, and a source may be altered while
    it runs), else now."""
    return tables_columns(con, catalog, {table: columns}, at=at)[table]


def tables_columns(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    reads: Mapping[int, tuple[str, ...]],
    *,
    at: int | None = None,
) -> dict[int, str]:
    """``read_columns`` of several tables of one catalog (by table id), in one query."""
    if not reads:
        return {}
    ids = ", ".join(str(int(t)) for t in sorted(reads))
    if at is None:
        live, parameters = "end_snapshot IS NULL", []
    else:
        live = "begin_snapshot <= ? AND (end_snapshot IS NULL OR end_snapshot > ?)"
        parameters = [at, at]
    rows = con.execute(
        inlined(
            f"SELECT table_id, column_id, column_name, column_type FROM {metadata_catalog(catalog)}"
            f".ducklake_column WHERE table_id IN ({ids}) AND {live} "
            "AND parent_column IS NULL ORDER BY table_id, column_order",
            parameters,
        ),
    ).fetchall()
    found: dict[int, list[str]] = {t: [] for t in reads}
    for tid, cid, name, type_ in rows:
        if name in reads[tid]:
            found[tid].append(f"{cid}:{name}:{type_}")
    return {t: ",".join(identity) for t, identity in found.items()}


def live_rows(
    con: duckdb.DuckDBPyConnection, table: TableRef, snapshot: int, *, newest: bool = False
) -> tuple[int, int]:
    """The table's row count at a snapshot and, when asked (a scan), the newest snapshot that
    wrote one of its live row versions (DuckLake's virtual column ``snapshot_id``)."""
    newest_sql = "coalesce(max(snapshot_id), 0)" if newest else "0"
    row = con.execute(
        f"SELECT count(*), {newest_sql} FROM {table.sql()} AT (VERSION => {snapshot})"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def row_counts(con: duckdb.DuckDBPyConnection, reads: Sequence[tuple[TableRef, int]]) -> list[int]:
    """Row counts of tables at snapshots, in one statement: each count binds a DuckLake scan
    (a few metadata reads), and one statement spares the round trips between them."""
    if not reads:
        return []
    counts = ", ".join(
        f"(SELECT count(*) FROM {table.sql()} AT (VERSION => {int(snapshot)}))"
        for table, snapshot in reads
    )
    row = con.execute(f"SELECT {counts}").fetchone()
    assert row is not None
    return [int(n) for n in row]


def uses_deletion_vectors(con: duckdb.DuckDBPyConnection, catalog: str, tables: set[int]) -> bool:
    """Whether any of ``tables`` has deletes written as deletion vectors: DuckLake does not
    record which snapshot deleted a row in them, so neither its feed nor time travel can tell
    what a window deleted."""
    if not tables:
        return False
    row = con.execute(
        f"SELECT count(*) FROM {metadata_catalog(catalog)}.ducklake_delete_file "
        f"WHERE table_id IN ({', '.join(str(t) for t in sorted(tables))}) "
        "AND format <> 'parquet' AND end_snapshot IS NULL"
    ).fetchone()
    return bool(row and row[0])


#: optimizers that trust column statistics, which DuckLake's feed functions report from the
#: current data files: after a rewrite older pre-images fall outside them (a pre-image v = 0
#: with reported min 1 was compressed into an unsigned offset and wrapped around). A table's
#: own statistics can be wrong too: ``ducklake_rewrite_data_files`` recomputes its bounds
#: without the row versions that live inlined (an updated row), and the next insert sets
#: bounds that exclude them, so ``WHERE k = 3`` prunes a row whose k is 3 (DuckLake d8a1881e)
STATISTICS_OPTIMIZERS = ("compressed_materialization", "statistics_propagation")

#: optimizers that push a join's key range into the scans below its probe side, through a
#: LIMIT, a top-N or a DISTINCT ON (DuckDB 1.5.5; duckdb/duckdb#22924, fixed for LIMIT and
#: top-N after 1.5.5, not for DISTINCT ON): a filter below an operator that picks rows changes
#: which rows it picks. Whether it did depends on whether the join's build side finished
#: first, so ``WITH top AS (... ORDER BY v LIMIT 3) SELECT ... FROM top JOIN s ON ...``
#: returns a wrong row now and then, more often on a loaded machine
JOIN_FILTER_OPTIMIZERS = ("join_filter_pushdown",)

#: what DuckDB 1.5.5 raises when a join's filter is pushed into the scan of a data file whose
#: column has another type than the table's, as a bloom filter, which it cannot cast to the
#: file's type: a HUGEINT column (DuckLake writes it to Parquet as DOUBLE: duckdb/duckdb#21180),
#: or a column widened by ``ALTER ... SET DATA TYPE`` over files written before. Whether the
#: join takes a bloom filter depends on its plan, so the same statement may pass on one table
#: and fail on another. A statement without the pushdown reads the same rows.
JOIN_FILTER_REFUSED = "Can't convert TableFilterType (BLOOM_FILTER) from global to local"

#: the optimizer that replaces a decorrelated subquery's duplicate elimination by a join
#: condition: DuckDB 1.5.5 gets it wrong for a correlation holding an inequality (``<>``,
#: ``IS DISTINCT FROM``) beside another comparison. ``EXISTS (SELECT 1 FROM t WHERE d.id <>
#: t.k AND d.k <= t.k)`` is true for the rows where ``d.id = t.k``, and its ``NOT EXISTS``,
#: ``IS TRUE`` and ``IS FALSE`` forms go wrong the same way (254 of 777 ``EXISTS``, ``NOT
#: EXISTS`` and ``IS TRUE`` forms of up to three correlated comparisons over random rows; none
#: without an inequality, no ``ANY`` or ``ALL`` form, none with it off). Only plans with a
#: correlated subquery change when it is off.
DELIMINATOR_OPTIMIZERS = ("deliminator",)

#: every optimizer the package turns off for a while (``optimizers_off``)
TOGGLED_OPTIMIZERS = STATISTICS_OPTIMIZERS + JOIN_FILTER_OPTIMIZERS + DELIMINATOR_OPTIMIZERS

#: ``disabled_optimizers`` is a setting of the whole DuckDB instance, which every thread
#: shares: the first block to need some off disables them, the last one done restores them.
#: DuckDB reads it without a lock while it plans a query, so a process whose other threads
#: plan queries of their own (dbt's) must not change it while they plan: setting it there
#: crashed dbt (SIGSEGV in ``Optimizer::OptimizerDisabled``, four threads starting models).
#: In such a process (``share_instance``) a change waits until no other thread plans: every
#: statement of dbt's and of this package's runs in the lake's turns, and the bridge calls
#: dbt plans outside them are counted until their function starts (``turns.PLANNING``).
_guard = threading.Lock()
_guard_users = 0
_guard_restore = ""
#: a restore that failed in an aborted transaction, left to the next block
_guard_pending = False
#: optimizers off for the rest of the process (restores keep them off)
_off_for_good: set[str] = set()


#: whether other threads plan statements on this instance (``share_instance``)
_shared = False


def share_instance(con: duckdb.DuckDBPyConnection) -> None:
    """dbt's threads will plan statements on this instance: from now on the optimizers change
    only while no other thread plans (``_changing_settings``). The statistics optimizers, which
    every change feed read needs off, go off for good, so that no run waits to change them."""
    global _shared
    _shared = True
    disable_for_good(con, STATISTICS_OPTIMIZERS)


@contextmanager
def _changing_settings() -> Generator[None]:
    """While an instance-wide setting changes: alone, in a process whose threads share it."""
    if not _shared:
        yield
        return
    with LAKE.alone(), PLANNING.quiet():
        yield


def disabled_optimizers(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The optimizers the DuckDB instance has off now.

    The function is named with its catalog: looked up by name while a DuckLake is the default
    database, it would start a DuckLake transaction (a metadata read, about 1 ms) to search it."""
    row = con.execute(f"SELECT {BUILTIN}.current_setting('disabled_optimizers')").fetchone()
    return [o.strip() for o in str(row[0] if row and row[0] else "").split(",") if o.strip()]


def _disable(con: duckdb.DuckDBPyConnection, current: list[str], names: Iterable[str]) -> None:
    missing = [o for o in names if o not in current]
    if missing:
        con.execute(f"SET disabled_optimizers = {literal(','.join(current + missing))}")


def disable_for_good(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
    """Turn optimizers off for the rest of the process: for SQL that runs outside the
    package's blocks (a dbt test's query), and, in a process whose threads share the instance,
    those every run would turn off (``share_instance``)."""
    global _guard_restore
    names = tuple(names)
    if not names or set(names) <= _off_for_good:
        return
    with _changing_settings(), _guard:
        _off_for_good.update(names)
        _disable(con, disabled_optimizers(con), _off_for_good)
        kept = [o for o in _guard_restore.split(",") if o]
        _guard_restore = ",".join(kept + [o for o in sorted(_off_for_good) if o not in kept])


@contextmanager
def optimizers_off(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> Generator[None]:
    """Disable ``names`` while the block runs, then restore the instance's setting."""
    global _guard_users, _guard_restore, _guard_pending
    names = tuple(names)
    # most models' SQL, and every feed read where they are off for good: no statement (a
    # pending restore waits for the next block)
    if not names or set(names) <= _off_for_good:
        yield
        return
    with _changing_settings(), _guard:
        current = disabled_optimizers(con)
        # off already, and not by another block that will restore them: nothing to change
        unchanged = _guard_users == 0 and not _guard_pending and set(names) <= set(current)
        if not unchanged:
            if _guard_users == 0 and not _guard_pending:
                _guard_restore = ",".join(current)
            _disable(con, current, names)
            _guard_users += 1
    if unchanged:
        yield
        return
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        with _changing_settings(), _guard:
            _guard_users -= 1
            if _guard_users == 0:
                try:
                    con.execute(f"SET disabled_optimizers = {literal(_guard_restore)}")
                    _guard_pending = False
                except duckdb.Error:
                    # a failed statement aborts the transaction, and the restore then fails
                    # too: the statement's own error is the one to report, and the next
                    # block to finish restores the setting
                    if not failed:
                        raise
                    _guard_pending = True


def refused_join_filter(error: BaseException) -> bool:
    """Whether DuckDB refused a join filter it pushed into a scan (``JOIN_FILTER_REFUSED``)."""
    return isinstance(error, duckdb.NotImplementedException) and JOIN_FILTER_REFUSED in str(error)


def without_refused_join_filters(con: duckdb.DuckDBPyConnection, attempt: Callable[[], T]) -> T:
    """``attempt()``, taken again with join filter pushdown off if DuckDB refused a join filter.

    The first attempt's error aborted its transaction, which its own block rolled back, so the
    second one starts from where the first did. Only statements that meet such a file pay the
    second attempt; turning the pushdown off for every statement would make each keyed read of
    a large table a full scan."""
    try:
        return attempt()
    except duckdb.NotImplementedException as error:
        if not refused_join_filter(error):
            raise
    with optimizers_off(con, JOIN_FILTER_OPTIMIZERS):
        return attempt()


def feed_safe_optimizers(con: duckdb.DuckDBPyConnection):
    """Disable statistics-driven optimizers while the block reads the feed, then restore them."""
    return optimizers_off(con, STATISTICS_OPTIMIZERS)


def unsound_optimizers(sql: str) -> tuple[str, ...]:
    """The optimizers that may give ``sql``, or the SQL maintaining it, wrong rows:
    ``JOIN_FILTER_OPTIMIZERS`` when it picks rows, ``DELIMINATOR_OPTIMIZERS`` when it compares
    for inequality."""
    return (JOIN_FILTER_OPTIMIZERS if picks_rows(sql) else ()) + (
        DELIMINATOR_OPTIMIZERS if compares_unequal(sql) else ()
    )


def sound_optimizers(con: duckdb.DuckDBPyConnection, sql: str):
    """Disable ``unsound_optimizers(sql)`` while the block runs; a no-op for most SQL."""
    return optimizers_off(con, unsound_optimizers(sql))
