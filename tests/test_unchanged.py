"""A model whose tables did not change since its last run is known unchanged from the lake's
metadata alone, before its SQL compiles (``runtime/unchanged.py``), and never where the
full decision would do something else."""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dbt_duckstream import prepare, refresh
from dbt_duckstream.bridge import functions
from dbt_duckstream.runtime import model_run
from dbt_duckstream.runtime.consistency import differences
from dbt_duckstream.runtime.unchanged import known_unchanged
from dbt_duckstream.sql import TableRef

from .budget import SLOW_EXAMPLES
from .harness import expire_before, fresh_lake
from .scenarios import COMPACTIONS

TARGET = TableRef("lake", "main", "m")
SQL = "SELECT k, sum(v) AS total, count(*) AS n FROM t GROUP BY k"
#: the same model in other words: its plan is the same, but not its text
OTHER_SQL = "SELECT k, sum(v) AS total, count(*) AS n FROM t GROUP  BY k"
STAR_SQL = "SELECT * FROM t WHERE v > 0"


@pytest.fixture
def lake():
    with fresh_lake(":memory:") as con:
        con.execute("CREATE TABLE t AS SELECT range % 4 AS k, range AS v FROM range(20)")
        yield con


def run(con: duckdb.DuckDBPyConnection, sql: str = SQL, **request) -> dict:
    """A run as dbt's materialization asks for it (the bridge, without SQL around it)."""
    relation = {"database": "lake", "schema": "main", "identifier": TARGET.name}
    return functions.run_model(con, {"relation": relation, "sql": sql, **request})


def quick(con: duckdb.DuckDBPyConnection, sql: str = SQL):
    return known_unchanged(con, sql, TARGET, catalog="lake", db="main")


def test_an_unchanged_model_is_known_without_compiling(lake, monkeypatch):
    assert run(lake)["strategy"] == "initial"
    lake.execute("CREATE TABLE other AS SELECT 1 AS x")  # a snapshot that is not the model's

    def no_compiling(*args, **kwargs):
        raise AssertionError("compiled the model's SQL")

    with monkeypatch.context() as patched:
        patched.setattr(model_run, "prepare", no_compiling)
        first = run(lake)
    assert first["strategy"] == "unchanged", first
    assert first["reason"] == "no source changed"
    _, now = first["snapshots"]["lake"]
    assert now == lake.execute("SELECT id FROM lake.current_snapshot()").fetchone()[0]
    lake.execute("INSERT INTO t VALUES (1, 100)")
    assert quick(lake) is None
    changed = run(lake)
    assert (changed["strategy"], changed["rows_inserted"]) == ("incremental", 1)
    with monkeypatch.context() as patched:
        patched.setattr(model_run, "prepare", no_compiling)
        assert run(lake)["strategy"] == "unchanged"
        with pytest.raises(AssertionError, match="compiled"):
            run(lake, full_refresh=True)


def test_a_changed_source_is_seen_before_the_models_tables_are_looked_up(lake, monkeypatch):
    """Most runs that reach the check find a source changed: the snapshot rows the run read
    say so, without a catalog query for the model's own tables."""
    from dbt_duckstream.runtime import unchanged

    run(lake)
    lake.execute("INSERT INTO t VALUES (1, 100)")

    def no_lookup(*args, **kwargs):
        raise AssertionError("looked up the model's tables")

    monkeypatch.setattr(unchanged, "_own_tables", no_lookup)
    assert quick(lake) is None


def test_a_full_refresh_and_bad_configuration_are_never_skipped(lake):
    run(lake)
    assert run(lake, full_refresh=True)["strategy"] == "rebuild"
    assert quick(lake) is not None
    with pytest.raises(Exception, match="ivm_rebuild_above='often'"):
        run(lake, rebuild_above="often")


def _alter_between_compile_and_pin(con: duckdb.DuckDBPyConnection) -> None:
    """A run whose plan was compiled before a source gained a column, and pinned after it
    (and after rows it maintains): its commit records the snapshot of its plan's schemas,
    before the change, which its plan does not show."""
    plan = prepare(con, STAR_SQL, TARGET, catalog="lake", db="main")
    con.execute("ALTER TABLE t ADD COLUMN w INTEGER")
    con.execute("INSERT INTO t VALUES (3, 3, 3)")
    assert refresh(con, plan).strategy == "incremental"


#: what happens after a first run (of ``STAR_SQL`` where the case says so), whether the
#: metadata still proves the model unchanged, and what the full run then does
CASES: dict[str, tuple[Callable[[duckdb.DuckDBPyConnection], None], bool, str]] = {
    "nothing": (lambda con: None, True, "unchanged"),
    "an insert": (lambda con: con.execute("INSERT INTO t VALUES (9, 9)"), False, "incremental"),
    "a delete": (lambda con: con.execute("DELETE FROM t WHERE v = 3"), False, "incremental"),
    "another table written": (
        lambda con: con.execute("CREATE TABLE u AS SELECT 1 AS x"),
        True,
        "unchanged",
    ),
    "a source's columns changed": (
        lambda con: con.execute("ALTER TABLE t ADD COLUMN w INTEGER"),
        False,
        "rebuild",
    ),
    "a source's columns changed between compiling and pinning": (
        _alter_between_compile_and_pin,
        False,
        "rebuild",
    ),
    "a write into the model": (
        lambda con: con.execute("INSERT INTO m VALUES (7, 7, 1)"),
        False,
        "rebuild",
    ),
    "the model dropped": (lambda con: con.execute("DROP TABLE m"), False, "initial"),
    "a state table dropped": (
        lambda con: con.execute("DROP TABLE _duckstream_state_m_3"),
        False,
        "unchanged",
    ),
    "the model's comment": (
        lambda con: con.execute("COMMENT ON TABLE m IS 'docs'"),
        True,
        "unchanged",
    ),
    "the lake compacted": (
        lambda con: con.execute("CALL ducklake_merge_adjacent_files('lake')"),
        True,
        "unchanged",
    ),
    "the run log written by hand": (
        lambda con: con.execute("UPDATE _duckstream_runs SET seconds = seconds WHERE model = 'm'"),
        False,
        "unchanged",
    ),
    "the source recreated": (
        lambda con: con.execute("CREATE OR REPLACE TABLE t AS SELECT 1 AS k, 2 AS v"),
        False,
        "rebuild",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_metadata_proves_nothing_the_full_run_would_not_find(lake, case):
    act, known, strategy = CASES[case]
    sql = STAR_SQL if "columns" in case else SQL
    assert run(lake, sql)["strategy"] == "initial"
    lake.execute("INSERT INTO t VALUES (2, 5)")
    assert run(lake, sql)["strategy"] == "incremental"  # the state tables exist
    act(lake)
    assert (quick(lake, sql) is not None) is known
    result = refresh(lake, prepare(lake, sql, TARGET, catalog="lake", db="main"))
    assert result.strategy == strategy, result.reason


def test_other_sql_text_is_compiled_again(lake):
    run(lake)
    assert quick(lake) is not None
    assert quick(lake, OTHER_SQL) is None
    assert run(lake, OTHER_SQL)["strategy"] == "unchanged"  # compiled: the same plan
    changed = "SELECT k, sum(v) AS total FROM t GROUP BY k"
    assert quick(lake, changed) is None
    result = run(lake, changed)
    assert (result["strategy"], result["reason"]) == ("rebuild", "model SQL changed")
    assert quick(lake, changed) is not None


def test_expired_snapshots_in_the_window_go_to_the_full_run(lake):
    run(lake)
    committed = lake.execute("SELECT id FROM lake.current_snapshot()").fetchone()[0]
    lake.execute("CREATE TABLE u AS SELECT 1 AS x")
    lake.execute("INSERT INTO u VALUES (2)")
    expire_before(lake, committed)
    assert quick(lake) is None
    result = run(lake)
    assert result["strategy"] == "unchanged" and "expired" in result["reason"]
    assert quick(lake) is not None  # that run moved the cursor, in a commit


def test_other_models_of_the_schema_writing_the_run_log_change_nothing(lake):
    run(lake)
    other = {"database": "lake", "schema": "main", "identifier": "n"}
    functions.run_model(lake, {"relation": other, "sql": "SELECT v FROM t WHERE k = 1"})
    assert quick(lake) is not None


#: steps of a random history around one model: the source's rows, the lake's upkeep, the
#: model's own tables, another model, and the model's runs (with its SQL changing)
STEPS = (
    "INSERT INTO t VALUES (1, 1)",
    "DELETE FROM t WHERE v % 5 = 0",
    "UPDATE t SET v = v + 1 WHERE k = 2",
    "CREATE OR REPLACE TABLE u AS SELECT 1 AS x",
    *COMPACTIONS,
    "CALL ducklake_expire_snapshots('lake', older_than => now())",
    "COMMENT ON TABLE m IS 'docs'",
    "INSERT INTO m SELECT * FROM m LIMIT 1",
    "ALTER TABLE t ADD COLUMN IF NOT EXISTS w INTEGER",
    "run",
    "run other",
    "run other SQL",
    "run another model",
)


@settings(
    max_examples=SLOW_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(st.sampled_from(STEPS), max_size=12))
# the model written after an expiry: the full run took it as no change, and moved the cursor
@example(
    steps=[
        "CALL ducklake_expire_snapshots('lake', older_than => now())",
        "INSERT INTO m SELECT * FROM m LIMIT 1",
        "run",
    ]
)
def test_known_unchanged_agrees_with_the_full_run(steps):
    """After every step, where the metadata proves the model unchanged, the model equals its
    recomputation and the full run (its SQL compiled again) finds it unchanged over the same
    window."""
    with fresh_lake(":memory:") as con:
        con.execute("CREATE TABLE t AS SELECT range % 4 AS k, range AS v FROM range(20)")
        sql = SQL
        run(con, sql)
        for step in steps:
            if step == "run another model":
                other = {"database": "lake", "schema": "main", "identifier": "n"}
                functions.run_model(con, {"relation": other, "sql": "SELECT k FROM t"})
            elif step.startswith("run"):
                sql = {"run": sql, "run other": SQL, "run other SQL": OTHER_SQL}[step]
                run(con, sql)
            else:
                try:
                    con.execute(step)
                except duckdb.Error:
                    continue  # e.g. the model's table dropped by a rebuild of another shape
            found = quick(con, sql)
            if found is None:
                continue
            _, window = found
            assert differences(con, TARGET.sql(), sql) == [], step  # the model is current
            result = refresh(con, prepare(con, sql, TARGET, catalog="lake", db="main"))
            assert result.strategy == "unchanged", (step, result.reason)
            assert result.snapshots == window, (step, result.snapshots, window)
