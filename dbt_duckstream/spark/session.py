"""A SparkSession with the DuckLake data source registered."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from .datasource import DuckLakeDataSource


def spark_session(master: str | None = None, app_name: str = "dbt-duckstream") -> SparkSession:
    """``local[*]`` unless ``master`` or ``DUCKSTREAM_SPARK_MASTER`` names another master."""
    # Python workers run this interpreter, so that they import the same dbt_duckstream
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(master or os.environ.get("DUCKSTREAM_SPARK_MASTER", "local[*]"))
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.dataSource.register(DuckLakeDataSource)
    return spark
