"""The incremental_ivm materialization, driven through dbt's CLI on the integration project.

Every round changes the sources, runs `dbt run` and `dbt test`, then checks each model against
the same SQL built by dbt's own `table` materialization (target `reference`).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbt_duckstream.runtime.breakdown import Breakdown
from dbt_duckstream.runtime.consistency import differences
from dbt_duckstream.runtime.lake import ducklake_extension_path
from dbt_duckstream.runtime.recorded_ties import recorded_ties
from dbt_duckstream.sql import TableRef

from .dbt_project import FALLBACK_MODELS, Project, change_sources

pytestmark = pytest.mark.xdist_group("dbt")

#: rounds of source changes; each costs three dbt commands (run, test, reference run)
ROUNDS = int(os.environ.get("DUCKSTREAM_DBT_ROUNDS", "2"))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    project = Project(tmp_path_factory.mktemp("integration"))
    project.dbt("deps")
    project.dbt("seed")
    project.first_run = project.dbt("run")
    yield project


def assert_equals_table_materialization(project: Project) -> None:
    project.dbt("run", "--target", "reference", "--vars", "{materialized: table}")
    with project.connect() as con:
        for model in project.models():
            maintained, reference = f"lake.main.{model}", f"lake.reference.{model}"
            ties = recorded_ties(con, TableRef("lake", "main", model))
            diff = differences(con, maintained, f"SELECT * FROM {reference}", ties=ties)
            assert not diff, f"{model} differs from its table materialization: {diff}"
            types = [con.execute(f"DESCRIBE {t}").fetchall() for t in (maintained, reference)]
            assert types[0] == types[1], f"{model}: column types differ"


def current_snapshot(project: Project) -> int:
    with project.connect() as con:
        return con.execute("SELECT id FROM lake.current_snapshot()").fetchone()[0]  # type: ignore[index]


def test_rounds_of_changes_are_maintained_exactly(project: Project) -> None:
    assert project.first_run is not None
    strategies = project.first_run.strategies()
    assert {m: s for m, s in strategies.items() if m not in FALLBACK_MODELS} == {
        m: "initial" for m in project.models() if m not in FALLBACK_MODELS
    }
    assert strategies["order_recency"] == "rebuild"
    project.dbt("test")
    assert_equals_table_materialization(project)

    rng = random.Random(20261121)
    for _ in range(ROUNDS):
        with project.connect() as con:
            change_sources(con, rng)
        run = project.dbt("run")
        for model, strategy in run.strategies().items():
            expected = {"rebuild"} if model in FALLBACK_MODELS else {"incremental", "unchanged"}
            assert strategy in expected, (model, run.response(model))
        tested = project.dbt("test")
        assert {r["status"] for r in tested.results.values()} == {"pass"}
        assert_equals_table_materialization(project)

    before = current_snapshot(project)
    quiet = project.dbt("run", "--exclude", *FALLBACK_MODELS)
    assert set(quiet.strategies().values()) == {"unchanged"}
    assert current_snapshot(project) == before, "a run with no changes wrote a snapshot"


def test_run_results_report_strategy_rows_and_window(project: Project) -> None:
    project.dbt("run", "-s", "stg_orders")
    with project.connect() as con:
        con.execute(
            "INSERT INTO lake.raw.orders VALUES (90001, 1, 'placed', 10, DATE '2026-11-01')"
        )
        con.execute("DELETE FROM lake.raw.orders WHERE id = 1")
        snapshot = con.execute("SELECT id FROM lake.current_snapshot()").fetchone()[0]  # type: ignore[index]
    run = project.dbt("run", "-s", "stg_orders")
    response = run.response("stg_orders")
    assert response["code"] == "incremental"
    assert response["rows_affected"] == 2
    message = response["_message"]
    assert message.startswith("incremental (1 of 1 sources changed): +1 -1 rows")
    window, _, _ = message.rpartition("; ")
    assert window.endswith(f"->{snapshot}")
    # where the run's time went, phase by phase (``runtime.breakdown``)
    assert set(Breakdown.parse(message)) >= {"decide", "read", "delta", "write", "commit"}
    assert message in run.output  # the run line shows it too


def test_full_refresh_rebuilds(project: Project) -> None:
    run = project.dbt("build", "--full-refresh", "-s", "totals")
    assert run.response("totals")["code"] == "rebuild"
    assert "full refresh requested" in run.response("totals")["_message"]
    assert "full refresh requested" in run.output


def test_changed_model_sql_rebuilds(project: Project) -> None:
    model = project.directory / "models" / "marts" / "monthly_status.sql"
    original = model.read_text()
    try:
        model.write_text(
            original.replace("sum(amount) as amount", "sum(amount) as amount, max(amount) as top")
        )
        run = project.dbt("build", "-s", "monthly_status")
        assert run.response("monthly_status")["code"] == "rebuild"
        assert "model SQL changed" in run.output
    finally:
        model.write_text(original)
    assert (
        project.dbt("run", "-s", "monthly_status").response("monthly_status")["code"] == "rebuild"
    )


def test_a_join_input_the_model_stores_is_kept_beside_it(project: Project) -> None:
    """``returned_payments`` configures ``ivm_stored_inputs=['stg_orders']``: the returned
    orders live in a state table that each run brings forward, explain shows it, and a
    model that stops storing them rebuilds, since its state changed."""
    with project.connect() as con:
        stored = con.execute(
            'SELECT count(*) FROM lake.main."_duckstream_state_returned_payments_3" '
            "WHERE order_id NOT IN (SELECT order_id FROM lake.main.stg_orders "
            "WHERE status = 'returned')"
        ).fetchone()
        returned = con.execute(
            "SELECT count(*) FROM lake.main.stg_orders WHERE status = 'returned'"
        ).fetchone()
        kept = con.execute(
            'SELECT count(*) FROM lake.main."_duckstream_state_returned_payments_3"'
        ).fetchone()
    assert stored == (0,) and kept == returned
    explained = project.dbt(
        "run-operation", "duckstream_explain", "--args", "{model: returned_payments}"
    )
    assert "stored_input3: rows of lake.main.stg_orders passing" in explained.output
    model = project.directory / "models" / "marts" / "returned_payments.sql"
    original = model.read_text()
    try:
        model.write_text(original.replace("{{ config(ivm_stored_inputs=['stg_orders']) }}", ""))
        run = project.dbt("run", "-s", "returned_payments")
        assert run.response("returned_payments")["code"] == "rebuild"
        assert "model SQL changed" in run.output
    finally:
        model.write_text(original)
    run = project.dbt("run", "-s", "returned_payments")
    assert run.response("returned_payments")["code"] == "rebuild"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("CREATE OR REPLACE TABLE lake.raw.payments AS FROM lake.raw.payments", "recreated"),
        (
            "ALTER TABLE lake.raw.payments ALTER amount TYPE DECIMAL(14, 2)",
            "the columns read from source",
        ),
    ],
)
def test_broken_change_feed_rebuilds(project: Project, change: str, reason: str) -> None:
    with project.connect() as con:
        con.execute(change)
    run = project.dbt("build", "-s", "stg_payments")  # build: run, then its tests
    assert run.response("stg_payments")["code"] == "rebuild"
    assert reason in run.response("stg_payments")["_message"]
    assert reason in run.output


def test_a_column_the_model_does_not_read_changes_nothing(project: Project) -> None:
    project.dbt("run", "-s", "stg_payments")
    with project.connect() as con:
        con.execute("ALTER TABLE lake.raw.payments ADD COLUMN note VARCHAR")
    run = project.dbt("build", "-s", "stg_payments")
    assert run.response("stg_payments")["code"] == "unchanged"


def test_hooks_and_persist_docs_run_as_for_table(project: Project) -> None:
    """Hooks run on every run, the first and an unchanged one, and docs are persisted."""
    models = project.directory / "models" / "marts"
    hooks = project.directory / "hooks"
    hooks.mkdir()

    def hook(name: str) -> str:
        return f"COPY (SELECT 1 AS ran) TO '{hooks}/{name}_{{{{ invocation_id }}}}.csv'"

    (models / "hooked.sql").write_text(
        "{{ config(materialized='incremental_ivm', "
        "persist_docs={'relation': true, 'columns': true}, "
        f"pre_hook={hook('pre')!r}, post_hook={hook('post')!r}) }}}}\n"
        "select id, status from {{ source('raw', 'orders') }}\n"
    )
    (models / "hooked.yml").write_text(
        "version: 2\nmodels:\n  - name: hooked\n    description: Orders with hooks.\n"
        "    columns:\n      - {name: status, description: Where the order stands.}\n"
    )
    try:
        strategies = [
            project.dbt("run", "-s", "hooked").response("hooked")["code"] for _ in range(2)
        ]
        with project.connect() as con:
            (comment,) = con.execute(
                "SELECT comment FROM duckdb_tables() WHERE database_name = 'lake' "
                "AND schema_name = 'main' AND table_name = 'hooked'"
            ).fetchone() or (None,)
            (column,) = con.execute(
                "SELECT comment FROM duckdb_columns() WHERE database_name = 'lake' "
                "AND schema_name = 'main' AND table_name = 'hooked' AND column_name = 'status'"
            ).fetchone() or (None,)
            con.execute("DROP TABLE lake.main.hooked")
    finally:
        (models / "hooked.sql").unlink()
        (models / "hooked.yml").unlink()
    assert strategies == ["initial", "unchanged"]
    assert len(list(hooks.glob("pre_*.csv"))) == 2
    assert len(list(hooks.glob("post_*.csv"))) == 2
    assert (comment, column) == ("Orders with hooks.", "Where the order stands.")


def test_status_through_dbt(project: Project) -> None:
    operation = project.dbt("run-operation", "duckstream_status")
    for model in ("lake.main.stg_orders", "lake.main.revenue_by_region"):
        assert model in operation.output
    assert "strategy" in operation.output and "behind" in operation.output


def test_expired_snapshots_rebuild(project: Project) -> None:
    with project.connect() as con:
        con.execute("UPDATE lake.raw.customers SET tier = 'gold' WHERE id = 3")
        con.execute("CALL ducklake_expire_snapshots('lake', older_than => now())")
    run = project.dbt("build", "-s", "stg_customers")
    assert run.response("stg_customers")["code"] == "rebuild"
    assert "expired" in run.response("stg_customers")["_message"]


def test_unsupported_sql_fails_naming_the_construct(project: Project) -> None:
    model = project.directory / "models" / "marts" / "customer_orders_positional.sql"
    model.write_text(
        "{{ config(materialized='incremental_ivm') }}\n"
        "select c.id, o.id as order_id from {{ source('raw', 'customers') }} c\n"
        "positional join {{ source('raw', 'orders') }} o\n"
    )
    try:
        run = project.dbt("run", "-s", "customer_orders_positional", check=False)
    finally:
        model.unlink()
    assert run.returncode != 0
    assert "POSITIONAL JOIN" in run.output
    assert "ivm_fallback='rebuild'" in run.output


def test_empty_checks_the_sql_and_leaves_every_table_as_it_is(project: Project) -> None:
    """``dbt build --empty`` renders each read as ``(select * from x where false limit 0)``,
    which a model cannot maintain: it failed every model. It now compiles each model's SQL as
    a run would, leaves its table and its cursors alone (the next run maintains the whole
    window), creates a new model's table without rows, and fails SQL it cannot maintain."""
    marts = project.directory / "models" / "marts"
    project.dbt("run")
    with project.connect() as con:
        change_sources(con, random.Random(11))
        counts = {m: _count(con, m) for m in project.models()}
    (marts / "customer_ids.sql").write_text(
        "{{ config(materialized='incremental_ivm') }}\n"
        "select id from {{ source('raw', 'customers') }}\n"
    )
    try:
        run = project.dbt("run", "--empty")
        with project.connect() as con:
            assert {m: _count(con, m) for m in counts} == counts
            assert _count(con, "customer_ids") == 0
        assert {run.response(m)["code"] for m in [*counts, "customer_ids"]} == {"empty"}
        assert "table created without rows" in run.response("customer_ids")["_message"]
        assert project.dbt("run", "-s", "customer_ids").response("customer_ids")["code"] == (
            "initial"
        )
        (marts / "customer_ids.sql").write_text(
            "{{ config(materialized='incremental_ivm') }}\n"
            "select id from {{ source('raw', 'customers') }} order by id limit 3 offset 1 + 1\n"
        )
        refused = project.dbt("run", "--empty", "-s", "customer_ids", check=False)
        assert refused.returncode != 0
        assert "OFFSET" in refused.output
    finally:
        (marts / "customer_ids.sql").unlink()
        with project.connect() as con:
            con.execute("DROP TABLE IF EXISTS lake.main.customer_ids")
    later = project.dbt("run")
    assert later.response("stg_orders")["code"] == "incremental"
    assert_equals_table_materialization(project)


def _count(con, model: str) -> int:
    return con.execute(f"SELECT count(*) FROM lake.main.{model}").fetchone()[0]  # type: ignore[index]


def test_missing_plugin_says_what_to_add(project: Project) -> None:
    # DuckLake loaded another way (from the wheel's file), but without the plugin
    profiles = project.directory / "profiles.yml"
    original = profiles.read_text()
    extension = ducklake_extension_path()
    try:
        profiles.write_text(
            original.replace("- module: dbt_duckstream.plugin", "[]").replace(
                "plugins:\n        []", f"extensions: ['{extension}']"
            )
        )
        run = project.dbt("run", "-s", "stg_orders", check=False)
    finally:
        profiles.write_text(original)
    assert run.returncode != 0
    assert "add `plugins: [{module: dbt_duckstream.plugin}]`" in run.output


def test_explain_through_dbt_and_the_console(project: Project) -> None:
    operation = project.dbt(
        "run-operation", "duckstream_explain", "--args", "{model: revenue_by_region}"
    )
    assert "ducklake_table_deletions('lake', 'main', 'orders_enriched'" in operation.output
    assert "-- model lake.main.revenue_by_region" in operation.output

    model_file = Path("models") / "marts" / "totals.sql"
    console = project.duckstream("explain", str(model_file))
    assert console.returncode == 0, console.stderr
    assert "-- model lake.main.totals" in console.stdout

    plain = project.duckstream(
        "explain",
        "select region, count(*) as n from lake.raw.customers group by region",
        "--lake",
        str(project.lake / "lake.ducklake"),
        "--name",
        "regions",
    )
    assert plain.returncode == 0, plain.stderr
    assert '"lake"."main"."regions"' in plain.stdout

    rejected = project.duckstream("explain", "select t.a, random() as r from lake.raw.t")
    assert rejected.returncode == 1
    assert "non-deterministic function random()" in rejected.stderr
