"""Rows a join term reads of an input narrowed to its delta's keys, from DuckLake's statistics.

A join term reads another input only where its key occurs in the delta (``operators.join``);
the reader skips every data file and row group whose key range misses the delta's keys. New
orders get new keys, so their term skips nearly all of lineitem, which counting lineitem's
rows in full would price like a rebuild. Here the delta's key range is the union of the
ranges of the data files the window wrote or deleted from (and of the inlined rows it
changed), and an input counts the rows of its data files whose range meets it; a file
without statistics for the key, or a type whose order the statistics do not keep, counts in
full.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import duckdb

from ..sql import quote
from .lake import has_inlined_deletions, inlined_tables, live_at, metadata_catalog
from .memo import Memo


@dataclass(frozen=True)
class NarrowedRead:
    """An input of a join term (``table``, read where ``column`` matches) narrowed to the keys
    of ``by_column`` in the delta of ``by_table`` (source keys, as ``TableRef.key``)."""

    table: str
    column: str
    by_table: str
    by_column: str


#: DuckLake's type names whose statistics order as the values do, and the type to compare in
_ORDERED = (
    ("int", "HUGEINT"),
    ("uint", "HUGEINT"),
    ("decimal", "DOUBLE"),
    ("float", "DOUBLE"),
    ("date", "DATE"),
    ("timestamptz", "TIMESTAMPTZ"),
    ("timestamp", "TIMESTAMP"),
    ("varchar", "VARCHAR"),
)


def comparable_type(ducklake_type: str) -> str | None:
    """The type to compare a column's min and max statistics in, or None when they are not
    comparable.

    >>> comparable_type("int64"), comparable_type("timestamp_ns"), comparable_type("blob")
    ('HUGEINT', 'TIMESTAMP', None)
    """
    name = ducklake_type.lower()
    return next((cast for prefix, cast in _ORDERED if name.startswith(prefix)), None)


#: per (lake, span of the delta's table, table ids of the read and of its delta, read): the
#: rows it reads, or None where it cannot be bounded
_MEMO: Memo[tuple[str, tuple[int, int], int, int, NarrowedRead], int | None] = Memo()


def narrowed_rows(
    con: duckdb.DuckDBPyConnection,
    lake: str,
    catalog: str,
    reads: set[NarrowedRead],
    ids: dict[str, int | None],
    spans: dict[str, tuple[int, int]],
) -> dict[NarrowedRead, int]:
    """Rows of each read's input in data files whose key range meets the keys of its delta
    over the delta's span (``spans``, by source key); a read it cannot bound (unknown table,
    column or type; a delta without statistics) is left out, and counts in full. Read once per
    process (``memo``): the models of a run that join the same tables on the same keys share
    it."""

    def key(read: NarrowedRead) -> tuple[str, tuple[int, int], int, int, NarrowedRead]:
        table, by_table = ids.get(read.table) or -1, ids.get(read.by_table) or -1
        return lake, spans[read.by_table], table, by_table, read

    def read(keys: list[tuple[str, tuple[int, int], int, int, NarrowedRead]]) -> dict:
        found: dict = {}
        for span in {k[1] for k in keys}:
            mine = {k[4] for k in keys if k[1] == span}
            bounded = _read(con, catalog, span, mine, ids)
            found |= {k: bounded.get(k[4]) for k in keys if k[1] == span}
        return found

    found = _MEMO.get([key(r) for r in reads if r.by_table in spans], read)
    return {k[4]: rows for k, rows in found.items() if rows is not None}


def _read(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    window: tuple[int, int],
    reads: set[NarrowedRead],
    ids: dict[str, int | None],
) -> dict[NarrowedRead, int]:
    tables = {
        t: tid
        for t in {r.table for r in reads} | {r.by_table for r in reads}
        if (tid := ids.get(t)) is not None
    }
    if not tables:
        return {}
    meta = metadata_catalog(catalog)
    columns = _columns(con, meta, set(tables.values()))
    keyed: dict[NarrowedRead, _Keys] = {}
    for read in reads:
        table, by_table = tables.get(read.table, -1), tables.get(read.by_table, -1)
        mine = columns.get((table, read.column.lower()))
        theirs = columns.get((by_table, read.by_column.lower()))
        if mine is None or theirs is None:
            continue
        kind = comparable_type(theirs[1])
        if kind is not None and kind == comparable_type(mine[1]):
            keyed[read] = _Keys(table, mine[0], by_table, theirs[0], read.by_column, kind)
    found: dict[NarrowedRead, int] = {}
    for kind in sorted({k.kind for k in keyed.values()}):
        typed = {r: k for r, k in keyed.items() if k.kind == kind}
        changed = {(k.by_table, k.by_column_id, k.by_column) for k in typed.values()}
        ranges = _delta_ranges(con, meta, window, changed, kind)
        limited = {
            read: (k.table, k.column_id, bounds)
            for read, k in typed.items()
            if (bounds := ranges.get((k.by_table, k.by_column_id))) is not None
        }
        meeting = _rows_meeting(con, meta, window[1], kind, set(limited.values()))
        found |= {read: meeting[key] for read, key in limited.items()}
    return found


class _Keys(NamedTuple):
    """A narrowed read in table ids and column ids, with the type its keys compare in."""

    table: int
    column_id: int
    by_table: int
    by_column_id: int
    by_column: str
    kind: str


def _columns(
    con: duckdb.DuckDBPyConnection, meta: str, tables: set[int]
) -> dict[tuple[int, str], tuple[int, str]]:
    """The live top-level columns of ``tables``: (table id, lower-case name) -> (id, type)."""
    return {
        (int(table), str(name)): (int(column), str(kind))
        for table, name, column, kind in con.execute(
            f"SELECT table_id, lower(column_name), column_id, column_type "
            f"FROM {meta}.ducklake_column WHERE table_id IN "
            f"({', '.join(str(t) for t in sorted(tables))}) "
            "AND end_snapshot IS NULL AND parent_column IS NULL"
        ).fetchall()
    }


Bounds = tuple[Any, Any]


def _delta_ranges(
    con: duckdb.DuckDBPyConnection,
    meta: str,
    window: tuple[int, int],
    keys: set[tuple[int, int, str]],
    kind: str,
) -> dict[tuple[int, int], Bounds]:
    """Per changed table and key column (ids; ``keys`` also names the column), the least and
    greatest key the window inserted or deleted, bounded by the statistics of the data files it
    wrote or deleted from and by the inlined rows it changed. Left out when a file has no
    statistics for the key or nothing bounds it."""
    old, new = window
    changing = sorted({table for table, _, _ in keys})
    ids = ", ".join(str(t) for t in changing)
    files = [
        f"SELECT table_id, data_file_id FROM {meta}.ducklake_data_file WHERE table_id IN ({ids}) "
        f"AND begin_snapshot > {old} AND begin_snapshot <= {new}",
        f"SELECT table_id, data_file_id FROM {meta}.ducklake_delete_file "
        f"WHERE table_id IN ({ids}) AND begin_snapshot <= {new} "
        f"AND coalesce(partial_max, begin_snapshot) > {old} "
        f"AND (end_snapshot IS NULL OR end_snapshot > {old})",
    ]
    files += [
        f"SELECT {table}, file_id FROM {meta}.ducklake_inlined_delete_{table} "
        f"WHERE begin_snapshot > {old} AND begin_snapshot <= {new}"
        for table in changing
        if has_inlined_deletions(con, meta, table)
    ]
    wanted = ", ".join(f"({table}, {column})" for table, column, _ in sorted(keys))
    low, high = f"TRY_CAST(s.min_value AS {kind})", f"TRY_CAST(s.max_value AS {kind})"
    found: dict[tuple[int, int], list[Bounds]] = {}
    unbounded: set[tuple[int, int]] = set()
    for table, column, lo, hi, missing in con.execute(
        f"SELECT w.table_id, w.column_id, min({low}), max({high}), "
        f"count(*) FILTER ({low} IS NULL OR {high} IS NULL) "
        f"FROM (VALUES {wanted}) AS w(table_id, column_id) "
        f"JOIN ({' UNION '.join(files)}) AS f USING (table_id) "
        f"LEFT JOIN {meta}.ducklake_file_column_stats AS s "
        "ON s.data_file_id = f.data_file_id AND s.column_id = w.column_id GROUP BY ALL"
    ).fetchall():
        if missing:
            unbounded.add((int(table), int(column)))
        else:
            found[(int(table), int(column))] = [(lo, hi)]
    inlined = inlined_tables(con, meta, changing)
    for table, column, name in sorted(keys):
        if (table, column) in unbounded:
            continue
        for stored in inlined.get(table, []):
            try:
                row = con.execute(
                    f"SELECT min(CAST({quote(name)} AS {kind})), max(CAST({quote(name)} AS {kind}))"
                    f" FROM {meta}.{quote(stored)} "
                    f"WHERE (begin_snapshot > {old} AND begin_snapshot <= {new}) "
                    f"OR (end_snapshot > {old} AND end_snapshot <= {new})"
                ).fetchone()
            except duckdb.Error:  # an inlined table of an earlier schema, without the column
                unbounded.add((table, column))
                break
            if row is not None and row[0] is not None:
                found.setdefault((table, column), []).append((row[0], row[1]))
    return {
        key: (min(b[0] for b in bounds), max(b[1] for b in bounds))
        for key, bounds in found.items()
        if key not in unbounded
    }


def _rows_meeting(
    con: duckdb.DuckDBPyConnection,
    meta: str,
    at: int,
    kind: str,
    reads: set[tuple[int, int, Bounds]],
) -> dict[tuple[int, int, Bounds], int]:
    """Per (table id, key column id, bounds): rows of the table's data files live at snapshot
    ``at`` whose key range meets the bounds (a file without statistics for the key meets every
    range)."""
    if not reads:
        return {}
    tables = ", ".join(str(t) for t in sorted({t for t, _, _ in reads}))
    columns = ", ".join(str(c) for c in sorted({c for _, c, _ in reads}))
    files: dict[int, dict[int, int]] = {}  # table -> data file -> rows
    ranges: dict[tuple[int, int], Bounds] = {}  # (data file, column) -> its key range
    for table, file, rows, column, low, high in con.execute(
        f"SELECT f.table_id, f.data_file_id, f.record_count, s.column_id, "
        f"TRY_CAST(s.min_value AS {kind}), TRY_CAST(s.max_value AS {kind}) "
        f"FROM {meta}.ducklake_data_file AS f LEFT JOIN {meta}.ducklake_file_column_stats AS s "
        f"ON s.data_file_id = f.data_file_id AND s.column_id IN ({columns}) "
        f"WHERE f.table_id IN ({tables}) AND {live_at(at, 'f')}"
    ).fetchall():
        files.setdefault(int(table), {})[int(file)] = int(rows)
        if column is not None and low is not None and high is not None:
            ranges[(int(file), int(column))] = (low, high)

    def meeting(table: int, column: int, bounds: Bounds) -> int:
        return sum(
            rows
            for file, rows in files.get(table, {}).items()
            if (found := ranges.get((file, column))) is None
            or not (found[1] < bounds[0] or found[0] > bounds[1])
        )

    return {read: meeting(*read) for read in reads}
