"""The integration project on a shared catalog, and a source writer running beside dbt."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from dbt_duckstream.runtime.consistency import differences
from dbt_duckstream.runtime.lake import attach_lake
from dbt_duckstream.runtime.recorded_ties import recorded_ties
from dbt_duckstream.runtime.runlog import RUN_LOG
from dbt_duckstream.sql import TableRef

from .dbt_project import FALLBACK_MODELS, REPOSITORY, Project

#: dbt's own materializations, the tests' scaffolding (seeds, the reference target's tables),
#: run on one thread: from several, their commits failed here now and then (a SQLite catalog
#: "database is locked"; DuckLake "Failed to get path for schema with id <garbage> - schema
#: not found in metadata catalog"). The incremental_ivm runs under test keep the profile's.
SCAFFOLDING = ("--threads", "1")


def seed(project: Project) -> None:
    project.dbt("seed", *SCAFFOLDING)


def _last_run_today(con: duckdb.DuckDBPyConnection, model: str) -> bool:
    """Whether the model's latest run happened on today's date (the lake's time zone)."""
    (today,) = con.execute(
        f"SELECT max(finished_at)::DATE = current_date FROM lake.main.{RUN_LOG} WHERE model = ?",
        [model],
    ).fetchone() or (None,)
    return bool(today)


def assert_equals_reference(project: Project) -> None:
    """Every model equals the same SQL built by dbt's ``table`` materialization (target
    ``reference``), values and column types, as ``test_dbt`` checks it."""
    project.dbt("run", "--target", "reference", "--vars", "{materialized: table}", *SCAFFOLDING)
    with project.connect() as con:
        for model in project.models():
            if model in FALLBACK_MODELS and not _last_run_today(con, model):
                continue  # a day began between its run and now: the reference differs by design
            maintained, reference = f"lake.main.{model}", f"lake.reference.{model}"
            ties = recorded_ties(con, TableRef("lake", "main", model))
            diff = differences(con, maintained, f"SELECT * FROM {reference}", ties=ties)
            assert not diff, f"{model} differs from its table materialization: {diff}"
            types = [con.execute(f"DESCRIBE {t}").fetchall() for t in (maintained, reference)]
            assert types[0] == types[1], f"{model}: column types differ"


class CatalogProject(Project):
    """The integration project whose DuckLake metadata lives in ``catalog`` (the profile's
    ``DUCKSTREAM_CATALOG``: ``sqlite:<file>`` or ``postgres:<dsn>``), so that other processes
    may commit to the lake while dbt runs."""

    def __init__(self, directory: Path, catalog: str) -> None:
        super().__init__(directory)
        self.catalog = catalog
        self.data_path = str(self.lake / "data")
        self.env["DUCKSTREAM_CATALOG"] = catalog

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        con = duckdb.connect()
        try:
            attach_lake(con, self.catalog, data_path=self.data_path)
            yield con
        finally:
            con.close()


@dataclass
class WriterReport:
    commits: int
    retries: int
    failures: int
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


@contextmanager
def writer_process(
    module: str, project: CatalogProject, name: str, *options: str, timeout: float = 120
) -> Iterator[dict]:
    """Run ``python -m module`` against the project's lake for the block's duration, and stop
    it when the block ends (it watches a stop file). Yields a dict that holds the writer's
    JSON report once the block has ended; a writer that failed raises with its output."""
    stop = project.directory / f"{name}.stop"
    report = project.directory / f"{name}.json"
    started = project.directory / f"{name}.started"
    stop.unlink(missing_ok=True)
    started.unlink(missing_ok=True)
    process = subprocess.Popen(
        [
            sys.executable,
            *("-m", module, "--catalog", project.catalog, "--data-path", project.data_path),
            *("--stop-file", str(stop), "--started-file", str(started)),
            *("--report", str(report), *options),
        ],
        cwd=REPOSITORY,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    found: dict = {}
    try:
        # its first commit before the block starts: on a loaded machine a new process can
        # take longer to start than the block takes to run
        deadline = time.monotonic() + 120
        while not started.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        yield found
    finally:
        stop.touch()
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
    if process.returncode != 0 or not report.exists():
        raise AssertionError(f"{module} failed ({process.returncode}):\n{output}")
    found.update(json.loads(report.read_text()))


@contextmanager
def source_writer(
    project: CatalogProject, seed: int = 1, pause_ms: str = "50-200"
) -> Iterator[list[WriterReport]]:
    """Run ``tests.source_writer`` against the project's lake for the block's duration.

    Yields a list that holds the writer's report once the block has ended."""
    reports: list[WriterReport] = []
    options = ("--seed", str(seed), "--pause-ms", pause_ms)
    with writer_process("tests.source_writer", project, f"writer-{seed}", *options) as found:
        yield reports
    reports.append(WriterReport(**found))
