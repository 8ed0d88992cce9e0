"""A throwaway DuckLake per test or per Hypothesis example, and the oracle."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from dbt_duckstream import RunResult, prepare, refresh
from dbt_duckstream.compiler import IVMPlan
from dbt_duckstream.consistency import differences
from dbt_duckstream.lake import attach_lake


@contextmanager
def fresh_lake(catalog: str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection with an empty DuckLake attached as ``lake`` (and in use).

    Its catalog is a DuckDB file by default, else ``catalog`` (``sqlite:<file>``,
    ``postgres:<dsn>`` of an empty database)."""
    directory = Path(tempfile.mkdtemp(prefix="duckstream-test-"))
    con = duckdb.connect()
    try:
        attach_lake(con, catalog or f"{directory}/lake.ducklake", data_path=f"{directory}/data")
        con.execute("USE lake")
        yield con
    finally:
        con.close()
        shutil.rmtree(directory, ignore_errors=True)


class Model:
    """A model under test: its plan, and the oracle after every run."""

    def __init__(self, con: duckdb.DuckDBPyConnection, name: str, sql: str) -> None:
        self.con, self.name, self.sql = con, name, sql
        self.plan: IVMPlan = prepare(con, sql, name, catalog="lake")
        self.results: list[RunResult] = []

    def refresh(self, **kwargs) -> RunResult:
        # the oracle tests maintenance itself, so the cost-based rebuild stays off by default
        kwargs.setdefault("rebuild_above", None)
        result = refresh(self.con, self.plan, **kwargs)
        self.results.append(result)
        return result

    def assert_consistent(self) -> None:
        assert_consistent(self.con, f"lake.main.{self.name}", self.sql)


def assert_consistent(con: duckdb.DuckDBPyConnection, table: str, sql: str) -> None:
    """The oracle: the maintained table equals the SQL recomputed now, as bags."""
    diff = differences(con, table, sql)
    assert not diff, f"{table} differs from its recomputation:\n" + "\n".join(map(str, diff))
    maintained_types = [r[1] for r in con.execute(f"DESCRIBE {table}").fetchall()]
    expected_types = [r[1] for r in con.execute(f"DESCRIBE {sql}").fetchall()]
    assert maintained_types == expected_types
