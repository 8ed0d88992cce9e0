"""All 22 TPC-H queries, as ``incremental_ivm`` models of a dbt project, maintained through
``dbt run`` under TPC-H's refresh functions and checked by ``dbt test`` (``ivm_consistent``:
each model equals its SQL recomputed) and against dbt's ``table`` materialization.

Each window is one kind of batch: RF1 (new orders with their lineitems), RF2 (orders deleted
with their lineitems), then updates (lineitem discounts, order statuses, and the dimension
tables RF1 and RF2 never touch: part, partsupp, supplier, customer). The scale and the share
of lineitem a batch touches are small in CI (``DUCKSTREAM_TPCH_SCALE``, default 0.01;
``DUCKSTREAM_TPCH_RATIO``, default 0.02).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import duckdb
import pytest

from benchmarks import tpch_dbt
from benchmarks.refresh import batch_for, dimension_updates, generate, rf1, rf2, updates
from dbt_duckstream.runtime.lake import transaction

from .dbt_project import TPCH, Project
from .lake_project import assert_equals_reference

pytest.importorskip("duckdb_extension_tpch")
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("tpch")]

SCALE = float(os.environ.get("DUCKSTREAM_TPCH_SCALE", "0.01"))
RATIO = float(os.environ.get("DUCKSTREAM_TPCH_RATIO", "0.02"))
SOURCES = "lake.tpch"


def test_the_models_are_duckdbs_query_texts() -> None:
    for name, text in tpch_dbt.model_files().items():
        assert (TPCH / "models" / name).read_text() == text, (
            f"{name} is stale: run python -m benchmarks.tpch_dbt"
        )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    project = Project(tmp_path_factory.mktemp("tpch"), TPCH)
    with project.connect() as con:
        generate(con, SCALE, SOURCES)
    project.dbt("deps")
    project.first_run = project.dbt("run")
    yield project


def batches() -> list[tuple[str, Callable[[duckdb.DuckDBPyConnection], None]]]:
    def step(kind: str, seed: int) -> Callable[[duckdb.DuckDBPyConnection], None]:
        def apply(con: duckdb.DuckDBPyConnection) -> None:
            batch = batch_for(con, SOURCES, RATIO)
            with transaction(con):
                if kind == "RF1":
                    rf1(con, SOURCES, batch.orders, seed)
                elif kind == "RF2":
                    rf2(con, SOURCES, batch.orders, seed)
                else:
                    updates(con, SOURCES, batch, seed)
            if kind == "updates":
                dimension_updates(con, SOURCES, batch.orders, seed)

        return apply

    return [(kind, step(kind, seed)) for seed, kind in enumerate(["RF1", "RF2", "updates"])]


def test_every_query_is_maintained_under_refresh_batches(project: Project) -> None:
    assert project.first_run is not None
    models = project.models()
    assert len(models) == 22
    assert project.first_run.strategies() == dict.fromkeys(models, "initial")
    changed: set[str] = set()
    for kind, apply in batches():
        with project.connect() as con:
            apply(con)
        run = project.dbt("run")
        for model, strategy in run.strategies().items():
            assert strategy in ("incremental", "unchanged"), (kind, model, run.response(model))
            if run.response(model).get("rows_affected"):
                changed.add(model)
        tested = project.dbt("test")
        failed = {n: r["status"] for n, r in tested.results.items() if r["status"] != "pass"}
        assert not failed, (kind, failed)
    assert_equals_reference(project)
    # most views see their rows change; the rest are empty or untouched at this scale
    assert len(changed) >= 12, sorted(changed)
