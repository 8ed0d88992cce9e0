"""The rows a window ended, read from the pre-images its writers captured where they did.

A snapshot whose writer captured the rows it ended (``change_tables``) holds their old values
in the source's change table; for those snapshots the minus side is a read of that table::

    SELECT cols, _rowid AS rowid FROM <change table> AT (VERSION => new)
    WHERE _source_table_id = <id> AND snapshot_id > old AND snapshot_id <= new
      AND _begin_snapshot <= old

(``_begin_snapshot <= old``: a row inserted, or updated, inside the window and ended again
there was not alive at ``old``, and a version's snapshots never overlap another's of its row.)
The window's other snapshots that ended rows (a write by DuckDB SQL or another tool) are read
from the data files (``preimages``, told to skip the captured snapshots), and the two are one
bag. A window where the captures cannot be trusted, because a column read changed in it (its
name or type) or the source's or the change table's files were reorganized in it, is read from
the data files alone.

Which snapshot captured what comes from DuckLake's snapshot metadata: a snapshot that
inserted into the change table captured every row it ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from ..sql import TableRef, inlined, quote
from . import preimages
from .change_tables import BEGIN, ROWID, TABLE_ID, change_table
from .lake import FLUSH, REWRITE, live_at, metadata_catalog, snapshot_changes
from .memo import Memo

#: what a snapshot does to a table when it ends rows, and when it adds rows
ENDINGS = frozenset({"deleted_from_table", "inlined_delete"})
INSERTIONS = frozenset({"inserted_into_table", "inlined_insert"})
#: what makes the source's captures in a window unusable: its files were reorganized (rows
#: may change ids; the runtime reads such windows by rowid anyway); a change to a column
#: read does too (``_columns_at``), but other columns come and go freely
SOURCE_UNUSABLE = frozenset({"compacted_table", "merge_adjacent", REWRITE, FLUSH})
#: a rewrite of the change table's files may give the rows it copies its own snapshot
CHANGES_UNUSABLE = frozenset({"compacted_table", REWRITE})


@dataclass(frozen=True)
class CapturedRows:
    """The window's ended rows (``rows``, as ``preimages`` gives them) and how they were read:
    ``note`` says so when captured pre-images were, or could have been, used ("" otherwise)."""

    rows: preimages.EndedRows
    note: str = ""


def ended_rows(
    con: duckdb.DuckDBPyConnection,
    table: TableRef,
    table_id: int,
    old: int,
    new: int,
    columns: Sequence[str],
) -> CapturedRows:
    """The rows of ``table`` (id ``table_id``) alive at ``old`` whose version ended in
    ``(old, new]``: ``columns`` named as asked and typed as at ``old``, and ``rowid``."""
    found = coverage(con, table, table_id, old, new) if old < new else None
    if found is None:
        return CapturedRows(preimages.ended_rows(con, table, old, new, columns))
    ending, captured = found.ending, found.captured
    if not captured:
        rows = preimages.ended_rows(con, table, old, new, columns)
        if not ending:
            return CapturedRows(rows)
        return CapturedRows(rows, _from_files(table, sorted(ending), "captured no pre-images"))
    target = change_table(table)
    unusable = list(found.unusable)
    types, changed = _columns_at(con, table.catalog, table_id, old, new, columns)
    stored = _stored(con, target)
    missing = [c for c in columns if _match(c, types) is None or _match(c, stored) is None]
    if changed:
        unusable.append(f"a change to column {', '.join(changed)}")
    if unusable or missing or any(c.lower() == preimages.ROWID for c in columns):
        why = (
            f"{', '.join(unusable)} in the window"
            if unusable
            else f"no captured column {', '.join(missing)}"
            if missing
            else "a column named rowid"
        )
        rows = preimages.ended_rows(con, table, old, new, columns)
        return CapturedRows(rows, f"ended rows of {table.key} read from data files ({why})")
    read = _captured_sql(target, table_id, old, new, columns, types, stored)
    rest = sorted(ending - captured)
    if not rest:
        rows = preimages.EndedRows(read)
        return CapturedRows(rows, f"ended rows of {table.key} read from captured pre-images")
    files = preimages.ended_rows(con, table, old, new, columns, skip=frozenset(captured))
    note = _from_files(table, rest, "without captured pre-images")
    if files.sql is None:
        return CapturedRows(files, note)
    union = f"SELECT * FROM ({files.sql})\nUNION ALL\n{read}"
    rows = preimages.EndedRows(union, "", files.data_files, files.inlined_tables)
    return CapturedRows(rows, f"ended rows of {table.key} read from captured pre-images; {note}")


@dataclass(frozen=True)
class Coverage:
    """Which snapshots of a window ended rows of a source, which of them captured those rows,
    and what in the window makes the captures unusable (``SOURCE_UNUSABLE``,
    ``CHANGES_UNUSABLE``; a change to a column read is checked by the reader)."""

    ending: frozenset[int]
    captured: frozenset[int]
    unusable: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether every row the window ended can be read from the change table."""
        return bool(self.ending) and self.ending <= self.captured and not self.unusable


def coverage(
    con: duckdb.DuckDBPyConnection, table: TableRef, table_id: int, old: int, new: int
) -> Coverage | None:
    """What the source's writers captured in ``(old, new]``; None when it has no change
    table. Two statements: the change table's id, the window's snapshot changes."""
    target_id = _table_id_at(con, change_table(table), new)
    if target_id is None:
        return None
    changes = snapshot_changes(con, table.catalog, old, new, {table_id, target_id})
    ending = {c.snapshot_id for c in changes if c.table_id == table_id and c.kind in ENDINGS}
    captured = {
        c.snapshot_id for c in changes if c.table_id == target_id and c.kind in INSERTIONS
    } & ending
    unusable = {
        c.kind
        for c in changes
        if (c.table_id == table_id and c.kind in SOURCE_UNUSABLE)
        or (c.table_id == target_id and c.kind in CHANGES_UNUSABLE)
    }
    return Coverage(frozenset(ending), frozenset(captured), tuple(sorted(unusable)))


#: per (lake, source table id, window): whether the writers captured every row it ended
_COMPLETE: Memo[tuple[str, int, tuple[int, int]], bool] = Memo()


def captured_all(
    con: duckdb.DuckDBPyConnection,
    lake: str,
    table: TableRef,
    table_id: int,
    window: tuple[int, int],
) -> bool:
    """Whether every row the window ``(old, new]`` ended in ``table`` (id ``table_id``, of
    the lake ``lake``) is in its change table: then reading them costs a read of those rows,
    not of the row groups of the data files that held them (what the cost estimate prices).
    Read once per process (``memo``)."""
    key = (lake, table_id, window)

    def read(keys: list[tuple[str, int, tuple[int, int]]]) -> dict:
        old, new = window
        found = coverage(con, table, table_id, old, new) if old < new else None
        return {key: found is not None and found.complete}

    return _COMPLETE.get([key], read)[key]


def _from_files(table: TableRef, snapshots: list[int], why: str) -> str:
    listed = ", ".join(str(s) for s in snapshots)
    return f"ended rows of {table.key} read from data files for snapshot(s) {listed} ({why})"


def _captured_sql(
    target: TableRef,
    table_id: int,
    old: int,
    new: int,
    columns: Sequence[str],
    types: dict[str, str],
    stored: dict[str, str],
) -> str:
    values = []
    for asked in columns:
        name = _match(asked, stored)
        kind = preimages.duckdb_type_of(types[_match(asked, types) or asked])
        assert name is not None
        value = quote(name)
        values.append(f"CAST({value} AS {kind})" if kind else value)
        values[-1] += f" AS {quote(asked)}"
    values.append(f"CAST({quote(ROWID)} AS BIGINT) AS {preimages.ROWID}")
    return (
        f"SELECT {', '.join(values)}\nFROM {target.sql()} AT (VERSION => {new})\n"
        f"WHERE {quote(TABLE_ID)} = {int(table_id)} AND snapshot_id > {old} "
        f"AND snapshot_id <= {new} AND {quote(BEGIN)} <= {old}"
    )


def _match(asked: str, names: dict[str, str]) -> str | None:
    """The name among ``names`` that ``asked`` means: itself, or its only case-folded match."""
    if asked in names:
        return asked
    folded = [n for n in names if n.lower() == asked.lower()]
    return folded[0] if len(folded) == 1 else None


def _table_id_at(con: duckdb.DuckDBPyConnection, table: TableRef, at: int) -> int | None:
    meta = metadata_catalog(table.catalog)
    row = con.execute(
        inlined(
            f"SELECT t.table_id FROM {meta}.ducklake_table AS t "
            f"JOIN {meta}.ducklake_schema AS s USING (schema_id) "
            f"WHERE s.schema_name = ? AND t.table_name = ? AND {live_at(at, 't')} "
            f"AND {live_at(at, 's')}",
            [table.schema, table.name],
        )
    ).fetchone()
    return int(row[0]) if row else None


def _columns_at(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    table_id: int,
    old: int,
    new: int,
    asked: Sequence[str],
) -> tuple[dict[str, str], list[str]]:
    """The source's columns at ``old`` with DuckLake's names of their types, and the asked
    ones that changed (renamed, retyped, dropped) in ``(old, new]``: rows captured after such
    a change hold them under another name or type."""
    rows = con.execute(
        inlined(
            "SELECT column_id, column_name, column_type, begin_snapshot, end_snapshot "
            f"FROM {metadata_catalog(catalog)}.ducklake_column "
            "WHERE table_id = ? AND parent_column IS NULL AND begin_snapshot <= ? "
            "AND (end_snapshot IS NULL OR end_snapshot > ?)",
            [table_id, new, old],
        )
    ).fetchall()
    at_old = {
        str(name): (int(cid), str(kind))
        for cid, name, kind, begin, end in rows
        if begin <= old and (end is None or end > old)
    }
    types = {name: kind for name, (_, kind) in at_old.items()}
    ids = {
        at_old[name][0]: asked_name for asked_name in asked if (name := _match(asked_name, types))
    }
    changed = sorted(
        {
            ids[int(cid)]
            for cid, _, _, begin, end in rows
            if int(cid) in ids and (begin > old or (end is not None and end <= new))
        }
    )
    return types, changed


def _stored(con: duckdb.DuckDBPyConnection, target: TableRef) -> dict[str, str]:
    rows = con.execute(f"DESCRIBE {target.sql()}").fetchall()
    return {str(name): str(kind) for name, kind, *_ in rows}
