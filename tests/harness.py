"""A throwaway DuckLake per test or per Hypothesis example, and the oracle."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from dbt_duckstream import RunResult, prepare, refresh
from dbt_duckstream.compiler import IVMPlan
from dbt_duckstream.compiler.ties import Ties
from dbt_duckstream.runtime.change_tables import expire_captured_rows
from dbt_duckstream.runtime.consistency import differences
from dbt_duckstream.runtime.lake import attach_lake, describe

from .crash_report import record_example

#: one DuckDB instance per test process for in-memory lakes: DuckLake loads once, and each
#: lake is attached to a cursor of it (its own client context) and detached afterwards. It
#: runs one thread: its lakes hold a few rows, which no plan splits over threads, and the idle
#: threads of each pytest worker's instance competed for the machine's cores (a quarter of the
#: property families' time on two cores); the scale families run four threads on lakes of
#: their own
_instance: duckdb.DuckDBPyConnection | None = None


@contextmanager
def fresh_lake(catalog: str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection with an empty DuckLake attached as ``lake`` (and in use).

    Its catalog is a DuckDB file by default, else ``catalog``: ``sqlite:<file>`` or
    ``postgres:<dsn>`` of an empty database, each on a DuckDB instance of its own; or
    ``:memory:``, a DuckDB catalog in memory on the process's shared instance (the property
    families run thousands of lakes, and loading DuckLake each time would dominate them)."""
    global _instance
    directory = Path(tempfile.mkdtemp(prefix="duckstream-test-"))
    shared = catalog == ":memory:"
    if shared and _instance is None:
        _instance = duckdb.connect(config={"threads": 1})
    con = _instance.cursor() if shared and _instance is not None else duckdb.connect()
    try:
        attach_lake(con, catalog or f"{directory}/lake.ducklake", data_path=f"{directory}/data")
        con.execute("USE lake")
        yield con
    finally:
        if shared:
            con.execute("USE memory")
            con.execute("DETACH DATABASE IF EXISTS lake")
        con.close()
        shutil.rmtree(directory, ignore_errors=True)


#: the one rebuild a maintenance run may choose over a random history: DuckLake 0.4 gave two
#: live rows one row id (rows inserted and updated in one transaction keep transaction-local
#: ids, which later transactions hand out again), and the change feed cannot tell them apart
#: (``compiler/operators/scan.py``); the table must still equal its recomputation
AMBIGUOUS_ROWIDS_REBUILD = "has two live rows under one row id"
#: the other: a window holding a rewrite of a source's files and a flush of its inlined data
#: after it, which leaves the snapshots before the rewrite unreadable (``decide``)
REWRITTEN_HISTORY_REBUILD = "duckdb/ducklake#1406"


def maintained(result: RunResult) -> bool:
    """Whether a run maintained the model (or found nothing to do), or took a rebuild that
    DuckLake forces (shared row ids, a rewritten history)."""
    if result.strategy == "rebuild":
        return any(
            reason in result.reason
            for reason in (AMBIGUOUS_ROWIDS_REBUILD, REWRITTEN_HISTORY_REBUILD)
        )
    return result.strategy in ("incremental", "unchanged")


class Model:
    """A model under test: its plan, and the oracle after every run."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        name: str,
        sql: str,
        stored_inputs: tuple[str, ...] = (),
    ) -> None:
        self.con, self.name, self.sql = con, name, sql
        self.plan: IVMPlan = prepare(con, sql, name, catalog="lake", stored_inputs=stored_inputs)
        self.results: list[RunResult] = []
        self.types_checked = False

    def refresh(self, **kwargs) -> RunResult:
        # the oracle tests maintenance itself, so the cost-based rebuild stays off by default
        kwargs.setdefault("rebuild_above", None)
        result = refresh(self.con, self.plan, **kwargs)
        self.results.append(result)
        return result

    def assert_consistent(self) -> None:
        # the table's column types are fixed when it is built: checking them once suffices
        assert_consistent(
            self.con,
            f"lake.main.{self.name}",
            self.sql,
            types=not self.types_checked,
            ties=self.plan.ties,
        )
        self.types_checked = True


def assert_consistent(
    con: duckdb.DuckDBPyConnection,
    table: str,
    sql: str,
    *,
    types: bool = True,
    ties: Ties | None = None,
) -> None:
    """The oracle: the maintained table equals the SQL recomputed now, as bags (every copy
    of a row is paired with one copy, so the row counts agree too), with the same column
    types; with the plan's ``ties``, the order within a window's ties does not count."""
    diff = differences(con, table, sql, ties=ties)
    assert not diff, f"{table} differs from its recomputation:\n" + "\n".join(map(str, diff))
    if types:
        maintained_types = [t for _, t in describe(con, table)]
        expected_types = [t for _, t in describe(con, sql)]
        assert maintained_types == expected_types


def maintain_through(
    con: duckdb.DuckDBPyConnection,
    views: dict[str, str],
    windows,
    before_runs: Callable[[duckdb.DuckDBPyConnection], object] | None = None,
    stored_inputs: tuple[str, ...] = (),
) -> None:
    """The oracle over a history: build every view, then after each window of operations
    (each with an ``apply(con)``) maintain every view and check it against a recomputation;
    ``before_runs`` runs before each window's runs; ``stored_inputs``: the views'."""
    record_example(f"views: {views!r}\nwindows: {windows!r}")
    models = [Model(con, name, sql, stored_inputs) for name, sql in views.items()]
    for model in models:
        assert model.refresh().strategy == "initial"
        model.assert_consistent()
    for window in windows:
        for operation in window:
            operation.apply(con)
        if before_runs is not None:
            before_runs(con)
        for model in models:
            result = model.refresh()
            assert maintained(result), result.summary()
            model.assert_consistent()


def expire_before(con, snapshot_id: int, catalog: str = "lake") -> None:
    """Expire every snapshot of ``catalog`` older than ``snapshot_id``, and the rows the
    Spark writer captured in them."""
    (versions,) = con.execute(
        f"SELECT list(snapshot_id) FROM ducklake_snapshots('{catalog}') "
        f"WHERE snapshot_id < {int(snapshot_id)}"
    ).fetchone()
    con.execute(f"CALL ducklake_expire_snapshots('{catalog}', versions => {versions})")
    expire_captured_rows(con, catalog)  # as the lake's maintenance does (README, Compacting)


def record_writes(monkeypatch) -> list[str]:
    """The statements that runs write the model and its state with, from now on, in order
    (``run.apply_statement``)."""
    from dbt_duckstream.runtime import run

    executed: list[str] = []

    def apply(con: duckdb.DuckDBPyConnection, statement: str) -> duckdb.DuckDBPyConnection:
        executed.append(statement)
        return con.execute(statement)

    monkeypatch.setattr(run, "apply_statement", apply)
    return executed
