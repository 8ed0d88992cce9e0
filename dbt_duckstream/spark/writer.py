"""Writing a DataFrame into a DuckLake table: Parquet from the executors, one commit on the driver.

Each task writes its rows to one Parquet file (under a temporary name, renamed when complete),
and returns the file's path; files go to the lake's data path, a directory or S3-compatible
storage (``storage``). The driver then registers every file, replaces the table's rows, or
applies the change set, in a single DuckLake transaction: one snapshot for the whole job, or,
when anything fails, no snapshot and no files left behind. A commit that loses a race with
another writer of the catalog (``dbt run``, another job) is retried whole (``retry``).

A merge or an overwrite first copies the rows it will end into the table's change table, in
the same transaction (``runtime.change_tables``): maintenance then reads a batch's minus side
from there instead of the data files that held those rows. Appends copy nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..errors import ConfigurationError
from ..retry import ducklake_paths, retrying
from ..runtime.change_tables import capture
from ..runtime.inlining import exact_floats, is_float_type, rounds_inlined_floats
from ..runtime.lake import table_id, transaction
from ..sql import literal, quote
from .options import LakeOptions
from .types import duckdb_type

OPERATIONS = ("insert", "update", "upsert", "delete")


@dataclass
class WrittenFiles(WriterCommitMessage):
    """What one task wrote."""

    files: list[str] = field(default_factory=list)
    rows: int = 0


class DuckLakeWriter(DataSourceArrowWriter):
    """``append``, ``overwrite`` or ``merge`` (when ``merge_on`` names key columns)."""

    def __init__(self, options: LakeOptions, schema: StructType, overwrite: bool) -> None:
        self.options = options
        self.overwrite = overwrite
        self.job = uuid.uuid4().hex[:12]
        self.merge = bool(options.merge_on)
        if self.merge and overwrite:
            raise ConfigurationError("merge_on is for mode('append'); overwrite replaces rows")
        self.columns = {f.name: str(duckdb.sqltype(duckdb_type(f.dataType))) for f in schema.fields}
        if self.merge:
            self._check_change_set()
        self.directory = retrying(self._inspect, f"spark job {self.job} reading {self.table_key}")
        self.staging = (
            f"{self.directory.rsplit('/', 2)[0]}/_duckstream_staging/{self.job}"
            if self.merge
            else self.directory
        )

    def _inspect(self) -> str:
        """Check the DataFrame against the table, if it exists; the table's data directory."""
        with self.options.connect() as con:
            existing = self.options.table_columns(con)
            if existing is not None:
                check_schema(self.table_key, self.table_columns, existing)
            return self.options.data_directory(con)

    @property
    def table_key(self) -> str:
        return self.options.table.key

    @property
    def table_columns(self) -> dict[str, str]:
        """The DataFrame's columns that are table columns (not the merge's operation)."""
        return {c: t for c, t in self.columns.items() if not (self.merge and c == self.op_column)}

    @property
    def op_column(self) -> str:
        return self.options.op_column

    def _check_change_set(self) -> None:
        missing = [k for k in self.options.merge_on if k not in self.columns]
        if missing:
            raise ConfigurationError(f"merge_on columns not in the DataFrame: {', '.join(missing)}")

    # -- on the executors --------------------------------------------------------------------

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        storage = self.options.storage
        storage.make_directory(self.staging)
        name = f"ducklake-spark-{self.job}-{uuid.uuid4().hex}.parquet"
        final = f"{self.staging}/{name}"
        partial = f"{self.staging}/.tmp-{self.job}-{name}"
        writer = None
        rows = 0
        try:
            for batch in iterator:
                if batch.num_rows == 0:
                    continue
                if writer is None:
                    writer = storage.parquet_writer(partial, batch.schema)
                writer.write_batch(batch)
                rows += batch.num_rows
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            return WrittenFiles()
        storage.move(partial, final)
        return WrittenFiles([final], rows)

    # -- on the driver -----------------------------------------------------------------------

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        files = [f for m in messages if isinstance(m, WrittenFiles) for f in m.files]
        try:
            # a commit that lost a race left nothing behind: connect and commit again
            attempts: list[int] = []

            def attempt() -> None:
                attempts.append(1)
                self._connect_and_commit(files, retry=len(attempts) > 1)

            retrying(attempt, f"spark job {self.job}")
        except BaseException:
            self._remove(files)
            raise
        finally:
            self._remove_partials()
            if self.merge:
                self._remove(files)
                self.options.storage.remove_empty_directory(self.staging)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._remove([f for m in messages if isinstance(m, WrittenFiles) for f in m.files])
        self._remove_partials()
        if self.merge:
            self.options.storage.remove_empty_directory(self.staging)

    def _connect_and_commit(self, files: list[str], *, retry: bool) -> None:
        with self.options.connect() as con:
            if retry and self._committed(con):
                return  # the failed attempt's commit had landed after all: never apply twice
            self._commit(con, files)

    def _committed(self, con: duckdb.DuckDBPyConnection) -> bool:
        """Whether a snapshot of this job exists (its commit message names the job)."""
        row = con.execute(
            f"SELECT count(*) FROM {quote(self.options.table.catalog)}.snapshots() "
            "WHERE commit_message LIKE ?",
            [f"spark % job {self.job}"],
        ).fetchone()
        return bool(row and row[0])

    def _commit(self, con: duckdb.DuckDBPyConnection, files: list[str]) -> None:
        table = self.options.table
        with transaction(con):
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(table.catalog)}.{quote(table.schema)}")
            existing = self.options.table_columns(con)
            if existing is None:
                columns = ", ".join(f"{quote(c)} {t}" for c, t in self.table_columns.items())
                con.execute(f"CREATE TABLE {table.sql()} ({columns})")
            else:
                check_schema(table.key, self.table_columns, existing)
            floats = any(is_float_type(kind) for kind in self.table_columns.values())
            exact = floats and rounds_inlined_floats(ducklake_paths(con).get(table.catalog))
            if self.overwrite and existing is not None:
                self._capture(con, f"FROM {table.sql()} AS t", exact)
                con.execute(f"DELETE FROM {table.sql()}")
            if self.merge:
                if files:
                    self._merge(con, files, exact, existing is not None)
            elif files:
                con.execute(
                    f"CALL ducklake_add_data_files({literal(table.catalog)}, "
                    f"{literal(table.name)}, [{', '.join(literal(f) for f in files)}], "
                    f"schema => {literal(table.schema)})"
                )
            con.execute(
                f"CALL {quote(table.catalog)}.set_commit_message('spark', "
                f"{literal(self._message(len(files)))})"
            )

    def _message(self, files: int) -> str:
        mode = "merge" if self.merge else "overwrite" if self.overwrite else "append"
        return f"spark {mode} into {self.options.table.key}: {files} files, job {self.job}"

    def _capture(self, con: duckdb.DuckDBPyConnection, rows: str, exact: bool) -> None:
        """Record the old values of the rows this job ends (``rows``: a query of the table as
        ``t``) in the table's change table, before they end (``change_tables``)."""
        table = self.options.table
        if not self.options.capture:
            return
        source_id = table_id(con, table)
        if source_id is None:
            return
        with exact_floats(con, exact):
            capture(con, table, source_id, self.table_columns, rows)

    def _merge(
        self, con: duckdb.DuckDBPyConnection, files: list[str], exact: bool, existed: bool
    ) -> None:
        """Upserts and deletes by key, as DuckLake updates (pre/post images) and deletes; the
        rows they end are captured first (every change set row ends the rows of its key)."""
        table = self.options.table.sql()
        keys = self.options.merge_on
        op = quote(self.op_column)
        file_list = "[" + ", ".join(literal(f) for f in files) + "]"
        has_op = self.op_column in self.columns
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _duckstream_changes AS "
            f"SELECT * FROM read_parquet({file_list})"
            if has_op
            else "CREATE OR REPLACE TEMP TABLE _duckstream_changes AS "
            f"SELECT *, 'upsert' AS {op} FROM read_parquet({file_list})"
        )
        key_list = ", ".join(quote(k) for k in keys)
        bad = con.execute(
            f"SELECT {op} FROM _duckstream_changes WHERE lower({op}) NOT IN "
            f"({', '.join(literal(o) for o in OPERATIONS)}) OR {op} IS NULL LIMIT 1"
        ).fetchone()
        if bad is not None:
            raise ConfigurationError(
                f"{self.op_column} must be one of {', '.join(OPERATIONS)}; found {bad[0]!r}"
            )
        twice = con.execute(
            f"SELECT {key_list} FROM _duckstream_changes GROUP BY ALL HAVING count(*) > 1 LIMIT 1"
        ).fetchone()
        if twice is not None:
            raise ConfigurationError(
                f"the change set has several rows for key ({key_list}) = {twice}: "
                "a merge needs at most one change per key"
            )
        on = " AND ".join(f"t.{quote(k)} = c.{quote(k)}" for k in keys)
        columns = list(self.table_columns)
        assignments = ", ".join(f"{quote(c)} = c.{quote(c)}" for c in columns if c not in keys)
        column_list = ", ".join(quote(c) for c in columns)
        values = ", ".join(f"c.{quote(c)}" for c in columns)
        upserts = f"(SELECT * FROM _duckstream_changes WHERE lower({op}) <> 'delete')"
        matched = f"WHEN MATCHED THEN UPDATE SET {assignments} " if assignments else ""
        if existed:
            # an upsert of a key-only row changes nothing: only deletes end such rows
            ending = (
                "_duckstream_changes"
                if assignments
                else f"(FROM _duckstream_changes WHERE lower({op}) = 'delete')"
            )
            self._capture(con, f"FROM {table} AS t SEMI JOIN {ending} AS c ON {on}", exact)
        # a small merge's rows would be inlined, its floats stored one bit off (``inlining``);
        # the table's column types are the DataFrame's (``check_schema``)
        with exact_floats(con, exact):
            con.execute(
                f"MERGE INTO {table} AS t USING {upserts} AS c ON {on} "
                f"{matched}WHEN NOT MATCHED THEN INSERT ({column_list}) VALUES ({values})"
            )
        con.execute(
            f"DELETE FROM {table} AS t USING _duckstream_changes AS c "
            f"WHERE lower(c.{op}) = 'delete' AND {on}"
        )
        con.execute("DROP TABLE _duckstream_changes")

    def _remove(self, files: list[str]) -> None:
        self.options.storage.remove(files)

    def _remove_partials(self) -> None:
        storage = self.options.storage
        storage.remove(storage.list_files(self.staging, f".tmp-{self.job}-"))


def check_schema(table: str, frame: dict[str, str], existing: dict[str, str]) -> None:
    """The DataFrame must have the table's columns, with the table's types."""
    problems = []
    if missing := [c for c in existing if c not in frame]:
        problems.append(f"missing from the DataFrame: {', '.join(missing)}")
    if extra := [c for c in frame if c not in existing]:
        problems.append(f"not in the table: {', '.join(extra)}")
    if differ := [
        f"{c} ({frame[c]} in the DataFrame, {existing[c]} in the table)"
        for c in frame
        if c in existing and frame[c] != existing[c]
    ]:
        problems.append(f"different types: {', '.join(differ)}")
    if problems:
        raise ConfigurationError(f"the DataFrame does not match {table}: {'; '.join(problems)}")
