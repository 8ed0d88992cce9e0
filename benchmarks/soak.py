"""A soak: months of maintenance runs on one lake, with DuckLake's own maintenance on schedule.

    python -m benchmarks.soak [--runs 5000] [--out docs/soak] [--directory soak-lake]

Each run applies a small random change to the sources (a few orders inserted, updated and
deleted, as many deleted as inserted on average so the sources keep their size; now and then
a customer moved) and maintains five models as dbt's materialization
does (``run_model``): a chain (a filter, and an aggregate of that model), an aggregate with
MIN/MAX, a join, and a window. Every ``--maintain-every`` runs it does what the README
recommends (``MAINTENANCE``): flush inlined rows, merge adjacent files, expire snapshots the
models have moved past, and delete the files they left. Every ``--check-every`` runs each
model is compared with its SQL recomputed, and a fresh process times one run of every model
cold (no plan or history of an earlier run in memory: what an orchestrator's ``dbt run``
pays). The report (JSON, and a text summary) gives run time over time, the start against the
end, and catalog and data size growth per 1,000 runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb

from dbt_duckstream.runtime.breakdown import PROFILE
from dbt_duckstream.runtime.consistency import differences
from dbt_duckstream.runtime.lake import attach_lake, metadata_catalog
from dbt_duckstream.runtime.model_run import run_model
from dbt_duckstream.runtime.recorded_ties import recorded_ties
from dbt_duckstream.sql import TableRef

#: the models, in the order they run (the chain's second model reads the first)
MODELS = {
    "clean_orders": "SELECT id, customer_id, amount FROM orders WHERE status <> 'test'",
    "customer_totals": "SELECT customer_id, sum(amount) AS total, count(*) AS n "
    "FROM clean_orders GROUP BY customer_id",
    "status_stats": "SELECT status, count(*) AS n, sum(amount) AS total, min(amount) AS low, "
    "max(amount) AS high FROM orders GROUP BY status",
    "orders_by_region": "SELECT o.id, o.amount, c.region FROM orders o "
    "JOIN customers c ON o.customer_id = c.id",
    "order_rank": "SELECT id, customer_id, amount, row_number() OVER (PARTITION BY customer_id "
    "ORDER BY amount, id) AS rn, sum(amount) OVER (PARTITION BY customer_id) AS customer_total "
    "FROM orders",
}

#: the share of a data file's rows deleted from which maintenance rewrites it: DuckLake's
#: default, 0.95, left files with half their rows deleted after 5,000 runs (141 files of the
#: join model, 31,254 of their 61,525 rows deleted), and runs read them all
REWRITE_THRESHOLD = 0.2

#: DuckLake's maintenance, as the README recommends it: inlined rows to files, files with
#: many deleted rows rewritten, small files merged, snapshots older than every model's cursor
#: expired, and their files deleted
MAINTENANCE = (
    "CALL ducklake_flush_inlined_data('lake')",
    f"CALL ducklake_rewrite_data_files('lake', delete_threshold => {REWRITE_THRESHOLD})",
    "CALL ducklake_merge_adjacent_files('lake')",
    "CALL ducklake_expire_snapshots('lake', older_than => {older_than})",
    "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)",
)
STATUSES = ("placed", "shipped", "completed", "returned", "test")
CUSTOMERS = 200


def create_sources(con: duckdb.DuckDBPyConnection, rows: int) -> None:
    con.execute(
        f"CREATE TABLE customers AS SELECT range AS id, ['north', 'south', 'east', 'west'][range "
        f"% 4 + 1] AS region FROM range(1, {CUSTOMERS + 1})"
    )
    con.execute(
        "CREATE TABLE orders AS SELECT range AS id, range % 200 + 1 AS customer_id, "
        "['placed', 'shipped', 'completed', 'returned', 'test'][range % 5 + 1] AS status, "
        f"(range * 37 % 1000)::DECIMAL(12, 2) AS amount FROM range(1, {rows + 1})"
    )


@dataclass
class Orders:
    """The live order ids: updates and deletes hit rows that exist, and deletes balance
    inserts, so the sources keep their size and what grows over a soak is history alone
    (with inserts only, the sources gained half their rows in 5,000 runs, and a run's time
    grew with them)."""

    ids: list[int]
    next_id: int

    def new(self) -> int:
        self.ids.append(self.next_id)
        self.next_id += 1
        return self.ids[-1]

    def take(self, rng: random.Random) -> int:
        """A random live id, no longer live."""
        i = rng.randrange(len(self.ids))
        self.ids[i], self.ids[-1] = self.ids[-1], self.ids[i]
        return self.ids.pop()


def change(con: duckdb.DuckDBPyConnection, rng: random.Random, orders: Orders) -> None:
    """One small random change to the sources, in one transaction."""
    con.execute("BEGIN TRANSACTION")
    for _ in range(rng.randint(1, 5)):
        con.execute(
            "INSERT INTO orders VALUES (?, ?, ?, ?)",
            [orders.new(), rng.randint(1, CUSTOMERS), rng.choice(STATUSES), rng.randint(1, 999)],
        )
    for _ in range(rng.randint(0, 3)):
        con.execute(
            "UPDATE orders SET amount = amount + 1, status = ? WHERE id = ?",
            [rng.choice(STATUSES), rng.choice(orders.ids)],
        )
    for _ in range(rng.randint(1, 5)):
        con.execute("DELETE FROM orders WHERE id = ?", [orders.take(rng)])
    if rng.random() < 0.05:
        con.execute(
            "UPDATE customers SET region = ? WHERE id = ?",
            [rng.choice(["north", "south", "east", "west"]), rng.randint(1, CUSTOMERS)],
        )
    con.execute("COMMIT")


def connect(catalog: str, data_path: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    attach_lake(con, catalog, data_path=data_path)
    con.execute("USE lake")
    return con


def run_all(
    con: duckdb.DuckDBPyConnection,
    phases: dict[str, float] | None = None,
    counts: dict[str, int] | None = None,
) -> dict[str, tuple[str, float]]:
    """Each model's run, always maintained (never rebuilt for cost): its strategy and seconds;
    ``phases`` gains the milliseconds of each phase of the runs, ``counts`` the statements
    they issued when profiled (``breakdown``)."""
    found = {}
    for name, sql in MODELS.items():
        result = run_model(con, sql, TableRef("lake", "main", name), rebuild_above=None)
        found[name] = (result.strategy, result.seconds)
        for phase, ms in result.breakdown.ms.items():
            if phases is not None:
                phases[phase] = phases.get(phase, 0.0) + ms
        for name_, n in result.breakdown.counts.items():
            if counts is not None:
                counts[name_] = counts.get(name_, 0) + n
    return found


def check(con: duckdb.DuckDBPyConnection) -> None:
    """Every model equals its SQL recomputed (``AssertionError`` otherwise)."""
    for name, sql in MODELS.items():
        target = TableRef("lake", "main", name)
        ties = recorded_ties(con, target)
        found = differences(con, target.sql(), sql, ties=ties)
        assert not found, f"{name} differs from its recomputation: {found}"


def sizes(directory: Path, catalog: str) -> tuple[int, int]:
    """The catalog's bytes (a DuckDB or SQLite file, with its journal) and the data files'."""
    location = Path(catalog.removeprefix("sqlite:"))
    metadata = sum(p.stat().st_size for p in location.parent.glob(location.name + "*"))
    data = sum(p.stat().st_size for p in (directory / "data").rglob("*") if p.is_file())
    return metadata, data


COLD = """
import json, sys
from benchmarks.soak import connect, run_all
from dbt_duckstream.runtime.breakdown import enable_profiling
con = connect(sys.argv[1], sys.argv[2])
enable_profiling(con)
counts = {}
ran = run_all(con, counts=counts)
print(json.dumps([{k: (str(s), t) for k, (s, t) in ran.items()}, counts]))
"""


def cold_run(catalog: str, data_path: str) -> tuple[dict[str, tuple[str, float]], dict]:
    """One run of every model from a fresh process (the lake released meanwhile), profiled:
    each model's strategy and seconds, and the statements the runs issued (``statements``)
    and DuckLake's catalog queries among them (``catalog``), which the machine's load does
    not blur."""
    done = subprocess.run(
        [sys.executable, "-c", COLD, catalog, data_path],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, PROFILE: "1"},
    )
    ran, counts = json.loads(done.stdout.strip().splitlines()[-1])
    return ran, counts


@dataclass
class Soak:
    runs: int = 0
    #: seconds of each run's models together, in this process
    warm: list[float] = field(default_factory=list)
    #: (run, seconds of every model's run in a fresh process)
    cold: list[tuple[int, float]] = field(default_factory=list)
    #: (run, statements, DuckLake catalog queries) of each cold run, every model together
    cold_statements: list[tuple[int, int, int]] = field(default_factory=list)
    #: (run, catalog bytes, data bytes, snapshots)
    size: list[tuple[int, int, int, int]] = field(default_factory=list)
    #: (run, orders in the source), to show that the sources keep their size
    orders: list[tuple[int, int]] = field(default_factory=list)
    #: (run, live data files, live delete files, share of their rows deleted), every table
    files: list[tuple[int, int, int, float]] = field(default_factory=list)
    strategies: dict[str, int] = field(default_factory=dict)
    checks: int = 0
    maintenance_seconds: list[float] = field(default_factory=list)
    #: each warm run's milliseconds per phase, its models together
    phases: list[dict[str, float]] = field(default_factory=list)

    def phase_change(self) -> str:
        """Each phase's median at the start and at the end (first and last tenth)."""
        tenth = max(1, len(self.phases) // 10)
        names = sorted({p for found in self.phases for p in found})

        def median(rows: list[dict[str, float]], name: str) -> float:
            return statistics.median(r.get(name, 0.0) for r in rows) if rows else 0.0

        return ", ".join(
            f"{n} {median(self.phases[:tenth], n):.0f}->{median(self.phases[-tenth:], n):.0f} ms"
            for n in names
        )

    def summary(self) -> str:
        tenth = max(1, len(self.warm) // 10)
        start = statistics.median(self.warm[1 : tenth + 1]) if len(self.warm) > 1 else 0.0
        end = statistics.median(self.warm[-tenth:]) if self.warm else 0.0
        cold_start = self.cold[0][1] if self.cold else 0.0
        cold_end = self.cold[-1][1] if self.cold else 0.0
        # from the second check on: the first holds the lake as its first run left it
        (r0, c0, d0, _), (r1, c1, d1, s1) = self.size[1 if len(self.size) > 2 else 0], self.size[-1]
        per_k = 1000 / max(1, r1 - r0)
        return (
            f"{self.runs} runs of {len(MODELS)} models: a run (every model) took "
            f"{start * 1000:.0f} ms at the start and {end * 1000:.0f} ms at the end "
            f"(median of the first and last tenth, {_change(start, end)}); cold, from a fresh "
            f"process: {cold_start * 1000:.0f} ms -> {cold_end * 1000:.0f} ms "
            f"({_change(cold_start, cold_end)}), {_statements_of(self)}; "
            f"from run {r0} to {r1}: catalog {c0 / 1e6:.2f} -> {c1 / 1e6:.2f} MB "
            f"({(c1 - c0) * per_k / 1e6:+.2f} MB per 1000 runs), data {d0 / 1e6:.2f} -> "
            f"{d1 / 1e6:.2f} MB ({(d1 - d0) * per_k / 1e6:+.2f} MB per 1000 runs), {s1} "
            f"snapshots kept; {_orders_of(self)}; {_files_of(self)}; {self.checks} checks "
            "against the recomputation passed; "
            f"strategies {dict(sorted(self.strategies.items()))}; phases (every model, start->"
            f"end) {self.phase_change()}"
        )


def _orders_of(soak: Soak) -> str:
    if not soak.orders:
        return "orders not counted"
    return f"orders in the source {soak.orders[0][1]} -> {soak.orders[-1][1]}"


def _files_of(soak: Soak) -> str:
    if not soak.files:
        return "files not counted"
    (_, f0, d0, s0), (_, f1, d1, s1) = soak.files[0], soak.files[-1]
    return (
        f"data files {f0} -> {f1}, delete files {d0} -> {d1}, rows deleted in them "
        f"{s0:.0%} -> {s1:.0%}"
    )


def live_files(con: duckdb.DuckDBPyConnection) -> tuple[int, int, float]:
    """The lake's live data files, their live delete files, and the share of their rows
    that those delete: what every scan reads past."""
    meta = metadata_catalog("lake")
    row = con.execute(
        "SELECT count(*), count(x.data_file_id), "
        "coalesce(sum(x.delete_count), 0) / greatest(sum(d.record_count), 1) "
        f"FROM {meta}.ducklake_data_file AS d LEFT JOIN {meta}.ducklake_delete_file AS x "
        "ON x.data_file_id = d.data_file_id AND x.end_snapshot IS NULL "
        "WHERE d.end_snapshot IS NULL"
    ).fetchone()
    return (int(row[0]), int(row[1]), float(row[2])) if row else (0, 0, 0.0)


def _statements_of(soak: Soak) -> str:
    if not soak.cold_statements:
        return "statements not counted"
    (_, s0, c0), (_, s1, c1) = soak.cold_statements[0], soak.cold_statements[-1]
    return f"statements {s0} -> {s1}, DuckLake catalog queries {c0} -> {c1}"


def _change(start: float, end: float) -> str:
    return f"{(end - start) / start * 100:+.0f}%" if start else "n/a"


def count_rows(con: duckdb.DuckDBPyConnection, table: str) -> int:
    row = con.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


def snapshots(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute("SELECT count(*) FROM ducklake_snapshots('lake')").fetchone()
    return int(row[0]) if row else 0


def soak(
    directory: Path,
    runs: int,
    *,
    catalog: str | None = None,
    rows: int = 20_000,
    maintain_every: int = 100,
    check_every: int = 100,
    keep: int = 20,
    seed: int = 1,
    progress: bool = False,
    out: Path | None = None,
) -> Soak:
    """``runs`` maintenance runs on a new lake in ``directory``; raises when a check fails.
    ``out``: where to write the report (JSON) at every check, so a soak cut short keeps it."""
    directory.mkdir(parents=True, exist_ok=True)
    catalog = catalog or str(directory / "lake.ducklake")
    data_path = str(directory / "data")
    rng = random.Random(seed)
    report = Soak()
    con = connect(catalog, data_path)
    create_sources(con, rows)
    orders = Orders(list(range(1, rows + 1)), rows + 1)
    for name, strategy in run_all(con).items():
        assert strategy[0] == "initial", (name, strategy)
    moments: list[str] = []  # each run's start, for expiring what every model moved past
    for i in range(1, runs + 1):
        row = con.execute("SELECT now()::VARCHAR").fetchone()
        moments.append(str(row[0]) if row else "")
        change(con, rng, orders)
        checking = i % check_every == 0 or i == runs or i == 1
        if checking:  # this run from a fresh process (the lake released meanwhile)
            con.close()
            ran, counts = cold_run(catalog, data_path)
            report.cold.append((i, sum(seconds for _, seconds in ran.values())))
            report.cold_statements.append(
                (i, counts.get("statements", 0), counts.get("catalog", 0))
            )
            con = connect(catalog, data_path)
        else:
            started, phases = time.perf_counter(), {}
            ran = run_all(con, phases)
            report.warm.append(time.perf_counter() - started)
            report.phases.append(phases)
        for strategy, _ in ran.values():
            report.strategies[str(strategy)] = report.strategies.get(str(strategy), 0) + 1
        report.runs = i
        if i % maintain_every == 0:
            started = time.perf_counter()
            older_than = f"TIMESTAMPTZ '{moments[-min(keep, len(moments))]}'"
            for statement in MAINTENANCE:
                con.execute(statement.format(older_than=older_than))
            report.maintenance_seconds.append(time.perf_counter() - started)
        if checking:
            check(con)
            report.checks += 1
            report.size.append((i, *sizes(directory, catalog), snapshots(con)))
            report.files.append((i, *live_files(con)))
            report.orders.append((i, count_rows(con, "orders")))
            if out is not None:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(json.dumps({**asdict(report), "summary": report.summary()}))
            if progress:
                w = statistics.median(report.warm[-check_every:] or [0.0])
                print(
                    f"run {i}: {w * 1000:.0f} ms warm, {report.cold[-1][1] * 1000:.0f} ms cold, "
                    f"catalog {report.size[-1][1] / 1e6:.2f} MB, data "
                    f"{report.size[-1][2] / 1e6:.2f} MB, {report.size[-1][3]} snapshots, "
                    f"{report.files[-1][1]} data files ({report.files[-1][3]:.0%} of their rows "
                    "deleted)",
                    flush=True,
                )
    con.close()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--rows", type=int, default=20_000, help="orders at the start")
    parser.add_argument("--maintain-every", type=int, default=100)
    parser.add_argument("--check-every", type=int, default=100)
    parser.add_argument("--catalog", help="sqlite:<file> or postgres:<dsn> (default: a file)")
    parser.add_argument("--directory", type=Path, default=Path("soak-lake"))
    parser.add_argument("--out", type=Path, help="write the report as JSON here")
    args = parser.parse_args()
    report = soak(
        args.directory,
        args.runs,
        catalog=args.catalog,
        rows=args.rows,
        maintain_every=args.maintain_every,
        check_every=args.check_every,
        progress=True,
        out=args.out,
    )
    print(report.summary())


if __name__ == "__main__":
    main()
