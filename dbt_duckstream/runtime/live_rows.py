"""Row counts of DuckLake tables at past snapshots, read from the lake's metadata.

A run counts its changed sources at past snapshots: the span check of ``decide`` (``counts``),
and the check that a snapshot only flushed inlined deletions. ``count(*) ... AT (VERSION =>
v)`` binds a DuckLake scan, which lists the table's files and reads its delete files, and at a
snapshot that a delete file spans (DuckLake extends one delete file per data file over every
later deletion, so after any deletion most past snapshots are spanned) it dates every deleted
position: 25 ms for lineitem at TPC-H SF1 (6M rows), against 7 ms at the newest snapshot and
11-20 ms from the metadata (medians, in a transaction). The newest snapshot's count (a
rebuild's cursors) stays a scan. The metadata holds the same count: the record counts of the
data files live at the snapshot, less the deletions live at it (a delete file's count, or the
rows of its snapshot column dated up to it when it spans the snapshot), less the inlined
deletions of file rows, plus the inlined rows live at it.

A layout this does not read is counted by the scan, as before: a data file whose own rows span
the snapshot (merged or flushed rows of several snapshots), a delete file of a merged or
flushed data file that gives no ``partial_max`` (a flush of inlined rows and their inlined
deletions writes one dating each deletion, and leaves ``partial_max`` out), deletion vectors,
an encrypted or remote delete file, a table not live at the snapshot, an expired snapshot.
``test_live_rows`` checks both ways at every snapshot of random histories.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from ..sql import TableRef, literal, quote
from .lake import has_inlined_deletions, live_at, metadata_catalog, row_counts
from .preimages import SNAPSHOT_COLUMN, table_directories


@dataclass(frozen=True)
class CountAt:
    """A table (with its id in its lake) at a snapshot."""

    table: TableRef
    table_id: int
    snapshot: int


def live_row_counts(con: duckdb.DuckDBPyConnection, reads: Sequence[CountAt]) -> list[int]:
    """The reads' row counts: from the metadata, one or two statements per catalog, and
    those it cannot tell by a scan (``lake.row_counts``, one statement)."""
    found: dict[int, int] = {}
    by_catalog: dict[str, list[int]] = defaultdict(list)
    for i, read in enumerate(reads):
        by_catalog[read.table.catalog].append(i)
    for catalog, positions in by_catalog.items():
        counted = _from_metadata(con, catalog, [reads[i] for i in positions])
        found |= {i: n for i, n in zip(positions, counted, strict=True) if n is not None}
    missing = [i for i in range(len(reads)) if i not in found]
    scanned = row_counts(con, [(reads[i].table, reads[i].snapshot) for i in missing])
    found |= dict(zip(missing, scanned, strict=True))
    return [found[i] for i in range(len(reads))]


def _from_metadata(
    con: duckdb.DuckDBPyConnection, catalog: str, reads: list[CountAt]
) -> list[int | None]:
    """Counts of one catalog's reads, None where the metadata does not tell it."""
    meta = metadata_catalog(catalog)
    values = ", ".join(f"({i}, {r.table_id}, {r.snapshot})" for i, r in enumerate(reads))
    files = (
        f"SELECT r.i, r.v, f.* FROM r JOIN {meta}.ducklake_data_file AS f "
        f"ON f.table_id = r.t AND {live_at('r.v', 'f')}"
    )
    rows = con.execute(
        f"""
        WITH r(i, t, v) AS (VALUES {values}),
        f AS ({files}),
        d AS (
          SELECT f.i, f.v, d.delete_count, d.partial_max, d.path, d.path_is_relative,
                 d.format <> 'parquet' OR d.encryption_key IS NOT NULL
                   OR (d.partial_max IS NULL AND f.partial_max IS NOT NULL) AS unread
          FROM f JOIN {meta}.ducklake_delete_file AS d
            ON d.data_file_id = f.data_file_id AND {live_at("f.v", "d")}
        )
        SELECT 'live', r.i, NULL, NULL FROM r
          JOIN {meta}.ducklake_table AS t ON t.table_id = r.t AND {live_at("r.v", "t")}
          WHERE r.v IN (SELECT snapshot_id FROM {meta}.ducklake_snapshot)
        UNION ALL SELECT 'files', i, sum(record_count),
               count(*) FILTER (WHERE partial_max IS NOT NULL AND partial_max > v)
          FROM f GROUP BY i
        UNION ALL SELECT 'deleted', i,
               sum(delete_count) FILTER (WHERE partial_max IS NULL OR partial_max <= v),
               count(*) FILTER (WHERE unread)
          FROM d GROUP BY i
        UNION ALL SELECT 'spanning', i, path, path_is_relative FROM d
          WHERE partial_max > v AND NOT unread
        UNION ALL SELECT 'inlined', r.i, x.table_name, NULL FROM r
          JOIN {meta}.ducklake_inlined_data_tables AS x ON x.table_id = r.t
        """
    ).fetchall()
    live: set[int] = set()
    counts: dict[int, int] = defaultdict(int)
    unread: set[int] = set()
    spanning: dict[int, list[tuple[str, bool]]] = defaultdict(list)
    inlined: dict[int, list[str]] = defaultdict(list)
    for kind, i, a, b in rows:
        if kind == "live":
            live.add(i)
        elif kind in ("files", "deleted"):
            counts[i] += int(a or 0) if kind == "files" else -int(a or 0)
            if b:
                unread.add(i)
        elif kind == "inlined":
            inlined[i].append(str(a))
        else:
            spanning[i].append((str(a), bool(b)))
    readable = [i for i in range(len(reads)) if i in live and i not in unread]
    spans = {i: spanning[i] for i in readable if i in spanning}
    paths = _delete_file_paths(con, catalog, {i: reads[i] for i in spans}, spans)
    done = [i for i in readable if paths.get(i, []) is not None]
    parts = _inlined_parts(con, meta, {i: reads[i] for i in done}, inlined)
    for i in done:
        if found := paths.get(i):
            parts.append(
                f"SELECT {i}, -count(*) FROM read_parquet([{', '.join(map(literal, found))}]) "
                f"WHERE {quote(SNAPSHOT_COLUMN)} <= {reads[i].snapshot}"
            )
    if parts:
        for i, n in con.execute(
            f"SELECT i, sum(n) FROM ({' UNION ALL '.join(parts)}) AS p(i, n) GROUP BY i"
        ).fetchall():
            counts[i] += int(n or 0)
    return [counts[i] if i in done else None for i in range(len(reads))]


def _inlined_parts(
    con: duckdb.DuckDBPyConnection,
    meta: str,
    reads: dict[int, CountAt],
    names: dict[int, list[str]],
) -> list[str]:
    """SQL of (read, rows) parts: the inlined rows live at each read's snapshot (in the
    tables ``names`` lists per read), and (negative) the inlined deletions of its live file
    rows up to it."""
    deletions = {
        t for t in {r.table_id for r in reads.values()} if has_inlined_deletions(con, meta, t)
    }
    parts = []
    for i, read in reads.items():
        at = read.snapshot
        parts += [
            f"SELECT {i}, count(*) FROM {meta}.{quote(name)} AS x WHERE {live_at(at, 'x')}"
            for name in names.get(i, [])
        ]
        if read.table_id in deletions:
            parts.append(
                f"SELECT {i}, -count(*) FROM {meta}.ducklake_inlined_delete_{read.table_id} AS x "
                f"WHERE x.begin_snapshot <= {at} AND x.file_id IN (SELECT f.data_file_id "
                f"FROM {meta}.ducklake_data_file AS f WHERE f.table_id = {read.table_id} "
                f"AND {live_at(at, 'f')})"
            )
    return parts


def _delete_file_paths(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    reads: dict[int, CountAt],
    files: dict[int, list[tuple[str, bool]]],
) -> dict[int, list[str] | None]:
    """The full paths of the delete files spanning each read's snapshot; None for a read
    with a remote one (read by the scan, with the lake's own credentials)."""
    if not reads:
        return {}
    directories = table_directories(con, catalog, (r.table_id for r in reads.values()))
    found: dict[int, list[str] | None] = {}
    for i, read in reads.items():
        directory = directories.get(read.table_id)
        paths = [(directory or "") + path if relative else path for path, relative in files[i]]
        unreadable = (directory is None and any(r for _, r in files[i])) or any(
            "://" in p for p in paths
        )
        found[i] = None if unreadable else paths
    return found
