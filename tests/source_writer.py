"""A pipeline committing to the integration project's sources continuously, in its own process.

    python -m tests.source_writer --catalog sqlite:lake.sqlite --data-path data \\
        --stop-file stop --report report.json [--seed 1] [--pause-ms 50-200] [--started-file F]

Every 50-200 ms it commits one transaction of one to three changes to ``raw.orders``,
``raw.payments`` and ``raw.customers`` (inserts with duplicates and NULLs, updates, deletes),
committing and retrying a lost race the way the Spark writer does. It stops when the stop
file appears and writes a JSON report: commits, retries, failures (commits that failed for
good).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from pathlib import Path

import duckdb

from dbt_duckstream.retry import retrying
from dbt_duckstream.runtime.lake import attach_lake, transaction

STATUSES = ["placed", "shipped", "completed", "returned", "test"]


class RetryCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.retries += 1


#: the changes one statement makes, by the table it changes
KINDS = {
    "orders": ["orders", "orders", "update", "delete"],
    "payments": ["payments", "payments", "delete payments"],
    "customers": ["customers"],
}


def changes(rng: random.Random) -> list[str]:
    """The kinds of the statements of one transaction (one to three of them).

    Two statements may change the same rows (update them twice, or update and delete them):
    DuckLake's change feed misreports such rows in data files (DuckLake #1387), which the
    runtime must not depend on."""
    kinds = [k for table in KINDS.values() for k in table]
    return [rng.choice(kinds) for _ in range(rng.randint(1, 3))]


def one_change(con: duckdb.DuckDBPyConnection, rng: random.Random, kind: str, next_id: int) -> int:
    """One statement against the sources; the next free order id."""
    if kind == "orders":
        rows = []
        for _ in range(rng.randint(1, 6)):
            amount = "NULL" if rng.random() < 0.1 else f"{rng.uniform(1, 500):.2f}"
            customer = "NULL" if rng.random() < 0.05 else str(rng.randint(1, 45))
            rows.append(
                f"({next_id}, {customer}, '{rng.choice(STATUSES)}', {amount}, "
                f"DATE '2026-10-01' + {rng.randint(0, 60)})"
            )
            if rng.random() < 0.2:
                rows.append(rows[-1])  # a duplicate row
            next_id += 1
        con.execute(f"INSERT INTO lake.raw.orders VALUES {', '.join(rows)}")
    elif kind == "payments":
        con.execute(
            "INSERT INTO lake.raw.payments SELECT coalesce(max(id), 0) + 1, ?, ?, ? "
            "FROM lake.raw.payments",
            [rng.randint(1, next_id), rng.choice(["card", "cash", "voucher"]), rng.randint(1, 300)],
        )
    elif kind == "update":
        modulus = rng.randint(11, 41)
        con.execute(
            f"UPDATE lake.raw.orders SET status = ?, amount = amount + 1 "
            f"WHERE id % {modulus} = {rng.randint(0, modulus - 1)}",
            [rng.choice(STATUSES)],
        )
    elif kind in ("delete", "delete payments"):
        table = "orders" if kind == "delete" else "payments"
        modulus = rng.randint(40, 90)
        con.execute(
            f"DELETE FROM lake.raw.{table} WHERE id % {modulus} = {rng.randint(0, modulus - 1)}"
        )
    else:
        con.execute(
            "UPDATE lake.raw.customers SET region = ?, tier = ? WHERE id % 7 = ?",
            [
                rng.choice(["north", "south", "east", "west", None]),
                rng.choice(["gold", "silver"]),
                rng.randint(0, 6),
            ],
        )
    return next_id


def next_order_id(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute("SELECT coalesce(max(id), 0) + 1 FROM lake.raw.orders").fetchone()
    return int(row[0]) if row else 1


def commit_changes(con: duckdb.DuckDBPyConnection, rng: random.Random, next_id: int) -> int:
    """One transaction of one to three changes; the next free order id."""
    with transaction(con):  # as the Spark writer commits
        for kind in changes(rng):
            next_id = one_change(con, rng, kind, next_id)
    return next_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--catalog", required=True)
    parser.add_argument("--data-path", required=True)
    parser.add_argument("--stop-file", type=Path, required=True)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--started-file", type=Path, help="touched after the first commit")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pause-ms", default="50-200")
    args = parser.parse_args()
    low, high = (int(x) for x in args.pause_ms.split("-"))
    counter = RetryCounter()
    logging.getLogger("dbt_duckstream").addHandler(counter)
    rng = random.Random(args.seed)
    con = duckdb.connect()
    attach_lake(con, args.catalog, data_path=args.data_path)
    next_id = next_order_id(con)
    commits, failures, errors = 0, 0, []
    started = time.monotonic()
    while not args.stop_file.exists():
        seed = rng.random()

        def commit(seed: float = seed, first: int = next_id) -> int:
            # the same changes on every attempt
            return commit_changes(con, random.Random(seed), first)

        try:
            next_id = retrying(commit, "source writer")
            commits += 1
        except duckdb.Error as error:
            failures += 1
            errors.append(str(error)[:300])
        time.sleep(rng.uniform(low, high) / 1000)
        if args.started_file is not None:
            args.started_file.touch(exist_ok=True)
    con.close()
    report = {
        "commits": commits,
        "retries": counter.retries,
        "failures": failures,
        "errors": errors[:5],
        "seconds": round(time.monotonic() - started, 1),
    }
    args.report.write_text(json.dumps(report))


if __name__ == "__main__":
    main()
