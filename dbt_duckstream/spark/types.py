"""Spark types to DuckDB (DuckLake) types and back."""

from __future__ import annotations

from pyspark.sql import types as T

from ..errors import ConfigurationError

_SIMPLE: dict[type[T.DataType], str] = {
    T.BooleanType: "BOOLEAN",
    T.ByteType: "TINYINT",
    T.ShortType: "SMALLINT",
    T.IntegerType: "INTEGER",
    T.LongType: "BIGINT",
    T.FloatType: "FLOAT",
    T.DoubleType: "DOUBLE",
    T.StringType: "VARCHAR",
    T.BinaryType: "BLOB",
    T.DateType: "DATE",
    # Spark's TIMESTAMP is an instant shown in the session time zone: DuckDB's TIMESTAMPTZ
    T.TimestampType: "TIMESTAMP WITH TIME ZONE",
    T.TimestampNTZType: "TIMESTAMP",
}


def duckdb_type(spark_type: T.DataType) -> str:
    """The DuckLake column type that holds a Spark column without loss."""
    for cls, name in _SIMPLE.items():
        if isinstance(spark_type, cls):
            return name
    if isinstance(spark_type, T.DecimalType):
        return f"DECIMAL({spark_type.precision},{spark_type.scale})"
    if isinstance(spark_type, T.ArrayType):
        return f"{duckdb_type(spark_type.elementType)}[]"
    if isinstance(spark_type, T.MapType):
        return f"MAP({duckdb_type(spark_type.keyType)}, {duckdb_type(spark_type.valueType)})"
    if isinstance(spark_type, T.StructType):
        fields = ", ".join(f'"{f.name}" {duckdb_type(f.dataType)}' for f in spark_type.fields)
        return f"STRUCT({fields})"
    raise ConfigurationError(f"Spark type {spark_type.simpleString()} has no DuckLake type")


_FROM_DUCKDB: dict[str, T.DataType] = {
    "BOOLEAN": T.BooleanType(),
    "TINYINT": T.ByteType(),
    "SMALLINT": T.ShortType(),
    "INTEGER": T.IntegerType(),
    "BIGINT": T.LongType(),
    "FLOAT": T.FloatType(),
    "DOUBLE": T.DoubleType(),
    "VARCHAR": T.StringType(),
    "BLOB": T.BinaryType(),
    "DATE": T.DateType(),
    "TIMESTAMP WITH TIME ZONE": T.TimestampType(),
    "TIMESTAMP": T.TimestampNTZType(),
    "HUGEINT": T.DecimalType(38, 0),
}


def spark_type(duck_type: str, column: str) -> T.DataType:
    """The Spark type a DuckLake column is read as."""
    name = duck_type.upper()
    if name in _FROM_DUCKDB:
        return _FROM_DUCKDB[name]
    if name.startswith("DECIMAL("):
        precision, scale = name[len("DECIMAL(") : -1].split(",")
        return T.DecimalType(int(precision), int(scale))
    if name.endswith("[]"):
        return T.ArrayType(spark_type(duck_type[:-2], column))
    raise ConfigurationError(
        f"column {column} has type {duck_type}, which Spark cannot read from DuckLake"
    )
