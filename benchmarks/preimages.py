"""The minus side of lineitem's delta at TPC-H scale: ``ended_rows`` against the definition.

    python -m benchmarks.preimages [--scale 1] [--ratios 0.001,0.01] [--runs 7] [--workdir DIR]

lineitem goes into a DuckLake once (6,001,215 rows in one Parquet file at SF1). For each ratio
``r`` and each batch shape, a copy of that lake receives one batch in three snapshots: insert
``4·r·1.5M`` lineitem rows (copies under new order keys), delete the lineitems of ``r·1.5M``
orders, add 0.01 to ``l_discount`` of the lineitems of ``r·1.5M`` other orders. The batch shape
picks those orders at random (``random``) or among the newest, at the end of the file
(``clustered``). Over the batch's window, for one column and for the seven Q1 reads, the median
of ``--runs`` runs of:

* definition: the rowids of ``ducklake_table_deletions``, then lineitem at the old snapshot
  restricted to them (both parts timed apart as well);
* ended_rows: its planning (metadata, delete files, Parquet footers), then its query.

Both materialize their rows into a temporary table, as a maintenance run does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import duckdb

from dbt_duckstream.runtime.lake import load_extension
from dbt_duckstream.runtime.preimages import ended_rows
from dbt_duckstream.sql import TableRef, quote

LINEITEM = TableRef("lake", "main", "lineitem")
ONE = ("l_discount",)
Q1 = (
    "l_returnflag",
    "l_linestatus",
    "l_quantity",
    "l_extendedprice",
    "l_discount",
    "l_tax",
    "l_shipdate",
)
ORDERS_PER_SF = 1_500_000


def attach(directory: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    load_extension(con, "ducklake")
    con.execute(
        f"ATTACH 'ducklake:{directory}/lake.ducklake' AS lake "
        f"(DATA_PATH '{directory}/data', OVERRIDE_DATA_PATH true)"
    )
    con.execute("USE lake")
    return con


def generate(directory: Path, scale: float) -> None:
    con = attach(directory)
    load_extension(con, "tpch")
    con.execute(f"CALL dbgen(sf = {scale}, catalog = 'memory')")
    con.execute("CREATE TABLE lake.main.lineitem AS FROM memory.main.lineitem")
    con.execute("CREATE TABLE lake.main.orders AS SELECT o_orderkey FROM memory.main.orders")
    con.close()


def apply_batch(con: duckdb.DuckDBPyConnection, orders: int, shape: str) -> tuple[int, int]:
    """One batch in three snapshots; the window (old, new] it makes."""
    old = current(con)
    pick = (
        "USING SAMPLE reservoir({n} ROWS) REPEATABLE ({seed})"
        if shape == "random"
        else "ORDER BY o_orderkey DESC LIMIT {n} OFFSET {offset}"
    )
    con.execute(
        "CREATE TEMP TABLE added AS SELECT * REPLACE (l_orderkey + 1000000000 AS l_orderkey) "
        f"FROM lineitem USING SAMPLE reservoir({4 * orders} ROWS) REPEATABLE (1)"
    )
    con.execute("INSERT INTO lineitem FROM added")
    con.execute(
        "CREATE TEMP TABLE gone AS SELECT o_orderkey FROM orders "
        + pick.format(n=orders, seed=2, offset=0)
    )
    con.execute("DELETE FROM lineitem WHERE l_orderkey IN (FROM gone)")
    con.execute(
        "CREATE TEMP TABLE raised AS SELECT o_orderkey FROM orders "
        "WHERE o_orderkey NOT IN (FROM gone) " + pick.format(n=orders, seed=3, offset=0)
    )
    con.execute(
        "UPDATE lineitem SET l_discount = l_discount + 0.01 WHERE l_orderkey IN (FROM raised)"
    )
    return old, current(con)


def current(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute("SELECT id FROM lake.current_snapshot()").fetchone()
    assert row is not None
    return int(row[0])


def medians_ms(runs: int, actions: dict[str, Callable[[], object]]) -> dict[str, float]:
    """The median wall time of each action, and as ``<name> cpu`` its median CPU time (all
    threads of this process: a busy machine stretches the first, hardly the second). The
    actions take turns, so load weighs on all alike; one warm-up round first (footers, the
    extension's caches)."""
    timings: dict[str, list[float]] = defaultdict(list)
    for round_ in range(runs + 1):
        for name, action in actions.items():
            wall, cpu = time.perf_counter(), time.process_time()
            action()
            if round_:
                timings[name].append(time.perf_counter() - wall)
                timings[f"{name} cpu"].append(time.process_time() - cpu)
    return {name: statistics.median(t) * 1000 for name, t in timings.items()}


def measure(con, window: tuple[int, int], columns: tuple[str, ...], runs: int) -> dict:
    old, new = window
    cols = ", ".join(quote(c) for c in columns)
    deletions = (
        f"SELECT DISTINCT rowid FROM ducklake_table_deletions('lake', 'main', 'lineitem', "
        f"{old + 1}, {new})"
    )
    restricted = f"SELECT {cols}, rowid FROM lineitem AT (VERSION => {old}) WHERE rowid IN "

    def definition() -> None:
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE d AS WITH r AS MATERIALIZED ({deletions}) "
            f"{restricted} (FROM r)"
        )

    def deletions_only() -> None:
        con.execute(f"CREATE OR REPLACE TEMP TABLE r AS {deletions}")

    def time_travel_only() -> None:
        con.execute(f"CREATE OR REPLACE TEMP TABLE d AS {restricted} (FROM r)")

    plan = ended_rows(con, LINEITEM, old, new, columns)
    assert plan.sql is not None, plan.reason
    sql = plan.sql

    def planning() -> None:
        ended_rows(con, LINEITEM, old, new, columns)

    def query() -> None:
        con.execute(f"CREATE OR REPLACE TEMP TABLE m AS {sql}")

    figures = medians_ms(
        runs,
        {
            "definition": definition,
            "deletions": deletions_only,
            "time_travel": time_travel_only,
            "planning": planning,
            "query": query,
        },
    )
    definition()
    rows = con.execute("SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM m)").fetchone()
    assert rows is not None and rows[0] == rows[1], rows
    different = con.execute(
        "SELECT count(*) FROM (FROM d EXCEPT ALL FROM m UNION ALL (FROM m EXCEPT ALL FROM d))"
    ).fetchone()
    assert different == (0,), different
    return {**figures, "rows": rows[0]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.preimages", description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--ratios", default="0.001,0.01")
    parser.add_argument("--shapes", default="random,clustered")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="preimages-") as work:
        base = Path(work) / "base"
        base.mkdir()
        started = time.perf_counter()
        generate(base, args.scale)
        print(f"lineitem SF{args.scale:g} in DuckLake: {time.perf_counter() - started:.1f} s")
        print(
            "| batch | columns | ended rows | definition: deletions + time travel "
            "| ended_rows: planning + query | speed-up | CPU: definition / ended_rows | load |\n"
            "|---|---|---|---|---|---|---|---|"
        )
        for ratio in (float(r) for r in args.ratios.split(",")):
            for shape in args.shapes.split(","):
                lake = Path(work) / "lake"
                shutil.rmtree(lake, ignore_errors=True)
                shutil.copytree(base, lake)
                con = attach(lake)
                window = apply_batch(con, round(ORDERS_PER_SF * args.scale * ratio), shape)
                for label, columns in (("1", ONE), ("Q1's 7", Q1)):
                    load = os.getloadavg()[0]
                    f = measure(con, window, columns, args.runs)
                    ours = f["planning"] + f["query"]
                    ours_cpu = f["planning cpu"] + f["query cpu"]
                    print(
                        f"| {ratio:.1%} {shape} | {label} | {f['rows']:,} "
                        f"| {f['definition']:.0f} ms: {f['deletions']:.0f} + "
                        f"{f['time_travel']:.0f} | {ours:.0f} ms: {f['planning']:.1f} + "
                        f"{f['query']:.0f} | {f['definition'] / ours:.1f}x "
                        f"| {f['definition cpu']:.0f} / {ours_cpu:.0f} ms | {load:.1f} |",
                        flush=True,
                    )
                con.close()


if __name__ == "__main__":
    main()
