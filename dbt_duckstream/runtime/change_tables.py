"""Change tables: the old values of the rows a writer ended, kept in the lake beside its sources.

DuckLake keeps a deleted or replaced row's values only in the data file that held it, so
reading the minus side of a scattered batch costs a scan of every row group it touched. A
writer that ends rows has their values in hand: it copies them, in the transaction that ends
them, into the source's change table, so the snapshot that changes the source also holds its
pre-images (Delta Lake's change data feed works the same way).

One change table per source, ``duckstream_preimages.<schema>__<table>`` in the source's lake:

* ``_source_table_id``: the DuckLake id of the source table (a source dropped and created
  again under its name gets a new id; its old rows stay apart);
* ``_begin_snapshot``: the snapshot that wrote the ended row version (``snapshot_id`` of the
  source), so that a window ``(old, new]`` takes the versions alive at ``old``;
* ``_rowid``: the row's DuckLake ``rowid``;
* every column of the source, under its own name and type.

The snapshot that ended a row is the change table's own ``snapshot_id`` (DuckLake's column
of the snapshot that wrote each row): it is the writer's commit, whatever id DuckLake gives
it when it commits. Appends write nothing here.

Columns the source gains are added to its change table when a writer next captures; rows
captured before hold NULL in them (those rows ended before the column existed). Nothing is
ever dropped from a change table. ``expire_captured_rows`` deletes the rows no live window
can read, after ``ducklake_expire_snapshots``.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from ..sql import TableRef, inlined, literal, quote
from .lake import describe, metadata_catalog

#: the schema of every change table of a lake
SCHEMA = "duckstream_preimages"
TABLE_ID, BEGIN, ROWID = "_source_table_id", "_begin_snapshot", "_rowid"
BOOKKEEPING = (TABLE_ID, BEGIN, ROWID)
#: source columns that would hide what a capture reads (DuckLake's ``rowid`` and
#: ``snapshot_id``) or clash with the bookkeeping columns: such sources are not captured
RESERVED = frozenset({"rowid", "snapshot_id", *BOOKKEEPING})
#: type changes DuckLake allows in place (``ALTER ... SET DATA TYPE``), as a capture follows them
PROMOTIONS = {
    "TINYINT": ("SMALLINT", "INTEGER", "BIGINT"),
    "SMALLINT": ("INTEGER", "BIGINT"),
    "INTEGER": ("BIGINT",),
    "UTINYINT": ("USMALLINT", "UINTEGER", "UBIGINT", "SMALLINT", "INTEGER", "BIGINT"),
    "USMALLINT": ("UINTEGER", "UBIGINT", "INTEGER", "BIGINT"),
    "UINTEGER": ("UBIGINT", "BIGINT"),
    "FLOAT": ("DOUBLE",),
}


def change_table(source: TableRef) -> TableRef:
    """The change table of ``source``, in the same lake.

    >>> change_table(TableRef("lake", "raw", "orders")).key
    'lake.duckstream_preimages.raw__orders'
    """
    return TableRef(source.catalog, SCHEMA, f"{source.schema}__{source.name}")


def capturable(columns: Sequence[str]) -> bool:
    """Whether a source with ``columns`` can be captured (no column hides what it reads)."""
    return not any(c.lower() in RESERVED for c in columns)


def capture(
    con: duckdb.DuckDBPyConnection,
    source: TableRef,
    source_id: int,
    columns: dict[str, str],
    rows: str,
) -> bool:
    """Copy the rows of ``source`` that ``rows`` selects (a query of ``source AS t``, e.g.
    ``FROM <source> AS t SEMI JOIN changes AS c ON ...``) into its change table, creating or
    widening the table first. Run it in the writer's transaction, before the rows end.

    ``columns``: the source's columns and types. False when the source cannot be captured
    (``capturable``, or a type change DuckLake cannot apply to the change table): the
    snapshot then holds no pre-images, and readers go to the data files for it."""
    if not capturable(list(columns)):
        return False
    target = change_table(source)
    if not _fit(con, target, columns):
        return False
    names = ", ".join(quote(c) for c in [*BOOKKEEPING, *columns])
    values = ", ".join(
        [str(int(source_id)), "t.snapshot_id", "t.rowid", *(f"t.{quote(c)}" for c in columns)]
    )
    con.execute(f"INSERT INTO {target.sql()} ({names}) SELECT {values} {rows}")
    return True


def _fit(con: duckdb.DuckDBPyConnection, target: TableRef, columns: dict[str, str]) -> bool:
    """Create the change table, or give it the source's new columns and widened types."""
    if not _exists(con, target):
        spec = ", ".join(
            [f"{quote(c)} BIGINT" for c in BOOKKEEPING]
            + [f"{quote(c)} {kind}" for c, kind in columns.items()]
        )
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(target.catalog)}.{quote(target.schema)}")
        con.execute(f"CREATE TABLE {target.sql()} ({spec})")
        return True
    existing = dict(describe(con, target.sql()))
    changes = []
    for name, kind in columns.items():
        held = existing.get(name)
        if held is None:
            changes.append(f"ALTER TABLE {target.sql()} ADD COLUMN {quote(name)} {kind}")
        elif held != kind:
            if kind not in PROMOTIONS.get(held, ()):
                return False
            changes.append(f"ALTER TABLE {target.sql()} ALTER {quote(name)} SET DATA TYPE {kind}")
    for change in changes:
        con.execute(change)
    return True


def _exists(con: duckdb.DuckDBPyConnection, table: TableRef) -> bool:
    """Whether the lake's catalog holds ``table`` (a query of its metadata, 1 ms, where
    ``duckdb_tables()`` lists every table of every attached database: 7-10 ms)."""
    meta = metadata_catalog(table.catalog)
    row = con.execute(
        inlined(
            f"SELECT count(*) FROM {meta}.ducklake_table AS t "
            f"JOIN {meta}.ducklake_schema AS s USING (schema_id) "
            "WHERE s.schema_name = ? AND t.table_name = ? "
            "AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL",
            [table.schema, table.name],
        )
    ).fetchone()
    return bool(row and row[0])


def change_tables(con: duckdb.DuckDBPyConnection, catalog: str) -> list[TableRef]:
    """Every change table of the lake ``catalog``."""
    meta = metadata_catalog(catalog)
    rows = con.execute(
        inlined(
            f"SELECT t.table_name FROM {meta}.ducklake_table AS t "
            f"JOIN {meta}.ducklake_schema AS s USING (schema_id) "
            "WHERE s.schema_name = ? AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL",
            [SCHEMA],
        )
    ).fetchall()
    return [TableRef(catalog, SCHEMA, str(name)) for (name,) in sorted(rows)]


def expire_captured_rows(con: duckdb.DuckDBPyConnection, catalog: str) -> int:
    """Delete the captured rows no window of live snapshots can read: those ended at or
    before the oldest snapshot left. Call it after ``ducklake_expire_snapshots`` (and before
    ``ducklake_cleanup_old_files``, which then removes the files they leave). Returns how many
    rows it deleted; one snapshot for all change tables, or none when nothing expired."""
    tables = change_tables(con, catalog)
    if not tables:
        return 0
    row = con.execute(
        f"SELECT min(snapshot_id) FROM ducklake_snapshots({literal(catalog)})"
    ).fetchone()
    oldest = int(row[0]) if row and row[0] is not None else 0
    con.execute("BEGIN TRANSACTION")
    try:
        deleted = 0
        for table in tables:
            done = con.execute(
                f"DELETE FROM {table.sql()} WHERE snapshot_id <= {oldest}"
            ).fetchone()
            deleted += int(done[0]) if done else 0
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    return deleted
