"""Spark pipelines feed DuckLake: the ``ducklake`` data source, to write and to read.

Executors write and read Parquet; only the driver touches the DuckLake catalog, and every write
job commits as one DuckLake snapshot (or not at all).
"""

from .datasource import DuckLakeDataSource
from .session import spark_session

__all__ = ["DuckLakeDataSource", "spark_session"]
