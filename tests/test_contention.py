"""A catalog that other writers keep busy: a run that gives up says which catalog and what to
do, and dbt reports it as a database error, not as a problem in the model's SQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dbt_duckstream.errors import ContendedCatalogError
from dbt_duckstream.retry import RetryPolicy, is_retryable, retrying

from .lake_project import CatalogProject, seed

pytestmark = pytest.mark.xdist_group("concurrency")


def test_a_run_that_keeps_losing_its_commit_fails_as_a_database_error(tmp_path: Path) -> None:
    """A writer that is not this package holds the SQLite catalog's write lock (as a long
    ingestion transaction would) while a model has a change to maintain: every attempt loses
    its commit, and the model fails naming the catalog, its kind and the way out."""
    catalog = tmp_path / "lake.sqlite"
    project = CatalogProject(tmp_path / "project", f"sqlite:{catalog}")
    project.dbt("deps")
    seed(project)
    project.dbt("run", "--select", "stg_orders")
    with project.connect() as con:
        con.execute("INSERT INTO lake.raw.orders SELECT * FROM lake.raw.orders LIMIT 1")
    project.env |= {"DUCKSTREAM_COMMIT_ATTEMPTS": "2", "DUCKSTREAM_COMMIT_WAIT": "1"}
    foreign = sqlite3.connect(catalog, isolation_level=None)
    try:
        foreign.execute("BEGIN IMMEDIATE")  # the catalog's write lock, held
        run = project.dbt("run", "--select", "stg_orders", check=False)
    finally:
        foreign.execute("ROLLBACK")
        foreign.close()
    assert run.returncode != 0
    assert "Database Error in model stg_orders" in run.output, run.output
    assert "Compilation Error" not in run.output
    for said in (
        "SQLite catalog 'lake'",
        "PostgreSQL",
        "DUCKSTREAM_COMMIT_ATTEMPTS (now 2)",
        "DUCKSTREAM_COMMIT_WAIT (now 1 seconds)",
    ):
        assert said in run.output, run.output
    # once the writer lets go, the next run maintains the change
    project.env.pop("DUCKSTREAM_COMMIT_ATTEMPTS")
    project.env.pop("DUCKSTREAM_COMMIT_WAIT")
    assert project.dbt("run", "--select", "stg_orders").models()["stg_orders"]["status"] == (
        "success"
    )


def test_a_write_is_retried_past_its_attempts_while_it_has_patience() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 5:
            raise RuntimeError("Failed to flush changes into DuckLake: database is locked")
        return "done"

    policy = RetryPolicy(attempts=2, base_delay=0.0, patience=30.0)
    assert retrying(flaky, "a write", policy=policy, sleep=lambda _: None) == "done"
    assert len(calls) == 5


def test_giving_up_names_the_catalog_and_keeps_its_credentials_out() -> None:
    def lost() -> None:
        raise RuntimeError("Exceeded the maximum retry count of 10 set by ducklake_max_retry_count")

    with pytest.raises(ContendedCatalogError) as raised:
        retrying(
            lost,
            "incremental_ivm lake.main.m writing",
            policy=RetryPolicy(attempts=2, base_delay=0.0),
            sleep=lambda _: None,
            catalogs={"lake": "postgres:dbname=lake user=etl password=secret"},
        )
    message = str(raised.value)
    assert "the PostgreSQL catalog 'lake' on all 2 attempts" in message
    assert "DUCKSTREAM_COMMIT_ATTEMPTS (now 2)" in message
    assert "secret" not in message
    assert (raised.value.catalog, raised.value.kind) == ("lake", "PostgreSQL")
    assert not is_retryable(raised.value), "an enclosing unit does not retry it again"


ONE_COMMIT = """
import sys
import duckdb
from tests.foreign_writer import connect
con = connect(sys.argv[1], sys.argv[2])
try:
    con.execute("INSERT INTO lake.t VALUES (2)")
    print("committed")
except duckdb.Error as error:
    print(str(error).splitlines()[-1])
"""


def test_a_transaction_after_a_lost_commit_holds_the_sqlite_catalog_against_others(
    tmp_path: Path,
) -> None:
    """Beside a writer that commits back to back, a SQLite catalog fails nearly every commit
    of a longer transaction. So an attempt that follows a lost commit holds the catalog's
    write lock until its own commit: another process's commit fails meanwhile, and ours,
    right after it lets go, succeeds. A first attempt holds nothing."""
    import subprocess
    import sys

    import duckdb

    from dbt_duckstream.runtime.lake import attach_lake, transaction

    catalog, data = f"sqlite:{tmp_path / 'lake.sqlite'}", str(tmp_path / "data")
    con = duckdb.connect()
    attach_lake(con, catalog, data_path=data)
    con.execute("CREATE TABLE lake.t AS SELECT 1 AS x")

    def other_process_commits() -> str:
        found = subprocess.run(
            [sys.executable, "-c", ONE_COMMIT, catalog, data],
            cwd=Path(__file__).resolve().parent.parent,
            capture_output=True,
            text=True,
            check=True,
        )
        return found.stdout.strip()

    said: list[str] = []

    def write() -> None:
        with transaction(con):
            con.execute("INSERT INTO lake.t VALUES (3)")
            said.append(other_process_commits())
            if len(said) == 1:
                raise RuntimeError("Failed to flush changes into DuckLake: database is locked")

    retrying(write, "a write", policy=RetryPolicy(base_delay=0.0), sleep=lambda _: None)
    assert said[0] == "committed", "a first attempt holds nothing"
    assert "database is locked" in said[1], said
    assert sorted(r[0] for r in con.execute("SELECT x FROM lake.t").fetchall()) == [1, 2, 3]
    assert other_process_commits() == "committed", "the hold ends with the transaction"
