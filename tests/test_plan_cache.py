"""A maintained model's compiled plan serves later runs until the lake changes what its SQL
binds to (``runtime/plan_cache.py``); views that dbt builds beside it on every run do not,
unless one could shadow a table that the SQL names without its catalog, or is a view the
model reads and its definition changed."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

from dbt_duckstream.bridge import functions
from dbt_duckstream.runtime import model_run, plan_cache

from .harness import fresh_lake

#: the same model, its source named in full (as dbt's ``source`` and ``ref`` name it) and not
FULL = 'SELECT k, sum(v) AS total, count(*) AS n FROM "lake"."main"."t" GROUP BY k'
BARE = "SELECT k, sum(v) AS total, count(*) AS n FROM t GROUP BY k"


@pytest.fixture
def lake(tmp_path, monkeypatch) -> Iterator[duckdb.DuckDBPyConnection]:
    monkeypatch.setenv(plan_cache.DIRECTORY, str(tmp_path / "plans"))
    with fresh_lake(":memory:") as con:
        con.execute("CREATE TABLE t AS SELECT range % 4 AS k, range AS v FROM range(20)")
        con.execute("CREATE SCHEMA lake.stg")
        yield con


def run(con: duckdb.DuckDBPyConnection, sql: str, model: str = "m") -> dict:
    """A run as dbt's materialization asks for it (the bridge, without SQL around it)."""
    relation = {"database": "lake", "schema": "main", "identifier": model}
    # tiny tables: a cost-based rebuild would win every run, and these runs maintain
    return functions.run_model(con, {"relation": relation, "sql": sql, "rebuild_above": "never"})


def compiled(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    monkeypatch: pytest.MonkeyPatch,
    row: int,
    model: str = "m",
    strategy: str = "incremental",
) -> bool:
    """Whether a run after one more source row compiled the model's SQL; the run takes
    ``strategy``, and the model then holds what its SQL selects."""
    con.execute(f"INSERT INTO t (k, v) VALUES ({row % 4}, {row})")
    calls: list[str] = []
    prepare = model_run.prepare

    def counted(*args, **kwargs):
        calls.append(args[1])
        return prepare(*args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(model_run, "prepare", counted)
        result = run(con, sql, model)
    assert result["strategy"] == strategy, result
    rows = con.execute(f"SELECT * FROM lake.main.{model} ORDER BY ALL").fetchall()
    assert rows == con.execute(f"{sql} ORDER BY ALL").fetchall()
    return bool(calls)


def build_views_as_dbt_does(
    con: duckdb.DuckDBPyConnection, name: str, query: str = "SELECT 2 AS x"
) -> None:
    """What dbt's ``view`` materialization commits on every run: the view created under a
    temporary name, the old one (if any) moved aside, the new one renamed, the old one
    dropped."""
    con.execute(f"CREATE VIEW lake.stg.{name}__dbt_tmp AS ({query})")
    existed = con.execute(
        "SELECT count(*) FROM duckdb_views() "
        "WHERE database_name = 'lake' AND schema_name = 'stg' AND view_name = ?",
        [name],
    ).fetchone()
    if existed and existed[0]:
        con.execute(f"ALTER VIEW lake.stg.{name} RENAME TO {name}__dbt_backup")
    con.execute(f"ALTER VIEW lake.stg.{name}__dbt_tmp RENAME TO {name}")
    if existed and existed[0]:
        con.execute(f"DROP VIEW lake.stg.{name}__dbt_backup")


@pytest.mark.parametrize("sql", [FULL, BARE], ids=["named_in_full", "named_bare"])
def test_views_built_beside_a_model_keep_its_plan(lake, monkeypatch, sql):
    assert run(lake, sql)["strategy"] == "initial"
    assert not compiled(lake, sql, monkeypatch, 100)
    build_views_as_dbt_does(lake, "stg_orders")
    assert not compiled(lake, sql, monkeypatch, 101)
    build_views_as_dbt_does(lake, "stg_orders")
    assert not compiled(lake, sql, monkeypatch, 102)


def test_a_view_that_could_shadow_a_source_compiles_the_plan_again(lake, monkeypatch):
    models = {FULL: "m_full", BARE: "m_bare"}
    for sql, model in models.items():
        assert run(lake, sql, model)["strategy"] == "initial"
        assert not compiled(lake, sql, monkeypatch, 200, model)
    lake.execute("CREATE VIEW lake.stg.T AS SELECT 1 AS k, 2 AS v")
    # named in full, the source cannot be shadowed; named bare, it could be
    assert not compiled(lake, FULL, monkeypatch, 201, models[FULL])
    assert compiled(lake, BARE, monkeypatch, 202, models[BARE])
    assert not compiled(lake, BARE, monkeypatch, 203, models[BARE])


def test_a_schema_created_or_a_source_altered_compiles_the_plan_again(lake, monkeypatch):
    run(lake, FULL)
    assert not compiled(lake, FULL, monkeypatch, 300)
    lake.execute("CREATE SCHEMA lake.marts")
    assert compiled(lake, FULL, monkeypatch, 301)
    lake.execute("ALTER TABLE t ADD COLUMN w INTEGER")
    assert compiled(lake, FULL, monkeypatch, 302)
    assert not compiled(lake, FULL, monkeypatch, 303)


def test_a_mart_over_staging_views_keeps_its_plan_while_their_definitions_hold(lake, monkeypatch):
    staging = 'SELECT k, v FROM "lake"."main"."t" WHERE v >= 0'
    build_views_as_dbt_does(lake, "stg_t", staging)
    mart = 'SELECT k, sum(v) AS total, count(*) AS n FROM "lake"."stg"."stg_t" GROUP BY k'
    assert run(lake, mart)["strategy"] == "initial"
    assert not compiled(lake, mart, monkeypatch, 400)
    for row in (401, 402):  # dbt builds the staging view again, as it was
        build_views_as_dbt_does(lake, "stg_t", staging)
        build_views_as_dbt_does(lake, "other")
        assert not compiled(lake, mart, monkeypatch, row)
    # its definition changed: the mart's SQL did, and it is rebuilt from a new plan
    build_views_as_dbt_does(lake, "stg_t", staging.replace("v >= 0", "v % 2 = 0"))
    assert compiled(lake, mart, monkeypatch, 403, strategy="rebuild")
    assert not compiled(lake, mart, monkeypatch, 404)
    lake.execute("DROP VIEW lake.stg.stg_t")
    build_views_as_dbt_does(lake, "stg_t", staging)
    assert compiled(lake, mart, monkeypatch, 405, strategy="rebuild")
