"""How a run behaves: no-op runs, pinning, rebuild triggers, atomicity, compaction."""

from __future__ import annotations

import re

import duckdb
import pytest

from dbt_duckstream import ConfigurationError, UnsupportedSQLError
from dbt_duckstream.compiler import parse_table
from dbt_duckstream.runtime import (
    breakdown,
    counts,
    decide,
    feeds,
    inlining,
    key_ranges,
    live_rows,
    preimages,
    runlog,
    window_rows,
)
from dbt_duckstream.runtime import lake as lake_module
from dbt_duckstream.runtime import run as runtime
from dbt_duckstream.runtime.decide import situation
from dbt_duckstream.runtime.runlog import PastRun

from .harness import Model, expire_before, record_writes
from .scenarios import flush_inlined_data

SQL = "SELECT k, sum(v) AS total, count(*) AS n FROM t GROUP BY k"


def snapshot(con) -> int:
    return lake_module.current_snapshot(con, "lake")


@pytest.fixture
def model(lake):
    lake.execute("CREATE TABLE t (k INTEGER, v INTEGER)")
    lake.execute("CREATE TABLE other (x INTEGER)")
    lake.execute("INSERT INTO t VALUES (1, 10), (1, 20), (2, 5)")
    m = Model(lake, "m", SQL)
    assert m.refresh().strategy == "initial"
    return m


def test_a_run_without_changes_writes_nothing(model, lake):
    before = snapshot(lake)
    result = model.refresh()
    assert (result.strategy, result.statements) == ("unchanged", [])
    lake.execute("INSERT INTO other VALUES (1)")  # a table the model does not read
    after_unrelated = snapshot(lake)
    assert model.refresh().strategy == "unchanged"
    assert snapshot(lake) == after_unrelated == before + 1


def test_a_run_commits_one_labelled_snapshot(model, lake):
    lake.execute("INSERT INTO t VALUES (3, 1)")
    before = snapshot(lake)
    model.refresh()
    assert snapshot(lake) == before + 1
    author, message = lake.execute(
        "SELECT author, commit_message FROM ducklake_snapshots('lake') ORDER BY snapshot_id DESC"
    ).fetchone()
    assert author == "dbt-duckstream" and "lake.main.m: incremental" in message


def test_changes_after_the_pinned_snapshot_wait_for_the_next_run(model, lake, monkeypatch):
    lake.execute("INSERT INTO t VALUES (3, 1)")
    pinned = snapshot(lake)
    lake.execute("INSERT INTO t VALUES (4, 1)")  # lands "while the run is going on"
    monkeypatch.setattr(runtime, "current_snapshot", lambda con, catalog: pinned)
    result = model.refresh()
    assert result.snapshots["lake"][1] == pinned
    assert lake.execute("SELECT count(*) FROM m WHERE k = 4").fetchone() == (0,)
    monkeypatch.undo()
    model.refresh()
    model.assert_consistent()


def test_a_read_column_altered_after_the_pin_rebuilds_the_next_run(model, lake, monkeypatch):
    lake.execute("INSERT INTO t VALUES (3, 1)")
    pinned = snapshot(lake)
    lake.execute("ALTER TABLE t ALTER v TYPE BIGINT")  # lands "while the run is going on"
    monkeypatch.setattr(runtime, "current_snapshot", lambda con, catalog: pinned)
    assert model.refresh().strategy == "incremental"
    (cursor,) = runlog.last(lake, model.plan.target).cursors
    assert ":v:int32" in cursor.columns  # as the run read them, at its pin
    monkeypatch.undo()
    result = model.refresh()
    assert result.strategy == "rebuild" and "columns read from source" in result.reason
    model.assert_consistent()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            "DROP TABLE t; CREATE TABLE t (k INTEGER, v INTEGER); INSERT INTO t VALUES (7, 7)",
            "dropped or recreated",
        ),
        (
            "ALTER TABLE t ALTER v TYPE BIGINT; INSERT INTO t VALUES (8, 8)",
            "the columns read from source lake.main.t changed",
        ),
    ],
)
def test_a_broken_change_feed_rebuilds(model, lake, change, reason):
    lake.execute(change)
    result = model.refresh()
    assert result.strategy == "rebuild" and reason in result.reason
    model.assert_consistent()


def test_columns_the_model_does_not_read_come_and_go_without_a_rebuild(model, lake):
    lake.execute("ALTER TABLE t ADD COLUMN note VARCHAR")
    lake.execute("INSERT INTO t VALUES (8, 8, 'x')")
    lake.execute("UPDATE t SET v = v + 1 WHERE k = 1")
    assert model.refresh().strategy == "incremental"
    model.assert_consistent()
    lake.execute("ALTER TABLE t DROP COLUMN note")
    lake.execute("DELETE FROM t WHERE k = 2")
    assert model.refresh().strategy == "incremental"
    model.assert_consistent()


def test_a_read_column_dropped_and_added_again_rebuilds(model, lake):
    lake.execute("ALTER TABLE t DROP COLUMN v")
    lake.execute("ALTER TABLE t ADD COLUMN v INTEGER")  # same name and type, every value NULL
    result = model.refresh()
    assert result.strategy == "rebuild" and "columns read from source" in result.reason
    model.assert_consistent()


def test_a_renamed_read_column_fails_naming_it(model, lake):
    lake.execute("ALTER TABLE t RENAME v TO value")
    with pytest.raises(ConfigurationError, match="v"):
        Model(lake, "m", SQL)


def test_a_model_table_written_by_hand_rebuilds(model, lake):
    lake.execute("DELETE FROM m WHERE k = 1")
    lake.execute("INSERT INTO t VALUES (5, 5)")
    result = model.refresh()
    assert result.strategy == "rebuild" and "written outside dbt-duckstream" in result.reason
    model.assert_consistent()
    lake.execute("COMMENT ON TABLE m IS 'documented'")  # dbt's persist_docs: not a write
    lake.execute("CALL ducklake_merge_adjacent_files('lake')")
    lake.execute("INSERT INTO t VALUES (6, 6)")
    assert model.refresh().strategy == "incremental"
    model.assert_consistent()


def test_flushing_a_models_inlined_deletions_is_not_a_write(model, lake):
    """DuckLake records ``ducklake_flush_inlined_data`` writing a table's inlined deletions to
    a delete file as a deletion from the table: a compaction, not a write by hand."""
    flush_inlined_data(lake)  # the model's rows into a file
    lake.execute("UPDATE t SET v = v + 1 WHERE k = 1")
    assert model.refresh().strategy == "incremental"  # deletes a file row: an inlined deletion
    flush_inlined_data(lake)
    lake.execute("INSERT INTO t VALUES (3, 3)")
    result = model.refresh()
    assert result.strategy == "incremental", result.reason
    model.assert_consistent()


def test_deletion_vectors_rebuild_with_the_reason(model, lake):
    lake.execute("CALL lake.set_option('write_deletion_vectors', true)")
    lake.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
    lake.execute("INSERT INTO t SELECT i % 3, i FROM range(100) r(i)")
    model.refresh()
    lake.execute("DELETE FROM t WHERE v < 10")
    result = model.refresh()
    assert result.strategy == "rebuild" and "deletion vectors" in result.reason
    model.assert_consistent()


def test_expired_snapshots_behind_the_cursor_rebuild(model, lake):
    lake.execute("INSERT INTO t VALUES (9, 9)")
    lake.execute("INSERT INTO t VALUES (10, 10)")
    lake.execute("CALL ducklake_expire_snapshots('lake', older_than => now())")
    result = model.refresh()
    assert result.strategy == "rebuild" and "expired" in result.reason
    model.assert_consistent()


def test_expired_snapshots_without_changes_to_the_sources_cost_no_rebuild(model, lake):
    committed = snapshot(lake)  # the model's last run
    for i in range(3):
        lake.execute(f"INSERT INTO other VALUES ({i})")  # not a source of the model
    lake.execute("CALL ducklake_merge_adjacent_files('lake')")
    expire_before(lake, committed)  # the cursor's snapshot expires, the run's commit stays
    before = snapshot(lake)
    result = model.refresh()
    assert result.strategy == "unchanged" and "expired" in result.reason
    assert snapshot(lake) == before + 1  # the cursor moved past the expired snapshots
    assert model.refresh().strategy == "unchanged"
    assert snapshot(lake) == before + 1
    lake.execute("INSERT INTO t VALUES (1, 1)")
    assert model.refresh().strategy == "incremental"
    model.assert_consistent()


def test_expired_snapshots_that_may_hide_writes_into_the_model_rebuild(model, lake):
    """With the cursor's snapshot expired, the snapshots since the model's last run must show
    that nothing but its runs wrote its tables: a write into the model after the expiry, or
    the expiry of the run's own commit (what came after it is gone), rebuilds."""
    lake.execute("CALL ducklake_expire_snapshots('lake', older_than => now())")
    lake.execute("INSERT INTO m SELECT * FROM m LIMIT 1")
    result = model.refresh()
    assert result.strategy == "rebuild" and "expired" in result.reason, result.reason
    model.assert_consistent()
    lake.execute("INSERT INTO other VALUES (1)")
    lake.execute("CALL ducklake_expire_snapshots('lake', older_than => now())")
    result = model.refresh()
    assert result.strategy == "rebuild" and "expired" in result.reason, result.reason
    model.assert_consistent()
    assert model.refresh().strategy == "unchanged"


def test_changed_model_sql_rebuilds(model, lake):
    changed = Model(lake, "m", SQL.replace("sum(v)", "max(v)"))
    result = changed.refresh()
    assert result.strategy == "rebuild" and "SQL changed" in result.reason
    changed.assert_consistent()


def test_full_refresh_rebuilds(model):
    assert model.refresh(full_refresh=True).strategy == "rebuild"
    model.assert_consistent()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM t JOIN other ON other.x = t.k JOIN t AS u ON u.k = t.k",
        "SELECT k, K, v AS k_1, k FROM t",
        "SELECT t.k, u.k, sum(t.v) FROM t JOIN t AS u USING (v) GROUP BY t.k, u.k",
    ],
)
def test_repeated_column_names_are_stored_as_create_table_as_stores_them(model, lake, sql):
    """A model's columns are named as dbt's table materialization of its SQL would name
    them: DuckDB gives a repeated name a suffix when it stores a query (``k``, ``k_1``)."""
    lake.execute("INSERT INTO other VALUES (1), (2)")
    lake.execute("CREATE TABLE lake.main.as_table AS " + sql)
    repeated = Model(lake, "r", sql)
    assert repeated.refresh().strategy == "initial"
    lake.execute("INSERT INTO t VALUES (1, 5), (2, 20)")
    lake.execute("DELETE FROM t WHERE v = 10")
    assert repeated.refresh().strategy == "incremental"
    repeated.assert_consistent()
    stored = lake_module.describe(lake, "lake.main.r")
    assert stored == lake_module.describe(lake, "lake.main.as_table")
    assert len({name.lower() for name, _ in stored}) == len(stored)


def test_a_model_reading_its_own_table_is_refused(model, lake):
    """The filter an ``incremental`` model keeps under ``is_incremental()``, left in place."""
    sql = "SELECT * FROM t WHERE k > (SELECT coalesce(max(k), 0) FROM lake.main.M)"
    with pytest.raises(UnsupportedSQLError, match=r"reads its own table lake\.main\.m"):
        Model(lake, "m", sql)


def test_sql_duckdb_cannot_plan_is_rejected_when_the_model_is_built(lake):
    """DuckDB 1.5.5 binds but cannot plan a correlated subquery over a FULL JOIN with a
    recursive CTE: the tree could maintain it, but nothing could recompute it."""
    lake.execute("CREATE TABLE t (k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO t VALUES (1, 10), (2, 5)")
    steps = (
        "WITH RECURSIVE p(n, i) AS (SELECT v, 0 FROM t UNION SELECT n + 1, i + 1 FROM p "
        "WHERE i < 2) SELECT n, i FROM p"
    )
    sql = (
        f"SELECT k FROM t WHERE NOT EXISTS (SELECT * FROM (SELECT a.k, b.n FROM t AS a "
        f"FULL OUTER JOIN ({steps}) AS b ON a.v = b.n) AS p WHERE p.n = t.k)"
    )
    with pytest.raises(UnsupportedSQLError, match="SQL that DuckDB itself cannot run") as raised:
        Model(lake, "m", sql).refresh()
    assert "Unsupported join type for flattening correlated subquery" in str(raised.value)
    assert lake_module.table_id(lake, parse_table("m", "lake", "main")) is None
    # the build wrote without inlining (``inlining``); its failure left the session as it was
    assert lake.execute(f"SELECT current_setting('{inlining.SETTING}')").fetchone() == (10,)


def test_a_crash_mid_run_leaves_model_and_cursor_as_they_were(model, lake, monkeypatch):
    lake.execute("UPDATE t SET v = 100 WHERE k = 1")
    lake.execute("DELETE FROM t WHERE k = 2")
    before_rows = sorted(lake.execute("SELECT * FROM m").fetchall())
    before_cursor = lake.execute("SELECT cursors FROM _duckstream_runs").fetchall()
    real = runtime.apply_statement

    def crash_on_insert(con, statement):
        if statement.startswith("INSERT INTO"):
            raise RuntimeError("simulated crash")
        return real(con, statement)

    monkeypatch.setattr(runtime, "apply_statement", crash_on_insert)
    with pytest.raises(RuntimeError, match="simulated crash"):
        model.refresh()
    assert sorted(lake.execute("SELECT * FROM m").fetchall()) == before_rows
    assert lake.execute("SELECT cursors FROM _duckstream_runs").fetchall() == before_cursor
    monkeypatch.undo()
    result = model.refresh()
    assert (result.strategy, result.rows_deleted) == ("incremental", 2)
    model.assert_consistent()


def test_a_retried_run_leaves_the_session_inlining_as_it_was(lake, monkeypatch):
    """An attempt that fails while its writes run without inlining (``inlining``) leaves the
    setting at 0; a retry whose writes keep inlining must not leave it so."""
    lake.execute("CREATE TABLE r (id INTEGER, x DOUBLE)")
    lake.execute("INSERT INTO r VALUES (1, 0.5)")
    model = Model(lake, "m", "SELECT id, x / 3 AS y FROM r")
    model.refresh()
    lake.execute("DELETE FROM r")
    real, failed, asked = runtime.apply_statement, [], []

    def conflict_once(con, statement):
        if not failed:
            failed.append(statement)
            raise duckdb.TransactionException("Transaction conflict - simulated")
        return real(con, statement)

    def floats_the_first_time(con, tables):
        asked.append(tables)
        return len(asked) == 1

    monkeypatch.setattr(runtime, "apply_statement", conflict_once)
    monkeypatch.setattr(runtime, "holds_floats", floats_the_first_time)
    assert model.refresh().strategy == "incremental"
    assert failed and len(asked) == 2
    assert lake.execute(f"SELECT current_setting('{inlining.SETTING}')").fetchone() == (10,)
    model.assert_consistent()


def test_compaction_and_rewrites_do_not_disturb_netting(model, lake):
    lake.execute("INSERT INTO t SELECT i % 4, i FROM range(2000) r(i)")
    lake.execute("INSERT INTO t SELECT i % 4, i FROM range(2000) r(i)")
    model.refresh()
    lake.execute("UPDATE t SET v = v + 1 WHERE v % 7 = 0")
    lake.execute("DELETE FROM t WHERE v % 11 = 0")
    lake.execute("CALL ducklake_merge_adjacent_files('lake')")
    lake.execute("CALL ducklake_rewrite_data_files('lake', delete_threshold => 0)")
    lake.execute("UPDATE t SET v = v + 1 WHERE v % 5 = 0")
    model.refresh()
    model.assert_consistent()


def test_flushing_inlined_deletions_is_not_a_change(model, lake):
    """DuckLake records a flush of inlined deletions as ``deleted_from_table``: of the
    sources (no work) and of the model's own tables (not a foreign write)."""
    flush_inlined_data(lake)
    lake.execute("DELETE FROM t WHERE v = 5")
    assert model.refresh().strategy == "incremental"  # retracts from file-backed state rows
    flush_inlined_data(lake)
    assert model.refresh().strategy == "unchanged"
    lake.execute("DELETE FROM t WHERE v = 10")
    flush_inlined_data(lake)
    result = model.refresh()
    assert (result.strategy, result.rows_deleted) == ("incremental", 1)
    model.assert_consistent()


def test_the_estimate_counts_rows_inlined_into_the_catalog(lake):
    """Small inserts and deletions live in DuckLake's catalog, not in files: they count."""
    lake.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
    lake.execute("CREATE TABLE f (k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO f SELECT i % 10, i FROM range(1000) AS r(i)")  # one data file
    lake.execute("CALL lake.set_option('data_inlining_row_limit', 100)")
    m = Model(lake, "per_key_f", "SELECT k, sum(v) AS total FROM f GROUP BY k")
    assert m.refresh().strategy == "initial"
    lake.execute("INSERT INTO f VALUES (1, -1), (2, -2), (3, -3)")  # inlined rows
    lake.execute("DELETE FROM f WHERE v = -2")  # an inlined row's deletion
    lake.execute("DELETE FROM f WHERE v IN (10, 20)")  # file rows' deletions, inlined
    result = m.refresh(rebuild_above=1e9)
    assert result.strategy == "incremental"
    # 3 inserted, 1 inlined row deleted, 2 file rows deleted
    assert "up to 6 rows changed" in result.reason, result.reason
    m.assert_consistent()


def test_changes_dated_before_the_cursor_rebuild_once_maintenance_is_chosen(
    model, lake, monkeypatch
):
    """A later commit that dates its changes before the cursor (DuckLake, concurrent commits)
    leaves the source at the cursor with other rows than the model read there. The row count
    check that finds it is spent only when the run would maintain."""
    counted = []

    def shifted(con, reads):
        counted.append(reads)
        return [n + 1 for n in live_rows.live_row_counts(con, reads)]

    monkeypatch.setattr(counts, "live_row_counts", shifted)
    lake.execute("INSERT INTO t VALUES (3, 1)")
    assert model.refresh(rebuild_above=0).strategy == "rebuild"
    lake.execute("INSERT INTO t VALUES (4, 1)")
    assert model.refresh().strategy == "initial"  # the state that rebuild dropped
    assert counted == []
    lake.execute("INSERT INTO t VALUES (5, 1)")
    result = model.refresh()
    assert result.strategy == "rebuild" and "no longer holds" in result.reason, result.reason
    assert counted
    model.assert_consistent()


def test_models_share_the_count_at_a_span_start_until_the_table_changes_again(
    model, lake, monkeypatch
):
    """The check above counts the source at the start of the delta's span; the models of a
    run share that span, and the count, unless a commit after the counting run lists the
    table (a commit that dated its changes into the past would)."""
    counted: list[list[tuple[str, int]]] = []

    def recording(con, reads):
        counted.append([(read.table.key, read.snapshot) for read in reads])
        return live_rows.live_row_counts(con, reads)

    monkeypatch.setattr(counts, "live_row_counts", recording)
    twin = Model(lake, "twin", "SELECT k, v FROM t WHERE v > 0")
    assert twin.refresh().strategy == "initial"
    lake.execute("INSERT INTO t VALUES (3, 1)")
    start = snapshot(lake) - 1
    counted.clear()
    assert model.refresh().strategy == "incremental"
    assert counted == [[("lake.main.t", start)]]
    assert twin.refresh().strategy == "incremental"
    assert counted == [[("lake.main.t", start)]], "the twin counts t at the same snapshot again"

    lake.execute("INSERT INTO t VALUES (4, 1)")
    start = snapshot(lake) - 1
    assert model.refresh().strategy == "incremental"
    assert counted[-1] == [("lake.main.t", start)]
    lake.execute("INSERT INTO t VALUES (5, 1)")  # listed after the model's pin
    assert twin.refresh().strategy == "incremental"
    assert counted[-1] == [("lake.main.t", start)] and len(counted) == 3
    model.refresh()
    model.assert_consistent()
    twin.assert_consistent()


def test_models_share_the_estimates_metadata_of_a_window(model, lake, monkeypatch):
    """What a window changed in a source, and the rows a join term's narrowed read meets, are
    read once per process: a second model over the same window reuses them; another window,
    or another table, reads again."""
    windows: list[set[int]] = []
    narrowed: list[int] = []
    read_window, read_narrowed = window_rows._read, key_ranges._read

    def recording_window(con, catalog, window, tables):
        windows.append(set(tables))
        return read_window(con, catalog, window, tables)

    def recording_narrowed(con, catalog, window, reads, ids):
        narrowed.append(len(reads))
        return read_narrowed(con, catalog, window, reads, ids)

    monkeypatch.setattr(window_rows, "_read", recording_window)
    monkeypatch.setattr(key_ranges, "_read", recording_narrowed)
    lake.execute("INSERT INTO other VALUES (1), (2)")
    joined = [
        Model(lake, name, "SELECT t.k, t.v, other.x FROM t JOIN other ON t.k = other.x")
        for name in ("j1", "j2")
    ]
    for m in joined:
        assert m.refresh().strategy == "initial"
    twin = Model(lake, "twin", SQL)
    assert twin.refresh().strategy == "initial"
    windows.clear()
    lake.execute("INSERT INTO t VALUES (2, 7), (3, 1)")
    for m in [model, twin, *joined]:
        assert m.refresh(rebuild_above=1e9).strategy == "incremental"
        m.assert_consistent()
    assert len(windows) == 1 and len(narrowed) == 1, (windows, narrowed)
    lake.execute("INSERT INTO other VALUES (3)")  # another window, another table
    for m in joined:
        assert m.refresh(rebuild_above=1e9).strategy == "incremental"
        m.assert_consistent()
    assert len(windows) == 2 and len(narrowed) == 2, (windows, narrowed)


def recorded_counts_at_pins(monkeypatch) -> list[list[tuple[str, int]]]:
    """The counts a run takes for its cursors, by statement: (source, snapshot) each."""
    counted: list[list[tuple[str, int]]] = []

    def recording(con, reads):
        if reads:
            counted.append([(table.key, snapshot) for table, snapshot in reads])
        return lake_module.row_counts(con, reads)

    monkeypatch.setattr(runtime, "row_counts", recording)
    monkeypatch.setattr(counts, "row_counts", recording)
    return counted


def test_a_rebuild_chosen_for_cost_counts_only_the_sources_its_window_changed(
    model, lake, monkeypatch
):
    """Its cursors keep the recorded count and columns of a source the window did not change,
    and count the others at the pin, in one statement: each must be what a count finds."""
    lake.execute("INSERT INTO other VALUES (1), (2)")
    joined = Model(
        lake,
        "joined",
        "SELECT t.k, sum(t.v) AS total FROM t JOIN other ON t.k = other.x GROUP BY t.k",
    )
    assert joined.refresh().strategy == "initial"
    counted = recorded_counts_at_pins(monkeypatch)
    lake.execute("INSERT INTO t VALUES (2, 7), (3, 1)")
    result = joined.refresh(rebuild_above=0)
    assert (result.strategy, "cheaper than maintenance" in result.reason) == ("rebuild", True)
    pin = snapshot(lake) - 1  # the run's own commit follows its pin
    assert counted == [[("lake.main.t", pin)]]
    entry = runlog.last(lake, joined.plan.target)
    assert entry is not None
    for cursor in entry.cursors:
        source = next(s for s in joined.plan.sources if s.key == cursor.source)
        assert cursor.snapshot_id == pin
        assert cursor.rows == lake_module.row_counts(lake, [(source, pin)])[0], cursor
        reads = joined.plan.source_reads[source.key]
        assert cursor.columns == lake_module.read_columns(
            lake, "lake", cursor.table_id, reads, at=pin
        )
    lake.execute("INSERT INTO other VALUES (3)")
    assert joined.refresh().strategy == "initial"  # the state that the rebuild dropped
    lake.execute("DELETE FROM t WHERE v = 7")
    assert joined.refresh().strategy == "incremental"
    joined.assert_consistent()


def test_models_rebuilding_after_the_same_changes_share_the_count_at_their_pins(
    model, lake, monkeypatch
):
    """A rebuild chosen for cost records a changed source's count at its pin: the count at
    the last snapshot of its window that lists the source, which the next model rebuilding
    after the same changes takes without counting, until a commit lists the source again; a
    maintenance run knows it from its delta, and keeps it for them too."""
    counted = recorded_counts_at_pins(monkeypatch)
    twin = Model(lake, "twin", "SELECT k, count(*) AS n FROM t GROUP BY k")
    assert twin.refresh().strategy == "initial"
    counted.clear()

    def rebuilt(m: Model) -> int:
        result = m.refresh(rebuild_above=0)
        assert (result.strategy, "cheaper than maintenance" in result.reason) == ("rebuild", True)
        entry = runlog.last(lake, m.plan.target)
        assert entry is not None
        (cursor,) = entry.cursors
        (truth,) = lake_module.row_counts(lake, [(m.plan.sources[0], cursor.snapshot_id)])
        assert cursor.rows == truth, "the cursor's count is the source's count at its pin"
        m.assert_consistent()
        return cursor.snapshot_id

    lake.execute("INSERT INTO t VALUES (3, 1), (3, 2)")
    first = rebuilt(model)
    assert counted == [[("lake.main.t", first)]]
    second = rebuilt(twin)
    assert second > first and len(counted) == 1, "the twin counts t again"
    lake.execute("DELETE FROM t WHERE k = 1")  # listed: both count again, once
    assert rebuilt(model) != rebuilt(twin) and len(counted) == 2, counted
    lake.execute("INSERT INTO t VALUES (4, 4)")
    assert model.refresh(rebuild_above=1e9).strategy == "initial"  # its state, dropped
    lake.execute("INSERT INTO t VALUES (5, 5)")
    before = len(counted)
    # maintained: knows its count at the pin from its delta, and the twin takes it
    assert model.refresh(rebuild_above=1e9).strategy == "incremental"
    rebuilt(twin)
    assert len(counted) == before, counted[before:]
    lake.execute("DELETE FROM t WHERE k = 5")
    assert model.refresh(rebuild_above=1e9).strategy == "incremental"
    assert twin.refresh(rebuild_above=1e9).strategy == "initial"
    lake.execute("INSERT INTO t VALUES (6, 6)")
    for m in (model, twin):  # their span checks meet the counts recorded above
        assert m.refresh(rebuild_above=1e9).strategy == "incremental"
        m.assert_consistent()


def test_the_correction_weighs_measured_seconds_per_estimated_row():
    def runs(*rows):
        return [PastRun(strategy, seconds, estimated) for strategy, seconds, estimated in rows]

    learned = decide.learned_correction
    # maintenance measured at 1 ms per 1,000 estimated rows, rebuilds at 1 ms per 10,000
    maintained = [("incremental", 0.06, 60_000), ("incremental", 0.03, 30_000)]
    assert learned(runs(*maintained, ("rebuild", 0.01, 100_000))) == pytest.approx(10)
    # builds stand in for chosen rebuilds only when there are none
    assert learned(runs(*maintained, ("initial", 0.1, 100_000))) == pytest.approx(1)
    both = runs(*maintained, ("rebuild", 0.01, 100_000), ("initial", 0.1, 100_000))
    assert learned(both) == pytest.approx(10)
    # too few measurements, or none with an estimate: the estimate as it is
    assert learned(runs(maintained[0], ("rebuild", 0.01, 100_000))) == 1.0
    assert learned(runs(*maintained, ("rebuild", 0.01, None))) == 1.0
    # small batches, far from the choice, cost the run's fixed cost: they teach nothing
    small = [("incremental", 0.02, 2000), ("incremental", 0.02, 1000)]
    assert learned(runs(*small, *maintained, ("rebuild", 0.01, 100_000))) == pytest.approx(10)
    assert learned(runs(*small, maintained[0], ("rebuild", 0.01, 100_000))) == 1.0
    # bounded: one slow run on a loaded machine never swings the choice without limit
    assert learned(runs(*maintained, ("rebuild", 1e-9, 100_000))) == 16.0


def test_the_correction_learns_from_batches_of_the_windows_scale():
    """Single orders near the choice cost far less per estimated row than 0.1% batches (their
    keys fall in few row groups): what they teach must not price the large batches."""
    learned = decide.learned_correction
    rebuilt = PastRun("rebuild", 0.01, 100_000, 50_000)
    # one-order runs: 1 ms per 10,000 estimated rows; 0.1% batches: 1 ms per 1,000
    single = [PastRun("incremental", 0.003, 30_000, 12), PastRun("incremental", 0.003, 30_000, 9)]
    batches = [
        PastRun("incremental", 0.04, 40_000, 40_000),
        PastRun("incremental", 0.06, 60_000, 60_000),
    ]
    past = [*single, *batches, rebuilt]
    assert learned(past, 11) == pytest.approx(1)
    assert learned(past, 50_000) == pytest.approx(10)
    # a batch of a scale no run measured: the estimate as it is
    assert learned(past, 1_000) == 1.0
    assert learned([*single, rebuilt], 50_000) == 1.0
    # runs logged before batches were counted teach only windows not counted either
    uncounted = [PastRun(p.strategy, p.seconds, p.estimated_rows) for p in batches]
    assert learned([*uncounted, rebuilt], 50_000) == 1.0
    assert learned([*uncounted, rebuilt]) == pytest.approx(10)


def test_the_cost_choice_learns_from_the_models_past_runs(lake):
    lake.execute("CREATE TABLE big (k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO big SELECT i % 10, i FROM range(100000) AS r(i)")
    m = Model(lake, "per_key", "SELECT k, sum(v) AS total FROM big GROUP BY k")
    assert m.refresh().strategy == "initial"
    for batch in range(3):
        lake.execute(f"INSERT INTO big VALUES ({batch}, {batch})")
        assert m.refresh(rebuild_above=0).strategy == "rebuild"
        lake.execute(f"INSERT INTO big VALUES ({batch}, -{batch})")
        assert m.refresh().strategy == "initial"  # its state, which the rebuild dropped
        # batches whose maintenance is estimated near a rebuild's cost: they teach the choice
        lake.execute("INSERT INTO big SELECT i % 10, i FROM range(3000) AS r(i)")
        result = m.refresh(rebuild_above=1e9)  # estimated, always maintained
        assert result.strategy == "incremental"
    # two maintained runs and three rebuilds measured: the estimate is corrected
    assert "priced x" in result.reason, result.reason
    past = runlog.last(lake, m.plan.target).past
    assert [p.strategy for p in past[:3]] == ["incremental", "initial", "rebuild"]
    assert all(p.estimated_rows for p in past)
    assert past[0].changed_rows == 3000
    m.assert_consistent()


def test_a_run_log_of_an_earlier_release_gains_the_new_columns(model, lake):
    log = runlog.log_table(model.plan.target).sql()
    lake.execute(f"ALTER TABLE {log} DROP COLUMN estimated_rows")
    lake.execute("INSERT INTO t VALUES (7, 7)")
    assert model.refresh(rebuild_above=1e9).strategy == "incremental"
    found = lake.execute(f"SELECT count(estimated_rows), max(changed_rows) FROM {log}")
    assert found.fetchone() == (1, 1)
    model.assert_consistent()


@pytest.mark.parametrize("windows", [1, 2], ids=["a run per batch", "two batches a run"])
def test_the_estimate_counts_only_the_deletions_of_its_window(lake, windows):
    """DuckLake keeps one delete file per data file and rewrites it with every earlier
    deletion at each batch: its metadata count grows with every batch, the window's does not."""
    lake.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
    lake.execute("CREATE TABLE f (k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO f SELECT i % 10, i FROM range(10000) AS r(i)")  # one data file
    m = Model(lake, "per_key_f", "SELECT k, sum(v) AS total FROM f GROUP BY k")
    assert m.refresh().strategy == "initial"
    for batch in range(6):
        lake.execute(f"DELETE FROM f WHERE v % 100 = {batch}")  # 100 rows each
        if batch % windows == windows - 1:
            result = m.refresh(rebuild_above=1e9)
            assert result.strategy == "incremental"
            assert f"up to {100 * windows} rows changed" in result.reason, result.reason
    m.assert_consistent()


def _estimated_share(reason: str) -> int:
    return int(reason.split("estimated maintenance cost ")[1].split("%")[0])


@pytest.mark.parametrize("inlined", [False, True])
def test_a_join_estimate_counts_the_files_the_delta_keys_can_meet(lake, inlined):
    """New keys meet none of the old files of the other input, which the join's narrowed
    read skips; keys spread over its key range meet every file, which it reads."""
    lake.execute(f"CALL lake.set_option('data_inlining_row_limit', {100 if inlined else 0})")
    lake.execute("CREATE TABLE facts (k INTEGER, v INTEGER)")
    lake.execute("CREATE TABLE dims (k INTEGER, name VARCHAR)")
    for part in range(3):  # three data files of disjoint key ranges
        low, high = part * 10_000, (part + 1) * 10_000
        lake.execute(f"INSERT INTO facts SELECT i, i FROM range({low}, {high}) AS r(i)")
    lake.execute("INSERT INTO dims SELECT i, 'n' || i FROM range(30_000) AS r(i)")
    m = Model(lake, "joined", "SELECT d.name, f.v FROM facts AS f JOIN dims AS d ON f.k = d.k")
    assert m.refresh().strategy == "initial"

    lake.execute("BEGIN")
    lake.execute("INSERT INTO dims SELECT i, 'n' || i FROM range(30_000, 30_010) AS r(i)")
    lake.execute("INSERT INTO facts SELECT i, i FROM range(30_000, 30_010) AS r(i)")
    lake.execute("COMMIT")
    new_keys = m.refresh(rebuild_above=1.0)
    assert new_keys.strategy == "incremental"
    assert _estimated_share(new_keys.reason) == 0, new_keys.reason

    lake.execute("BEGIN")
    lake.execute("INSERT INTO dims SELECT i, 'n' || i FROM range(30_010, 30_020) AS r(i)")
    lake.execute("INSERT INTO facts SELECT i * 3_000, i FROM range(10) AS r(i)")  # every file
    lake.execute("COMMIT")
    spread = m.refresh(rebuild_above=1.0)
    # dims's one file is met: every row of it probed, the row groups holding a key read whole
    # (``costs.probed_rows``): half its rows as a rebuild reads them, beside the model's rows
    assert _estimated_share(spread.reason) >= 2, spread.reason
    m.assert_consistent()


def test_a_subquery_change_is_priced_by_the_outer_files_its_keys_can_meet(lake):
    """A change to the subquery of ``IN (... GROUP BY ... HAVING ...)`` (TPC-H Q18's shape)
    reads the outer input narrowed to its keys: new keys meet none of the outer files, keys
    spread over their range meet every one."""
    lake.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
    lake.execute("CREATE TABLE orders (k INTEGER, v INTEGER)")
    lake.execute("CREATE TABLE items (k INTEGER, q INTEGER)")
    for part in range(3):  # three data files of disjoint key ranges
        low, high = part * 10_000, (part + 1) * 10_000
        lake.execute(f"INSERT INTO orders SELECT i, i FROM range({low}, {high}) AS r(i)")
        lake.execute(f"INSERT INTO items SELECT i, i % 7 FROM range({low}, {high}) AS r(i)")
    m = Model(
        lake,
        "big_orders",
        "SELECT o.k, o.v FROM orders AS o "
        "WHERE o.k IN (SELECT k FROM items GROUP BY k HAVING sum(q) > 10)",
    )
    assert m.refresh().strategy == "initial"

    lake.execute("INSERT INTO items SELECT 30_000 + i % 5, 20 FROM range(10) AS r(i)")
    new_keys = m.refresh(rebuild_above=1.0)
    assert new_keys.strategy == "incremental"
    assert _estimated_share(new_keys.reason) == 0, new_keys.reason

    lake.execute("INSERT INTO items SELECT i * 3_000, 20 FROM range(10) AS r(i)")  # every file
    spread = m.refresh(rebuild_above=1.0)
    assert _estimated_share(spread.reason) >= 20, spread.reason
    m.assert_consistent()


def test_a_batch_costlier_to_maintain_than_to_rebuild_rebuilds(lake):
    lake.execute("CREATE TABLE big (k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO big SELECT i % 10, i FROM range(100000) AS r(i)")
    m = Model(lake, "per_key", "SELECT k, sum(v) AS total FROM big GROUP BY k")
    rows = Model(lake, "rows", "SELECT k, v FROM big WHERE v % 3 = 0")
    assert m.refresh().strategy == "initial"
    assert rows.refresh().strategy == "initial"

    lake.execute("INSERT INTO big SELECT i % 10, i FROM range(100000, 100050) AS r(i)")
    small = m.refresh(rebuild_above=1.0)
    assert small.strategy == "incremental"
    assert "up to 50 rows changed" in small.reason, small.reason

    # deletes scattered through the big file: their pre-images are read from every row group
    lake.execute("DELETE FROM big WHERE v % 7 = 0")
    table = lake_module.table_id(lake, m.plan.target)
    large = m.refresh(rebuild_above=1.0)
    assert large.strategy == "rebuild"
    assert "cheaper than maintenance" in large.reason, large.reason
    assert lake_module.table_id(lake, m.plan.target) == table  # refilled, not recreated
    # its rows computed before its write transaction, which copies them; then dropped
    copied = 'INSERT INTO "lake"."main"."per_key" SELECT * FROM temp.main."_ivm_per_key_refill"'
    assert copied in large.statements, large.statements
    temporary = "SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '_ivm_%_refill'"
    assert lake.execute(temporary).fetchone() == (0,)
    (state,) = m.plan.state_tables  # the sums per key: dropped, not refilled
    assert lake_module.table_id(lake, state) is None
    m.assert_consistent()
    rows.refresh(rebuild_above=1.0)  # 14k of 100k rows deleted: either way is close
    rows.assert_consistent()
    lake.execute("DELETE FROM big WHERE v % 2 = 0")  # most of the rows left: rebuild
    assert rows.refresh(rebuild_above=1.0).strategy == "rebuild"
    rows.assert_consistent()

    lake.execute("DELETE FROM big WHERE v % 11 = 0")
    built = m.refresh(rebuild_above=None)  # maintenance needs the state: built first
    assert (built.strategy, built.reason) == ("initial", "its state tables are missing")
    m.assert_consistent()
    lake.execute("DELETE FROM big WHERE v % 13 = 0")
    assert m.refresh(rebuild_above=None).strategy == "incremental"
    m.assert_consistent()


def test_a_model_that_usually_maintains_keeps_its_state_through_a_rebuild_for_cost(lake):
    """A rebuild chosen for cost refills a model that mostly rebuilds, and drops its state;
    a model that mostly maintains builds its state too, so its next small batch maintains
    instead of building the state whole."""
    lake.execute("CREATE TABLE big (k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO big SELECT i % 10, i FROM range(100000) AS r(i)")
    m = Model(lake, "per_key", "SELECT k, sum(v) AS total FROM big GROUP BY k")
    assert m.refresh().strategy == "initial"
    for batch in range(3):
        lake.execute(f"INSERT INTO big VALUES ({batch}, {200_000 + batch})")
        assert m.refresh(rebuild_above=1.0).strategy == "incremental"
    lake.execute("DELETE FROM big WHERE v % 7 = 0")  # pre-images from every row group
    large = m.refresh(rebuild_above=1.0)
    assert large.strategy == "rebuild", large.reason
    assert "its state is built too" in large.reason, large.reason
    (state,) = m.plan.state_tables
    assert lake_module.table_id(lake, state) is not None
    m.assert_consistent()
    lake.execute("INSERT INTO big VALUES (3, 300000)")
    small = m.refresh(rebuild_above=1.0)
    assert small.strategy == "incremental", small.reason
    m.assert_consistent()


def test_a_model_that_usually_maintains_prices_the_rebuild_with_its_state(lake):
    """Such a model's rebuild writes its state again: at 300,000 groups of state behind a
    one-row model, a batch of 85,000 updated rows costs a bare rebuild's several times over,
    but a fraction of a rebuild that writes the state too, so it is maintained."""
    lake.execute("CREATE TABLE big (k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO big SELECT i, i FROM range(300000) AS r(i)")
    per_key = "SELECT k, sum(v) AS total FROM big GROUP BY k"
    m = Model(lake, "groups", f"SELECT count(*) AS groups, sum(total) AS total FROM ({per_key})")
    assert m.refresh().strategy == "initial"
    for batch in range(3):
        lake.execute(f"INSERT INTO big VALUES ({batch}, {batch})")
        assert m.refresh(rebuild_above=1.0).strategy == "incremental"
    lake.execute("UPDATE big SET v = v + 1 WHERE k % 7 = 0")
    large = m.refresh(rebuild_above=1.0)
    assert large.strategy == "incremental", large.reason
    assert "of a rebuild's with its state" in large.reason, large.reason
    m.assert_consistent()


def test_status_lists_each_model_with_its_last_run_and_lag(model, lake):
    from dbt_duckstream.runtime.status import format_status, status

    lake.execute("INSERT INTO t VALUES (4, 4)")
    model.refresh()
    lake.execute("INSERT INTO t VALUES (5, 5)")
    lake.execute("INSERT INTO other VALUES (1)")  # not a source of the model
    (row,) = status(lake, "lake", "main")
    assert (row.model, row.last_run.strategy, row.behind) == ("lake.main.m", "incremental", 1)
    assert (row.last_run.rows_inserted, row.last_run.rows_deleted) == (1, 0)
    text = format_status([row])
    assert "lake.main.m" in text and "incremental" in text


def test_a_run_that_another_run_of_the_model_overtook_reruns(model, lake, monkeypatch, caplog):
    """Between a run's decision and its write, another run of the same model commits: the
    first must not apply its now stale delta a second time; it reruns whole."""
    import logging

    from dbt_duckstream import refresh

    lake.execute("INSERT INTO t VALUES (1, 1), (3, 30)")
    overtaken: list[bool] = []
    original = runtime._feed_requests

    def another_run_commits_first(*args, **kwargs):
        if not overtaken:
            overtaken.append(True)
            other = lake.cursor()
            other.execute("USE lake")
            assert refresh(other, model.plan, rebuild_above=None).strategy == "incremental"
        return original(*args, **kwargs)

    monkeypatch.setattr(runtime, "_feed_requests", another_run_commits_first)
    with caplog.at_level(logging.WARNING, logger="dbt_duckstream"):
        result = model.refresh()
    assert "another run of lake.main.m committed while this one was deciding" in caplog.text
    assert result.strategy == "unchanged"  # the rerun finds the model up to date
    model.assert_consistent()
    runs = lake.execute("SELECT run FROM _duckstream_runs WHERE model = 'm' ORDER BY run")
    assert [r for (r,) in runs.fetchall()] == [1, 2]


def test_a_run_overtaken_after_computing_its_delta_redoes_all(model, lake, monkeypatch, caplog):
    """Another run of the same model commits after this run computed its delta and before it
    writes: the delta, computed from the model's old rows, must not be applied; the run
    redoes everything, and finds the model up to date."""
    import logging

    from dbt_duckstream import refresh

    lake.execute("INSERT INTO t VALUES (1, 1), (3, 30)")
    overtaken: list[bool] = []
    original = runtime.compute

    def another_run_commits_after(*args):
        found = original(*args)
        if not overtaken:
            overtaken.append(True)
            other = lake.cursor()
            other.execute("USE lake")
            assert refresh(other, model.plan, rebuild_above=None).strategy == "incremental"
        return found

    monkeypatch.setattr(runtime, "compute", another_run_commits_after)
    with caplog.at_level(logging.WARNING, logger="dbt_duckstream"):
        result = model.refresh()
    assert "another run of lake.main.m committed while this one was deciding" in caplog.text
    assert result.strategy == "unchanged"
    model.assert_consistent()
    runs = lake.execute("SELECT run FROM _duckstream_runs WHERE model = 'm' ORDER BY run")
    assert [r for (r,) in runs.fetchall()] == [1, 2]


@pytest.mark.parametrize("ended_rows", ["from_files", "by_time_travel"])
def test_rows_sharing_a_row_id_never_retract_the_wrong_row(lake, caplog, monkeypatch, ended_rows):
    """DuckLake 0.4 commits rows inserted and then updated (with file-backed rows) in one
    transaction under transaction-local row ids from 10^18, and hands the same ids out again
    in a later such transaction: two live rows then share a row id. A deletion of one of them
    must not retract the other (it did, found by the SQLite concurrency test). Read at its
    position in its file, the deleted row is the right one; read by time travel under its row
    id, it is ambiguous, and the run rebuilds."""
    import logging

    if ended_rows == "by_time_travel":
        unread = preimages.EndedRows(None, "as if the layout were unsupported")
        monkeypatch.setattr(preimages, "ended_rows", lambda *args: unread)
    lake.execute("CREATE TABLE f (id INTEGER, v INTEGER)")
    lake.execute("INSERT INTO f SELECT range, 0 FROM range(300)")
    m = Model(lake, "ids", "SELECT id, v FROM f")
    assert m.refresh().strategy == "initial"
    for new in (1000, 2000):  # each transaction leaks row id 10^18 (to the updated row)
        lake.execute("BEGIN")
        lake.execute(f"INSERT INTO f VALUES ({new}, 1), ({new + 1}, 1)")
        lake.execute("UPDATE f SET v = v + 1 WHERE id % 10 = 0")
        lake.execute("COMMIT")
    shared = lake.execute("SELECT count(*) - count(DISTINCT rowid) FROM f").fetchone()
    assert shared == (1,), "DuckLake no longer leaks row ids: this guard can go"
    assert m.refresh().strategy == "incremental"
    m.assert_consistent()
    lake.execute("DELETE FROM f WHERE id = 2000")  # row id 10^18, which id 1000 has too
    with caplog.at_level(logging.WARNING, logger="dbt_duckstream"):
        result = m.refresh()
    if ended_rows == "from_files":
        assert result.strategy == "incremental", result.reason
    else:
        assert result.strategy == "rebuild", result.reason
        assert "two live rows under one row id" in result.reason
        assert "rebuilds" in caplog.text
    m.assert_consistent()


def test_a_process_reads_a_models_run_log_once_while_only_its_own_runs_write_it(
    model, lake, monkeypatch
):
    """The latest run a process wrote is the one it finds next time, without reading the log:
    the lake's snapshot metadata shows that only its own commit wrote the model's runs."""
    reads: list[str] = []
    original = runlog.latest_runs

    def counted(con, target):
        reads.append(target.name)
        return original(con, target)

    monkeypatch.setattr(runlog, "latest_runs", counted)
    other = Model(lake, "other_m", "SELECT k, count(*) AS n FROM t GROUP BY k")
    assert other.refresh().strategy == "initial"  # another model's runs: not this model's
    assert reads == ["other_m"]  # its first run: a model the process has not seen yet
    reads.clear()
    for round_ in range(3):
        lake.execute(f"INSERT INTO t VALUES ({round_}, 1)")
        assert model.refresh().strategy == "incremental"
        assert other.refresh().strategy == "incremental"
        assert model.refresh().strategy == "unchanged"
    assert reads == []
    model.assert_consistent()
    lake.execute("DELETE FROM _duckstream_runs WHERE model = 'm'")  # by hand
    assert model.refresh().strategy == "initial"
    assert reads == ["m"]
    model.assert_consistent()


def test_a_run_of_the_model_in_another_process_moves_its_cursor_here_too(model, lake, monkeypatch):
    """Two dbt processes maintain one model by turns (each process keeps what it knows of the
    run log, ``known_runs``): each finds the other's run in the log; applying a window again
    would count its changes twice."""
    from dbt_duckstream.runtime import known_runs

    memories: list[dict] = [{}, {}]
    for round_ in range(4):
        monkeypatch.setattr(known_runs, "_known", memories[round_ % 2])
        lake.execute(f"INSERT INTO t VALUES ({round_ % 3}, {round_})")
        result = model.refresh()
        assert result.strategy == "incremental", result.summary()
        model.assert_consistent()


def test_a_model_over_another_lakes_sources_reads_that_lake_only_when_it_maintains(
    model, lake, tmp_path, monkeypatch
):
    """Feeds and span counts tell lakes apart by their identity; a run that finds nothing to
    do reads only its own lake's (``known_runs``), one that maintains reads the other's too."""
    lake_module.attach_lake(
        lake, str(tmp_path / "far.ducklake"), alias="far", data_path=str(tmp_path)
    )
    try:
        lake.execute("CREATE TABLE far.main.u (k INTEGER, w INTEGER)")
        lake.execute("INSERT INTO far.main.u VALUES (1, 3), (2, 4), (2, 4)")
        joined = Model(
            lake,
            "joined",
            "SELECT t.k, sum(t.v * u.w) AS total, count(*) AS n "
            "FROM t JOIN far.main.u AS u ON t.k = u.k GROUP BY t.k",
        )
        assert joined.refresh().strategy == "initial"
        read: list[str] = []

        def identity(con, catalog):
            read.append(catalog)
            return lake_module.lake_identity(con, catalog)

        monkeypatch.setattr(runtime, "lake_identity", identity)
        monkeypatch.setattr(situation, "lake_identity", identity)
        monkeypatch.setattr(feeds, "lake_identity", identity)
        assert joined.refresh().strategy == "unchanged"
        assert read == ["lake"]
        for change, lakes in [
            ("INSERT INTO far.main.u VALUES (1, 5)", {"lake", "far"}),
            ("DELETE FROM t WHERE v = 5", {"lake"}),
        ]:
            lake.execute(change)
            read.clear()
            assert joined.refresh().strategy == "incremental"
            joined.assert_consistent()
            assert set(read) == lakes, change
    finally:
        lake.execute("DETACH far")


def test_a_keyed_model_with_a_string_key_deletes_by_its_narrow_columns(lake, monkeypatch):
    """A GROUP BY whose key holds a string deletes the groups it changes by its narrow
    columns, as a bag model does; the delete by every column runs only where those leave
    some row undecided (two groups alike but for their name)."""
    lake.execute("CREATE TABLE t (k INTEGER, name VARCHAR, v INTEGER)")
    lake.execute("INSERT INTO t VALUES (1, 'a', 1), (1, 'b', 1), (2, 'c', 5), (3, NULL, 2)")
    model = Model(lake, "m", "SELECT k, name, sum(v) AS s, count(*) AS n FROM t GROUP BY k, name")
    model.refresh()
    executed = record_writes(monkeypatch)

    def model_deletes() -> list[str]:
        return [
            s
            for s in executed
            if s.startswith("DELETE FROM") and "_duckstream_state" not in s.split(" WHERE")[0]
        ]

    lake.execute("UPDATE t SET v = 7 WHERE k = 2; INSERT INTO t VALUES (3, NULL, 1)")
    result = model.refresh()
    assert (result.strategy, result.rows_deleted) == ("incremental", 2)
    (delete,) = model_deletes()
    assert "per_value" in delete, "told apart by k, s and n alone"
    model.assert_consistent()
    # one of two groups alike but for their name changes: k, s and n leave it undecided
    executed.clear()
    lake.execute("UPDATE t SET v = 3 WHERE name = 'b'")
    result = model.refresh()
    assert (result.strategy, result.rows_deleted) == ("incremental", 1)
    narrow, rest = model_deletes()
    assert "per_value" in narrow and '"name" IS NOT DISTINCT FROM' in rest
    model.assert_consistent()


def test_a_bag_model_deletes_by_its_narrow_columns_where_they_suffice(lake):
    """Where the model holds as many rows with a retracted row's narrow values as the delta
    retracts, those rows go without their other columns read; where it holds more (one of
    two rows alike but for their name), the rest of the row picks which."""
    lake.execute("CREATE TABLE t (k INTEGER, name VARCHAR, v INTEGER)")
    lake.execute(
        "INSERT INTO t VALUES (1, 'a', 0), (1, 'b', 0), (2, 'c', 0), (2, 'c', 0), "
        "(NULL, 'd', NULL), (3, 'e', 1)"
    )
    model = Model(lake, "m", "SELECT k, name, v FROM t")
    model.refresh()
    lake.execute("DELETE FROM t WHERE name IN ('b', 'c', 'd')")
    result = model.refresh()
    assert (result.strategy, result.rows_deleted) == ("incremental", 4)
    delete, rest = [s for s in result.statements if s.startswith("DELETE FROM")]
    assert 'SELECT "k", "v", sum(_ivm_copies)' in delete, "matched by k and v first"
    assert '"name" IS NOT DISTINCT FROM' in rest and "per_value" not in rest
    assert lake.execute("SELECT * FROM m ORDER BY ALL").fetchall() == [(1, "a", 0), (3, "e", 1)]
    model.assert_consistent()
    # a float is matched by every column: a value stored one bit off is then seen missing
    floats = Model(lake, "f", "SELECT k, name, v / 3 AS x FROM t")
    floats.refresh()
    lake.execute("DELETE FROM t WHERE k = 1")
    result = floats.refresh()
    (delete,) = [s for s in result.statements if s.startswith("DELETE FROM")]
    assert "per_value" not in delete
    floats.assert_consistent()


def test_a_profiled_run_counts_exactly_the_statements_it_issued(lake, monkeypatch):
    """``DUCKSTREAM_PROFILE``: the count of a run holds its own statements, neither the
    counter's nor those before it (a dbt run's earlier models), and DuckLake's catalog
    queries among them."""
    monkeypatch.setenv(breakdown.PROFILE, "1")
    monkeypatch.setattr(breakdown._StatementCounter, "connection", None)
    breakdown.enable_profiling(lake)
    try:
        for _ in range(20):  # an earlier model's statements
            lake.execute("SELECT 1")
        with breakdown.recording() as plain:
            for n in range(3):
                lake.execute(f"SELECT {n}")
        assert plain.counts == {"statements": 3, "catalog": 0}
        lake.execute("CREATE TABLE lake.main.t AS SELECT 1 AS v")
        with breakdown.recording() as read:
            lake.execute("SELECT * FROM lake.main.t")
        # the query, DuckLake's catalog queries, and its BEGIN and COMMIT there
        assert read.counts["statements"] > read.counts["catalog"] >= 1, read.counts
    finally:
        lake.execute("CALL disable_logging()")


def test_a_rebuild_with_its_state_computes_it_before_its_write_transaction(lake):
    """A rebuild of a model that usually maintains builds its state too: the model's rows and
    every state table are computed at the pin into temporary tables first, and the write
    transaction only recreates the tables from them (a foreign writer's commit then rarely
    overlaps it); the state it leaves serves the next maintained run."""
    lake.execute("CREATE TABLE t (k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO t SELECT i % 7, i FROM range(1000) AS r(i)")
    sql = (
        "SELECT k, total, rank() OVER (ORDER BY total DESC, k) AS place FROM "
        "(SELECT k, sum(v) AS total FROM t GROUP BY k)"
    )
    m = Model(lake, "ranked", sql)
    assert m.refresh().strategy == "initial"
    for i in range(3):  # a model that usually maintains
        lake.execute(f"INSERT INTO t VALUES ({i}, {i}); DELETE FROM t WHERE v = {100 + i}")
        assert m.refresh(rebuild_above=1e9).strategy == "incremental"
    lake.execute("INSERT INTO t VALUES (8, 80); UPDATE t SET v = v + 1 WHERE v < 50")
    result = m.refresh(rebuild_above=0)
    assert result.strategy == "rebuild" and "its state is built too" in result.reason, result
    reads = [s for s in result.statements if "SELECT" in s]
    assert reads and all('FROM "_ivm_ranked_stage' in s for s in reads), result.statements
    assert not any(re.search(r"\bt\b", s.split("SELECT", 1)[1]) for s in reads)
    m.assert_consistent()
    lake.execute("INSERT INTO t VALUES (9, 90)")
    assert m.refresh(rebuild_above=1e9).strategy == "incremental"
    m.assert_consistent()
