"""The ``ducklake`` Spark data source (Spark 4's Python Data Source API)."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.types import StructField, StructType

from ..errors import ConfigurationError
from .options import LakeOptions
from .reader import DuckLakeReader
from .types import spark_type
from .writer import DuckLakeWriter


class DuckLakeDataSource(DataSource):
    """``df.write.format("ducklake").option("catalog", ...).option("table", ...)``.

    Options: ``catalog`` (DuckLake metadata: a DuckDB file, ``sqlite:<file>`` or
    ``postgres:<dsn>``), ``data_path`` (needed when the lake is created), ``table``
    (``<schema>.<table>``), ``merge_on`` (key columns: the write becomes an upsert/delete
    merge), ``op_column`` (the change set's operation column, default ``_op``: insert, update,
    upsert or delete), ``capture_preimages`` (``true``, the default: a merge or an overwrite
    records the rows it ends in the table's change table, ``runtime.change_tables``),
    ``snapshot`` (read at that snapshot), ``partitions`` (read parallelism).
    """

    @classmethod
    def name(cls) -> str:
        return "ducklake"

    def schema(self) -> StructType:
        lake = LakeOptions.parse(self.options)
        with lake.connect() as con:
            columns = lake.table_columns(con)
        if columns is None:
            raise ConfigurationError(f"table {lake.table.key} does not exist")
        return StructType([StructField(c, spark_type(t, c)) for c, t in columns.items()])

    def reader(self, schema: StructType) -> DataSourceReader:
        return DuckLakeReader(LakeOptions.parse(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return DuckLakeWriter(LakeOptions.parse(self.options), schema, overwrite)
