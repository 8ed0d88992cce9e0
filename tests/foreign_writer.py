"""A user's own ingestion job: commits to the integration project's sources at a fixed rate,
from a plain DuckDB process that does not use dbt-duckstream (no turns, no file lock).

    python -m tests.foreign_writer --catalog sqlite:lake.sqlite --data-path data \\
        --rate 5 --stop-file stop --report report.json [--seed 1] [--started-file F]

Each commit is one transaction of one to three statements against ``raw.orders``,
``raw.payments`` and ``raw.customers``: inserts (with duplicates and NULLs), updates, deletes,
``MERGE`` (update or insert), on rows that the same transaction may touch twice. A commit that
fails is retried at once, as a job would, and counted. It stops when the stop file appears
and writes a JSON report: commits, retries, failures, seconds, the rate it reached, and
``late``: how far behind its schedule it fell at worst (seconds).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import time
from pathlib import Path

import duckdb

STATUSES = ["placed", "shipped", "completed", "returned", "test"]
KINDS = ["insert", "insert", "update", "delete", "merge", "payment", "delete payment", "customer"]


def extension(name: str) -> str:
    """An extension from its PyPI wheel (nothing is downloaded)."""
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    assert spec is not None and spec.submodule_search_locations is not None
    root = Path(next(iter(spec.submodule_search_locations)))
    return str(next(root.rglob(f"{name}.duckdb_extension")))


def connect(catalog: str, data_path: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(f"LOAD '{extension('ducklake')}'")
    for prefix, name in (("sqlite:", "sqlite_scanner"), ("postgres:", "postgres_scanner")):
        if catalog.startswith(prefix):
            con.execute(f"LOAD '{extension(name)}'")
    con.execute(f"ATTACH 'ducklake:{catalog}' AS lake (DATA_PATH '{data_path}')")
    return con


def statement(rng: random.Random, kind: str, next_id: int) -> tuple[str, int]:
    """One statement of the given kind; the next free order id."""
    if kind == "insert":
        rows = []
        for _ in range(rng.randint(1, 5)):
            amount = "NULL" if rng.random() < 0.1 else f"{rng.uniform(1, 500):.2f}"
            customer = "NULL" if rng.random() < 0.05 else str(rng.randint(1, 45))
            row = (
                f"({next_id}, {customer}, '{rng.choice(STATUSES)}', {amount}, "
                f"DATE '2026-10-01' + {rng.randint(0, 60)})"
            )
            rows += [row, row] if rng.random() < 0.2 else [row]  # a duplicate now and then
            next_id += 1
        return f"INSERT INTO lake.raw.orders VALUES {', '.join(rows)}", next_id
    if kind == "update":
        m = rng.randint(11, 41)
        return (
            f"UPDATE lake.raw.orders SET status = '{rng.choice(STATUSES)}', amount = amount + 1 "
            f"WHERE id % {m} = {rng.randint(0, m - 1)}"
        ), next_id
    if kind == "delete":
        m = rng.randint(40, 90)
        return f"DELETE FROM lake.raw.orders WHERE id % {m} = {rng.randint(0, m - 1)}", next_id
    if kind == "merge":
        ids = [rng.randint(1, next_id + 3) for _ in range(rng.randint(1, 4))]
        values = ", ".join(
            f"({i}, {rng.randint(1, 45)}, '{rng.choice(STATUSES)}', {rng.uniform(1, 500):.2f})"
            for i in dict.fromkeys(ids)
        )
        return (
            f"MERGE INTO lake.raw.orders AS t USING (VALUES {values}) AS s(id, c, st, a) "
            "ON t.id = s.id WHEN MATCHED THEN UPDATE SET status = s.st, amount = s.a "
            "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.c, s.st, s.a, DATE '2026-11-01')"
        ), max(next_id, max(ids) + 1)
    if kind == "payment":
        return (
            "INSERT INTO lake.raw.payments SELECT coalesce(max(id), 0) + 1, "
            f"{rng.randint(1, next_id)}, '{rng.choice(['card', 'cash', 'voucher'])}', "
            f"{rng.randint(1, 300)} FROM lake.raw.payments"
        ), next_id
    if kind == "delete payment":
        m = rng.randint(40, 90)
        return f"DELETE FROM lake.raw.payments WHERE id % {m} = {rng.randint(0, m - 1)}", next_id
    region = rng.choice(["'north'", "'south'", "'east'", "'west'", "NULL"])
    return (
        f"UPDATE lake.raw.customers SET region = {region}, "
        f"tier = '{rng.choice(['gold', 'silver'])}' WHERE id % 7 = {rng.randint(0, 6)}"
    ), next_id


def commit(con: duckdb.DuckDBPyConnection, statements: list[str]) -> None:
    con.execute("BEGIN TRANSACTION")
    try:
        for sql in statements:
            con.execute(sql)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--catalog", required=True)
    parser.add_argument("--data-path", required=True)
    parser.add_argument("--rate", type=float, default=5.0, help="commits per second")
    parser.add_argument("--stop-file", type=Path, required=True)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--started-file", type=Path, help="touched after the first commit")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--attempts", type=int, default=50, help="per commit, then it fails")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    con = connect(args.catalog, args.data_path)
    row = con.execute("SELECT coalesce(max(id), 0) + 1 FROM lake.raw.orders").fetchone()
    next_id = int(row[0]) if row else 1
    commits = retries = failures = 0
    errors: list[str] = []
    late = 0.0
    started = time.monotonic()
    while not args.stop_file.exists():
        due = started + commits / args.rate if args.rate > 0 else time.monotonic()
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        late = max(late, -wait)
        statements, first = [], next_id
        for _ in range(rng.randint(1, 3)):
            sql, next_id = statement(rng, rng.choice(KINDS), next_id)
            statements.append(sql)
        for attempt in range(args.attempts):
            try:
                commit(con, statements)
                break
            except duckdb.Error as error:
                if attempt == args.attempts - 1:
                    failures += 1
                    errors.append(str(error)[:300])
                    next_id = first
                else:
                    retries += 1
                    time.sleep(rng.uniform(0.0, 0.02))
        commits += 1
        if args.started_file is not None:
            args.started_file.touch(exist_ok=True)
    seconds = time.monotonic() - started
    con.close()
    report = {
        "commits": commits - failures,
        "retries": retries,
        "failures": failures,
        "errors": errors[:5],
        "seconds": round(seconds, 1),
        "rate": round((commits - failures) / seconds, 2) if seconds else 0.0,
        "late": round(late, 2),
    }
    args.report.write_text(json.dumps(report))


if __name__ == "__main__":
    main()
