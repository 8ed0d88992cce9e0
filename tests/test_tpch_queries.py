"""The 22 TPC-H queries, DuckDB's texts from its ``tpch`` extension, as maintained models:
each built over TPC-H tables in DuckLake, then maintained through batches of the benchmark's
refresh functions (new orders with their lines, orders deleted with theirs) and updates of
lines, customers, suppliers, parts and their supply costs, equal to its recomputation after
each. ``test_tpch_dbt.py`` runs them under dbt with the final ORDER BY and LIMIT dropped; these
are the queries as written, top-N included, at SF 0.01 (``DUCKSTREAM_TPCH_SCALE``), two
batches each (``DUCKSTREAM_TPCH_BATCHES``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import duckdb
import pytest

from tests.generated_lake import assert_maintained, generated_lake

pytest.importorskip("duckdb_extension_tpch")
pytestmark = pytest.mark.slow

SCALE = float(os.environ.get("DUCKSTREAM_TPCH_SCALE", "0.01"))
BATCHES = int(os.environ.get("DUCKSTREAM_TPCH_BATCHES", "2"))


@pytest.fixture(scope="module")
def lake() -> Iterator[tuple[duckdb.DuckDBPyConnection, dict[int, str]]]:
    """TPC-H generated into DuckLake (schema main), and the queries by number."""
    with generated_lake("tpch", f"CALL dbgen(sf={SCALE})", "tpch_queries") as generated:
        yield generated


def change(con: duckdb.DuckDBPyConnection, seed: int) -> None:
    """A batch, a commit per statement: about 2.5% of orders deleted with their lines (RF2),
    as many copied under new keys with theirs (RF1), and updates of every dimension."""
    picked = f"hash({{key}} + {seed}) % 40"
    new_key = f"{{key}} + 1000000 * {seed + 1}"
    for table, key in (("lineitem", "l_orderkey"), ("orders", "o_orderkey")):
        con.execute(f"DELETE FROM {table} WHERE {picked.format(key=key)} = 0")
        con.execute(
            f"INSERT INTO {table} SELECT * REPLACE ({new_key.format(key=key)} AS {key}) "
            f"FROM {table} WHERE {picked.format(key=key)} = 1"
        )
    for update in (
        "lineitem SET l_quantity = l_quantity + 1 WHERE hash(l_orderkey + {seed}) % 30 = 2",
        "customer SET c_acctbal = c_acctbal + 1 WHERE hash(c_custkey + {seed}) % 20 = 0",
        "supplier SET s_acctbal = s_acctbal - 1 WHERE hash(s_suppkey + {seed}) % 10 = 0",
        "partsupp SET ps_supplycost = ps_supplycost + 1 WHERE hash(ps_partkey + {seed}) % 20 = 0",
        "part SET p_size = p_size + 1 WHERE hash(p_partkey + {seed}) % 20 = 0",
    ):
        con.execute(f"UPDATE {update.format(seed=seed)}")


@pytest.mark.parametrize("number", range(1, 23))
def test_query_is_maintained(lake, number: int) -> None:
    con, queries = lake
    assert_maintained(con, number, queries[number], BATCHES, change)
