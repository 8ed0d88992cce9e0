"""Commit races: a pipeline commits to the sources while `dbt run` maintains the models.

On a shared catalog (SQLite, PostgreSQL) a commit can lose to another process's. The runtime and
the Spark writer retry the whole unit (``dbt_duckstream.retry``): these tests provoke each kind
of lost race, then run dbt against a writer committing every 50-200 ms.

``DUCKSTREAM_CONCURRENT_RUNS`` sets the dbt runs made while the writer commits (default 2).
"""

from __future__ import annotations

import doctest
import logging
import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from dbt_duckstream import prepare, refresh
from dbt_duckstream import retry as retry_module
from dbt_duckstream.retry import RetryPolicy, is_retryable, retrying
from dbt_duckstream.runtime import run as runtime_run
from dbt_duckstream.runtime.lake import attach_lake

from .dbt_project import FALLBACK_MODELS
from .harness import assert_consistent
from .lake_project import CatalogProject, assert_equals_reference, seed, source_writer
from .postgres import create_database

pytestmark = pytest.mark.xdist_group("concurrency")

#: dbt runs made while the writer commits, per catalog
RUNS = int(os.environ.get("DUCKSTREAM_CONCURRENT_RUNS", "2"))

#: the messages of lost commit races, as DuckDB 1.5.5 reported them here
LOST_RACES = [
    # DuckLake's conflict check (PostgreSQL catalog, two writers of one table)
    "TransactionContext Error: Failed to commit: Failed to commit DuckLake transaction.\n"
    'Transaction conflict - attempting to insert into table with index "2" - but another '
    "transaction has deleted inlined data from it",
    "TransactionContext Error: Failed to commit: Failed to commit DuckLake transaction.\n"
    'Transaction conflict - attempting to drop table with index "22" - but another transaction '
    "has dropped it already",
    # SQLite catalog, another process committing
    "TransactionContext Error: Failed to commit: Failed to commit DuckLake transaction.\n"
    "Failed to flush changes into DuckLake: database is locked",
    "TransactionContext Error: Failed to commit: Failed to commit DuckLake transaction.\n"
    'Failed to commit: Failed to execute query "COMMIT": database is locked',
    'Failed to query most recent snapshot for DuckLake: Failed to prepare query "SELECT type '
    "FROM sqlite_master WHERE lower(name)=lower('ducklake_snapshot');\": database is locked",
    # PostgreSQL catalog, a snapshot-id race past DuckLake's own retries
    "TransactionContext Error: Failed to commit: Failed to commit DuckLake transaction.\n"
    "Exceeded the maximum retry count of 10 set by the ducklake_max_retry_count setting.\n"
    '... ERROR:  duplicate key value violates unique constraint "ducklake_snapshot_pkey"',
    # DuckLake reading a garbage schema id while dbt threads commit (one DuckDB instance)
    "TransactionContext Error: Failed to commit: Failed to commit DuckLake transaction.\n"
    "Failed to get path for schema with id 4922528105298997544 - schema not found in metadata "
    "catalog",
    # PostgreSQL's serialization failures
    "ERROR:  could not serialize access due to concurrent update",
    "ERROR:  deadlock detected",
]

NOT_RACES = [
    "Binder Error: Referenced column amount not found in FROM clause!",
    "Catalog Error: Table with name orders does not exist!",
    "Constraint Error: NOT NULL constraint failed: t.k",
    "IO Error: No files found that match the pattern",
]


@pytest.mark.parametrize("message", LOST_RACES)
def test_lost_commit_races_are_retryable(message: str) -> None:
    assert is_retryable(duckdb.TransactionException(message))


@pytest.mark.parametrize("message", NOT_RACES)
def test_other_errors_are_not(message: str) -> None:
    assert not is_retryable(duckdb.Error(message))


def test_retries_back_off_with_jitter_within_bounds(caplog: pytest.LogCaptureFixture) -> None:
    policy = RetryPolicy(attempts=5, base_delay=0.1, max_delay=0.3)
    waits: list[float] = []
    calls: list[int] = []

    def always_locked() -> None:
        calls.append(1)
        raise duckdb.TransactionException("Failed to flush changes: database is locked")

    with caplog.at_level(logging.WARNING, logger="dbt_duckstream"), pytest.raises(duckdb.Error):
        retrying(always_locked, "a unit", policy=policy, sleep=waits.append)
    assert len(calls) == 5 and len(waits) == 4
    assert all(0 <= w <= c for w, c in zip(waits, [0.1, 0.2, 0.3, 0.3], strict=True))
    assert [r.name for r in caplog.records] == ["dbt_duckstream"] * 4
    assert "a unit lost a commit race (attempt 1 of 5)" in caplog.records[0].getMessage()
    rng = random.Random(7)
    assert len({policy.delay(3, rng) for _ in range(20)}) == 20  # jittered, never in lockstep


def test_the_module_examples_run() -> None:
    assert doctest.testmod(retry_module).failed == 0


def test_an_error_that_is_not_a_race_is_not_retried() -> None:
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise duckdb.BinderException("Binder Error: Referenced column x not found")

    with pytest.raises(duckdb.BinderException):
        retrying(broken, "a unit", sleep=lambda _: None)
    assert calls == [1]


def test_a_postgres_conflict_is_provoked_and_retried(postgres: str, tmp_path: Path) -> None:
    """Two connections delete from and insert into one table: DuckLake refuses the second
    commit with a transaction conflict, and rerunning the unit succeeds."""
    catalog = f"postgres:{create_database(postgres, f'lake_{uuid.uuid4().hex[:12]}')}"
    a, b = duckdb.connect(), duckdb.connect()
    for con in (a, b):
        attach_lake(con, catalog, data_path=str(tmp_path / "data"))
    a.execute("CREATE TABLE lake.t (k INTEGER)")
    a.execute("INSERT INTO lake.t VALUES (1), (2)")
    attempts: list[int] = []

    def delete_while_b_inserts() -> None:
        attempts.append(1)
        a.execute("BEGIN")
        a.execute("DELETE FROM lake.t WHERE k = 1")
        if len(attempts) == 1:  # the other writer commits first, once
            b.execute("INSERT INTO lake.t VALUES (3)")
        a.execute("COMMIT")

    with pytest.raises(duckdb.TransactionException, match="Transaction conflict") as lost:
        retrying(delete_while_b_inserts, "delete", policy=RetryPolicy(attempts=1))
    assert is_retryable(lost.value)
    attempts.clear()
    a.execute("INSERT INTO lake.t VALUES (1)")
    retrying(delete_while_b_inserts, "delete", policy=RetryPolicy(base_delay=0.01))
    assert len(attempts) == 2
    assert sorted(a.execute("SELECT k FROM lake.t").fetchall()) == [(2,), (3,), (3,)]


def test_a_refresh_that_loses_a_race_redoes_only_its_write(
    postgres: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process commits to a source while the run writes its delta, and takes the
    snapshot id the run wanted (DuckLake's own retries off): the run redoes its write alone,
    with the delta it computed at its pin, which still holds; the next run applies the other
    commit's rows."""
    catalog = f"postgres:{create_database(postgres, f'lake_{uuid.uuid4().hex[:12]}')}"
    con, other = duckdb.connect(), duckdb.connect()
    for c in (con, other):
        attach_lake(c, catalog, data_path=str(tmp_path / "data"))
        c.execute("SET ducklake_max_retry_count = 0")
    con.execute("USE lake")
    con.execute("CREATE TABLE t (k INTEGER, v INTEGER)")
    con.execute("INSERT INTO t SELECT range % 5, range FROM range(50)")
    sql = "SELECT k, sum(v) AS s, count(*) AS n FROM t GROUP BY k"
    plan = prepare(con, sql, "m", catalog="lake")
    refresh(con, plan)
    con.execute("INSERT INTO t VALUES (1, 1000), (7, 7)")
    (pin,) = con.execute("SELECT id FROM lake.current_snapshot()").fetchone() or (0,)
    applied: list[str] = []
    computed: list[object] = []
    original, original_compute = runtime_run.apply_statement, runtime_run.compute

    def apply_while_another_process_commits(
        c: duckdb.DuckDBPyConnection, statement: str
    ) -> duckdb.DuckDBPyConnection:
        if not applied:
            other.execute("INSERT INTO lake.t VALUES (8, 8)")
        applied.append(statement)
        return original(c, statement)

    def compute(*args: object) -> object:
        computed.append(original_compute(*args))  # ty: ignore[invalid-argument-type]
        return computed[-1]

    monkeypatch.setattr(runtime_run, "apply_statement", apply_while_another_process_commits)
    monkeypatch.setattr(runtime_run, "compute", compute)
    with caplog.at_level(logging.WARNING, logger="dbt_duckstream"):
        result = refresh(con, plan, rebuild_above=None)
    assert "writing lost a commit race (attempt 1 of" in caplog.text
    assert "Exceeded the maximum retry count" in caplog.text
    assert len(computed) == 1, "the delta was computed once"
    assert applied[0] in applied[1:], "the write was redone"
    assert result.strategy == "incremental"
    assert result.snapshots["lake"][1] == pin  # the run's pin, not the other commit's
    assert con.execute("SELECT s FROM m WHERE k = 8").fetchall() == []
    monkeypatch.undo()
    assert refresh(con, plan, rebuild_above=None).strategy == "incremental"
    assert_consistent(con, "lake.main.m", sql)
    assert con.execute("SELECT s FROM m WHERE k = 8").fetchall() == [(8,)]


class SqliteLock(logging.Handler):
    """Another process holding the SQLite catalog's exclusive lock until the first retry is
    logged: SQLite waits 5 s for a lock, then reports "database is locked"."""

    def __init__(self, catalog_file: Path) -> None:
        super().__init__(logging.WARNING)
        script = (
            "import sqlite3, sys\n"
            "con = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "con.execute('BEGIN EXCLUSIVE')\n"
            "print('locked', flush=True)\n"
            "sys.stdin.readline()\n"
            "con.execute('ROLLBACK')\n"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", script, str(catalog_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "locked"
        logging.getLogger("dbt_duckstream").addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.release()

    def release(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.write("release\n")
            self.process.stdin.close()

    def __enter__(self) -> SqliteLock:
        return self

    def __exit__(self, *_: object) -> None:
        logging.getLogger("dbt_duckstream").removeHandler(self)
        self.release()
        self.process.wait(timeout=30)


def test_the_spark_writer_commit_waits_out_a_locked_sqlite_catalog(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver's commit meets "database is locked" and retries; the executors' files are
    registered exactly once."""
    pytest.importorskip("pyspark")
    from pyspark.sql import types as T

    from dbt_duckstream.spark.options import LakeOptions
    from dbt_duckstream.spark.writer import DuckLakeWriter

    catalog_file = tmp_path / "lake.sqlite"
    options = LakeOptions.parse(
        {"catalog": f"sqlite:{catalog_file}", "data_path": str(tmp_path / "data"), "table": "t"}
    )
    schema = T.StructType([T.StructField("k", T.IntegerType())])
    first = DuckLakeWriter(options, schema, overwrite=False)
    first.commit([])  # creates the table
    writer = DuckLakeWriter(options, schema, overwrite=False)
    batch = pa.record_batch([pa.array(range(100), pa.int32())], names=["k"])
    message = writer.write(iter([batch]))
    with SqliteLock(catalog_file), caplog.at_level(logging.WARNING, logger="dbt_duckstream"):
        writer.commit([message])
    assert f"spark job {writer.job} lost a commit race" in caplog.text
    assert "database is locked" in caplog.text
    with options.connect() as con:
        assert con.execute("SELECT count(*), sum(k) FROM lake.main.t").fetchone() == (100, 4950)


def test_a_sqlite_catalog_commits_beside_an_open_read(tmp_path: Path) -> None:
    """dbt's threads read the lake while a run commits. In SQLite's rollback-journal mode the
    commit waited 5 s for the reader, failed "database is locked", and kept its lock, so every
    later read of the lake in the process failed too; the catalog is attached in WAL mode."""
    con = duckdb.connect()
    attach_lake(con, f"sqlite:{tmp_path / 'lake.sqlite'}", data_path=str(tmp_path / "data"))
    con.execute("CREATE TABLE lake.t AS SELECT 1 AS k")
    reader, writer = con.cursor(), con.cursor()
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM lake.t").fetchone() == (1,)
    started = time.monotonic()
    writer.execute("BEGIN")
    writer.execute("INSERT INTO lake.t VALUES (2)")
    writer.execute("COMMIT")
    assert time.monotonic() - started < 4  # SQLite's busy timeout is 5 s
    reader.execute("COMMIT")
    assert con.cursor().execute("SELECT count(*) FROM lake.t").fetchone() == (2,)


def test_the_plugin_attaches_a_sqlite_catalog_in_wal_mode() -> None:
    from dbt.adapters.duckdb.credentials import Attachment, DuckDBCredentials

    from dbt_duckstream.bridge.plugin import Plugin

    given = {"data_path": "data", "META_JOURNAL_MODE": "DELETE"}
    creds = DuckDBCredentials(
        database="lake",
        schema="main",
        path=":memory:",
        attach=[
            Attachment(
                path="ducklake:sqlite:lake.sqlite", alias="lake", options={"data_path": "d"}
            ),
            Attachment(path="ducklake:sqlite:mine.sqlite", alias="mine", options=given),
            Attachment(path="ducklake:lake.ducklake", alias="plain"),
        ],
    )
    plugin = Plugin("duckstream", {}, creds)
    plugin._complete_attachments()
    assert creds.attach is not None
    assert "META_JOURNAL_MODE 'WAL'" in creds.attach[0].to_sql()
    assert creds.attach[1].options == given  # the user's choice stands
    assert "JOURNAL" not in creds.attach[2].to_sql()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_dbt_runs_succeed_while_a_writer_commits(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        catalog = f"sqlite:{tmp_path / 'lake.sqlite'}"
    else:
        database = create_database(request.getfixturevalue("postgres"), f"lake_{backend}")
        catalog = f"postgres:{database}"
    project = CatalogProject(tmp_path / "project", catalog)
    project.dbt("deps")
    seed(project)
    started = time.monotonic()
    strategies: dict[str, int] = {}
    seconds: list[float] = []
    retried = 0
    with source_writer(project, seed=len(backend)) as report:
        for _ in range(RUNS):  # the first run builds the models, the others maintain them
            run_started = time.monotonic()
            run = project.dbt("run")  # fails the test if any model fails
            seconds.append(time.monotonic() - run_started)
            assert {r["status"] for r in run.models().values()} == {"success"}
            for model, strategy in run.strategies().items():
                if model not in FALLBACK_MODELS:
                    strategies[strategy] = strategies.get(strategy, 0) + 1
            retried += run.output.count("lost a commit race")
    writer = report[0]
    assert writer.failures == 0, writer.errors
    assert writer.commits >= RUNS
    # run, then each model's ivm_consistent test (not the seeds: they would reset the sources)
    built = project.dbt("build", "--exclude-resource-type", "seed")
    assert {r["status"] for r in built.results.values()} <= {"success", "pass"}
    assert_equals_reference(project)
    print(
        f"\n{backend}: {RUNS} dbt runs ({', '.join(f'{s:.0f}s' for s in seconds)}) during "
        f"{writer.commits} writer commits in {writer.seconds:.0f}s ({writer.retries} writer "
        f"retries, {retried} maintenance retries); model strategies {strategies}; none failed; "
        f"{time.monotonic() - started:.0f}s with the final build and checks"
    )


def test_commits_and_reads_of_one_process_take_turns(tmp_path: Path) -> None:
    """DuckLake 0.4 fails a commit that runs beside a read of another connection of the same
    instance (a garbage schema id, duckdb/ducklake#1248; here 29 failed commits in 20 s
    without turns). Runs commit in ``transaction``; dbt's statements go through dbt-duckdb's
    cursor wrapper, which the plugin makes take turns too."""
    import threading

    from dbt.adapters.duckdb.environments.local import DuckDBCursorWrapper

    from dbt_duckstream.bridge.plugin import Plugin
    from dbt_duckstream.runtime.lake import transaction

    Plugin("duckstream", {}, None)  # makes dbt-duckdb's cursors take turns
    con = duckdb.connect()
    attach_lake(con, str(tmp_path / "lake.ducklake"), data_path=str(tmp_path / "data"))
    for i in range(2):
        con.execute(f"CREATE TABLE lake.t{i} AS SELECT range AS k FROM range(1000)")
    errors: list[str] = []
    stop = time.monotonic() + 8

    def commit(i: int) -> None:
        cursor = con.cursor()
        while time.monotonic() < stop:
            try:
                with transaction(cursor):
                    cursor.execute(f"CREATE OR REPLACE TABLE lake.t{i} AS FROM range(1000)")
            except duckdb.Error as error:
                errors.append(str(error))

    def read(i: int) -> None:
        dbt_cursor = DuckDBCursorWrapper(con.cursor())
        while time.monotonic() < stop:
            try:
                dbt_cursor.execute(f"/* dbt */ select count(*) from lake.t{i % 2}").fetchall()
            except Exception as error:  # any failure is the finding
                errors.append(str(error))

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(2)]
    threads += [threading.Thread(target=read, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:3]
