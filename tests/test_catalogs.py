"""Maintenance on the shared catalog backends: SQLite and PostgreSQL hold the same lake as a
DuckDB file does, and the oracle holds on random scenarios there too."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings

from .harness import fresh_lake
from .postgres import create_database
from .scenarios import Scenario, scenarios
from .test_properties import FAMILIES, run_scenario
from .test_unchanged import quick, run

pytestmark = pytest.mark.xdist_group("catalogs")

#: one view of each family that reads several tables or keeps state
VIEWS = {
    "j_three": FAMILIES["joins"]["j_three"],
    "a_expr": FAMILIES["aggregates"]["a_expr"],
    "ja_region": FAMILIES["join_aggregates"]["ja_region"],
    "n_cte_join": FAMILIES["nesting"]["n_cte_join"],
}


@settings(max_examples=10)
@given(scenario=scenarios())
def test_sqlite_catalog(scenario: Scenario) -> None:
    with tempfile.TemporaryDirectory() as directory:
        run_scenario(scenario, VIEWS, catalog=f"sqlite:{Path(directory) / 'lake.sqlite'}")


@settings(max_examples=10)
@given(scenario=scenarios())
def test_postgres_catalog(postgres: str, scenario: Scenario) -> None:
    database = create_database(postgres, f"lake_{uuid.uuid4().hex[:12]}")
    run_scenario(scenario, VIEWS, catalog=f"postgres:{database}")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_unchanged_models_are_known_from_each_catalog(request, backend: str) -> None:
    """The metadata queries of ``runtime/unchanged.py`` read SQLite's and PostgreSQL's
    catalogs as they read a DuckDB one: a model run through the bridge is known unchanged,
    and not once its source changed."""
    with tempfile.TemporaryDirectory() as directory:
        if backend == "sqlite":
            catalog = f"sqlite:{Path(directory) / 'lake.sqlite'}"
        else:
            dsn = request.getfixturevalue("postgres")
            catalog = f"postgres:{create_database(dsn, f'lake_{uuid.uuid4().hex[:12]}')}"
        with fresh_lake(catalog) as con:
            con.execute("CREATE TABLE t AS SELECT range % 4 AS k, range AS v FROM range(20)")
            assert run(con)["strategy"] == "initial"
            assert quick(con) is not None
            con.execute("INSERT INTO t VALUES (1, 100)")
            assert quick(con) is None
            assert run(con)["strategy"] == "incremental"
            con.execute("CALL ducklake_merge_adjacent_files('lake')")
            assert run(con)["strategy"] == "unchanged"
            assert quick(con) is not None
