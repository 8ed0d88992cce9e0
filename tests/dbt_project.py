"""The integration_tests dbt project, copied into a temp directory and driven by dbt's CLI.

dbt runs in a process of its own, as an orchestrator would run it: the DuckLake catalog is a
DuckDB file that one process at a time may hold, and the tests change the sources between
runs. The process is forked from one that imported dbt ahead (``tests.dbt_launcher``).
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from dbt_duckstream import load_ducklake
from dbt_duckstream.bridge.dbt_process import Invocation, dbt_environment, run_dbt

from .dbt_launcher import forked_dbt

REPOSITORY = Path(__file__).resolve().parent.parent
INTEGRATION_PROJECT = REPOSITORY / "integration_tests"
BIN = Path(sys.executable).parent


#: further dbt projects beside the integration project, each in a folder of its own
JAFFLE_SHOP = INTEGRATION_PROJECT / "jaffle_shop"
TPCH = INTEGRATION_PROJECT / "tpch"
#: the integration project's models that read ``current_date``: they rebuild on every run
#: (``ivm_fallback='rebuild'``) and equal a reference built on the same day only
FALLBACK_MODELS = frozenset({"order_recency"})


class Project:
    """A private copy of a dbt project (integration_tests by default) with its own lake."""

    def __init__(self, directory: Path, source: Path = INTEGRATION_PROJECT) -> None:
        self.directory = directory
        self.lake = directory / "lake"
        self.first_run: Invocation | None = None
        shutil.copytree(
            source,
            directory,
            ignore=shutil.ignore_patterns(
                "target", "logs", "dbt_packages", "lake", "*.lock*", JAFFLE_SHOP.name, TPCH.name
            ),
            dirs_exist_ok=True,
        )
        (directory / "packages.yml").write_text(f"packages:\n  - local: {REPOSITORY}\n")
        # the seeds are tiny, so a cost-based rebuild would win every run: keep maintaining,
        # which is what these tests check against the reference
        config = directory / "dbt_project.yml"
        materialized = "    +materialized:"
        config.write_text(
            config.read_text().replace(
                materialized, "    +ivm_rebuild_above: never\n" + materialized
            )
        )
        self.lake.mkdir(exist_ok=True)
        self.env = dbt_environment(self.lake, directory)

    def dbt(self, *args: str, check: bool = True) -> Invocation:
        invocation = run_dbt(*args, project_dir=self.directory, env=self.env, launch=forked_dbt)
        if check and invocation.returncode != 0:
            raise AssertionError(f"dbt {' '.join(args)} failed:\n{invocation.output}")
        return invocation

    def duckstream(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "duckstream"), *args],
            cwd=self.directory,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The lake, between dbt commands (only one process may hold it)."""
        con = duckdb.connect()
        try:
            load_ducklake(con)
            con.execute(
                f"ATTACH 'ducklake:{self.lake}/lake.ducklake' AS lake "
                f"(DATA_PATH '{self.lake}/data')"
            )
            yield con
        finally:
            con.close()

    def models(self) -> list[str]:
        return sorted(p.stem for p in (self.directory / "models").rglob("*.sql"))


def change_sources(con: duckdb.DuckDBPyConnection, rng: random.Random) -> None:
    """A pipeline's worth of changes: several commits of inserts, updates and deletes.

    Duplicated rows, NULL keys and values, rows inserted and deleted within the window, and
    multi-statement transactions all occur.
    """
    next_id = int(con.execute("SELECT max(id) FROM lake.raw.orders").fetchone()[0]) + 1  # type: ignore[index]
    statuses = ["placed", "shipped", "completed", "returned", "test"]
    for _ in range(rng.randint(2, 4)):
        transactional = rng.random() < 0.4
        if transactional:
            con.execute("BEGIN")
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(["orders", "orders", "payments", "update", "delete", "customers"])
            if kind == "orders":
                rows = []
                for _ in range(rng.randint(1, 8)):
                    amount = "NULL" if rng.random() < 0.1 else f"{rng.uniform(1, 500):.2f}"
                    customer = "NULL" if rng.random() < 0.05 else str(rng.randint(1, 45))
                    rows.append(
                        f"({next_id}, {customer}, '{rng.choice(statuses)}', {amount}, "
                        f"DATE '2026-10-01' + {rng.randint(0, 60)})"
                    )
                    if rng.random() < 0.2:
                        rows.append(rows[-1])  # a duplicate row
                    next_id += 1
                con.execute(f"INSERT INTO lake.raw.orders VALUES {', '.join(rows)}")
            elif kind == "payments":
                order = rng.randint(1, next_id)
                method = rng.choice(["card", "cash", "voucher"])
                con.execute(
                    "INSERT INTO lake.raw.payments SELECT max(id) + 1, ?, ?, ? "
                    "FROM lake.raw.payments",
                    [order, method, round(rng.uniform(-5, 300), 2)],
                )
            elif kind == "update":
                modulus = rng.randint(5, 23)
                con.execute(
                    f"UPDATE lake.raw.orders SET status = ?, amount = amount + 1 "
                    f"WHERE id % {modulus} = {rng.randint(0, modulus - 1)}",
                    [rng.choice(statuses)],
                )
            elif kind == "delete":
                table = rng.choice(["orders", "payments"])
                modulus = rng.randint(20, 60)
                con.execute(
                    f"DELETE FROM lake.raw.{table} "
                    f"WHERE id % {modulus} = {rng.randint(0, modulus - 1)}"
                )
            else:
                region = rng.choice(["north", "south", "east", "west", None])
                con.execute(
                    "UPDATE lake.raw.customers SET region = ?, tier = ? WHERE id % 7 = ?",
                    [region, rng.choice(["gold", "silver"]), rng.randint(0, 6)],
                )
        if transactional:
            con.execute("COMMIT")
