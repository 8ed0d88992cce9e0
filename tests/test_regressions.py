"""Tables that were silently wrong, each pinned down by the history that showed it.

1. A retraction matched rows by recomputed floating-point values: a two-level aggregation of
   DOUBLE values kept stale rows after one small insert, because a sum recomputed by another
   plan differs from the stored one in its last bits.
2. The change feed reports wrong values when one transaction touches a file-backed row twice
   (duckdb/ducklake#1387): overlapping UPDATEs or MERGEs double the change, UPDATE then DELETE
   brings deleted rows back.
3. ``ducklake_rewrite_data_files`` reports as deleted the rows of a file whose update was
   inlined before, while the same row versions live on (same rowids, same ``snapshot_id``):
   a scan retracted them and never asserted them back.
4. ``ducklake_rewrite_data_files`` gives the rows it copies from a file with deletes its own
   snapshot as ``snapshot_id`` and reports them inserted, never deleted: a scan counted them
   twice.
5. After that rewrite, DuckLake's table statistics leave out the row versions that live
   inlined, and the next insert sets bounds that exclude them: DuckDB's statistics
   propagation then prunes existing rows from a recomputation (``WHERE k = 3`` finds none),
   so the oracle recomputed a wrong table and called the right one inconsistent.
"""

from __future__ import annotations

import pytest

from .harness import Model

TWO_LEVEL = """
    WITH per_key AS (SELECT k, sum(v * w) AS s FROM facts GROUP BY k),
         per_group AS (SELECT d.grp, sum(p.s) AS total
                       FROM per_key p JOIN dim d ON p.k = d.k GROUP BY d.grp)
    SELECT d.k, d.grp, g.total FROM dim d JOIN per_group g ON d.grp = g.grp
"""


def test_a_retraction_finds_the_stored_float_not_a_recomputed_one(lake):
    lake.execute("CREATE TABLE facts (k INTEGER, v DOUBLE, w DOUBLE)")
    lake.execute("CREATE TABLE dim (k INTEGER, grp INTEGER)")
    lake.execute(
        "INSERT INTO facts SELECT i % 20000, (i * 7919 % 1000) / 7.0, (i % 13) * 0.37 "
        "FROM range(1500000) r(i)"
    )
    lake.execute("INSERT INTO dim SELECT i, i % 50 FROM range(20000) r(i)")
    model = Model(lake, "two_level", TWO_LEVEL)
    model.refresh()
    lake.execute("INSERT INTO facts VALUES (1, 0.1, 0.3), (2, 0.2, 0.7)")
    result = model.refresh()
    assert result.strategy == "incremental"
    assert lake.execute("SELECT count(*) FROM two_level").fetchone() == (20000,)
    model.assert_consistent()


#: pairs of statements in one transaction that touch the same rows of a file-backed table
TOUCHED_TWICE = {
    "update_update": [
        "UPDATE t SET v = v + 1 WHERE id < 500",
        "UPDATE t SET v = v + 10 WHERE id < 300",
    ],
    "merge_update": [
        "MERGE INTO t USING (SELECT range AS id, 7 AS v FROM range(400)) AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = s.v",
        "UPDATE t SET v = v * 2 WHERE id < 200",
    ],
    "merge_merge": [
        "MERGE INTO t USING (SELECT range AS id, 3 AS v FROM range(400)) AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = s.v",
        "MERGE INTO t USING (SELECT range AS id, 5 AS v FROM range(100, 300)) AS s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v",
    ],
    "update_delete": [
        "UPDATE t SET v = v + 100 WHERE id < 500",
        "DELETE FROM t WHERE id < 250",
    ],
    "insert_update": [
        "INSERT INTO t SELECT range + 1000, range % 7, range FROM range(300)",
        "UPDATE t SET v = -v WHERE id >= 1000",
    ],
    "disjoint": [
        "UPDATE t SET v = v + 1 WHERE id < 100",
        "DELETE FROM t WHERE id BETWEEN 200 AND 299",
    ],
}


@pytest.mark.parametrize("history", sorted(TOUCHED_TWICE))
def test_rows_touched_twice_in_one_transaction(lake, history):
    lake.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
    lake.execute("CREATE TABLE t (id INTEGER, k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO t SELECT range, range % 7, range FROM range(1000)")
    rows = Model(lake, "rows", "SELECT id, k, v FROM t")
    sums = Model(lake, "sums", "SELECT k, sum(v) AS total, count(*) AS n FROM t GROUP BY k")
    for model in (rows, sums):
        model.refresh()
    for round_ in range(2):  # a second snapshot of the same kind in the same window
        lake.execute("BEGIN")
        for statement in TOUCHED_TWICE[history]:
            lake.execute(statement)
        lake.execute("COMMIT")
        if round_ == 0:
            lake.execute("CALL ducklake_merge_adjacent_files('lake')")
    for model in (rows, sums):
        assert model.refresh().strategy == "incremental"
        model.assert_consistent()


def test_rows_a_rewrite_reports_deleted_but_keeps_are_not_retracted(lake):
    lake.execute("CREATE TABLE t (id INTEGER, v INTEGER)")
    lake.execute("INSERT INTO t VALUES (NULL, 1), (NULL, 2), (NULL, 3)")
    model = Model(lake, "rewritten", "SELECT id, v FROM t")
    model.refresh()
    lake.execute("CALL ducklake_flush_inlined_data('lake')")
    lake.execute("UPDATE t SET id = 0 WHERE id IS NULL")  # inlined over the flushed file
    assert model.refresh().strategy == "incremental"
    lake.execute("CALL ducklake_rewrite_data_files('lake', delete_threshold => 0)")
    lake.execute("INSERT INTO t VALUES (5, 5)")
    assert model.refresh().strategy == "incremental"
    assert lake.execute("SELECT count(*) FROM rewritten").fetchone() == (4,)
    model.assert_consistent()


def test_rows_a_rewrite_copies_under_its_own_snapshot_are_not_counted_twice(lake):
    lake.execute("CREATE TABLE t (id INTEGER, v INTEGER)")
    lake.execute("INSERT INTO t VALUES (0, 1), (NULL, 2)")
    model = Model(lake, "copied", "SELECT id, v FROM t")
    model.refresh()
    lake.execute("CALL ducklake_flush_inlined_data('lake')")
    lake.execute("UPDATE t SET id = 0 WHERE id IS NULL")  # deletes from the flushed file
    lake.execute("CALL ducklake_rewrite_data_files('lake', delete_threshold => 0)")
    assert model.refresh().strategy == "incremental"
    assert lake.execute("SELECT count(*) FROM copied").fetchone() == (2,)
    model.assert_consistent()


def test_the_oracle_does_not_trust_statistics_a_rewrite_left_wrong(lake):
    lake.execute("CREATE TABLE t (id INTEGER, k INTEGER)")
    lake.execute("INSERT INTO t VALUES (1, NULL), (2, NULL)")
    model = Model(lake, "threes", "SELECT id, k FROM t WHERE k = 3")
    model.refresh()
    lake.execute("CALL ducklake_flush_inlined_data('lake')")
    lake.execute("UPDATE t SET k = 3 WHERE id = 1")  # the new version lives inlined
    lake.execute("CALL ducklake_rewrite_data_files('lake', delete_threshold => 0)")
    lake.execute("INSERT INTO t VALUES (4, 0)")
    assert model.refresh().strategy == "incremental"
    assert lake.execute("SELECT id, k FROM threes").fetchall() == [(1, 3)]
    model.assert_consistent()
