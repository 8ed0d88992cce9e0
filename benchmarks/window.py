"""One window model on 1M rows: maintenance against a rebuild, side by side, at a 0.1% change.

    uv run python -m benchmarks.window [--rows 1000000] [--ratio 0.001] [--repeat 5]

The source is 1M orders of 100k customers in DuckLake (Parquet files). The model ranks each
customer's orders and keeps a running total per customer (``row_number()`` and a ROWS-frame
``sum`` over DOUBLE: its old rows come from stored state). Each repetition commits one change
of ``ratio`` of the rows, in one of two shapes: ``mixed`` (a third new orders, a third updated
amounts, a third deleted orders) or ``append`` (new orders only); then times the maintenance
run (checked against a recomputation), a full rebuild of the same model on the same
snapshot (``refresh(..., full_refresh=True)``: what a first run executes, the window's state
table included), and a bare ``CREATE TABLE AS`` of the model's SQL (what dbt's ``table``
materialization costs at least). Timings are medians, in seconds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import duckdb

from dbt_duckstream import prepare, refresh
from dbt_duckstream.runtime.consistency import differences
from dbt_duckstream.runtime.lake import attach_lake

MODEL = """
SELECT customer_id, id, ordered_at, amount,
       row_number() OVER (PARTITION BY customer_id ORDER BY ordered_at, id) AS nth_order,
       sum(amount) OVER (PARTITION BY customer_id ORDER BY ordered_at, id
                         ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running_amount
FROM orders
"""


def load(con: duckdb.DuckDBPyConnection, rows: int) -> None:
    con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
    con.execute(
        "CREATE TABLE orders (id BIGINT, customer_id INTEGER, ordered_at DATE, amount DOUBLE)"
    )
    con.execute(
        f"INSERT INTO orders SELECT i, (hash(i) % {max(rows // 10, 1)})::INTEGER, "
        "DATE '2024-01-01' + (hash(i * 7) % 700)::INTEGER, (hash(i * 13) % 100000) / 100.0 "
        f"FROM range({rows}) r(i)"
    )


def change(con: duckdb.DuckDBPyConnection, rows: int, ratio: float, mix: str, round_: int) -> None:
    """One snapshot touching ``ratio`` of the rows."""
    touched = max(3, int(rows * ratio))
    start = rows * (round_ + 2)
    con.execute("BEGIN")
    inserted = touched if mix == "append" else touched // 3
    con.execute(
        f"INSERT INTO orders SELECT i, (hash(i) % {max(rows // 10, 1)})::INTEGER, "
        "DATE '2024-01-01' + (hash(i * 7) % 700)::INTEGER, (hash(i * 13) % 100000) / 100.0 "
        f"FROM range({start}, {start + inserted}) r(i)"
    )
    if mix == "mixed":
        step = max(rows // (touched // 3), 1)
        con.execute(
            f"UPDATE orders SET amount = amount + 1 WHERE id < {rows} AND id % {step} = {round_}"
        )
        con.execute(f"DELETE FROM orders WHERE id < {rows} AND id % {step} = {round_ + step // 2}")
    con.execute("COMMIT")


def measure(rows: int, ratio: float, repeat: int, mix: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as directory:
        con = duckdb.connect()
        attach_lake(con, f"{directory}/lake.ducklake", data_path=f"{directory}/data")
        con.execute("USE lake")
        load(con, rows)
        plan = prepare(con, MODEL, "order_windows", catalog="lake")
        refresh(con, plan)
        maintained, rebuilt, bare, changed = [], [], [], []
        for round_ in range(repeat):
            change(con, rows, ratio, mix, round_)
            started = time.perf_counter()
            result = refresh(con, plan, rebuild_above=None)
            maintained.append(time.perf_counter() - started)
            assert result.strategy == "incremental", result.summary()
            changed.append(result.rows_inserted + result.rows_deleted)
            assert not differences(con, "order_windows", MODEL), "differs from recomputation"
            started = time.perf_counter()
            refresh(con, plan, full_refresh=True)
            rebuilt.append(time.perf_counter() - started)
            started = time.perf_counter()
            con.execute(f"CREATE OR REPLACE TABLE scratch AS {MODEL}")
            bare.append(time.perf_counter() - started)
        con.close()
    return {
        "mix": mix,
        "rows": rows,
        "ratio": ratio,
        "maintenance_s": round(statistics.median(maintained), 3),
        "rebuild_s": round(statistics.median(rebuilt), 3),
        "speedup": round(statistics.median(rebuilt) / statistics.median(maintained), 2),
        "create_table_as_s": round(statistics.median(bare), 3),
        "model_rows_changed": int(statistics.median(changed)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--ratio", type=float, default=0.001)
    parser.add_argument("--repeat", type=int, default=5)
    arguments = parser.parse_args()
    for mix in ("mixed", "append"):
        print(measure(arguments.rows, arguments.ratio, arguments.repeat, mix), flush=True)


if __name__ == "__main__":
    main()
