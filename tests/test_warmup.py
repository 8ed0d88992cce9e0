"""The catalog versions an invocation's models read, loaded ahead by its first run
(``runtime.warmup``)."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb

from dbt_duckstream.runtime import first_windows, invocation, known_runs, warmup
from dbt_duckstream.runtime.feeds import cached_entries
from dbt_duckstream.runtime.lake import attach_lake, table_id
from dbt_duckstream.runtime.run import prepare, refresh
from dbt_duckstream.sql import TableRef

from .harness import Model

SQL = {
    "per_k": "SELECT k, sum(v) AS s, count(*) AS n FROM a GROUP BY k",
    "per_g": "SELECT g, max(w) AS m FROM b GROUP BY g",
}
#: DuckLake's load of a whole catalog as of a schema version
CATALOG_LOAD = "SELECT schema_id, tbl.table_id"
#: a read of the run log's latest runs (``runlog.latest_runs``)
LOG_READ = "arg_max(struct_pack(run"
#: a read of a source's change into the feed cache (``feeds``)
FEED_READ = 'CREATE TABLE "_duckstream_feeds"'


def _attached(directory: Path) -> duckdb.DuckDBPyConnection:
    """A DuckDB instance of its own, so that it has loaded nothing of the lake yet."""
    con = duckdb.connect()
    attach_lake(con, f"{directory}/lake.ducklake", data_path=f"{directory}/data")
    con.execute("USE lake")
    return con


def _lake_at_old_versions(directory: Path) -> None:
    """Two sources and two models, every table holding inlined rows at a schema version
    older than the lake's, and a change of each source for the next runs."""
    con = _attached(directory)
    con.execute("CREATE TABLE a (k INTEGER, v INTEGER)")
    con.execute("INSERT INTO a SELECT i % 3, i FROM range(20) r(i)")
    con.execute("CREATE TABLE b (g VARCHAR, w DOUBLE)")
    con.execute("INSERT INTO b VALUES ('x', 1.5), ('y', NULL), ('x', 2.5)")
    for name, sql in SQL.items():
        Model(con, name, sql).refresh()
    con.execute("CREATE TABLE later (x INTEGER)")  # the lake's schema version moves on
    con.execute("INSERT INTO a VALUES (1, 100), (NULL, 7)")
    con.execute("DELETE FROM b WHERE w = 1.5")
    con.close()


def _loads(con: duckdb.DuckDBPyConnection) -> int:
    logged = con.execute("SELECT message FROM duckdb_logs").fetchall()
    return sum(CATALOG_LOAD in message and "duckdb_logs" not in message for (message,) in logged)


def _reads_while_running(directory: Path, monkeypatch, *, ahead: bool) -> tuple[int, int, int]:
    """Both models run as one invocation as in a fresh process (an instance of its own, no
    latest runs known), read ahead for or not: the catalog loads, the run log reads and the
    reads of a source's change into the feed cache that their runs issued."""
    monkeypatch.setattr(known_runs, "_known", {})
    con = _attached(directory)
    models = {name: Model(con, name, sql) for name, sql in SQL.items()}
    names = invocation.model_names([f"model.p.{name}" for name in SQL])
    try:
        if ahead:
            thread = warmup.on_open(con.cursor, names)
            assert thread is not None
            thread.join()
        con.execute("CALL enable_logging('QueryLog')")
        with invocation.within(names):
            for model in models.values():
                assert model.refresh().strategy == "incremental"
        logged = [m for (m,) in con.execute("SELECT message FROM duckdb_logs").fetchall()]
        for model in models.values():
            model.assert_consistent()
    finally:
        con.close()
    runs = [m for m in logged if "duckdb_logs" not in m]
    return (
        sum(CATALOG_LOAD in m for m in runs),
        sum(LOG_READ in m for m in runs),
        sum(FEED_READ in m for m in runs),
    )


def test_reading_ahead_leaves_the_runs_no_catalog_version_and_no_run_log_to_read(
    tmp_path, monkeypatch
):
    """Read ahead for when dbt opens its connection, an invocation's runs find every catalog
    version their tables' inlined rows need loaded (their sources', their own tables' and
    state tables') and their latest runs known; without it they load and read them."""
    _lake_at_old_versions(tmp_path)
    loads, log_reads, _ = _reads_while_running(tmp_path, monkeypatch, ahead=False)
    assert loads > 0 and log_reads > 0
    _lake_at_old_versions_again(tmp_path)
    assert _reads_while_running(tmp_path, monkeypatch, ahead=True)[:2] == (0, 0)


def test_the_changes_the_first_runs_read_are_read_ahead(tmp_path, monkeypatch):
    """Each changed source's change over the span the models' runs read it (inserted rows of
    one, deleted and updated inlined rows of the other), with the columns they read, is in
    the feed cache before they run: they read none themselves, and maintain as without it."""
    monkeypatch.setattr(first_windows, "AHEAD_SHARE", 1.0)  # the tables are tiny
    _lake_at_old_versions(tmp_path)
    assert _reads_while_running(tmp_path, monkeypatch, ahead=True) == (0, 0, 0)
    _lake_at_old_versions_again(tmp_path)
    assert _reads_while_running(tmp_path, monkeypatch, ahead=False)[2] == 2


def _read_ahead_for(directory: Path, monkeypatch) -> dict[str, list[str]]:
    """What a fresh process reads ahead for both models: the columns of each source's change
    in the feed cache, by the source's name."""
    monkeypatch.setattr(known_runs, "_known", {})
    con = _attached(directory)
    try:
        thread = warmup.on_open(con.cursor, frozenset(SQL))
        assert thread is not None
        thread.join()
        names = dict(
            con.execute(
                "SELECT table_id, table_name FROM __ducklake_metadata_lake.ducklake_table "
                "WHERE end_snapshot IS NULL"
            ).fetchall()
        )
        return {names[tid]: sorted(columns) for tid, _, _, columns in cached_entries(con)}
    finally:
        con.close()


def test_only_plain_small_changes_are_read_ahead(tmp_path, monkeypatch):
    """A change of more than ``AHEAD_SHARE`` of a source's rows is not read ahead (it is
    often rebuilt), nor a window that altered the source or moved its rows to other files
    (the decision spans those its own way)."""
    _lake_at_old_versions(tmp_path)
    assert _read_ahead_for(tmp_path, monkeypatch) == {}  # 2 of 20 rows, 1 of 3
    monkeypatch.setattr(first_windows, "AHEAD_SHARE", 1.0)
    assert _read_ahead_for(tmp_path, monkeypatch) == {"a": ["k", "v"], "b": ["g", "w"]}
    con = _attached(tmp_path)
    con.execute("ALTER TABLE b ADD COLUMN extra INTEGER")
    con.execute("CALL ducklake_flush_inlined_data('lake', table_name => 'a')")
    con.execute("INSERT INTO a VALUES (4, 4)")
    con.close()
    assert _read_ahead_for(tmp_path, monkeypatch) == {}


def test_nothing_is_read_ahead_for_an_unknown_invocation(tmp_path):
    _lake_at_old_versions(tmp_path)
    con = _attached(tmp_path)
    assert warmup.on_open(con.cursor, None) is None
    assert warmup.on_open(con.cursor, frozenset()) is None
    con.close()


def _lake_at_old_versions_again(directory: Path) -> None:
    con = _attached(directory)
    con.execute("CREATE TABLE later_still (x INTEGER)")
    con.execute("INSERT INTO a VALUES (2, 5)")
    con.execute("UPDATE b SET w = 9 WHERE g = 'y'")
    con.close()


def test_old_versions_are_those_of_the_tables_and_models_asked_for(tmp_path):
    """One entry per schema version older than the lake's that holds inlined rows of a table
    asked for (by id, or as a model's table or state table in a schema), with a table named
    as it was then; ``load`` loads each, and the tables read as before."""
    _lake_at_old_versions(tmp_path)
    con = _attached(tmp_path)
    a = table_id(con, TableRef("lake", "main", "a"))
    assert a is not None
    only_a = warmup.old_versions(con, "lake", [a])
    assert [name for _, _, name in only_a] == ["a"]
    with_models = warmup.old_versions(con, "lake", [a], ["per_g"], ["main"])
    # a's version, and the one per_g and its state table were created at; not per_k's
    assert len(with_models) == 2 and with_models[0] == only_a[0]
    assert with_models[1][2] in ("per_g", "_duckstream_state_per_g_3")
    assert warmup.old_versions(con, "lake", [], ["per_g"], ["elsewhere"]) == []
    # tables of one version in two schemas: the entry names one of them whole
    con.execute("BEGIN TRANSACTION")
    con.execute("CREATE SCHEMA zz")
    con.execute("CREATE TABLE zz.c (x INTEGER)")
    con.execute("CREATE TABLE main.d (x INTEGER)")
    con.execute("INSERT INTO zz.c VALUES (1)")
    con.execute("INSERT INTO main.d VALUES (2)")
    con.execute("COMMIT")
    con.execute("CREATE TABLE main.later_again (x INTEGER)")
    pair = [("zz", "c"), ("main", "d")]
    ids = [i for s, n in pair if (i := table_id(con, TableRef("lake", s, n))) is not None]
    [(_, schema, name)] = warmup.old_versions(con, "lake", ids)
    assert (schema, name) in pair
    assert warmup.load(con, "lake", ids) == 1
    assert warmup.old_versions(con, "lake", []) == []
    con.execute("CALL enable_logging('QueryLog')")
    assert warmup.load(con, "lake", [a], ["per_g"], ["main"]) == 2
    loaded = _loads(con)
    assert loaded >= 2
    assert con.execute("SELECT count(*), sum(v) FROM a").fetchone() == (22, 297)
    assert _loads(con) == loaded  # its version is loaded: reading it loads nothing more
    con.close()


def test_a_failure_stops_reading_ahead_quietly_and_the_runs_go_on(tmp_path, monkeypatch):
    """A run log written by an earlier release (without a column added since) fails the read
    ahead: the thread stops without a word to dbt's output, and the runs upgrade the log and
    maintain, as without it."""
    monkeypatch.setattr(known_runs, "_known", {})
    _lake_at_old_versions(tmp_path)
    con = _attached(tmp_path)
    try:
        con.execute("ALTER TABLE _duckstream_runs DROP COLUMN changed_rows")
        models = {name: Model(con, name, sql) for name, sql in SQL.items()}
        escaped: list[BaseException] = []
        monkeypatch.setattr(threading, "excepthook", lambda hook: escaped.append(hook.exc_value))
        thread = warmup.on_open(con.cursor, frozenset(SQL))
        assert thread is not None
        thread.join()
        assert escaped == []
        for model in models.values():
            assert model.refresh().strategy == "incremental"
            model.assert_consistent()
    finally:
        con.close()


def test_only_the_run_logs_of_the_invocations_schemas_are_read_ahead(tmp_path, monkeypatch):
    """A lake shared by several targets (a developer's schema, a CI run's) holds a run log
    per schema, and models of the same names in each: reading ahead for models built in one
    schema reads that schema's log alone, and loads none of the others' tables; without the
    schemas known it reads every log."""
    _lake_at_old_versions(tmp_path)
    con = _attached(tmp_path)
    con.execute("CREATE SCHEMA dev")
    elsewhere = prepare(
        con, "SELECT k, sum(v) AS s FROM lake.main.a GROUP BY k", "per_k", catalog="lake", db="dev"
    )
    refresh(con, elsewhere)
    con.execute("CREATE TABLE later_in_dev (x INTEGER)")
    con.close()

    def read_ahead(schemas: frozenset[warmup.Schema] | None) -> tuple[set[str], int]:
        """The schemas of the run logs learned, and the statements naming the dev schema."""
        monkeypatch.setattr(known_runs, "_known", {})
        con = _attached(tmp_path)
        try:
            con.execute("CALL enable_logging('QueryLog')")
            thread = warmup.on_open(con.cursor, frozenset({"per_k"}), schemas)
            assert thread is not None
            thread.join()
            logs = {
                str(schema)
                for schema, log_id in con.execute(
                    "SELECT s.schema_name, t.table_id FROM __ducklake_metadata_lake.ducklake_table "
                    "AS t JOIN __ducklake_metadata_lake.ducklake_schema AS s USING (schema_id) "
                    "WHERE t.table_name = '_duckstream_runs' AND t.end_snapshot IS NULL"
                ).fetchall()
                if any(key[1] == log_id for key in known_runs._known)
            }
            logged = con.execute("SELECT message FROM duckdb_logs").fetchall()
            return logs, sum('"dev"' in m and "duckdb_logs" not in m for (m,) in logged)
        finally:
            con.close()

    assert read_ahead(frozenset({("lake", "main")})) == ({"main"}, 0)
    everywhere, naming_dev = read_ahead(None)
    assert everywhere == {"main", "dev"} and naming_dev > 0


def test_the_process_exit_stops_reading_ahead_first(monkeypatch):
    """A ``dbt run`` can finish before its reading ahead does (every model unchanged): the
    exit interrupts the thread's queries and waits for it, since a daemon thread still inside
    DuckDB when the interpreter finalizes aborts the process (``stop_reading``)."""
    started = threading.Event()

    def long_read(con, catalog, models, schemas=None):
        started.set()
        for _ in range(3):  # each query the thread starts is interrupted in turn
            con.execute("SELECT count(*) FROM range(100_000_000_000)").fetchall()

    con = duckdb.connect()
    try:
        monkeypatch.setattr(warmup, "ducklake_catalogs", lambda cursor: {"lake"})
        monkeypatch.setattr(warmup, "read_ahead", long_read)
        thread = warmup.on_open(con.cursor, frozenset({"m"}))
        assert thread is not None and started.wait(10)
        warmup.stop_reading(wait=10)
        assert not thread.is_alive()
    finally:
        con.close()
