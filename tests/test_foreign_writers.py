"""`dbt run` beside a writer that does not use this package (a user's own ingestion job: a
plain DuckDB process, no turns, no file lock) committing inserts, updates, deletes, MERGE and
multi-statement transactions at 1, 5 and 20 commits/s, with dbt threads 1 and 4: every run
succeeds, and a final run converges to the recomputation (``benchmarks.foreign_writers``).

A reduced form: ``DUCKSTREAM_FOREIGN_SECONDS`` per rate and thread count (default 5, which
makes one or two runs each). The full size is documented in the README.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from benchmarks.foreign_writers import session

from .postgres import create_database

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("concurrency")]

SECONDS = float(os.environ.get("DUCKSTREAM_FOREIGN_SECONDS", "5"))
LOADS = [(rate, threads) for rate in (1.0, 5.0, 20.0) for threads in (1, 4)]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_runs_succeed_beside_a_foreign_writer_and_converge(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    catalog = None
    if backend == "postgres":
        dsn = request.getfixturevalue("postgres")
        catalog = f"postgres:{create_database(dsn, f'lake_{uuid.uuid4().hex[:12]}')}"
    loads = session(tmp_path, backend, LOADS, SECONDS, catalog=catalog)  # checks convergence
    for load in loads:
        print(load.line())
        assert load.failed == 0, load.failures
        assert load.writer["failures"] == 0, load.writer["errors"]
        assert load.writer["commits"] > 0
        assert load.transaction_ms, "maintained models report their write transaction"


WRITER = """
import sys, time
import duckdb
from tests.foreign_writer import extension
con = duckdb.connect()
con.execute(f"LOAD '{extension('ducklake')}'")
con.execute(f"ATTACH 'ducklake:{sys.argv[1]}' AS lake (DATA_PATH '{sys.argv[2]}')")
con.execute("CREATE TABLE IF NOT EXISTS lake.t AS SELECT 1 AS x")
print("attached", flush=True)
time.sleep(30)
"""


def test_a_duckdb_file_catalog_admits_one_process(tmp_path: Path) -> None:
    """Why no foreign writer runs beside dbt on a DuckDB-file catalog: while one process has
    it attached, another cannot attach it at all, not even read-only."""
    import duckdb

    from dbt_duckstream.runtime.lake import attach_lake

    lake, data = str(tmp_path / "lake.ducklake"), str(tmp_path / "data")
    holder = subprocess.Popen(
        [sys.executable, "-c", WRITER, lake, data],
        cwd=Path(__file__).resolve().parent.parent,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "attached"
        for read_only in (False, True):
            with pytest.raises(duckdb.IOException, match="Could not set lock on file"):
                attach_lake(duckdb.connect(), lake, data_path=data, read_only=read_only)
    finally:
        holder.kill()
        holder.wait()
