"""Refresh batches landed by Spark through the project's writer: the ``spark`` mix of the dbt
benchmark (``python -m benchmarks.dbt_tpch --mixes spark``).

A batch has the shape and size of ``refresh``'s mixed batches (``refresh.Batch``: RF1's new
orders, as many orders deleted by RF2, as many order statuses and a third of the touched
lineitem rows' discounts updated), written as a Spark pipeline writes its batches, with
``df.write.format("ducklake")``: one job and one snapshot per write, four per batch.

1. RF1's orders appended (copies of sampled orders under fresh keys);
2. their lineitems appended;
3. lineitem's change set merged by ``(l_orderkey, l_linenumber)``: the lineitems of RF2's orders
   deleted (``_op = 'delete'``), the discounts of other sampled lineitems updated;
4. orders' change set merged by ``o_orderkey``: RF2's orders deleted, the statuses of other
   sampled orders flipped.

Each merge records the rows it ends in ``duckstream_preimages.tpch__<table>`` in its own
snapshot (the writer's capture), so maintenance reads the batch's pre-images from there rather
than from the data files that held them; the runs' summaries say so. The change sets are drawn
by DuckDB in the benchmark's process (seeded samples, as ``refresh`` draws them), taken out as
Arrow tables and handed to Spark (``createDataFrame``): the rows then go the way a pipeline's
rows go, through Spark's tasks into Parquet files and the writer's one DuckLake commit.

Who holds the lake: the benchmark's lake has a DuckDB-file catalog, which one process at a
time may open. Spark's tasks only write Parquet files; the writer opens the catalog on the
driver's side for the length of a job (to check the table, then to commit) and closes it before
``save()`` returns. So one session serves the whole benchmark, started at its first batch (its
JVM takes seconds to start) and left idle while dbt runs: nothing of Spark's holds the catalog
between jobs, and the benchmark closes its own connection before each job. Neither a SQLite
catalog nor a session per batch is needed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
from pyspark.sql import SparkSession

from dbt_duckstream.spark import spark_session

from .refresh import Batch

#: lineitem's and orders' keys, as the merges match them
LINEITEM_KEY = "l_orderkey,l_linenumber"
ORDERS_KEY = "o_orderkey"


@dataclass(frozen=True)
class ChangeSets:
    """One batch, as the four Spark jobs write it (``_op`` says what a merge row does)."""

    new_orders: pa.Table
    new_lineitems: pa.Table
    lineitem_changes: pa.Table
    order_changes: pa.Table


#: rows of an order RF2 deletes
DELETED = "IN (SELECT o_orderkey FROM rf2_keys)"


def change_sets(con: duckdb.DuckDBPyConnection, schema: str, batch: Batch, seed: int) -> ChangeSets:
    """The batch's rows, drawn from the lake in ``schema`` as it stands."""
    _draw_keys(con, schema, batch, seed)
    return ChangeSets(
        new_orders=_arrow(
            con,
            f"SELECT o.* REPLACE (k.new_key AS o_orderkey) FROM {schema}.orders AS o "
            "JOIN rf1_keys AS k ON o.o_orderkey = k.old_key",
        ),
        new_lineitems=_arrow(
            con,
            f"SELECT l.* REPLACE (k.new_key AS l_orderkey) FROM {schema}.lineitem AS l "
            "JOIN rf1_keys AS k ON l.l_orderkey = k.old_key",
        ),
        lineitem_changes=_arrow(
            con,
            f"SELECT l.*, 'delete' AS _op FROM {schema}.lineitem AS l "
            f"WHERE l_orderkey {DELETED} UNION ALL "
            # refresh.updates' new discount, in the column's own type (TPC-H's DECIMAL(15,2))
            "SELECT l.* REPLACE (CAST((l.l_discount + 0.01) % 0.11 AS DECIMAL(15,2)) "
            f"AS l_discount), 'update' AS _op FROM {schema}.lineitem AS l "
            "SEMI JOIN discount_keys AS k "
            "ON l.l_orderkey = k.l_orderkey AND l.l_linenumber = k.l_linenumber",
        ),
        order_changes=_arrow(
            con,
            f"SELECT o.*, 'delete' AS _op FROM {schema}.orders AS o "
            f"WHERE o_orderkey {DELETED} UNION ALL "
            "SELECT o.* REPLACE (CASE o_orderstatus WHEN 'O' THEN 'F' ELSE 'O' END "
            f"AS o_orderstatus), 'update' AS _op FROM {schema}.orders AS o "
            "WHERE o_orderkey IN (SELECT o_orderkey FROM status_keys)",
        ),
    )


def _draw_keys(con: duckdb.DuckDBPyConnection, schema: str, batch: Batch, seed: int) -> None:
    """The keys of the batch's rows, in temp tables: RF1's orders to copy and their new keys,
    RF2's orders, and the lineitems and orders to update. The updated rows are drawn among
    those RF2 keeps, so that a merge's change set has one row per key, as the writer asks."""
    _sample(con, f"SELECT o_orderkey FROM {schema}.orders", batch.orders, seed, "rf1_source")
    con.execute(
        "CREATE OR REPLACE TEMP TABLE rf1_keys AS "
        f"SELECT o_orderkey AS old_key, (SELECT max(o_orderkey) FROM {schema}.orders) "
        "+ row_number() OVER (ORDER BY o_orderkey) AS new_key FROM rf1_source"
    )
    _sample(con, f"SELECT o_orderkey FROM {schema}.orders", batch.orders, seed + 1, "rf2_keys")
    _sample(
        con,
        f"SELECT l_orderkey, l_linenumber FROM {schema}.lineitem WHERE l_orderkey NOT {DELETED}",
        batch.discounts,
        seed + 2,
        "discount_keys",
    )
    _sample(
        con,
        f"SELECT o_orderkey FROM {schema}.orders WHERE o_orderkey NOT {DELETED}",
        batch.orders,
        seed + 3,
        "status_keys",
    )


def _sample(con: duckdb.DuckDBPyConnection, rows: str, count: int, seed: int, name: str) -> None:
    """``count`` of ``rows`` into temp table ``name``, seeded as ``refresh``'s samples are. The
    sample is taken of the query's result: DuckDB samples a table before its ``WHERE``."""
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM ({rows}) "
        f"USING SAMPLE reservoir({count} ROWS) REPEATABLE ({seed})"
    )


def _arrow(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    return con.execute(sql).to_arrow_table()


class SparkWriter:
    """A Spark session for a whole benchmark, started at its first batch, writing batches into
    the lake whose catalog is ``catalog`` and whose files are under ``data_path``."""

    def __init__(self, catalog: Path, data_path: Path) -> None:
        self.options = {"catalog": str(catalog), "data_path": str(data_path)}
        self._session: SparkSession | None = None

    @property
    def session(self) -> SparkSession:
        if self._session is None:
            started = time.perf_counter()
            self._session = spark_session("local[2]", app_name="duckstream-bench")
            self._session.sparkContext.setLogLevel("ERROR")
            print(f"Spark started in {time.perf_counter() - started:.1f} s", flush=True)
        return self._session

    def land(self, changes: ChangeSets, schema: str) -> float:
        """The batch's four jobs, in the order of the module's list; the seconds they took."""
        started = time.perf_counter()
        self._write(changes.new_orders, f"{schema}.orders")
        self._write(changes.new_lineitems, f"{schema}.lineitem")
        self._write(changes.lineitem_changes, f"{schema}.lineitem", merge_on=LINEITEM_KEY)
        self._write(changes.order_changes, f"{schema}.orders", merge_on=ORDERS_KEY)
        return time.perf_counter() - started

    def _write(self, rows: pa.Table, table: str, merge_on: str | None = None) -> None:
        """One job: an append, or a merge by ``merge_on``. One task, so that an append adds one
        data file, as DuckDB's ``INSERT`` of the other mixes does."""
        options = {**self.options, "table": table}
        if merge_on is not None:
            options["merge_on"] = merge_on
        frame = self.session.createDataFrame(rows).coalesce(1)
        frame.write.format("ducklake").options(**options).mode("append").save()

    def stop(self) -> None:
        """Stop the session, if it was started."""
        if self._session is not None:
            self._session.stop()
            self._session = None
