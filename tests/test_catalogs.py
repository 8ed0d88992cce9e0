"""Maintenance on the shared catalog backends: SQLite and PostgreSQL hold the same lake as a
DuckDB file does, and the oracle holds on random scenarios there too."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings

from .postgres import create_database, postgres_server
from .scenarios import Scenario, scenarios
from .test_properties import FAMILIES, run_scenario

pytestmark = pytest.mark.xdist_group("catalogs")

#: one view of each family that reads several tables or keeps state
VIEWS = {
    "j_three": FAMILIES["joins"]["j_three"],
    "a_expr": FAMILIES["aggregates"]["a_expr"],
    "ja_region": FAMILIES["join_aggregates"]["ja_region"],
    "n_cte_join": FAMILIES["nesting"]["n_cte_join"],
}


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    with postgres_server() as dsn:
        yield dsn


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
