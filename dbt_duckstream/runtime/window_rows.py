"""The rows a window changed in a catalog's tables, from DuckLake's metadata: what the cost
estimate of ``decide`` prices.

Two statements (and a probe per table for its inlined deletions): the window's data files,
the delete files it extended, and the tables of inlined rows, in one flat query; then one sum
over the inlined rows, the inlined deletions and the snapshot column of the delete files that
began before the window. They were seven statements and one more per table, 15-21 ms for
lineitem and orders at TPC-H SF1 on a 2-core machine (12-14 ms now); each metadata statement
costs its planning, 1-3 ms, more than its rows. A window's counts never change: the later
models of a process reuse them (``memo``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import duckdb

from ..sql import literal, quote
from .lake import has_inlined_deletions, metadata_catalog
from .memo import Memo
from .preimages import SNAPSHOT_COLUMN, table_directories

#: the rows of a Parquet row group DuckLake writes (DuckDB's default): the reader of ended
#: rows decodes the row groups that hold deleted positions
ROW_GROUP_ROWS = 122_880


@dataclass(frozen=True)
class WindowRows:
    """What a window changed in some tables, in rows."""

    #: rows inserted, in new data files or inlined
    inserted: int = 0
    #: rows of the row groups holding the deleted rows of data files, at most the files: the
    #: pre-images are read from them
    pre_images: int = 0
    #: deleted rows of data files
    deleted: int = 0
    #: deleted inlined rows (their old values are in the catalog: cheap to look up)
    inlined_deleted: int = 0


def _row_groups_read(file_rows: str, deleted: str) -> str:
    """SQL of the rows the reader of ended rows decodes in a data file of ``file_rows`` rows
    with ``deleted`` rows ended: the row groups holding them, at most the file."""
    return f"least({file_rows}, {deleted} * {ROW_GROUP_ROWS})"


#: per (lake, table id, span): what the span changed in the table
_MEMO: Memo[tuple[str, int, tuple[int, int]], WindowRows] = Memo()


def per_table(
    con: duckdb.DuckDBPyConnection, lake: str, catalog: str, spans: dict[int, tuple[int, int]]
) -> dict[int, WindowRows]:
    """What each table (id) of ``catalog``, a lake ``lake`` (``lake.lake_identity``), changed
    over its span of snapshots ``(old, new]``: read once per process and table (``memo``)."""

    def read(keys: list[tuple[str, int, tuple[int, int]]]) -> dict:
        found = {}
        for span in {span for _, _, span in keys}:
            tables = {t for _, t, s in keys if s == span}
            found |= {
                (lake, t, span): rows for t, rows in _read(con, catalog, span, tables).items()
            }
        return found

    found = _MEMO.get(((lake, t, span) for t, span in sorted(spans.items())), read)
    return {table: rows for (_, table, _), rows in found.items()}


def _read(
    con: duckdb.DuckDBPyConnection, catalog: str, window: tuple[int, int], tables: set[int]
) -> dict[int, WindowRows]:
    """What the window changed, per table.

    DuckLake extends one delete file per data file across snapshots (``partial_max``): one
    that began in the window holds only its deletions and is counted by its metadata, one
    that began before it also every earlier deletion of its data file, and is counted by its
    snapshot column (a few bytes per deleted row)."""
    meta = metadata_catalog(catalog)
    old, new = window
    ids = ", ".join(str(int(t)) for t in sorted(tables))
    rows = con.execute(
        f"""
        SELECT 'inserted', sum(record_count), NULL, NULL, table_id, NULL, NULL
          FROM {meta}.ducklake_data_file
          WHERE table_id IN ({ids}) AND begin_snapshot > {old} AND begin_snapshot <= {new}
          GROUP BY table_id
        UNION ALL SELECT 'delete', (d.begin_snapshot > {old})::INTEGER, f.record_count,
               d.delete_count, d.table_id, d.path, d.path_is_relative
          FROM {meta}.ducklake_delete_file AS d JOIN {meta}.ducklake_data_file AS f
            USING (data_file_id)
          WHERE d.table_id IN ({ids}) AND d.begin_snapshot <= {new}
            AND coalesce(d.partial_max, d.begin_snapshot) > {old}
            AND (d.end_snapshot IS NULL OR d.end_snapshot > {old})
        UNION ALL SELECT 'inlined', NULL, NULL, NULL, table_id, table_name, NULL
          FROM {meta}.ducklake_inlined_data_tables WHERE table_id IN ({ids})
        """
    ).fetchall()
    # per table: inserted, pre-images, deleted, inlined rows deleted
    counts: dict[int, list[int]] = {t: [0, 0, 0, 0] for t in tables}
    spanning: list[tuple[int, str, bool, int]] = []
    inlined_tables: list[tuple[int, str]] = []
    for kind, a, b, c, table_id, path, relative in rows:
        table = counts[int(table_id)]
        if kind == "inserted":
            table[0] += int(a or 0)
        elif kind == "inlined":
            inlined_tables.append((int(table_id), str(path)))
        elif a:  # a delete file that began in the window
            table[1] += min(int(b), int(c) * ROW_GROUP_ROWS)
            table[2] += int(c)
        else:
            spanning.append((int(table_id), str(path), bool(relative), int(b)))
    parts = [
        f"SELECT 'inlined', {table}, NULL, count(*) FILTER (WHERE begin_snapshot > {old} "
        f"AND begin_snapshot <= {new}), count(*) FILTER (WHERE end_snapshot > {old} "
        f"AND end_snapshot <= {new}) FROM {meta}.{quote(name)}"
        for table, name in inlined_tables
    ]
    parts += [
        f"SELECT 'inlined deletions', {table}, NULL, "
        f"sum({_row_groups_read('f.record_count', 'd.n')}), sum(d.n) FROM "
        f"(SELECT file_id, count(*) AS n FROM {meta}.ducklake_inlined_delete_{table} "
        f"WHERE begin_snapshot > {old} AND begin_snapshot <= {new} GROUP BY file_id) AS d "
        f"JOIN {meta}.ducklake_data_file AS f ON f.data_file_id = d.file_id"
        for table in sorted(tables)
        if has_inlined_deletions(con, meta, table)
    ]
    paths = _paths(con, catalog, new, spanning)
    if paths:
        parts.append(
            f"SELECT 'spanning', NULL, filename, count(*), NULL "
            f"FROM read_parquet([{', '.join(map(literal, paths))}], filename = true) "
            f"WHERE {quote(SNAPSHOT_COLUMN)} > {old} AND {quote(SNAPSHOT_COLUMN)} <= {new} "
            "GROUP BY filename"
        )
    per_file: dict[str, int] = defaultdict(int)
    if parts:
        for kind, table_id, filename, a, b in con.execute(" UNION ALL ".join(parts)).fetchall():
            if kind == "spanning":
                per_file[str(filename)] += int(a)
                continue
            table = counts[int(table_id)]
            if kind == "inlined":
                table[0], table[3] = table[0] + int(a), table[3] + int(b)
            else:  # inlined deletions of file rows
                table[1], table[2] = table[1] + int(a or 0), table[2] + int(b or 0)
    for path, (table_id, *_, file_rows) in zip(paths, spanning, strict=True):
        deleted = per_file.get(path, 0)
        counts[table_id][1] += min(file_rows, deleted * ROW_GROUP_ROWS)
        counts[table_id][2] += deleted
    return {t: WindowRows(*found) for t, found in counts.items()}


def _paths(
    con: duckdb.DuckDBPyConnection, catalog: str, new: int, files: list[tuple[int, str, bool, int]]
) -> list[str]:
    """The full paths of delete files (table id, path, relative, rows of the data file): a
    statement of its own, since appends have none (in the first one it costs 2 ms each run)."""
    if not files:
        return []
    directories = table_directories(con, catalog, (f[0] for f in files), at=new)
    return [directories[t] + p if relative else p for t, p, relative, _ in files]
