"""Reading a DuckLake table into Spark at a pinned snapshot, through DuckDB.

Listing a table's Parquet files would be wrong (deleted rows, inlined rows, renamed columns),
so each partition asks DuckDB for a range of row ids at the snapshot pinned on the driver.

Once the table's files are rewritten and its inlined data flushed after, DuckLake reads the
snapshots before the rewrite wrongly (``lake.rewritten_since``): the driver refuses such a
snapshot, and each partition checks again before it reads, since a compaction may commit
while the job runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import duckdb
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ..errors import ConfigurationError
from ..runtime.lake import current_snapshot, rewritten_since, table_id
from ..sql import quote
from .options import ALIAS, LakeOptions

ROWS_PER_PARTITION = 1_000_000


@dataclass
class RowRange(InputPartition):
    first: int
    last: int


class DuckLakeReader(DataSourceReader):
    def __init__(self, options: LakeOptions, schema: StructType) -> None:
        self.options = options
        self.columns = [f.name for f in schema.fields]
        with options.connect() as con:
            if options.snapshot is None:
                self.snapshot = current_snapshot(con, ALIAS)
            else:
                self.snapshot = options.snapshot
            self.table_id = table_id(con, options.table)
            self._check_readable(con)
            bounds = con.execute(
                f"SELECT min(rowid), max(rowid), count(*) FROM {self._source()}"
            ).fetchone()
        assert bounds is not None
        low, high, rows = bounds
        self.ranges: list[tuple[int, int]] = []
        if rows:
            parts = options.partitions or max(1, -(-int(rows) // ROWS_PER_PARTITION))
            step = -(-(int(high) - int(low) + 1) // parts)
            self.ranges = [
                (start, min(start + step - 1, int(high)))
                for start in range(int(low), int(high) + 1, step)
            ]

    def _check_readable(self, con: duckdb.DuckDBPyConnection) -> None:
        """Refuse the pinned snapshot when a rewrite and a flush after it made DuckLake read
        it wrongly."""
        if self.table_id is None:
            return
        found = rewritten_since(con, ALIAS, self.table_id, self.snapshot)
        if found is not None:
            _, rewrite, flush = found
            raise ConfigurationError(
                f"snapshot {self.snapshot} of {self.options.table.key} cannot be read: the "
                f"table's files were rewritten in snapshot {rewrite} and its inlined data "
                f"flushed in snapshot {flush}, after which DuckLake reads the snapshots before "
                f"the rewrite wrongly (duckdb/ducklake#1406); read snapshot {rewrite} or later"
            )

    def _source(self) -> str:
        return f"{self.options.table.sql()} AT (VERSION => {self.snapshot})"

    def partitions(self) -> list[RowRange]:
        return [RowRange(first, last) for first, last in self.ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RowRange)
        columns = ", ".join(quote(c) for c in self.columns)
        with self.options.connect(read_only=True) as con:
            con.execute("BEGIN TRANSACTION")  # the check and the read see one catalog state
            self._check_readable(con)
            reader = con.execute(
                f"SELECT {columns} FROM {self._source()} WHERE rowid BETWEEN ? AND ?",
                [partition.first, partition.last],
            ).fetch_record_batch()
            for batch in reader:
                yield _utc_timestamps(batch)


def _utc_timestamps(batch: pa.RecordBatch) -> pa.RecordBatch:
    """DuckDB labels instants ``Etc/UTC``; Spark expects ``UTC`` (the same instants)."""
    fields = batch.schema
    if not any(pa.types.is_timestamp(f.type) and f.type.tz for f in fields):
        return batch
    arrays = [
        column.cast(pa.timestamp(f.type.unit, tz="UTC"))
        if pa.types.is_timestamp(f.type) and f.type.tz
        else column
        for f, column in zip(fields, batch.columns, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, names=fields.names)
