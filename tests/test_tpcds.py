"""The 99 TPC-DS queries, DuckDB's texts from its ``tpcds`` extension, as maintained models:
each built over TPC-DS tables in DuckLake, then maintained through batches that delete, insert
and update rows of the sales, returns and dimension tables, equal to its recomputation after
each. Queries written for reporting (ROLLUP rankings, one-row aggregates under a LIMIT, CTEs
read several times, correlated subqueries, INTERSECT and EXCEPT) as a user would paste them.

The scale (``DUCKSTREAM_TPCDS_SCALE``, default 0.01) and the batches per query
(``DUCKSTREAM_TPCDS_BATCHES``, default 1; two take about 7 minutes on one core) keep the suite
to minutes. The data stays in one row group per table at that scale, so a top-N's ties (TPC-DS
orders many of them partially) break the same way in the maintained table and in its
recomputation. Each test worker generates its own lake, and its queries' batches follow one
another there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import duckdb
import pytest

from tests.generated_lake import assert_maintained, generated_lake

pytest.importorskip("duckdb_extension_tpcds")
pytestmark = pytest.mark.slow

SCALE = float(os.environ.get("DUCKSTREAM_TPCDS_SCALE", "0.01"))
BATCHES = int(os.environ.get("DUCKSTREAM_TPCDS_BATCHES", "1"))


@pytest.fixture(scope="module")
def lake() -> Iterator[tuple[duckdb.DuckDBPyConnection, dict[int, str]]]:
    """TPC-DS generated into DuckLake (schema main), and the queries by number."""
    with generated_lake("tpcds", f"CALL dsdgen(sf={SCALE})", "tpcds_queries") as generated:
        yield generated


#: each fact table, and its key that copies of its rows get anew
FACTS = {
    "store_sales": "ss_ticket_number",
    "catalog_sales": "cs_order_number",
    "web_sales": "ws_order_number",
    "store_returns": "sr_ticket_number",
    "catalog_returns": "cr_order_number",
    "web_returns": "wr_order_number",
}


def change(con: duckdb.DuckDBPyConnection, seed: int) -> None:
    """A batch, a commit per statement: rows of every fact table deleted and about as many
    copied under new keys (the tables keep their size over the suite's batches), quantities,
    prices and customers updated."""
    for table, key in FACTS.items():
        con.execute(f"DELETE FROM {table} WHERE hash({key} + {seed}) % 40 = 0")
        con.execute(
            f"INSERT INTO {table} SELECT * REPLACE ({key} + 1000000 * {seed + 1} AS {key}) "
            f"FROM {table} WHERE hash({key} + {seed}) % 40 = 1"
        )
    con.execute(
        "UPDATE catalog_sales SET cs_quantity = cs_quantity + 1 "
        f"WHERE hash(cs_order_number + {seed}) % 30 = 0"
    )
    con.execute(
        "UPDATE inventory SET inv_quantity_on_hand = inv_quantity_on_hand + 1 "
        f"WHERE hash(inv_item_sk + {seed}) % 30 = 0"
    )
    con.execute(
        f"UPDATE customer SET c_birth_country = 'X' WHERE hash(c_customer_sk + {seed}) % 25 = 0"
    )
    con.execute(
        "UPDATE item SET i_current_price = i_current_price + 1 "
        f"WHERE hash(i_item_sk + {seed}) % 20 = 0"
    )


@pytest.mark.parametrize("number", range(1, 100))
def test_query_is_maintained(lake, number: int) -> None:
    con, queries = lake
    assert_maintained(con, number, queries[number], BATCHES, change)
