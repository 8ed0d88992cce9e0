"""The rows a window of snapshots ended, read from the files that held them.

The minus side of a DuckLake table's delta over the window ``(old, new]`` is, as a bag, the rows
alive at ``old`` whose version ended in the window (deleted, or replaced by an update)::

    SELECT cols FROM t AT (VERSION => old)
    WHERE rowid IN (SELECT rowid FROM ducklake_table_deletions(cat, schema, t, old + 1, new))

That reads the pre-image of every touched data file, all columns, and then scans ``t`` at
``old`` again. ``ended_rows_sql`` builds the same rows from DuckLake's own bookkeeping instead:

* which positions of which data files ended in the window: delete files (plain ones carry the
  snapshot that wrote them, partial ones a snapshot per position), deletions inlined into the
  catalog (``ducklake_inlined_delete_<table id>``), and data files that ended as a whole
  (emptied, or replaced by ``ducklake_rewrite_data_files``);
* the values at exactly those positions, only of the columns asked for, with
  ``read_parquet(..., file_row_number = true)`` semi-joined to the positions;
* rows inlined into the catalog whose ``end_snapshot`` falls in the window.

Rows that a file holds but that were not alive at ``old`` (a file merged or flushed after ``old``
holds rows of later snapshots, in its ``_ducklake_internal_snapshot_id`` column) are left out,
and a row's id is its ``_ducklake_internal_row_id`` where the file stores one (files written by
UPDATE, compaction and flushes), ``row_id_start + file_row_number`` otherwise.

>>> import tempfile
>>> from dbt_duckstream.runtime.lake import attach_lake
>>> con, where = duckdb.connect(), tempfile.mkdtemp()
>>> attach_lake(con, f"{where}/lake.ducklake", data_path=f"{where}/data")
>>> _ = con.execute("USE lake")
>>> _ = con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
>>> _ = con.execute("CREATE TABLE t AS SELECT range AS k, range * 10 AS v FROM range(5)")
>>> _ = con.execute("DELETE FROM t WHERE k = 1")
>>> _ = con.execute("UPDATE t SET v = -1 WHERE k = 3")
>>> sql = ended_rows_sql(con, TableRef("lake", "main", "t"), 1, 3, ["v"])
>>> sorted(con.execute(sql).fetchall())
[(10, 1), (30, 3)]

Layouts it does not read return None, and the caller uses the definition above: encrypted
lakes, deletion vectors, nested column types, remote data paths, name-mapped files whose
columns come from hive partitions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import duckdb

from ..sql import TableRef, inlined, literal, quote
from .lake import has_inlined_deletions, live_at, metadata_catalog

#: Parquet field ids of DuckLake's hidden columns (DuckDB's ``MultiFileReader`` constants)
ROW_ID_FIELD = 2147483540  # _ducklake_internal_row_id: explicit row ids
SNAPSHOT_FIELD = 2147483539  # _ducklake_internal_snapshot_id: the snapshot of each row
SNAPSHOT_COLUMN = "_ducklake_internal_snapshot_id"

#: the output column holding each row's DuckLake row id
ROWID = "rowid"

#: DuckLake's names of the primitive types, as DuckDB spells them; others are not read here
DUCKLAKE_TYPES = {
    "boolean": "BOOLEAN",
    "int8": "TINYINT",
    "int16": "SMALLINT",
    "int32": "INTEGER",
    "int64": "BIGINT",
    "int128": "HUGEINT",
    "uint8": "UTINYINT",
    "uint16": "USMALLINT",
    "uint32": "UINTEGER",
    "uint64": "UBIGINT",
    "uint128": "UHUGEINT",
    "float32": "FLOAT",
    "float64": "DOUBLE",
    "time": "TIME",
    "time_ns": "TIME_NS",
    "timetz": "TIMETZ",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_us": "TIMESTAMP",
    "timestamp_ms": "TIMESTAMP_MS",
    "timestamp_ns": "TIMESTAMP_NS",
    "timestamp_s": "TIMESTAMP_S",
    "timestamptz": "TIMESTAMPTZ",
    "interval": "INTERVAL",
    "varchar": "VARCHAR",
    "blob": "BLOB",
    "uuid": "UUID",
    "json": "JSON",
}


@dataclass(frozen=True)
class EndedRows:
    """The query of a window's ended rows, or why there is none (``sql`` is None)."""

    sql: str | None
    reason: str = ""
    data_files: int = 0  # data files the query reads values from
    inlined_tables: int = 0  # catalog tables of inlined rows it reads


def ended_rows_sql(
    con: duckdb.DuckDBPyConnection,
    table: TableRef,
    old: int,
    new: int,
    columns: Sequence[str],
) -> str | None:
    """SQL of the rows of ``table`` alive at ``old`` whose version ended in ``(old, new]``.

    The query yields ``columns`` (named as asked, typed as at ``old``) and ``rowid`` (BIGINT),
    one row per ended row version; it needs nothing created beforehand and embeds as a
    subquery. It reads Parquet files by path and, for inlined rows and deletions, DuckLake's
    metadata catalog: run it in the transaction that planned it (a flush committed in between
    would move inlined rows into a file it does not read). None means a layout this reader
    does not handle: use ``ducklake_table_deletions`` and time travel instead (``ended_rows``
    says why).
    """
    return ended_rows(con, table, old, new, columns).sql


def ended_rows(
    con: duckdb.DuckDBPyConnection,
    table: TableRef,
    old: int,
    new: int,
    columns: Sequence[str],
    skip: frozenset[int] = frozenset(),
) -> EndedRows:
    """``ended_rows_sql`` with the reason when unsupported, and what the query reads.

    ``skip``: snapshots of the window whose ended rows the caller reads elsewhere (captured
    pre-images, ``captured``): rows whose version ended there are left out."""
    if old > new:
        raise ValueError(f"the window ({old}, {new}] is empty the wrong way round")
    try:
        return _Reader(con, table, old, new, list(columns), skip).plan()
    except _Unsupported as unsupported:
        return EndedRows(None, str(unsupported))


class _Unsupported(Exception):
    """A layout the reader does not handle; the message says which."""


@dataclass(frozen=True)
class _Column:
    name: str  # as asked for
    column_id: int
    type: str  # DuckDB type
    initial_default: str | None  # the value of rows written before the column existed

    def default(self) -> str:
        value = "NULL" if self.initial_default is None else literal(self.initial_default)
        return f"CAST({value} AS {self.type}) AS {quote(self.name)}"

    def read(self, stored: str, prefix: str = "", physical: str | None = None) -> str:
        value = f"{prefix}{quote(stored)}"
        if physical == "BLOB" and self.type != "BLOB":  # text a catalog keeps as bytes
            value = f"decode({value})"
        return f"CAST({value} AS {self.type}) AS {quote(self.name)}"


@dataclass
class _DataFile:
    data_file_id: int
    path: str
    ended_whole: bool  # the file itself ended in the window (emptied, or rewritten)
    row_id_start: int | None
    mapping_id: int | None
    partial_max: int | None  # the newest snapshot of its rows, for files spanning several


@dataclass(frozen=True)
class _DeleteFile:
    data_file_id: int
    path: str
    begin: int  # plain files: the snapshot that deleted; partial ones: their oldest deletion
    candidate: bool  # written after ``old``: it may record deletions in the window


@dataclass(frozen=True)
class _Layout:
    """What the data files read with one ``read_parquet`` share."""

    names: tuple[str | None, ...]  # the physical column of each asked column, None if absent
    types: tuple[str, ...]  # their Parquet types, so one scan never unifies schemas
    row_id_column: bool
    snapshot_column: bool
    whole: bool


class _Reader:
    """Plans one query in four statements: the table's context, whether deletions were ever
    inlined, the window's files, and the footers of those files; when the window ended inlined
    rows, one more for their columns and one per inlined-data table (the types it keeps them
    in); and one per name mapping of files it reads."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        table: TableRef,
        old: int,
        new: int,
        columns: list[str],
        skip: frozenset[int] = frozenset(),
    ) -> None:
        self.con, self.table, self.old, self.new = con, table, old, new
        self.asked = columns
        self.skip = skip
        self.meta = metadata_catalog(table.catalog)
        self.mappings: dict[int, dict[int, str]] = {}

    def plan(self) -> EndedRows:
        if any(c.lower() == ROWID for c in self.asked):
            raise _Unsupported("a column named rowid would clash with the row id column")
        self._context()
        if self.old == self.new:
            return EndedRows(self._empty(), "an empty window")
        files, deletes, inlined_deletions, inlined_rows = self._window_files()
        files = self._touched(files, deletes, inlined_deletions)
        parts: list[str] = []
        ctes: list[str] = []
        if files:
            ids = {f.data_file_id for f in files}
            deletes = [d for d in deletes if d.data_file_id in ids]
            ctes = self._event_ctes(files, deletes)
            parts += self._file_reads(files)
        inlined = self._inlined_columns(inlined_rows)
        parts += [self._inlined_read(*table) for table in inlined]
        if not parts:
            return EndedRows(self._empty(), "nothing ended in the window")
        body = "\nUNION ALL\n".join(parts)
        sql = "WITH " + ",\n".join(ctes) + "\n" + body if ctes else body
        return EndedRows(sql, "", len(files), len(inlined))

    def _empty(self) -> str:
        values = [f"CAST(NULL AS {c.type}) AS {quote(c.name)}" for c in self.columns]
        values.append(f"CAST(NULL AS BIGINT) AS {ROWID}")
        return f"SELECT {', '.join(values)} WHERE false"

    def _rows(self, sql: str, params: Sequence[object] | dict[str, object] = ()) -> list[tuple]:
        return self.con.execute(
            inlined(sql, params if isinstance(params, dict) else list(params))
        ).fetchall()

    # -- round trip 1: the lake, the table, its columns ------------------------------------------

    def _context(self) -> None:
        """The table's id at ``new`` (the same at ``old``), the first file id after ``old``, the
        directory of its files, its columns at ``old`` and its inlined-data tables.

        One flat UNION ALL: DuckDB plans it in a fraction of the time scalar subqueries take.
        """
        meta, old, new = self.meta, self.old, self.new

        table_id = "table_id IN (SELECT table_id FROM t)"
        rows = self._rows(
            f"""
            WITH t AS (
              SELECT t.table_id, s.path AS schema_path, s.path_is_relative AS schema_relative,
                     t.path AS table_path, t.path_is_relative AS table_relative
              FROM {meta}.ducklake_table AS t JOIN {meta}.ducklake_schema AS s USING (schema_id)
              WHERE s.schema_name = $schema AND t.table_name = $name
                AND {live_at(new, "t")} AND {live_at(new, "s")}
            )
            SELECT 'table' AS kind, table_id AS id, schema_path AS a, table_path AS b,
                   NULL::VARCHAR AS c, schema_relative AS x, table_relative AS y FROM t
            UNION ALL SELECT 'at old', table_id, NULL, NULL, NULL, NULL, NULL
              FROM {meta}.ducklake_table WHERE {table_id} AND {live_at(old)}
            UNION ALL SELECT 'snapshot', snapshot_id, next_file_id::VARCHAR, NULL, NULL, NULL, NULL
              FROM {meta}.ducklake_snapshot WHERE snapshot_id IN ({old}, {new})
            UNION ALL SELECT 'column', column_id, column_name, column_type, initial_default,
                   NULL, NULL
              FROM {meta}.ducklake_column
             WHERE {table_id} AND parent_column IS NULL AND {live_at(old)}
            UNION ALL SELECT 'inlined', schema_version, table_name, NULL, NULL, NULL, NULL
              FROM {meta}.ducklake_inlined_data_tables WHERE {table_id}
            UNION ALL SELECT 'data path', NULL, data_path, NULL, NULL, NULL, NULL
              FROM ducklake_settings({literal(self.table.catalog)})
            """,
            {"schema": self.table.schema, "name": self.table.name},
        )
        found: dict[str, list[tuple]] = defaultdict(list)
        for kind, *values in rows:
            found[kind].append(tuple(values))
        if not found["table"]:
            raise _Unsupported(f"{self.table.key} does not exist at snapshot {new}")
        if not found["at old"]:
            raise _Unsupported(f"{self.table.key} is not the same table at snapshot {old}")
        snapshots = {int(i): a for i, a, *_ in found["snapshot"]}
        if old not in snapshots or new not in snapshots:
            raise _Unsupported(f"snapshot {old} or {new} does not exist (expired?)")
        table_id, schema_path, table_path, _, schema_relative, table_relative = found["table"][0]
        self.table_id, self.next_file_id = int(table_id), int(snapshots[old])
        self.columns = self._asked_columns(found["column"])
        self.inlined_tables = sorted((str(a), int(i)) for i, a, *_ in found["inlined"])
        self.data_path = table_directory(
            str(found["data path"][0][1]),
            (schema_path, schema_relative),
            (table_path, table_relative),
        )

    def _asked_columns(self, columns: list[tuple]) -> list[_Column]:
        """The asked columns as the table had them at ``old``: (id, name, type, default)."""
        by_name = {str(name): (int(i), str(t), d) for i, name, t, d, *_ in columns}
        folded: dict[str, list[str]] = defaultdict(list)
        for name in by_name:
            folded[name.lower()].append(name)
        found = []
        for asked in self.asked:
            name = asked if asked in by_name else _only(folded.get(asked.lower(), []))
            if name is None:
                raise _Unsupported(f"{self.table.key} has no column {asked} at snapshot {self.old}")
            column_id, ducklake_type, initial_default = by_name[name]
            duckdb_type = duckdb_type_of(ducklake_type)
            if duckdb_type is None:
                raise _Unsupported(f"column {asked} has type {ducklake_type}: not read here")
            found.append(_Column(asked, column_id, duckdb_type, initial_default))
        return found

    def _resolve(self, path: str, relative: bool) -> str:
        full = self.data_path + path if relative else path
        if "://" in full:
            raise _Unsupported(f"a file is remote ({full.split('://')[0]}://)")
        return full

    # -- round trip 2: the files that may hold rows ended in the window --------------------------

    def _window_files(
        self,
    ) -> tuple[list[_DataFile], list[_DeleteFile], set[int], list[tuple[str, int]]]:
        """Data files alive at ``old`` that may hold an ended row, all their delete files up to
        ``new``, the files with deletions inlined in the window, and the inlined-data tables
        holding ended rows (with the schema version of each).

        Whole-ended files ended between ``old`` and ``new``. A delete file written at or before
        ``old`` records no deletion after ``old``: delete files take their ids from the
        snapshots' file counter, so only ids from ``next_file_id`` of ``old`` on can.
        """
        meta = self.meta
        alive = (
            f"SELECT data_file_id FROM {meta}.ducklake_data_file WHERE table_id = $table "
            "AND begin_snapshot <= $old AND (end_snapshot IS NULL OR end_snapshot > $old)"
        )
        inlined_deletions = has_inlined_deletions(self.con, self.meta, self.table_id)
        self.has_inlined_deletions = inlined_deletions
        touched = [
            f"SELECT data_file_id FROM {meta}.ducklake_data_file WHERE table_id = $table "
            "AND begin_snapshot <= $old AND end_snapshot > $old AND end_snapshot <= $new",
            f"SELECT data_file_id FROM {meta}.ducklake_delete_file WHERE table_id = $table "
            f"AND begin_snapshot <= $new AND delete_file_id >= $next AND data_file_id IN ({alive})",
        ]
        if inlined_deletions:
            touched.append(
                f"SELECT file_id FROM {self._inlined_deletions} WHERE begin_snapshot > $old "
                f"AND begin_snapshot <= $new AND file_id IN ({alive})"
            )
        facts = [
            "SELECT 'data' AS kind, data_file_id AS id, path, path_is_relative AS relative, "
            "begin_snapshot AS a, end_snapshot AS b, row_id_start AS c, mapping_id AS d, "
            "partial_max AS e, coalesce(encryption_key IS NOT NULL, false) AS encrypted, "
            f"file_format AS format FROM {meta}.ducklake_data_file "
            "WHERE data_file_id IN (FROM touched)",
            "SELECT 'delete', data_file_id, path, path_is_relative, begin_snapshot, "
            "delete_file_id, NULL, NULL, NULL, coalesce(encryption_key IS NOT NULL, false), "
            f"format FROM {meta}.ducklake_delete_file "
            "WHERE data_file_id IN (FROM touched) AND begin_snapshot <= $new",
        ]
        if inlined_deletions:
            facts.append(
                f"SELECT DISTINCT 'inlined', file_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
                f"false, NULL FROM {self._inlined_deletions} WHERE begin_snapshot > $old "
                f"AND begin_snapshot <= $new AND file_id IN ({alive})"
            )
        ended = "begin_snapshot <= $old AND end_snapshot > $old AND end_snapshot <= $new"
        for i, (name, _version) in enumerate(self.inlined_tables):
            facts.append(
                f"SELECT 'rows', {i}, NULL, NULL, count(*), NULL, NULL, NULL, NULL, false, NULL "
                f"FROM {meta}.{quote(name)} WHERE {ended}"
            )
        rows = self._rows(
            "WITH touched AS (" + " UNION ".join(touched) + ") " + " UNION ALL ".join(facts),
            {"table": self.table_id, "old": self.old, "new": self.new, "next": self.next_file_id},
        )
        files, deletes, inlined, tables = [], [], set(), []
        for kind, fid, path, rel, a, b, c, d, e, encrypted, fmt in rows:
            if encrypted:
                raise _Unsupported("a file is encrypted")
            if fmt is not None and str(fmt).lower() != "parquet":
                raise _Unsupported(
                    f"a {kind} file is {fmt}"
                    + (
                        ": a deletion vector records no snapshot per position"
                        if kind == "delete"
                        else ""
                    )
                )
            if kind == "data":
                ended_whole = b is not None and int(b) <= self.new and int(b) not in self.skip
                files.append(_DataFile(int(fid), self._resolve(path, rel), ended_whole, c, d, e))
            elif kind == "delete":
                deletes.append(
                    _DeleteFile(int(fid), self._resolve(path, rel), int(a), b >= self.next_file_id)
                )
            elif kind == "inlined":
                inlined.add(int(fid))
            elif a:
                tables.append(self.inlined_tables[int(fid)])
        return files, deletes, inlined, tables

    @property
    def _inlined_deletions(self) -> str:
        return f"{self.meta}.{quote(f'ducklake_inlined_delete_{self.table_id}')}"

    # -- round trip 3: footers ---------------------------------------------------------------------

    def _touched(
        self, files: list[_DataFile], deletes: list[_DeleteFile], inlined: set[int]
    ) -> list[_DataFile]:
        """Reads the footers: which delete files record a snapshot per position (and their
        range), how each data file stores the asked columns; keeps the data files with a row
        that may have ended in the window."""
        if not files:
            return []
        data_paths = [f.path for f in files if f.mapping_id is None]
        sources = []
        if data_paths:
            sources.append(
                "SELECT 'schema', file_name, name, field_id, type || '/' || "
                f"coalesce(logical_type::VARCHAR, ''), NULL, NULL "
                f"FROM parquet_schema({_list(data_paths)}) WHERE field_id IS NOT NULL"
            )
        if deletes:
            sources.append(
                f"SELECT 'snapshots', file_name, NULL, NULL, NULL, min(stats_min_value), "
                f"max(stats_max_value) FROM parquet_metadata({_list(d.path for d in deletes)}) "
                f"WHERE path_in_schema = {literal(SNAPSHOT_COLUMN)} GROUP BY file_name"
            )
        self.fields: dict[str, dict[int, tuple[str, str]]] = defaultdict(dict)
        self.partial: dict[str, tuple[int | None, int | None]] = {}
        if sources:
            for kind, file_name, name, field_id, ptype, low, high in self._rows(
                " UNION ALL ".join(sources)
            ):
                if kind == "schema":
                    self.fields[str(file_name)][int(field_id)] = (str(name), str(ptype))
                else:
                    self.partial[str(file_name)] = (_int(low), _int(high))
        maybe = {f.data_file_id for f in files if f.ended_whole} | inlined
        for d in deletes:
            if not d.candidate:
                continue
            if d.path not in self.partial:
                if self.old < d.begin <= self.new and d.begin not in self.skip:
                    maybe.add(d.data_file_id)
                continue
            low, high = self.partial[d.path]
            if (low is None or low <= self.new) and (high is None or high > self.old):
                maybe.add(d.data_file_id)
        return [f for f in files if f.data_file_id in maybe]

    # -- the query -------------------------------------------------------------------------------

    def _event_ctes(self, files: list[_DataFile], deletes: list[_DeleteFile]) -> list[str]:
        """``_ev``: every deletion of the touched files up to ``new`` (file, position,
        snapshot); ``_ended``: positions whose first deletion falls in the window; ``_gone``:
        positions deleted at or before ``old``, or first deleted in a skipped snapshot (a file
        that ended whole is read but for these: the caller reads the skipped ones elsewhere)."""
        sources = []
        for partial in (True, False):
            group = [d for d in deletes if (d.path in self.partial) == partial]
            if not group:
                continue
            file_ids = _list(d.data_file_id for d in group)
            snapshot = (
                quote(SNAPSHOT_COLUMN)
                if partial
                else f"{_list(d.begin for d in group)}[file_index::BIGINT + 1]"
            )
            sources.append(
                f"SELECT {file_ids}[file_index::BIGINT + 1] AS data_file_id, pos, "
                f"{snapshot} AS snap FROM read_parquet({_list(d.path for d in group)})"
            )
        if self.has_inlined_deletions:
            ids = _ints(f.data_file_id for f in files)
            sources.append(
                f"SELECT file_id AS data_file_id, row_id AS pos, begin_snapshot AS snap "
                f"FROM {self._inlined_deletions} WHERE file_id IN ({ids}) "
                f"AND begin_snapshot <= {self.new}"
            )
        if not sources:
            sources.append("SELECT NULL::BIGINT, NULL::BIGINT, NULL::BIGINT WHERE false")
        events = "\n  UNION ALL ".join(sources)
        return [
            f"_ev(data_file_id, pos, snap) AS MATERIALIZED (\n  {events}\n)",
            "_ended AS (SELECT data_file_id, pos FROM _ev GROUP BY data_file_id, pos "
            f"HAVING min(snap) > {self.old} AND min(snap) <= {self.new}{self._kept('min(snap)')})",
            "_gone AS (SELECT data_file_id, pos FROM _ev GROUP BY data_file_id, pos "
            f"HAVING min(snap) <= {self.old}{self._skipped('min(snap)')})",
        ]

    def _skipped(self, snapshot: str) -> str:
        """A condition taking in the skipped snapshots too (empty when none is)."""
        return f" OR {snapshot} IN ({_ints(sorted(self.skip))})" if self.skip else ""

    def _kept(self, snapshot: str) -> str:
        """A condition leaving out the skipped snapshots (empty when none is)."""
        return f" AND {snapshot} NOT IN ({_ints(sorted(self.skip))})" if self.skip else ""

    def _file_reads(self, files: list[_DataFile]) -> list[str]:
        groups: dict[_Layout, list[_DataFile]] = defaultdict(list)
        for f in files:
            groups[self._layout(f)].append(f)
        return [self._group_read(layout, group) for layout, group in groups.items()]

    def _layout(self, f: _DataFile) -> _Layout:
        """How a file stores the asked columns: by field id in the files DuckLake wrote,
        through the catalog's name mapping in files registered with ``ducklake_add_data_files``
        (one scan each: their Parquet types may differ)."""
        wanted = [c.column_id for c in self.columns]
        if f.mapping_id is None:
            fields = self.fields.get(f.path, {})
            if not fields:
                raise _Unsupported(f"{f.path} has no field ids")
            names = tuple(fields[i][0] if i in fields else None for i in wanted)
            types = tuple(fields[i][1] if i in fields else "" for i in wanted)
            row_ids, snapshots = ROW_ID_FIELD in fields, SNAPSHOT_FIELD in fields
        else:
            mapping = self._mapping(f.mapping_id)
            names = tuple(mapping.get(i) for i in wanted)
            types, row_ids, snapshots = (f.path,), False, False
        if not row_ids and f.row_id_start is None:
            raise _Unsupported(f"{f.path} has neither row ids nor a row_id_start")
        if f.partial_max is not None and f.partial_max > self.old and not snapshots:
            raise _Unsupported(f"{f.path} spans snapshots but records none per row")
        return _Layout(names, types, row_ids, snapshots, f.ended_whole)

    def _mapping(self, mapping_id: int) -> dict[int, str]:
        """The source column of each field in files registered under a name mapping."""
        if mapping_id not in self.mappings:
            self.mappings[mapping_id] = {}
            rows = self._rows(
                f"SELECT target_field_id, source_name, coalesce(is_partition, false) "
                f"FROM {self.meta}.ducklake_name_mapping "
                "WHERE mapping_id = ? AND parent_column IS NULL",
                [mapping_id],
            )
            wanted = {c.column_id for c in self.columns}
            for field_id, source_name, is_partition in rows:
                if int(field_id) in wanted and is_partition:
                    raise _Unsupported("a column is read from hive partition paths")
                self.mappings[mapping_id][int(field_id)] = str(source_name)
        return self.mappings[mapping_id]

    def _group_read(self, layout: _Layout, files: list[_DataFile]) -> str:
        """One scan of files sharing a layout, keeping the positions that ended (or, for files
        that ended whole, all but those deleted before ``old``)."""
        values = [
            c.default() if name is None else c.read(name, "d.")
            for c, name in zip(self.columns, layout.names, strict=True)
        ]
        if layout.row_id_column:
            rowid = "d._ducklake_internal_row_id"
        elif len(files) == 1:
            rowid = f"{files[0].row_id_start} + d.file_row_number"
        else:
            starts = _list(f.row_id_start or 0 for f in files)  # all set: see _layout
            rowid = f"{starts}[d.file_index::BIGINT + 1] + d.file_row_number"
        values.append(f"CAST({rowid} AS BIGINT) AS {ROWID}")
        ids = [f.data_file_id for f in files]
        source = "_gone" if layout.whole else "_ended"
        if len(files) == 1:
            keys = f"SELECT pos FROM {source} WHERE data_file_id = {ids[0]}"
            on = "d.file_row_number = k.pos"
        else:
            index = " ".join(f"WHEN {fid} THEN {i}" for i, fid in enumerate(ids))
            keys = (
                f"SELECT CASE data_file_id {index} END AS fi, pos FROM {source} "
                f"WHERE data_file_id IN ({_ints(ids)})"
            )
            on = "d.file_index = k.fi AND d.file_row_number = k.pos"
        join = "ANTI" if layout.whole else "SEMI"
        alive = (
            f"\nWHERE d.{quote(SNAPSHOT_COLUMN)} <= {self.old}" if layout.snapshot_column else ""
        )
        scan = f"read_parquet({_list(f.path for f in files)}, file_row_number = true)"
        return (
            f"SELECT {', '.join(values)}\nFROM {scan} AS d\n"
            f"{join} JOIN ({keys}) AS k ON {on}{alive}"
        )

    # -- round trips 4 and on (only when inlined rows ended): their columns -------------------

    def _inlined_columns(
        self, tables: list[tuple[str, int]]
    ) -> list[tuple[str, list[str | None], dict[str, str]]]:
        """The name of each asked column in each inlined-data table (None: the table predates
        the column), the table's columns at a snapshot of the table's schema version; and the
        types the table keeps its columns in."""
        if not tables:
            return []
        versions = _ints(v for _, v in tables)
        rows = self._rows(
            f"""
            WITH version AS (
              SELECT schema_version, max(snapshot_id) AS snapshot_id
              FROM {self.meta}.ducklake_snapshot WHERE schema_version IN ({versions})
              GROUP BY schema_version
            )
            SELECT v.schema_version, c.column_id, c.column_name
            FROM version AS v JOIN {self.meta}.ducklake_column AS c
              ON c.begin_snapshot <= v.snapshot_id
             AND (c.end_snapshot IS NULL OR c.end_snapshot > v.snapshot_id)
            WHERE c.table_id = ? AND c.parent_column IS NULL
            """,
            [self.table_id],
        )
        names: dict[int, dict[int, str]] = defaultdict(dict)
        for version, column_id, column_name in rows:
            names[int(version)][int(column_id)] = str(column_name)
        found = []
        for name, version in tables:
            if version not in names:
                raise _Unsupported(f"no snapshot left of the schema version of {name}")
            stored = [names[version].get(c.column_id) for c in self.columns]
            found.append((name, stored, self._stored_types(name)))
        return found

    def _stored_types(self, name: str) -> dict[str, str]:
        """The types an inlined-data table keeps its columns in: a PostgreSQL catalog keeps
        VARCHAR and JSON values as BYTEA (cast to VARCHAR, a BLOB's bytes come out escaped:
        ``it\\x27s``), and dates, timestamps and the like as text."""
        described = self._rows(f"DESCRIBE SELECT * FROM {self.meta}.{quote(name)}")
        return {str(column): str(kind).upper() for column, kind, *_ in described}

    def _inlined_read(
        self, name: str, names: list[str | None], stored_types: dict[str, str]
    ) -> str:
        values = [
            c.default() if stored is None else c.read(stored, physical=stored_types.get(stored))
            for c, stored in zip(self.columns, names, strict=True)
        ]
        values.append(f"CAST(row_id AS BIGINT) AS {ROWID}")
        return (
            f"SELECT {', '.join(values)}\nFROM {self.meta}.{quote(name)}\n"
            f"WHERE begin_snapshot <= {self.old} AND end_snapshot > {self.old} "
            f"AND end_snapshot <= {self.new}{self._kept('end_snapshot')}"
        )


def duckdb_type_of(ducklake_type: str) -> str | None:
    lowered = ducklake_type.strip().lower()
    if lowered.startswith("decimal(") and lowered.endswith(")"):
        return lowered.upper()
    return DUCKLAKE_TYPES.get(lowered)


def _only(names: list[str]) -> str | None:
    return names[0] if len(names) == 1 else None


def table_directory(data_path: str, *parts: tuple[str | None, bool | None]) -> str:
    """The directory of a table's files, from the lake's data path and the (path, relative)
    of its schema and of the table: a relative part extends the one above it."""
    path = data_path
    for part, relative in parts:
        if part:
            path = path + str(part) if relative else str(part)
    return path


def table_directories(
    con: duckdb.DuckDBPyConnection, catalog: str, tables: Iterable[int], at: int | None = None
) -> dict[int, str]:
    """The directories of the tables' files (by id), from the tables and schemas live at
    snapshot ``at`` (the current ones when None)."""
    meta = metadata_catalog(catalog)

    def live(alias: str) -> str:
        return f"{alias}.end_snapshot IS NULL" if at is None else live_at(at, alias)

    return {
        int(table_id): table_directory(data_path, (schema, schema_relative), (table, relative))
        for table_id, schema, schema_relative, table, relative, data_path in con.execute(
            "SELECT t.table_id, s.path, s.path_is_relative, t.path, t.path_is_relative, "
            f"(SELECT data_path FROM ducklake_settings({literal(catalog)})) "
            f"FROM {meta}.ducklake_table AS t JOIN {meta}.ducklake_schema AS s USING (schema_id) "
            f"WHERE t.table_id IN ({_ints(sorted(set(tables)))}) "
            f"AND {live('t')} AND {live('s')}"
        ).fetchall()
    }


def _int(value: object) -> int | None:
    try:
        return None if value is None else int(str(value))
    except ValueError:
        return None


def _list(items: Iterable[str | int]) -> str:
    """A DuckDB list literal of strings or integers."""
    return "[" + ", ".join(literal(i) if isinstance(i, str) else str(int(i)) for i in items) + "]"


def _ints(items: Iterable[int]) -> str:
    return ", ".join(str(int(i)) for i in items)
