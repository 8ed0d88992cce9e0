"""A source's delta is read once per window and shared by the models of a run, and reused only
where it is exactly the same delta: same lake, table, window, and the columns asked for."""

from __future__ import annotations

import pytest

from dbt_duckstream import prepare, refresh
from dbt_duckstream.runtime import feeds, invocation
from dbt_duckstream.runtime.decide.costs import PRE_IMAGE_WEIGHT, estimate
from dbt_duckstream.runtime.feeds import FeedRequest, cached, cached_entries, held, shared_feed
from dbt_duckstream.runtime.lake import (
    attach_lake,
    current_snapshot,
    lake_identity,
    table_id,
    table_ids,
)
from dbt_duckstream.sql import TableRef

from .harness import Model, assert_consistent

T = TableRef("lake", "main", "t")


def entries_for(con, tid: int) -> list[tuple[int, int, list[str]]]:
    return [(o, n, c) for t, o, n, c in cached_entries(con) if t == tid]


@pytest.fixture
def models(lake):
    lake.execute("CREATE TABLE t (id INTEGER, k INTEGER, g VARCHAR, v DOUBLE)")
    lake.execute("INSERT INTO t VALUES (1, 1, 'a', 1.5), (2, 2, 'b', 2.5)")
    found = {
        "sums": Model(lake, "sums", "SELECT k, sum(v) AS s FROM t GROUP BY k"),
        "rows": Model(lake, "rows", "SELECT k, v FROM t WHERE v > 0"),
        "names": Model(lake, "names", "SELECT g, count(*) AS n FROM t GROUP BY g"),
        "ids": Model(lake, "ids", "SELECT id FROM t"),
    }
    for model in found.values():
        model.refresh()
    return found


def test_models_of_a_run_share_one_read_per_window(lake, models):
    tid = table_id(lake, T)
    assert tid is not None
    lake.execute("INSERT INTO t VALUES (3, 1, 'c', 4.0)")
    lake.execute("INSERT INTO t VALUES (4, 2, 'd', 5.0)")
    old = current_snapshot(lake, "lake") - 2
    models["sums"].refresh()
    # the first read of a window that only inserted takes what the other models of the log
    # read too (id, g)
    assert entries_for(lake, tid) == [(old, old + 2, ["k", "v", "id", "g"])]
    for name in ("rows", "names", "ids"):
        models[name].refresh()
    assert len(entries_for(lake, tid)) == 1
    for model in models.values():
        model.assert_consistent()

    # one that ended rows reads the old values of its own columns first
    lake.execute("UPDATE t SET v = v * 2 WHERE k = 2")
    updated = current_snapshot(lake, "lake")
    models["sums"].refresh()
    models["rows"].refresh()  # k, v: inside the first read's columns
    assert entries_for(lake, tid)[-1] == (updated - 1, updated, ["k", "v"])
    models["names"].refresh()  # g: not read yet, so the window is read once more, whole
    assert entries_for(lake, tid)[-1] == (updated - 1, updated, ["id", "k", "g", "v"])
    models["ids"].refresh()
    assert len(entries_for(lake, tid)) == 3  # id: served by the whole read
    for model in models.values():
        model.assert_consistent()

    lake.execute("DELETE FROM t WHERE id = 1")  # another window: read anew
    deleted = current_snapshot(lake, "lake")
    models["sums"].refresh()
    assert entries_for(lake, tid)[-1][:2] == (deleted - 1, deleted)
    models["sums"].assert_consistent()


def test_a_model_of_another_run_log_reads_its_columns_once_more(lake, models):
    """The first read knows what the models of its own schema's run log read; a model of
    another schema asking for a column none of them reads makes the window be read again,
    with every column, once."""
    tid = table_id(lake, T)
    assert tid is not None
    lake.execute("CREATE TABLE u (a INTEGER, b VARCHAR, c INTEGER)")
    lake.execute("INSERT INTO u VALUES (1, 'x', 1)")
    lake.execute("CREATE SCHEMA other")
    mine = Model(lake, "per_a", "SELECT a, count(*) AS n FROM u GROUP BY a")
    theirs_sql = "SELECT b, sum(c) AS s FROM u GROUP BY b"
    theirs = prepare(lake, theirs_sql, "lake.other.per_b", catalog="lake", db="main")
    mine.refresh()
    refresh(lake, theirs)
    uid = table_id(lake, TableRef("lake", "main", "u"))
    lake.execute("INSERT INTO u VALUES (2, 'y', 2)")
    new = current_snapshot(lake, "lake")
    mine.refresh()
    assert entries_for(lake, uid) == [(new - 1, new, ["a"])]
    refresh(lake, theirs)
    assert entries_for(lake, uid)[-1] == (new - 1, new, ["a", "b", "c"])
    mine.assert_consistent()
    assert_consistent(lake, "lake.other.per_b", theirs_sql)


def test_a_window_that_ended_rows_is_read_again_with_the_columns_models_read(lake):
    """Every column read for ended rows costs a read of every row group holding one: the
    second read of such a window takes the columns the run log's models read, not a column
    that no model reads (``d``)."""
    lake.execute("CREATE TABLE u (a INTEGER, b VARCHAR, c INTEGER, d VARCHAR)")
    lake.execute(
        "INSERT INTO u SELECT i % 7, 'b' || (i % 3), i, repeat('x', 50) FROM range(100) r(i)"
    )
    per_a = Model(lake, "per_a", "SELECT a, count(*) AS n FROM u GROUP BY a")
    per_b = Model(lake, "per_b", "SELECT b, sum(c) AS s FROM u GROUP BY b")
    for model in (per_a, per_b):
        model.refresh()
    uid = table_id(lake, TableRef("lake", "main", "u"))
    assert uid is not None
    lake.execute("UPDATE u SET c = c + 1 WHERE a = 3")
    new = current_snapshot(lake, "lake")
    per_a.refresh()
    assert entries_for(lake, uid) == [(new - 1, new, ["a"])]
    per_b.refresh()
    assert entries_for(lake, uid)[-1] == (new - 1, new, ["a", "b", "c"])
    per_a.assert_consistent()
    per_b.assert_consistent()


def test_a_first_read_of_ended_rows_takes_what_its_invocations_models_read(lake, models):
    """Inside a dbt invocation the first read of a window that ended rows takes the columns
    that the invocation's other models read from the table (``g`` for "names"), not those of
    models outside it (``id`` for "ids"): the models after it find theirs in its entry."""
    tid = table_id(lake, T)
    assert tid is not None
    lake.execute("UPDATE t SET v = v * 2 WHERE k = 2")
    updated = current_snapshot(lake, "lake")
    with invocation.within(invocation.model_names(["model.p.sums", "model.p.names"])):
        models["sums"].refresh()
        assert entries_for(lake, tid) == [(updated - 1, updated, ["k", "v", "g"])]
        models["names"].refresh()
        assert len(entries_for(lake, tid)) == 1
    models["ids"].refresh()  # outside the invocation: its column is read again
    assert entries_for(lake, tid)[-1] == (updated - 1, updated, ["id", "k", "g", "v"])
    for model in models.values():
        model.refresh()
        model.assert_consistent()


def test_models_after_the_first_reader_price_the_ended_rows_it_read_as_read(lake):
    """Ended rows of data files cost a read of the row groups holding them, once per
    invocation: a model deciding after the first reader read them prices them as the rows
    read, as captured pre-images are priced (``decide.costs``)."""
    lake.execute("CREATE TABLE u (a INTEGER, b VARCHAR, c INTEGER)")
    lake.execute("INSERT INTO u SELECT i % 7, 'b' || (i % 3), i FROM range(1000) r(i)")
    per_a = Model(lake, "per_a", "SELECT a, count(*) AS n FROM u GROUP BY a")
    per_b = Model(lake, "per_b", "SELECT b, sum(c) AS s FROM u GROUP BY b")
    for model in (per_a, per_b):
        model.refresh()
    u = TableRef("lake", "main", "u")
    lake.execute("UPDATE u SET c = c + 1 WHERE c = 3")  # one row of the file
    new = current_snapshot(lake, "lake")
    ids = table_ids(lake, [u, per_b.plan.target])
    uid = ids[u.key]
    assert uid is not None

    def priced() -> int:
        return estimate(
            lake,
            per_b.plan,
            {"lake": (new - 1, new)},
            {u.key: (new - 1, new)},
            ids,
            {u.key: 1000, per_b.plan.target.key: 3},
            lambda catalog: lake_identity(lake, catalog),
        ).maintain_rows

    before = priced()
    assert not cached(lake_identity(lake, "lake"), uid, (new - 1, new), ("b", "c"))
    with invocation.within(invocation.model_names(["model.p.per_a", "model.p.per_b"])):
        per_a.refresh()
    assert cached(lake_identity(lake, "lake"), uid, (new - 1, new), ("b", "c"))
    assert before - priced() == int(PRE_IMAGE_WEIGHT * 1000) - 1
    per_b.refresh()
    for model in (per_a, per_b):
        model.assert_consistent()


def test_threads_asking_for_one_window_at_once_read_it_once(lake, models, monkeypatch):
    """dbt's threads run models of the same sources at once: the second waits for the first
    read of their window and projects its entry, instead of reading the window beside it."""
    import threading
    import time

    tid = table_id(lake, T)
    assert tid is not None
    lake.execute("UPDATE t SET v = v + 1 WHERE k = 1")
    new = current_snapshot(lake, "lake")
    reads = []
    delta_sql = feeds._delta_sql

    def slow(*args, **kwargs):
        reads.append(args[2])
        time.sleep(0.3)  # long enough that an unserialized second read would start meanwhile
        return delta_sql(*args, **kwargs)

    monkeypatch.setattr(feeds, "_delta_sql", slow)
    start = threading.Barrier(2)
    served = {}

    def read(name: str, columns: tuple[str, ...]) -> None:
        cursor = lake.cursor()
        start.wait()
        with held(cursor, {"t": FeedRequest(T, tid, (new - 1, new), columns)}) as feeds_:
            served[name] = feeds_["t"].name

    threads = [
        threading.Thread(target=read, args=(name, ("k", "v"))) for name in ("first", "second")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(reads) == 1
    assert served["first"] == served["second"]
    for model in models.values():
        model.refresh()
        model.assert_consistent()


def test_other_lakes_and_tables_are_never_served(lake, models, tmp_path):
    tid = table_id(lake, T)
    assert tid is not None
    lake.execute("INSERT INTO t VALUES (3, 1, 'c', 4.0)")
    new = current_snapshot(lake, "lake")
    request = FeedRequest(T, tid, (new - 1, new), ("k", "v"))
    first = shared_feed(lake, request)
    assert shared_feed(lake, request) == first
    assert shared_feed(lake, FeedRequest(T, tid, (new - 2, new), ("k", "v"))) != first
    recreated = FeedRequest(T, tid + 1000, (new - 1, new), ("k", "v"))
    assert shared_feed(lake, recreated) != first

    # another lake on the same instance whose table has the same id, at the same snapshots
    attach_lake(lake, str(tmp_path / "other.ducklake"), alias="other", data_path=str(tmp_path))
    lake.execute("CREATE TABLE other.main.t (id INTEGER, k INTEGER, g VARCHAR, v DOUBLE)")
    for _ in range(new - current_snapshot(lake, "other")):
        lake.execute("INSERT INTO other.main.t VALUES (9, 9, 'z', 9.0)")
    twin = TableRef("other", "main", "t")
    assert (table_id(lake, twin), current_snapshot(lake, "other")) == (tid, new)
    with held(lake, {"twin": FeedRequest(twin, tid, (new - 1, new), ("k", "v"))}) as served:
        assert first.name not in served["twin"].relation
        rows = lake.execute(f"SELECT k, v, _ivm_m FROM {served['twin'].relation}").fetchall()
    assert rows == [(9, 9.0, 1)]

    # that lake created again in the same place: same data path, table id and snapshots
    lake.execute("DETACH other")
    (tmp_path / "other.ducklake").unlink()
    attach_lake(lake, str(tmp_path / "other.ducklake"), alias="other", data_path=str(tmp_path))
    lake.execute("CREATE TABLE other.main.t (id INTEGER, k INTEGER, g VARCHAR, v DOUBLE)")
    for _ in range(new - current_snapshot(lake, "other")):
        lake.execute("INSERT INTO other.main.t VALUES (8, 8, 'y', 8.0)")
    assert (table_id(lake, twin), current_snapshot(lake, "other")) == (tid, new)
    with held(lake, {"again": FeedRequest(twin, tid, (new - 1, new), ("k", "v"))}) as served:
        rows = lake.execute(f"SELECT k, v, _ivm_m FROM {served['again'].relation}").fetchall()
    assert rows == [(8, 8.0, 1)]


def test_the_cache_stays_within_its_budget(lake, models, monkeypatch):
    monkeypatch.setattr(feeds, "budget_bytes", lambda: 0)
    tid = table_id(lake, T)
    assert tid is not None
    for i in range(3):
        lake.execute(f"INSERT INTO t VALUES ({10 + i}, 1, 'x', 1.0)")
        models["sums"].refresh()
        models["sums"].assert_consistent()
    assert len(entries_for(lake, tid)) == 1  # every older entry was dropped


def test_entries_a_run_holds_outlive_the_budget(lake, models, monkeypatch):
    """Another thread's run may overflow the budget while this one has yet to use its feed."""
    monkeypatch.setattr(feeds, "budget_bytes", lambda: 0)
    tid = table_id(lake, T)
    assert tid is not None
    lake.execute("INSERT INTO t VALUES (3, 1, 'c', 4.0)")
    new = current_snapshot(lake, "lake")
    with held(lake, {"t": FeedRequest(T, tid, (new - 1, new), ("k", "v"))}) as mine:
        lake.execute("INSERT INTO t VALUES (4, 1, 'd', 5.0)")
        models["sums"].refresh()  # reads (and holds, then lets go) another window's entry
        rows = lake.execute(f"SELECT k, v, _ivm_m FROM {mine['t'].relation}").fetchall()
        assert rows == [(1, 4.0, 1)]
    assert len(entries_for(lake, tid)) == 2
    models["sums"].assert_consistent()


def test_a_window_that_only_inserted_reads_no_ended_rows(lake, models, monkeypatch):
    """The minus half of a source's delta reads the old snapshot: skipped when DuckLake's
    snapshot metadata says the window only inserted into the table."""
    seen: list[bool] = []
    read = feeds.source_delta_sql

    def recording(*args, **kwargs):
        seen.append(kwargs["appended"])
        sql = read(*args, **kwargs)
        # a window that ended rows reads them from their files; one that only inserted, none
        assert (kwargs["ended_rows"] is None) == kwargs["appended"]
        assert "ducklake_table_deletions" not in sql
        return sql

    monkeypatch.setattr(feeds, "source_delta_sql", recording)
    sums = models["sums"]
    for change, appended in [
        ("INSERT INTO t VALUES (3, 1, 'c', 4.0), (4, 5, NULL, NULL)", True),
        ("UPDATE t SET v = v * 2 WHERE k = 2", False),
        ("DELETE FROM t WHERE id = 3", False),
        ("ALTER TABLE t ADD COLUMN w INTEGER; INSERT INTO t VALUES (5, 1, 'e', 1, 7)", True),
        ("INSERT INTO t VALUES (6, 6, 'f', 6.0, 0); DELETE FROM t WHERE id = 6", False),
    ]:
        lake.execute(change)
        seen.clear()
        sums.refresh()
        assert seen == [appended], change
        sums.assert_consistent()


def test_a_window_is_read_at_the_pin_when_nothing_touched_its_table_since(
    lake, models, monkeypatch
):
    """The rows a window wrote are read at the run's pinned snapshot rather than at the
    window's end when no snapshot between them touched the table: the same rows, in the
    catalog version the run holds (a table created elsewhere moved the version on, and a
    read at the window's end would load the older one). After an alteration of the table
    past the window's end, they are read at its end."""
    seen: list[tuple[tuple[int, int], int | None]] = []
    read = feeds.source_delta_sql

    def recording(*args, **kwargs):
        seen.append((args[2], kwargs["read_at"]))
        return read(*args, **kwargs)

    monkeypatch.setattr(feeds, "source_delta_sql", recording)
    sums = models["sums"]
    for number, (change, then, at_pin) in enumerate(
        [
            ("INSERT INTO t VALUES (3, 1, 'c', 4.0)", "CREATE TABLE other1 (x INTEGER)", True),
            ("UPDATE t SET v = v + 1 WHERE k = 2", "CREATE TABLE other2 (x INTEGER)", True),
            ("DELETE FROM t WHERE id = 3", "", False),
            ("INSERT INTO t VALUES (4, 4, 'd', 1.0)", "COMMENT ON TABLE t IS 'rows'", False),
        ]
    ):
        lake.execute(change)
        changed = current_snapshot(lake, "lake")
        if then:
            lake.execute(then)
        seen.clear()
        sums.refresh()
        pin = current_snapshot(lake, "lake") - 1  # the run's commit follows its pin
        assert [window[1] for window, _ in seen] == [changed], number
        assert [read_at for _, read_at in seen] == [pin if at_pin else None], number
        sums.assert_consistent()


def test_a_first_read_takes_no_column_dropped_or_renamed_since_the_others_read_it(lake, models):
    tid = table_id(lake, T)
    assert tid is not None
    lake.execute("ALTER TABLE t RENAME COLUMN g TO g2")  # read by "names": its runs rebuild
    lake.execute("ALTER TABLE t DROP COLUMN id")  # read by "ids"
    lake.execute("ALTER TABLE t ADD COLUMN id INTEGER")  # another column under that name
    lake.execute("INSERT INTO t VALUES (3, 'c', 4.0, 9)")
    new = current_snapshot(lake, "lake")
    models["sums"].refresh()
    assert entries_for(lake, tid)[-1] == (new - 1, new, ["k", "v"])
    models["sums"].assert_consistent()


def test_a_window_that_only_inserted_is_kept_unnetted_and_read_as_it_is(lake, models):
    """No row of such a window can cancel, so its entry keeps duplicates apart (netting them
    would group by every column), and each model reads its projection of it in place."""
    tid = table_id(lake, T)
    assert tid is not None
    lake.execute("INSERT INTO t VALUES (3, 1, 'c', 4.0), (3, 1, 'c', 4.0), (4, 1, 'c', NULL)")
    lake.execute("INSERT INTO t VALUES (3, 1, 'c', 4.0), (NULL, NULL, NULL, NULL)")
    for model in models.values():
        model.refresh()
    names = [name for name, entry in feeds._registry(lake).items() if entry.table_id == tid]
    assert len(names) == 1  # the first read takes what every model of the log reads
    for name in names:
        rows = lake.execute(f"SELECT count(*), max(_ivm_m) FROM {feeds._relation(name)}")
        assert rows.fetchone() == (5, 1)
    for model in models.values():
        model.assert_consistent()
    assert lake.execute("SELECT n FROM names WHERE g = 'c'").fetchone() == (4,)


#: every kind of reader of a scan's delta, each fed copies of one row apart
READERS = {
    "distinct": "SELECT DISTINCT k, g FROM t",
    "counts": "SELECT g, count(DISTINCT id) AS d, min(v) AS lo, max(v) AS hi FROM t GROUP BY g",
    "unioned": "SELECT k FROM t UNION SELECT id FROM t",
    "excepted": "SELECT k, g FROM t EXCEPT ALL SELECT id, g FROM t WHERE v > 3",
    "numbered": "SELECT id, g, row_number() OVER (PARTITION BY g ORDER BY id, v) AS n FROM t",
    "first": "SELECT id, v FROM t ORDER BY v DESC NULLS LAST, id LIMIT 2",
    "semi": "SELECT * FROM t WHERE k IN (SELECT id FROM t WHERE g = 'c')",
    "outer": "SELECT a.id, b.v FROM t AS a LEFT JOIN t AS b ON a.k = b.id AND b.g = 'c'",
    "copies": "SELECT * FROM t",
}


def test_copies_of_a_row_appended_reach_every_reader_apart(lake):
    """A window that only inserted hands its rows to the models unnetted, the copies of a row
    apart: sets, groups, windows, a top-N and joins each count them as a recomputation does."""
    lake.execute("CREATE TABLE t (id INTEGER, k INTEGER, g VARCHAR, v DOUBLE)")
    lake.execute("INSERT INTO t VALUES (1, 1, 'a', 1.5), (2, 2, 'c', 2.5)")
    models = [Model(lake, name, sql) for name, sql in READERS.items()]
    for model in models:
        model.refresh()
    for batch in [
        "(3, 1, 'c', 4.0), (3, 1, 'c', 4.0), (3, 1, 'c', 4.0), (NULL, 2, 'c', NULL)",
        "(1, 1, 'a', 1.5), (1, 1, 'a', 1.5), (NULL, 2, 'c', NULL)",
    ]:
        lake.execute(f"INSERT INTO t VALUES {batch}")
        lake.execute(f"INSERT INTO t VALUES {batch}")
        for model in models:
            assert model.refresh(rebuild_above=None).strategy == "incremental", model.name
            model.assert_consistent()
    assert lake.execute("SELECT count(*) FROM copies").fetchone() == (16,)


def test_one_read_of_ended_rows_serves_every_reader_of_an_invocation(lake):
    """Inside a dbt invocation the first read of a window that ended rows takes every column
    the invocation's models read, and each model nets its own projection of it: updates that
    change a column one model does not read cancel for that model alone. File rows and
    inlined rows, copies of a row and NULLs."""
    lake.execute("CREATE TABLE t (id INTEGER, k INTEGER, g VARCHAR, v DOUBLE)")
    lake.execute(
        "INSERT INTO t SELECT i % 50, i % 7, chr((97 + i % 3)::INTEGER), "
        "CASE WHEN i % 11 = 0 THEN NULL ELSE i / 4 END FROM range(2000) r(i)"
    )
    models = [Model(lake, name, sql) for name, sql in READERS.items()]
    for model in models:
        model.refresh()
    tid = table_id(lake, T)
    assert tid is not None
    names = invocation.model_names([f"model.p.{name}" for name in READERS])
    for changes in [
        ("UPDATE t SET v = v + 1 WHERE id = 3", "DELETE FROM t WHERE id = 7 AND k = 2"),
        ("INSERT INTO t VALUES (3, 1, 'c', 4.0), (3, 1, 'c', 4.0), (NULL, 2, 'c', NULL)",),
        ("UPDATE t SET g = 'z' WHERE id = 3 AND v = 4.0", "DELETE FROM t WHERE v IS NULL"),
    ]:
        for change in changes:
            lake.execute(change)
        before = len(entries_for(lake, tid))
        with invocation.within(names):
            for model in models:
                assert model.refresh().strategy == "incremental", model.name
                model.assert_consistent()
        assert len(entries_for(lake, tid)) == before + 1  # one read for all of them


def test_ended_rows_come_from_their_files_or_visibly_by_time_travel(lake, models, tmp_path):
    """Deleted and updated rows are read at their positions in the data files; a layout the
    reader does not handle (here an encrypted lake) reads them by time travel and says so."""
    lake.execute("UPDATE t SET v = -v WHERE k = 1")
    result = models["rows"].refresh()
    assert "time travel" not in result.reason
    models["rows"].assert_consistent()

    lake.execute(
        f"ATTACH 'ducklake:{tmp_path}/sealed.ducklake' AS sealed "
        f"(DATA_PATH '{tmp_path}/sealed', ENCRYPTED)"
    )
    lake.execute("SET force_mbedtls_unsafe = 'true'")  # no httpfs here: a test-only cipher
    lake.execute("CALL sealed.set_option('data_inlining_row_limit', 0)")  # rows in files
    lake.execute("CREATE TABLE sealed.main.s AS SELECT range AS k FROM range(4)")
    sealed = Model(lake, "sealed_rows", "SELECT k FROM sealed.main.s WHERE k > 0")
    sealed.refresh()
    lake.execute("DELETE FROM sealed.main.s WHERE k = 2")
    result = sealed.refresh()
    assert result.strategy == "incremental"
    assert "ended rows of sealed.main.s read by time travel (" in result.reason
    assert "encrypted" in result.reason
    sealed.assert_consistent()
