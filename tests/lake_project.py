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

from dbt_duckstream.runtime.lake import attach_lake

from .dbt_project import REPOSITORY, Project


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
def source_writer(
    project: CatalogProject, seed: int = 1, pause_ms: str = "50-200"
) -> Iterator[list[WriterReport]]:
    """Run ``tests.source_writer`` against the project's lake for the block's duration.

    Yields a list that holds the writer's report once the block has ended."""
    stop = project.directory / f"writer-{seed}.stop"
    report = project.directory / f"writer-{seed}.json"
    stop.unlink(missing_ok=True)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.source_writer",
            "--catalog",
            project.catalog,
            "--data-path",
            project.data_path,
            "--stop-file",
            str(stop),
            "--report",
            str(report),
            "--seed",
            str(seed),
            "--pause-ms",
            pause_ms,
        ],
        cwd=REPOSITORY,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    reports: list[WriterReport] = []
    try:
        time.sleep(0.5)  # let it commit a little before dbt starts
        yield reports
    finally:
        stop.touch()
        try:
            output, _ = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
    if process.returncode != 0 or not report.exists():
        raise AssertionError(f"the source writer failed ({process.returncode}):\n{output}")
    reports.append(WriterReport(**json.loads(report.read_text())))
