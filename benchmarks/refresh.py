"""TPC-H data in DuckLake, and refresh batches shaped like the specification's RF1 and RF2.

A batch at change ratio ``r`` touches about ``r`` of lineitem's rows, in three snapshots:

* RF1: new orders (copies of sampled orders under fresh keys) with their lineitems, a third of
  the touched lineitem rows;
* RF2: sampled orders deleted with their lineitems, another third;
* updates: ``l_discount`` of sampled lineitem rows (the last third) and ``o_orderstatus`` of as
  many orders as RF1 adds.

An ``append`` batch is RF1 alone, all of its touched rows new lineitems: the shape of fact
tables that pipelines only ever append to. Samples are seeded, so a run is repeatable.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from dbt_duckstream.runtime.lake import load_extension, transaction

TABLES = ("lineitem", "orders", "customer", "nation", "region", "part", "supplier", "partsupp")

#: TPC-H's average number of lineitems per order
LINES_PER_ORDER = 4


def generate(con: duckdb.DuckDBPyConnection, scale: float, schema: str) -> None:
    """TPC-H at ``scale`` into ``schema`` of the attached lake, one snapshot per table."""
    load_extension(con, "tpch")
    con.execute("CREATE SCHEMA IF NOT EXISTS memory.tpch_gen")
    con.execute(f"CALL dbgen(sf={scale}, catalog='memory', schema='tpch_gen')")
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    for table in TABLES:
        con.execute(f"CREATE TABLE {schema}.{table} AS SELECT * FROM memory.tpch_gen.{table}")
        con.execute(f"DROP TABLE memory.tpch_gen.{table}")


@dataclass(frozen=True)
class Batch:
    """How many rows one refresh batch touches."""

    ratio: float
    lineitems: int  # lineitem rows touched, all kinds together
    mix: str = "mixed"  # "mixed": RF1, RF2 and updates; "append": RF1 only

    @property
    def orders(self) -> int:
        """Orders added by RF1, and as many deleted by RF2 and updated."""
        parts = 1 if self.mix == "append" else 3
        return max(1, self.lineitems // (parts * LINES_PER_ORDER))

    @property
    def discounts(self) -> int:
        return max(1, self.lineitems // 3)


MIXES = ("mixed", "append")


def batch_for(
    con: duckdb.DuckDBPyConnection, schema: str, ratio: float, mix: str = "mixed"
) -> Batch:
    row = con.execute(f"SELECT count(*) FROM {schema}.lineitem").fetchone()
    assert row is not None
    return Batch(ratio, max(3, round(int(row[0]) * ratio)), mix)


def apply_batch(con: duckdb.DuckDBPyConnection, schema: str, batch: Batch, seed: int) -> None:
    """RF1, RF2 and the updates, one snapshot each (RF1 alone for an ``append`` batch)."""
    with transaction(con):
        _rf1(con, schema, batch.orders, seed)
    if batch.mix == "append":
        return
    with transaction(con):
        _rf2(con, schema, batch.orders, seed + 1)
    with transaction(con):
        _updates(con, schema, batch, seed + 2)


def _sample_orders(con, schema: str, count: int, seed: int, name: str) -> None:
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT o_orderkey FROM {schema}.orders "
        f"USING SAMPLE reservoir({count} ROWS) REPEATABLE ({seed})"
    )


def _rf1(con, schema: str, count: int, seed: int) -> None:
    _sample_orders(con, schema, count, seed, "rf1_source")
    con.execute(
        "CREATE OR REPLACE TEMP TABLE rf1_keys AS "
        f"SELECT o_orderkey AS old_key, (SELECT max(o_orderkey) FROM {schema}.orders) "
        "+ row_number() OVER (ORDER BY o_orderkey) AS new_key FROM rf1_source"
    )
    con.execute(
        f"INSERT INTO {schema}.orders SELECT o.* REPLACE (k.new_key AS o_orderkey) "
        f"FROM {schema}.orders AS o JOIN rf1_keys AS k ON o.o_orderkey = k.old_key"
    )
    con.execute(
        f"INSERT INTO {schema}.lineitem SELECT l.* REPLACE (k.new_key AS l_orderkey) "
        f"FROM {schema}.lineitem AS l JOIN rf1_keys AS k ON l.l_orderkey = k.old_key"
    )


def _rf2(con, schema: str, count: int, seed: int) -> None:
    _sample_orders(con, schema, count, seed, "rf2_keys")
    con.execute(f"DELETE FROM {schema}.lineitem WHERE l_orderkey IN (SELECT * FROM rf2_keys)")
    con.execute(f"DELETE FROM {schema}.orders WHERE o_orderkey IN (SELECT * FROM rf2_keys)")


def _updates(con, schema: str, batch: Batch, seed: int) -> None:
    con.execute(
        "CREATE OR REPLACE TEMP TABLE discount_keys AS SELECT l_orderkey, l_linenumber "
        f"FROM {schema}.lineitem USING SAMPLE reservoir({batch.discounts} ROWS) REPEATABLE ({seed})"
    )
    con.execute(
        f"UPDATE {schema}.lineitem AS l SET l_discount = (l.l_discount + 0.01) % 0.11 "
        "FROM discount_keys AS k "
        "WHERE l.l_orderkey = k.l_orderkey AND l.l_linenumber = k.l_linenumber"
    )
    _sample_orders(con, schema, batch.orders, seed + 1, "status_keys")
    con.execute(
        f"UPDATE {schema}.orders SET o_orderstatus = CASE o_orderstatus WHEN 'O' THEN 'F' "
        "ELSE 'O' END WHERE o_orderkey IN (SELECT * FROM status_keys)"
    )
