"""The functions the dbt macros call, through SQL as the macros call them."""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import pytest

from dbt_duckstream import bridge
from dbt_duckstream.bridge import functions as functions_module
from dbt_duckstream.bridge import plugin as plugin_module
from dbt_duckstream.bridge.plugin import take_turns
from dbt_duckstream.runtime import lake as lake_module
from dbt_duckstream.runtime.lake import attach_lake, disabled_optimizers
from dbt_duckstream.runtime.turns import LAKE, PLANNING


@pytest.fixture
def lake() -> Iterator[duckdb.DuckDBPyConnection]:
    """A lake in a DuckDB instance of its own: the bridge's functions are registered on the
    instance, once (the shared test instance would already have them, bound to a closed
    cursor)."""
    with tempfile.TemporaryDirectory() as directory:
        con = duckdb.connect()
        try:
            attach_lake(con, f"{directory}/lake.ducklake", data_path=f"{directory}/data")
            con.execute("USE lake")
            yield con
        finally:
            con.close()


def call(con: duckdb.DuckDBPyConnection, function: str, request: dict) -> dict:
    row = con.execute(f"SELECT {function}(?)", [json.dumps(request)]).fetchone()
    assert row is not None
    return json.loads(row[0])


def model(name: str, **request) -> dict:
    return {"relation": {"database": "lake", "schema": "main", "identifier": name}, **request}


def test_run_test_and_explain_through_sql(lake: duckdb.DuckDBPyConnection) -> None:
    bridge.register(lake)
    lake.execute("CREATE TABLE t AS SELECT range % 3 AS k, range AS v FROM range(10)")
    sql = "SELECT k, sum(v) AS total FROM lake.main.t GROUP BY k"
    first = call(lake, "duckstream_run", model("m", sql=sql))
    assert (first["strategy"], first["rows_inserted"]) == ("initial", 3)
    lake.execute("UPDATE t SET v = v + 100 WHERE v = 4")
    second = call(lake, "duckstream_run", model("m", sql=sql))
    assert second["strategy"] == "incremental", second
    assert (second["rows_inserted"], second["rows_deleted"]) == (1, 1)
    check = call(lake, "duckstream_consistency_sql", model("m"))["sql"]
    assert lake.execute(check).fetchall() == []
    lake.execute("DELETE FROM m WHERE k = 0")  # the table drifts: the test must see it
    assert lake.execute(check).fetchall() != []
    assert "ducklake_table_deletions" in call(lake, "duckstream_explain", model("m"))["text"]


def test_a_run_belongs_to_the_invocation_of_the_models_dbt_selected(
    lake: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run knows the other models of the dbt invocation it belongs to, as dbt's
    ``selected_resources`` lists them (``runtime.invocation``), and nothing outside the call
    does."""
    from dbt import selected_resources

    from dbt_duckstream.runtime import invocation, model_run

    bridge.register(lake)
    seen = []
    run_model = model_run.run_model

    def recording(*args, **kwargs):
        seen.append(invocation.models())
        return run_model(*args, **kwargs)

    monkeypatch.setattr(model_run, "run_model", recording)
    lake.execute("CREATE TABLE t AS SELECT range AS k FROM range(3)")
    selected = ["model.p.m", "model.p.n", "seed.p.s", "test.p.unique_m_k"]
    monkeypatch.setattr(selected_resources, "SELECTED_RESOURCES", selected)
    call(lake, "duckstream_run", model("m", sql="SELECT k FROM lake.main.t"))
    monkeypatch.setattr(selected_resources, "SELECTED_RESOURCES", ["model.p.n"])
    call(lake, "duckstream_run", model("n", sql="SELECT k FROM lake.main.t"))
    assert seen == [frozenset({"m", "n"}), frozenset({"n"})]
    assert invocation.models() is None


def test_the_consistency_test_and_explain_of_a_window_whose_order_ties(
    lake: duckdb.DuckDBPyConnection,
) -> None:
    """jaffle-shop's numbering of a customer's orders by day: orders of one day tie, and the
    test accepts either numbering of them, and nothing else; explain says so."""
    bridge.register(lake)
    lake.execute(
        "CREATE TABLE orders AS SELECT range AS id, range % 3 AS customer, "
        "DATE '2024-01-01' + (range // 6)::INTEGER AS day FROM range(12)"
    )
    sql = (
        "SELECT id, customer, day, row_number() OVER (PARTITION BY customer ORDER BY day) "
        "AS n FROM lake.main.orders"
    )
    assert call(lake, "duckstream_run", model("m", sql=sql))["strategy"] == "initial"
    check = call(lake, "duckstream_consistency_sql", model("m"))["sql"]
    lake.execute(  # the other numbering of each tie
        "UPDATE m SET n = CASE n WHEN 1 THEN 2 WHEN 2 THEN 1 WHEN 3 THEN 4 ELSE 3 END"
    )
    assert lake.execute(check).fetchall() == []
    lake.execute("UPDATE m SET n = 3 WHERE id = 0")  # a number of the other day
    assert lake.execute(check).fetchall() != []
    explained = call(lake, "duckstream_explain", model("m"))["text"]
    assert "-- ties: ROW_NUMBER() OVER (PARTITION BY customer ORDER BY day)" in explained
    assert "a unique column ending its ORDER BY" in explained


def test_the_consistency_test_of_a_model_with_repeated_column_names(
    lake: duckdb.DuckDBPyConnection,
) -> None:
    """The model stores ``k`` twice as ``k`` and ``k_1``, as ``CREATE TABLE AS`` would: its
    test compares those columns, where DuckDB describes the query with ``k`` twice."""
    bridge.register(lake)
    lake.execute("CREATE TABLE t AS SELECT range % 3 AS k, range AS v FROM range(10)")
    sql = "SELECT a.k, b.k, a.v FROM lake.main.t AS a JOIN lake.main.t AS b ON a.v = b.v + 1"
    call(lake, "duckstream_run", model("m", sql=sql))
    check = call(lake, "duckstream_consistency_sql", model("m"))["sql"]
    assert lake.execute(check).fetchall() == []
    lake.execute("DELETE FROM m WHERE k_1 = 0")
    assert lake.execute(check).fetchall() != []


def test_the_consistency_test_of_a_model_that_picks_rows_runs_without_join_filters(
    lake: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dbt runs the test's query after the bridge returns: for a model with a LIMIT (see
    ``lake.JOIN_FILTER_OPTIMIZERS``) the optimizer stays off for the rest of the process,
    and maintenance runs in between (which restore what they change) keep it off."""
    monkeypatch.setattr(lake_module, "_off_for_good", set())
    bridge.register(lake)
    lake.execute("CREATE TABLE t AS SELECT range % 3 AS k, range AS v FROM range(10)")
    plain = "SELECT k, sum(v) AS total FROM lake.main.t GROUP BY k"
    top = "SELECT k, v FROM lake.main.t ORDER BY v DESC LIMIT 4"
    for name, sql in (("plain", plain), ("top", top)):
        assert call(lake, "duckstream_run", model(name, sql=sql))["strategy"] == "initial"
    assert "join_filter_pushdown" not in disabled_optimizers(lake)
    call(lake, "duckstream_consistency_sql", model("plain"))
    assert "join_filter_pushdown" not in disabled_optimizers(lake)
    check = call(lake, "duckstream_consistency_sql", model("top"))["sql"]
    assert "join_filter_pushdown" in disabled_optimizers(lake)
    lake.execute("INSERT INTO t VALUES (1, 100)")
    for name, sql in (("plain", plain), ("top", top)):
        assert call(lake, "duckstream_run", model(name, sql=sql))["strategy"] == "incremental"
    assert "join_filter_pushdown" in disabled_optimizers(lake)
    assert lake.execute(check).fetchall() == []


def test_the_consistency_test_of_a_model_with_an_inequality_runs_without_the_deliminator(
    lake: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a correlation holding an inequality (``lake.DELIMINATOR_OPTIMIZERS``):
    the test's query is right only with the deliminator off."""
    monkeypatch.setattr(lake_module, "_off_for_good", set())
    bridge.register(lake)
    lake.execute("CREATE TABLE r (id INTEGER, k INTEGER)")
    lake.execute("CREATE TABLE t (k INTEGER)")
    lake.execute("INSERT INTO t VALUES (2)")
    lake.execute("INSERT INTO r VALUES (0, 1), (2, 1)")
    sql = (
        "SELECT id FROM lake.main.r "
        "WHERE EXISTS (SELECT 1 FROM lake.main.t WHERE r.id <> t.k AND r.k <= t.k)"
    )
    assert call(lake, "duckstream_run", model("m", sql=sql))["strategy"] == "initial"
    assert lake.execute("SELECT * FROM m").fetchall() == [(0,)]
    assert "deliminator" not in disabled_optimizers(lake)
    check = call(lake, "duckstream_consistency_sql", model("m"))["sql"]
    assert "deliminator" in disabled_optimizers(lake)
    assert lake.execute(check).fetchall() == []


def test_with_the_toggled_optimizers_off_for_good_no_run_changes_them(
    lake: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dbt's threads plan queries while a model runs, and DuckDB reads the instance's
    ``disabled_optimizers`` without a lock: setting it then crashed dbt. The plugin turns
    every optimizer the package toggles off before the threads start; after that no run,
    maintained or rebuilt, of a model that needs them off or not, sets it again (DuckDB's
    query log, which records the statements of every connection of the instance)."""
    monkeypatch.setattr(lake_module, "_off_for_good", set())
    bridge.register(lake)
    lake_module.disable_for_good(lake, lake_module.TOGGLED_OPTIMIZERS)
    before = disabled_optimizers(lake)
    assert set(lake_module.TOGGLED_OPTIMIZERS) <= set(before)
    lake.execute("CREATE TABLE t AS SELECT range % 3 AS k, range AS v FROM range(10)")
    models = {
        "plain": "SELECT k, sum(v) AS total FROM lake.main.t GROUP BY k",
        "top": "SELECT k, v FROM lake.main.t ORDER BY v DESC LIMIT 4",
    }
    lake.execute("CALL enable_logging('QueryLog')")
    strategies = []
    for round_ in range(3):
        if round_:
            lake.execute(f"INSERT INTO t VALUES ({round_}, {100 + round_})")
        for name, sql in models.items():
            request = model(name, sql=sql, rebuild_above=0.0 if round_ == 2 else None)
            strategies.append(call(lake, "duckstream_run", request)["strategy"])
            call(lake, "duckstream_consistency_sql", model(name))
    lake.execute("CALL disable_logging()")
    assert strategies == ["initial"] * 2 + ["incremental"] * 2 + ["rebuild"] * 2
    logged = lake.execute(
        "SELECT count(*), count(*) FILTER (WHERE message ILIKE '%SET disabled_optimizers%') "
        "FROM duckdb_logs() WHERE type = 'QueryLog'"
    ).fetchone()
    assert logged is not None and logged[0] > 0
    assert logged[1] == 0, "a run set disabled_optimizers"
    assert disabled_optimizers(lake) == before


def test_threads_sharing_the_instance_change_optimizers_only_while_none_plans(
    lake: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dbt's threads plan queries while models run, and DuckDB reads ``disabled_optimizers``
    without a lock. With the instance shared (``lake.share_instance``), a run of SQL that needs
    an optimizer off (a LIMIT, an inequality in a correlated subquery) still turns it off for
    its run, but only while no other thread holds a turn or plans a bridge call; every other
    run changes nothing. Four threads run such models, plain ones, reads and inserts at once,
    through dbt's ``execute`` as the plugin patches it."""
    monkeypatch.setattr(lake_module, "_off_for_good", set())
    monkeypatch.setattr(lake_module, "_shared", False)
    bridge.register(lake)
    lake_module.share_instance(lake)
    assert set(lake_module.STATISTICS_OPTIMIZERS) <= set(disabled_optimizers(lake))
    assert "join_filter_pushdown" not in disabled_optimizers(lake)
    lake.execute("CREATE TABLE t AS SELECT range % 7 AS k, range AS v FROM range(200)")
    models = {
        "top": "SELECT k, v FROM lake.main.t ORDER BY v DESC LIMIT 5",
        "plain": "SELECT k, sum(v) AS total FROM lake.main.t GROUP BY k",
        "unequal": "SELECT k, v FROM lake.main.t AS a WHERE EXISTS "
        "(SELECT 1 FROM lake.main.t AS b WHERE b.k <> a.k AND b.v = a.v + 1)",
        "joined": "SELECT a.k, count(*) AS n FROM lake.main.t AS a "
        "JOIN lake.main.t AS b ON a.v = b.v GROUP BY a.k",
    }
    alone: list[bool] = []
    changing = lake_module._changing_settings

    @contextmanager
    def watched() -> Iterator[None]:
        with changing():
            me = threading.get_ident()
            others = [t for t in LAKE._readers if t != me]
            alone.append(LAKE._writer == me and not others and not PLANNING._pending)
            yield

    monkeypatch.setattr(lake_module, "_changing_settings", watched)
    execute = take_turns(lambda cursor, sql, bindings=None: cursor.execute(sql).fetchall())
    failures: list[BaseException] = []

    def work(number: int) -> None:
        cursor = lake.cursor()
        try:
            for round_ in range(4):
                for name, sql in models.items():
                    payload = json.dumps(model(f"{name}_{number}", sql=sql)).replace("'", "''")
                    found = execute(cursor, f"select system.main.duckstream_run('{payload}')")
                    assert "error" not in json.loads(found[0][0]), found
                    execute(cursor, "SELECT count(*), sum(v) FROM lake.main.t WHERE k = 3")
                if number == 0:
                    execute(cursor, f"INSERT INTO lake.main.t VALUES ({round_}, {500 + round_})")
        except BaseException as error:
            failures.append(error)
        finally:
            cursor.close()

    workers = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not failures, failures
    assert alone and all(alone), alone
    # each run that turned it off turned it on again
    assert "join_filter_pushdown" not in disabled_optimizers(lake)
    for name, sql in models.items():
        for number in range(4):  # the inserts of the last round, applied
            assert "error" not in call(lake, "duckstream_run", model(f"{name}_{number}", sql=sql))
            check = call(lake, "duckstream_consistency_sql", model(f"{name}_{number}"))["sql"]
            assert lake.execute(check).fetchall() == [], (name, number)


@pytest.mark.parametrize("threads", [1, 4])
def test_under_dbt_the_statistics_optimizers_stay_off_whatever_the_threads(
    threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rewrite can leave a lake's column bounds wrong, and DuckDB's statistics optimizers
    then prune rows that exist from any query (``test_regressions``): dbt's rebuilds, tests
    and other materializations read the lake outside a run's blocks, so the plugin turns them
    off for the whole process, with one thread as with several; only several threads wait for
    each other to change the optimizers (``lake.share_instance``)."""
    monkeypatch.setattr(lake_module, "_off_for_good", set())
    monkeypatch.setattr(lake_module, "_shared", False)
    monkeypatch.setattr(plugin_module, "dbt_threads", lambda: threads)
    con = duckdb.connect()
    try:
        plugin_module.Plugin("duckstream", {}, None).configure_connection(con)
        off = disabled_optimizers(con)
        assert set(lake_module.STATISTICS_OPTIMIZERS) <= set(off), off
        assert "join_filter_pushdown" not in off
        assert lake_module._shared == (threads > 1)
    finally:
        con.close()


def test_dbts_first_cursor_starts_reading_ahead_for_its_selection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """dbt attaches the profile's databases after the plugin configured its connection, and
    then opens cursors: the first starts reading ahead (``runtime.warmup``) for the models
    dbt selected, on a cursor of the connection, when the command runs models; later cursors
    start nothing."""
    started: list[tuple[duckdb.DuckDBPyConnection, frozenset[str] | None, object]] = []
    monkeypatch.setattr(
        plugin_module,
        "on_open",
        lambda cursors, models, schemas: started.append((cursors(), models, schemas)),
    )
    selected, schemas = frozenset({"orders"}), frozenset({("lake", "shop")})
    monkeypatch.setattr(plugin_module, "invocation_models", lambda: selected)
    monkeypatch.setattr(plugin_module, "invocation_schemas", lambda: schemas)
    monkeypatch.setattr(plugin_module, "dbt_threads", lambda: 1)
    monkeypatch.setattr(lake_module, "_off_for_good", set())
    command = ["test"]
    monkeypatch.setattr(plugin_module, "dbt_command", lambda: command[0])
    connections = [duckdb.connect(), duckdb.connect()]
    try:
        plugin = plugin_module.Plugin("duckstream", {}, None)
        plugin.configure_cursor(connections[0].cursor())  # no connection opened yet: nothing
        plugin.configure_connection(connections[0])
        plugin.configure_cursor(connections[0].cursor())  # dbt test: nothing
        assert started == []
        command[0] = "run"
        plugin.configure_connection(connections[1])
        for _ in range(2):
            plugin.configure_cursor(connections[1].cursor())
        assert [(models, built) for _, models, built in started] == [(selected, schemas)]
        assert started[0][0].execute("SELECT 42").fetchone() == (42,)
    finally:
        for con in connections:
            con.close()


def test_fallback_rebuilds_unsupported_sql(lake: duckdb.DuckDBPyConnection) -> None:
    bridge.register(lake)
    lake.execute("CREATE TABLE t AS SELECT range AS v FROM range(5)")
    sql = "SELECT v, any_value(v) AS a FROM lake.main.t GROUP BY v"
    refused = call(lake, "duckstream_run", model("w", sql=sql))
    assert "order-dependent aggregate any_value()" in refused["error"]
    assert "ivm_fallback='rebuild'" in refused["error"]
    for _ in range(2):
        result = call(lake, "duckstream_run", model("w", sql=sql, fallback="rebuild"))
        assert result["strategy"] == "rebuild"
        assert "ivm_fallback='rebuild': order-dependent aggregate any_value()" in result["reason"]
    check = call(lake, "duckstream_consistency_sql", model("w"))["sql"]
    assert lake.execute(check).fetchall() == []
    explained = call(lake, "duckstream_explain", model("w"))["text"]
    assert "rebuilt on every run" in explained


def test_configuration_errors_say_what_to_fix(lake: duckdb.DuckDBPyConnection) -> None:
    bridge.register(lake)
    lake.execute("CREATE TABLE t AS SELECT 1 AS v")
    sql = "SELECT v FROM lake.main.t"
    wrong = call(lake, "duckstream_run", model("m", sql=sql, fallback="table"))
    assert "ivm_fallback='table' is not a choice" in wrong["error"]
    threshold = call(lake, "duckstream_run", model("m", sql=sql, rebuild_above="often"))
    assert "ivm_rebuild_above='often'" in threshold["error"]
    assert "'never'" in threshold["error"]
    outside = call(
        lake,
        "duckstream_run",
        {"relation": {"database": "memory", "schema": "main", "identifier": "m"}, "sql": sql},
    )
    assert "must live in a DuckLake catalog" in outside["error"]
    never_built = call(lake, "duckstream_consistency_sql", model("nothing"))
    assert "has not been built by incremental_ivm yet" in never_built["error"]


def test_each_connection_moves_the_parsed_project_out_of_the_collectors_sight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full collection traverses every live object: dbt's manifest, parsed before the
    plugin's connection opens, is moved out of its sight; what an earlier invocation of the
    process froze goes back to the collector first, so that it can be freed."""
    calls = []
    monkeypatch.setattr(plugin_module.gc, "unfreeze", lambda: calls.append("unfreeze"))
    monkeypatch.setattr(plugin_module.gc, "freeze", lambda: calls.append("freeze"))
    plugin_module.settle_garbage_collector()
    plugin_module.settle_garbage_collector()
    assert calls == ["unfreeze", "freeze", "unfreeze", "freeze"]


def test_the_invocations_schemas_come_from_the_manifest_dbt_gave_its_adapter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where dbt builds the selected models (tests and seeds aside), as the manifest says;
    unknown without an adapter."""
    from types import SimpleNamespace

    from dbt import selected_resources
    from dbt.adapters.factory import FACTORY

    node = SimpleNamespace
    nodes = {
        "model.shop.orders": node(database="Lake", schema="Shop_Marts"),
        "model.shop.items": node(database="lake", schema="shop"),
        "test.shop.not_null": node(database="lake", schema="shop_tests"),
    }
    manifest = SimpleNamespace(nodes=nodes)
    monkeypatch.setattr(selected_resources, "SELECTED_RESOURCES", [*nodes, "model.shop.gone"])
    monkeypatch.setattr(FACTORY, "adapters", {})
    assert functions_module.invocation_schemas() is None
    adapter = SimpleNamespace(get_macro_resolver=lambda: manifest)
    monkeypatch.setattr(FACTORY, "adapters", {"duckdb": adapter})
    assert functions_module.invocation_schemas() == {("lake", "shop_marts"), ("lake", "shop")}


def test_dbts_statements_that_commit_nothing_take_their_turn_beside_readers(
    lake: duckdb.DuckDBPyConnection,
) -> None:
    """While another thread reads the lake (reading ahead: ``runtime.warmup``), dbt's
    ``create schema if not exists`` of a schema that exists, and the end of a transaction that
    only read, go beside it; a schema to create, and the end of a transaction that wrote,
    wait for it."""
    lake.execute("CREATE SCHEMA lake.shop")
    execute = take_turns(lambda cursor, sql, bindings=None: cursor.execute(sql).fetchall())

    class Wrapper:  # what dbt-duckdb's cursor wrapper keeps: its cursor
        def __init__(self, cursor: duckdb.DuckDBPyConnection) -> None:
            self._cursor = cursor

        def execute(self, sql: str) -> duckdb.DuckDBPyConnection:
            return self._cursor.execute(sql)

    dbt = Wrapper(lake.cursor())
    reading, done = threading.Event(), threading.Event()

    def reader() -> None:
        with LAKE.reading():
            reading.set()
            done.wait(timeout=30)

    def alongside(*statements: str) -> bool:
        """Whether the statements all ran while the reader held its turn."""
        thread = threading.Thread(target=reader)
        thread.start()
        reading.wait()
        ran = threading.Event()

        def run() -> None:
            for sql in statements:
                execute(dbt, sql)
            ran.set()

        runner = threading.Thread(target=run)
        runner.start()
        finished = ran.wait(timeout=2)
        done.set()
        runner.join()
        thread.join()
        reading.clear()
        done.clear()
        return finished

    assert alongside(
        "BEGIN",
        '/* {"app": "dbt"} */ create schema if not exists "lake"."shop"',
        "select 1",
        "COMMIT",
    )
    execute(dbt, "USE memory")
    assert not alongside("BEGIN", "create schema if not exists shop", "ROLLBACK")
    execute(dbt, "USE lake")
    assert alongside("BEGIN", "create schema if not exists shop", "COMMIT")
    assert not alongside("BEGIN", 'create schema if not exists "lake"."new_one"', "COMMIT")
    assert not alongside("BEGIN", "CREATE TABLE lake.shop.t AS SELECT 1 AS x", "COMMIT")
    assert not alongside("COMMIT")  # a transaction this wrapper did not see begin
    assert not alongside(
        "BEGIN", "SELECT * FROM ducklake_snapshots('lake') WHERE snapshot_id < 0", "COMMIT"
    )
    assert not alongside("SELECT count(*) FROM ducklake_snapshots('lake')")
    assert lake.execute("SELECT count(*) FROM lake.shop.t").fetchone() == (1,)
