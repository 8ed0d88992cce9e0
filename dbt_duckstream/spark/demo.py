"""The end-to-end pipeline: Spark lands data in DuckLake, dbt maintains the models.

    python -m dbt_duckstream.spark.demo [--orders 1000000] [--batches 3] [--workdir .demo]

1. A PySpark job generates customers, orders and payments into DuckLake (``raw`` schema).
2. ``dbt run`` builds the integration project's ``incremental_ivm`` models; ``dbt test``.
3. Spark change batches (new orders, status updates, refunded payments deleted), each
   followed by ``dbt run`` and ``dbt test``, and by ``dbt run --full-refresh`` for comparison.
4. A summary per model: rows changed, incremental run time against a full rebuild, tests;
   and a last row for the whole ``dbt run`` (its wall time, as an orchestrator waits for it,
   against ``dbt run --full-refresh``).
"""

from __future__ import annotations

import argparse
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..bridge.dbt_process import dbt_environment, run_dbt
from .session import spark_session

PROJECT = Path(__file__).resolve().parents[2] / "integration_tests"


@dataclass
class ModelFigures:
    inserted: int = 0
    deleted: int = 0
    incremental: list[float] = field(default_factory=list)
    rebuild: list[float] = field(default_factory=list)
    strategies: set[str] = field(default_factory=set)


class Demo:
    def __init__(self, workdir: Path, orders: int) -> None:
        self.workdir = workdir.resolve()
        self.lake_dir = self.workdir / "lake"
        self.orders = orders
        self.customers = max(1000, orders // 10)
        self.lake = {
            "catalog": str(self.lake_dir / "lake.ducklake"),
            "data_path": str(self.lake_dir / "data"),
        }
        self.env = dbt_environment(self.lake_dir, PROJECT)
        self.figures: dict[str, ModelFigures] = {}
        #: each ``dbt run`` process's wall time: incremental, and with ``--full-refresh``
        self.invocations = ModelFigures()
        #: the wall time of the last dbt command
        self.wall = 0.0
        self.tests_passed = True

    def write(self, df: DataFrame, table: str, mode: str = "append", **options: str) -> None:
        df.write.format("ducklake").options(**self.lake, table=table, **options).mode(mode).save()

    def dbt(self, *args: str) -> dict[str, dict]:
        """Run dbt on the integration project; its run results by model name."""
        started = time.perf_counter()
        done = run_dbt(
            *args,
            project_dir=PROJECT,
            env=self.env,
            target_path=self.workdir / "target",
            log_path=self.workdir / "logs",
        )
        if done.returncode != 0 and args[0] != "test":
            raise SystemExit(f"dbt {' '.join(args)} failed:\n{done.output}")
        self.wall = time.perf_counter() - started
        return done.by_name()

    def generate(self, spark: SparkSession) -> None:
        n, c = self.orders, self.customers
        customers = spark.range(1, c + 1).select(
            F.col("id").cast("int").alias("id"),
            F.concat(F.lit("customer "), F.col("id")).alias("name"),
            F.element_at(
                F.array(*map(F.lit, ["north", "south", "east", "west"])),
                (F.col("id") % 4 + 1).cast("int"),
            ).alias("region"),
            F.element_at(
                F.array(*map(F.lit, ["gold", "silver", "bronze"])),
                (F.col("id") % 3 + 1).cast("int"),
            ).alias("tier"),
        )
        orders = self._orders(spark.range(1, n + 1))
        payments = spark.range(1, int(n * 1.2) + 1).select(
            F.col("id").cast("int").alias("id"),
            (F.abs(F.hash("id")) % n + 1).cast("int").alias("order_id"),
            F.element_at(
                F.array(*map(F.lit, ["card", "cash", "voucher"])), (F.col("id") % 3 + 1).cast("int")
            ).alias("method"),
            ((F.abs(F.hash(F.col("id") * 7)) % 30000) / 100).cast("decimal(12,2)").alias("amount"),
        )
        for table, df in [
            ("raw.customers", customers),
            ("raw.orders", orders),
            ("raw.payments", payments),
        ]:
            self.write(df, table, mode="overwrite")

    def _orders(self, ids: DataFrame) -> DataFrame:
        return ids.select(
            F.col("id").cast("int").alias("id"),
            (F.abs(F.hash("id")) % self.customers + 1).cast("int").alias("customer_id"),
            F.element_at(
                F.array(*map(F.lit, ["placed", "shipped", "completed", "returned"])),
                (F.abs(F.hash(F.col("id") * 3)) % 4 + 1).cast("int"),
            ).alias("status"),
            ((F.abs(F.hash(F.col("id") * 5)) % 50000) / 100).cast("decimal(12,2)").alias("amount"),
            F.date_add(F.lit("2026-01-01").cast("date"), (F.col("id") % 300).cast("int")).alias(
                "ordered_at"
            ),
        )

    def change_batch(self, spark: SparkSession, batch: int) -> None:
        """0.1% new orders, 0.1% status updates, refunds: 0.05% of payments deleted."""
        size = max(10, self.orders // 1000)
        first = self.orders + (batch - 1) * size + 1
        self.write(self._orders(spark.range(first, first + size)), "raw.orders")
        updates = self._orders(
            spark.range(batch * 7919 % self.orders, self.orders, self.orders // size)
        )
        updates = updates.withColumn("status", F.lit("completed")).withColumn(
            "_op", F.lit("update")
        )
        self.write(updates, "raw.orders", merge_on="id")
        refunds = spark.range(
            batch * 104729 % self.orders, int(self.orders * 1.2), self.orders * 2 // size
        )
        refunds = refunds.select(
            F.col("id").cast("int").alias("id"),
            F.lit(0).cast("int").alias("order_id"),
            F.lit("").alias("method"),
            F.lit(None).cast("decimal(12,2)").alias("amount"),
            F.lit("delete").alias("_op"),
        )
        self.write(refunds, "raw.payments", merge_on="id")

    def record(self, results: dict[str, dict], rebuild: bool) -> None:
        for model, result in results.items():
            response = result["adapter_response"]
            figures = self.figures.setdefault(model, ModelFigures())
            (figures.rebuild if rebuild else figures.incremental).append(result["execution_time"])
            if not rebuild:
                figures.strategies.add(response.get("code", ""))
                message = response.get("_message", "")
                plus, minus = message.split(": +", 1)[1].split(" rows")[0].split(" -")
                figures.inserted += int(plus)
                figures.deleted += int(minus)

    def check(self, results: dict[str, dict]) -> None:
        failed = [n for n, r in results.items() if r["status"] != "pass"]
        if failed:
            self.tests_passed = False
            print(f"  consistency tests failed: {', '.join(failed)}")

    def run(self, batches: int) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.lake_dir.mkdir(parents=True)
        spark = spark_session()
        spark.sparkContext.setLogLevel("ERROR")
        started = time.perf_counter()
        self.generate(spark)
        print(
            f"Spark generated {self.orders:,} orders, {self.customers:,} customers and "
            f"{int(self.orders * 1.2):,} payments in {time.perf_counter() - started:.1f} s"
        )
        self.dbt("deps")
        self.dbt("run")
        self.check(self.dbt("test"))
        for batch in range(1, batches + 1):
            started = time.perf_counter()
            self.change_batch(spark, batch)
            print(
                f"batch {batch}: Spark landed its changes in {time.perf_counter() - started:.1f} s"
            )
            self.record(self.dbt("run"), rebuild=False)
            self.invocations.incremental.append(self.wall)
            self.check(self.dbt("test"))
            self.record(self.dbt("run", "--full-refresh"), rebuild=True)
            self.invocations.rebuild.append(self.wall)
        spark.stop()
        self.summary()

    def summary(self) -> None:
        def median(values: list[float]) -> float:
            ordered = sorted(values)
            return ordered[len(ordered) // 2] if ordered else float("nan")

        print(
            "\n| model | rows +/- | incremental run | full rebuild | speed-up | incremental runs |"
        )
        print("|---|---|---|---|---|---|")
        for model, f in sorted(self.figures.items()):
            inc, reb = median(f.incremental), median(f.rebuild)
            print(
                f"| {model} | +{f.inserted} -{f.deleted} | {inc * 1000:.0f} ms | "
                f"{reb * 1000:.0f} ms | {reb / inc:.2f}x | {', '.join(sorted(f.strategies))} |"
            )
        inc, reb = median(self.invocations.incremental), median(self.invocations.rebuild)
        inserted = sum(f.inserted for f in self.figures.values())
        deleted = sum(f.deleted for f in self.figures.values())
        print(
            f"| **whole `dbt run`** (wall time) | +{inserted} -{deleted} | {inc * 1000:.0f} ms | "
            f"{reb * 1000:.0f} ms | {reb / inc:.2f}x | {len(self.invocations.incremental)} |"
        )
        print(f"\nevery ivm_consistent test passed: {'yes' if self.tests_passed else 'NO'}")
        if not self.tests_passed:
            raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path(".demo/pipeline"))
    args = parser.parse_args()
    Demo(args.workdir, args.orders).run(args.batches)


if __name__ == "__main__":
    main()
