"""A Spark application landing the integration project's sources in DuckLake, batch by batch.

    python -m tests.spark_batches --catalog postgres:<dsn> --data-path s3://lake/data/ \\
        --s3-endpoint http://127.0.0.1:9000 ...

It reads a batch number per line on stdin and answers ``done <n> <rows in raw.orders>`` once
the batch has committed (each write is one DuckLake snapshot):

1. the seeds of ``integration_tests`` (customers, orders, payments) as the initial load;
2. a change batch: new orders (append), order updates and refunded payments deleted (merges).

S3 settings (``--s3-*``) become the data source's ``s3_*`` options: the executors write their
Parquet files to the bucket through pyarrow, the driver commits through DuckDB's httpfs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dbt_duckstream.spark import spark_session

SEEDS = Path(__file__).resolve().parent.parent / "integration_tests" / "seeds"

SCHEMAS = {
    "customers": "id INT, name STRING, region STRING, tier STRING",
    "orders": "id INT, customer_id INT, status STRING, amount DECIMAL(12,2), ordered_at DATE",
    "payments": "id INT, order_id INT, method STRING, amount DECIMAL(12,2)",
}

S3_OPTIONS = ("endpoint", "region", "access_key_id", "secret_access_key", "url_style", "use_ssl")


class Batches:
    def __init__(self, spark: SparkSession, lake: dict[str, str]) -> None:
        self.spark, self.lake = spark, lake

    def write(self, df: DataFrame, table: str, mode: str = "append", **options: str) -> None:
        df.write.format("ducklake").options(**self.lake, table=table, **options).mode(mode).save()

    def read(self, table: str) -> DataFrame:
        return self.spark.read.format("ducklake").options(**self.lake, table=table).load()

    def initial(self) -> None:
        for table, schema in SCHEMAS.items():
            seed = self.spark.read.csv(str(SEEDS / f"{table}.csv"), header=True, schema=schema)
            self.write(seed, f"raw.{table}", mode="overwrite")

    def changes(self) -> None:
        orders = self.read("raw.orders")
        first = orders.agg(F.max("id")).first()[0] + 1  # type: ignore[index]
        new = self.spark.range(first, first + 25).select(
            F.col("id").cast("int").alias("id"),
            (F.col("id") % 40 + 1).cast("int").alias("customer_id"),
            F.lit("placed").alias("status"),
            (F.col("id") % 97 + 0.5).cast("decimal(12,2)").alias("amount"),
            F.date_add(F.lit("2026-11-01").cast("date"), (F.col("id") % 20).cast("int")).alias(
                "ordered_at"
            ),
        )
        self.write(new, "raw.orders")
        updates = (
            orders.where(F.col("id") % 10 == 0)
            .withColumn("status", F.lit("completed"))
            .withColumn("amount", (F.col("amount") + 1).cast("decimal(12,2)"))
            .withColumn("_op", F.lit("update"))
        )
        self.write(updates, "raw.orders", merge_on="id")
        refunds = (
            self.read("raw.payments")
            .where(F.col("id") % 17 == 0)
            .withColumn("_op", F.lit("delete"))
        )
        self.write(refunds, "raw.payments", merge_on="id")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--catalog", required=True)
    parser.add_argument("--data-path", required=True)
    for name in S3_OPTIONS:
        parser.add_argument(f"--s3-{name.replace('_', '-')}")
    args = parser.parse_args()
    lake = {"catalog": args.catalog, "data_path": args.data_path}
    for name in S3_OPTIONS:
        value = getattr(args, f"s3_{name}")
        if value is not None:
            lake[f"s3_{name}"] = value
    spark = spark_session("local[2]", app_name="duckstream-topology")
    spark.sparkContext.setLogLevel("ERROR")
    batches = Batches(spark, lake)
    print("ready", flush=True)
    for line in sys.stdin:
        batch = line.strip()
        if batch == "1":
            batches.initial()
        elif batch == "2":
            batches.changes()
        else:
            break
        print(f"done {batch} {batches.read('raw.orders').count()}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
