"""What capturing pre-images costs the Spark writer: a merge batch with and without capture.

    python -m benchmarks.capture [--orders 1000000] [--ratio 0.001] [--runs 5] [--workdir DIR]

Spark lands ``--orders`` orders in DuckLake (five columns, as the demo's), then merges batches
into them by key: ``ratio`` of the orders updated (a new status) and as many other orders
deleted, at random keys. Batches alternate between ``capture_preimages`` true and false (the
order swapped every run, so neither side always follows the other), each with keys of its own.
Two timings per batch, medians over ``--runs``:

* the Spark job: ``df.write.format("ducklake")...save()``, as a pipeline waits for it;
* the commit alone: the same change set through the writer's driver side (the Parquet file
  written, then the one DuckLake transaction), without Spark's scheduling around it.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dbt_duckstream.runtime.change_tables import change_table
from dbt_duckstream.runtime.lake import attach_lake
from dbt_duckstream.spark import spark_session
from dbt_duckstream.spark.options import LakeOptions
from dbt_duckstream.spark.writer import DuckLakeWriter
from dbt_duckstream.sql import TableRef

ORDERS = TableRef("lake", "raw", "orders")
STATUSES = ["placed", "shipped", "completed", "returned"]


def orders(ids: DataFrame) -> DataFrame:
    return ids.select(
        F.col("id").cast("int").alias("id"),
        (F.abs(F.hash("id")) % 100_000 + 1).cast("int").alias("customer_id"),
        F.element_at(
            F.array(*map(F.lit, STATUSES)), (F.abs(F.hash(F.col("id") * 3)) % 4 + 1).cast("int")
        ).alias("status"),
        ((F.abs(F.hash(F.col("id") * 5)) % 50000) / 100).cast("decimal(12,2)").alias("amount"),
        F.date_add(F.lit("2026-01-01").cast("date"), (F.col("id") % 300).cast("int")).alias(
            "ordered_at"
        ),
    )


class Bench:
    def __init__(self, workdir: Path, count: int, ratio: float, seed: int = 7) -> None:
        self.workdir, self.count = workdir, count
        self.size = max(1, int(count * ratio))
        self.lake = {
            "catalog": str(workdir / "lake.ducklake"),
            "data_path": str(workdir / "data"),
            "table": "raw.orders",
        }
        self.random = random.Random(seed)
        self.used: set[int] = set()

    def keys(self) -> tuple[list[int], list[int]]:
        """Keys to update and keys to delete, never used by an earlier batch."""
        chosen: list[int] = []
        while len(chosen) < 2 * self.size:
            key = self.random.randint(1, self.count)
            if key not in self.used:
                self.used.add(key)
                chosen.append(key)
        return chosen[: self.size], chosen[self.size :]

    def change_set(self, spark: SparkSession) -> DataFrame:
        updates, deletes = self.keys()
        rows = [(k, "update") for k in updates] + [(k, "delete") for k in deletes]
        keyed = spark.createDataFrame(rows, "id LONG, _op STRING")
        changed = orders(keyed.select("id")).join(
            keyed.withColumn("id", F.col("id").cast("int")), "id"
        )
        return changed.withColumn(
            "status",
            F.when(F.col("_op") == "update", F.lit("completed")).otherwise(F.col("status")),
        )

    def spark_batch(self, spark: SparkSession, capture: bool) -> float:
        df = self.change_set(spark).cache()
        df.count()
        started = time.perf_counter()
        df.write.format("ducklake").options(
            **self.lake, merge_on="id", capture_preimages=str(capture).lower()
        ).mode("append").save()
        elapsed = time.perf_counter() - started
        df.unpersist()
        return elapsed

    def commit_batch(self, spark: SparkSession, capture: bool) -> float:
        """The writer's own work for one batch, outside Spark: its Parquet file and commit."""
        df = self.change_set(spark)
        table = df.toArrow()
        schema = df.schema
        options = LakeOptions.parse(
            {**self.lake, "merge_on": "id", "capture_preimages": str(capture).lower()}
        )
        started = time.perf_counter()
        writer = DuckLakeWriter(options, schema, overwrite=False)
        batches = iter(table.to_batches()) if table.num_rows else iter([])
        writer.commit([writer.write(batches)])
        return time.perf_counter() - started

    def captured_rows(self) -> int:
        con = duckdb.connect()
        try:
            attach_lake(con, self.lake["catalog"], data_path=self.lake["data_path"])
            row = con.execute(f"SELECT count(*) FROM {change_table(ORDERS).sql()}").fetchone()
            return int(row[0]) if row else 0
        finally:
            con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--ratio", type=float, default=0.001)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="duckstream-capture-bench-"))
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    bench = Bench(workdir, args.orders, args.ratio)
    spark = spark_session("local[2]", app_name="duckstream-capture-bench")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        started = time.perf_counter()
        orders(spark.range(1, args.orders + 1)).write.format("ducklake").options(**bench.lake).mode(
            "overwrite"
        ).save()
        print(f"loaded {args.orders:,} orders in {time.perf_counter() - started:.1f} s")
        bench.spark_batch(spark, True)  # warm both paths once
        bench.commit_batch(spark, False)
        times: dict[tuple[str, bool], list[float]] = {}
        for run in range(args.runs):
            for capture in (run % 2 == 0, run % 2 != 0):
                for kind, batch in (("spark", bench.spark_batch), ("commit", bench.commit_batch)):
                    times.setdefault((kind, capture), []).append(batch(spark, capture))
        report(times, bench, args)
    finally:
        spark.stop()
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


def report(times: dict[tuple[str, bool], list[float]], bench: Bench, args) -> None:
    print(
        f"\n{args.orders:,} orders; each batch updates {bench.size:,} and deletes {bench.size:,} "
        f"at random keys; medians of {args.runs} runs\n"
    )
    print("| timing | without capture | with capture | overhead |")
    print("|---|---|---|---|")
    for kind, label in (("spark", "Spark job (`save()`)"), ("commit", "writer's commit alone")):
        off = statistics.median(times[(kind, False)])
        on = statistics.median(times[(kind, True)])
        print(
            f"| {label} | {off * 1000:.0f} ms | {on * 1000:.0f} ms | {(on / off - 1) * 100:+.0f}% |"
        )
    print(f"\ncaptured rows in the change table: {bench.captured_rows():,}")


if __name__ == "__main__":
    main()
