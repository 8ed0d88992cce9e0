"""A compile-and-maintain demo on an embedded DuckLake, with a side-by-side timing.

Builds ``orders`` (1M rows by default) and ``stores``, creates a join+aggregate model, then for
a few rounds changes 0.1% of the orders (inserts, updates, deletes), maintains the model, and
times in the same process a full-refresh run of a twin model (same SQL, same bookkeeping) and
a bare ``CREATE TABLE AS`` of the SQL; checks the model equals a recomputation every round.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

from .runtime import prepare, refresh
from .runtime.consistency import differences
from .runtime.lake import load_ducklake

MODEL_SQL = """
SELECT s.region, o.status,
       sum(o.amount) AS revenue, count(*) AS orders, avg(o.amount) AS avg_amount,
       max(o.amount) AS largest
FROM orders o JOIN stores s ON o.store_id = s.id
GROUP BY s.region, o.status
"""


def setup(con: duckdb.DuckDBPyConnection, rows: int) -> None:
    con.execute(
        "CREATE TABLE stores AS SELECT i AS id, 'region_' || (i % 12) AS region "
        "FROM range(1000) r(i)"
    )
    con.execute(
        "CREATE TABLE orders AS SELECT i AS id, (i * 7919) % 1000 AS store_id, "
        "((i * 104729) % 100000 / 100.0)::DECIMAL(12, 2) AS amount, "
        "['open', 'shipped', 'returned'][1 + i % 3] AS status FROM range(?) r(i)",
        [rows],
    )


def change(con: duckdb.DuckDBPyConnection, rows: int, ratio: float, round_: int) -> None:
    """Change ``ratio`` of the orders: one third inserts, one third updates, one third deletes."""
    n = max(3, int(rows * ratio) // 3)
    base = rows * (round_ + 10)
    con.execute("BEGIN")
    con.execute(
        "INSERT INTO orders SELECT ? + i, (i * 31) % 1000, (i % 500)::DECIMAL(12, 2), 'open' "
        "FROM range(?) r(i)",
        [base, n],
    )
    con.execute(
        "UPDATE orders SET status = 'shipped', amount = amount + 1 "
        "WHERE id % ? = ? AND status = 'open'",
        [rows // n, round_],
    )
    con.execute("DELETE FROM orders WHERE id % ? = ?", [rows // n, round_ + 7])
    con.execute("COMMIT")


def rebuild_seconds(con: duckdb.DuckDBPyConnection) -> float:
    started = time.perf_counter()
    con.execute("BEGIN")
    con.execute(f"CREATE OR REPLACE TABLE rebuilt AS {MODEL_SQL}")
    con.execute("COMMIT")
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--ratio", type=float, default=0.001)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="keep the lake in this directory")
    args = parser.parse_args(argv)

    directory = args.keep or Path(tempfile.mkdtemp(prefix="duckstream-demo-"))
    directory.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    load_ducklake(con)
    con.execute(
        f"ATTACH 'ducklake:{directory}/lake.ducklake' AS lake (DATA_PATH '{directory}/data')"
    )
    con.execute("USE lake")
    print(f"lake in {directory}; {args.rows:,} orders; model:\n{MODEL_SQL}")
    setup(con, args.rows)
    plan = prepare(con, MODEL_SQL, "revenue_by_region", catalog="lake")
    twin = prepare(con, MODEL_SQL, "revenue_rebuilt", catalog="lake")
    print(refresh(con, plan).summary())
    refresh(con, twin)

    maintain, rebuild, bare = [], [], []
    for round_ in range(args.rounds):
        change(con, args.rows, args.ratio, round_)
        result = refresh(con, plan)
        maintain.append(result.seconds)
        rebuild.append(refresh(con, twin, full_refresh=True).seconds)
        bare.append(rebuild_seconds(con))
        diff = differences(con, "revenue_by_region", MODEL_SQL)
        status = "equal to recomputation" if not diff else f"DIFFERS: {diff[:3]}"
        print(
            f"round {round_ + 1}: {result.summary()} in {result.seconds * 1000:.0f} ms; "
            f"full-refresh run {rebuild[-1] * 1000:.0f} ms; bare CTAS {bare[-1] * 1000:.0f} ms; "
            f"{status}"
        )
        if diff:
            raise SystemExit(1)
    m, r, b = (statistics.median(x) for x in (maintain, rebuild, bare))
    print(
        f"\nmedian over {args.rounds} rounds of {args.ratio:.2%} changes to {args.rows:,} "
        f"orders: maintenance run {m * 1000:.0f} ms, full-refresh run {r * 1000:.0f} ms "
        f"({r / m:.2f}x), bare CTAS {b * 1000:.0f} ms ({b / m:.2f}x)"
    )
    con.close()
    if args.keep is None:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
