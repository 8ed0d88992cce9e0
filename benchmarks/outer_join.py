"""One outer-join model on 1M rows: maintenance against a rebuild, side by side.

    python -m benchmarks.outer_join [--orders 1000000] [--ratio 0.001] [--repetitions 5]
                                    [--mix mixed|append]

Tables in a fresh file-backed DuckLake: ``customers`` (a tenth as many rows as ``orders``,
some of them without orders) and ``orders``. Two models:

* ``orders_of_customers``: every customer with each of its orders, or with NULLs:
  ``customers LEFT JOIN orders`` (a row per order, plus one per customer without orders);
* ``customer_totals``: every customer with the count and sum of its orders, the jaffle_shop
  shape: ``customers LEFT JOIN (orders aggregated per customer)``.

Each repetition lands one batch touching ``ratio`` of the orders in one snapshot: new orders
(some of customers that had none), updated amounts and statuses, deleted orders (some a
customer's last), and a few new customers (``--mix append``: new orders and customers only).
Then, for each model: the maintenance run (``refresh``, always maintaining), the check that
the model equals its recomputation (not timed), and a rebuild of the same SQL
(``CREATE OR REPLACE TABLE ... AS`` in its own transaction, what dbt's ``table``
materialization runs). Medians are printed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

from dbt_duckstream import prepare, refresh
from dbt_duckstream.runtime.consistency import differences
from dbt_duckstream.runtime.lake import attach_lake, transaction

MODELS = {
    "orders_of_customers": """
        SELECT c.id AS customer_id, c.region, o.id AS order_id, o.amount, o.status
        FROM customers AS c LEFT JOIN orders AS o ON o.customer_id = c.id
    """,
    "customer_totals": """
        WITH per_customer AS (
            SELECT customer_id, count(*) AS orders, sum(amount) AS total
            FROM orders GROUP BY customer_id
        )
        SELECT c.id AS customer_id, c.region, coalesce(p.orders, 0) AS orders, p.total
        FROM customers AS c LEFT JOIN per_customer AS p ON p.customer_id = c.id
    """,
}


def load(con: duckdb.DuckDBPyConnection, orders: int) -> None:
    customers = orders // 10
    with transaction(con):
        con.execute(
            "CREATE TABLE customers AS SELECT i AS id, 'customer ' || i AS name, "
            "['north', 'south', 'east', 'west'][i % 4 + 1] AS region FROM range(1, ?) t(i)",
            [customers + 1],
        )
        # customer ids beyond 90% of the customers never order
        con.execute(
            "CREATE TABLE orders AS SELECT i AS id, "
            "(hash(i) % ?)::INTEGER + 1 AS customer_id, "
            "((hash(i * 7) % 50000) / 100)::DECIMAL(12, 2) AS amount, "
            "['placed', 'shipped', 'completed'][i % 3 + 1] AS status FROM range(1, ?) t(i)",
            [customers * 9 // 10, orders + 1],
        )


def batch(
    con: duckdb.DuckDBPyConnection, orders: int, ratio: float, seed: int, mix: str = "mixed"
) -> int:
    """One snapshot touching ``ratio`` of the orders (a third each inserted, updated and
    deleted; ``append``: all inserted); returns the rows it touched."""
    touched = max(3, round(orders * ratio))
    third = touched // 3 if mix == "mixed" else touched
    row = con.execute("SELECT max(id), (SELECT max(id) FROM customers) FROM orders").fetchone()
    assert row is not None
    next_order, customers = int(row[0]) + 1, int(row[1])
    with transaction(con):
        con.execute(
            "INSERT INTO customers SELECT ? + i, 'new ' || i, 'north' FROM range(1, 11) t(i)",
            [customers],
        )
        # new orders: some of the new customers and of customers that never ordered
        con.execute(
            "INSERT INTO orders SELECT ? + i, (hash(i, ?) % ?)::INTEGER + 1, 9.99, 'placed' "
            "FROM range(?) t(i)",
            [next_order, seed, customers + 10, third],
        )
        if mix == "mixed":
            con.execute(
                "UPDATE orders SET amount = amount + 1, status = 'completed' "
                "WHERE hash(id, ?) % ? = 0",
                [seed, max(1, orders // third)],
            )
            con.execute(
                "DELETE FROM orders WHERE hash(id, ?, 1) % ? = 0",
                [seed, max(1, orders // third)],
            )
    return touched


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.outer_join", description=__doc__)
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--ratio", type=float, default=0.001)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--mix", choices=["mixed", "append"], default="mixed")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="outer-join-") as directory:
        con = duckdb.connect()
        attach_lake(con, f"{directory}/lake.ducklake", data_path=str(Path(directory) / "data"))
        con.execute("USE lake")
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        load(con, args.orders)
        con.execute("CREATE SCHEMA rebuilds")
        plans = {name: prepare(con, sql, name, catalog="lake") for name, sql in MODELS.items()}
        for plan in plans.values():
            refresh(con, plan)
        timings: dict[str, list[tuple[float, float, int, int]]] = {n: [] for n in MODELS}
        for repetition in range(args.repetitions):
            touched = batch(con, args.orders, args.ratio, repetition, args.mix)
            for name, plan in plans.items():
                result = refresh(con, plan, rebuild_above=None)
                assert result.strategy == "incremental", result.summary()
                diff = differences(con, name, MODELS[name])
                assert not diff, diff
                started = time.perf_counter()
                with transaction(con):
                    con.execute(f"CREATE OR REPLACE TABLE rebuilds.{name} AS {MODELS[name]}")
                rebuild = time.perf_counter() - started
                changed = result.rows_inserted + result.rows_deleted
                timings[name].append((result.seconds, rebuild, changed, touched))
                print(
                    f"rep {repetition + 1} {name}: maintain {result.seconds * 1000:.0f} ms, "
                    f"rebuild {rebuild * 1000:.0f} ms ({touched} orders touched, "
                    f"+{result.rows_inserted} -{result.rows_deleted} model rows)",
                    flush=True,
                )
        rows = {n: con.execute(f"SELECT count(*) FROM {n}").fetchone() for n in MODELS}
        con.close()
    print(
        f"\n{args.orders} orders, {args.ratio:.2%} changed per batch ({args.mix}), medians "
        f"of {args.repetitions}:"
    )
    for name, samples in timings.items():
        maintain = statistics.median(s[0] for s in samples)
        rebuild = statistics.median(s[1] for s in samples)
        print(
            f"  {name} ({rows[name][0]} rows): maintenance {maintain * 1000:.0f} ms, "  # type: ignore[index]
            f"rebuild {rebuild * 1000:.0f} ms, speed-up {rebuild / maintain:.1f}x"
        )


if __name__ == "__main__":
    main()
