"""A table's row count at a snapshot read from DuckLake's metadata equals ``count(*)`` by time
travel, at every snapshot of random histories (inserts, deletes, updates, MERGE, inlining on
and off, compaction, rewrites, flushes), on DuckDB and SQLite catalogs; the layouts it does
not read fall back to the scan, and the common ones do not."""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from dbt_duckstream.runtime.lake import rewritten_history, snapshot_changes
from dbt_duckstream.runtime.live_rows import CountAt, _from_metadata, live_row_counts
from dbt_duckstream.sql import TableRef

from .harness import fresh_lake
from .scenarios import flush_inlined_data
from .test_preimages import examples, histories, play, rows_at, snapshots

T = TableRef("lake", "main", "t")


def table_id(con) -> int:
    row = con.execute("SELECT table_id FROM lake.table_info() WHERE table_name = 't'").fetchone()
    return row[0]


def scanned(con, snapshot: int) -> int:
    return con.execute(f"SELECT count(*) FROM {T.sql()} AT (VERSION => {snapshot})").fetchone()[0]


def live_then(con, snapshot: int) -> int:
    """The rows the history held at the snapshot (recorded as it committed them, ``play``)."""
    return con.execute(f"SELECT count(*) FROM ({rows_at(con, snapshot, ('k',), T)})").fetchone()[0]


def assert_counts(con, points: list[int]) -> None:
    """Counts from the metadata and by time travel equal the rows live then, at every snapshot
    that no rewrite followed by a flush makes unreadable (``lake.rewritten_history``)."""
    tid = table_id(con)
    points = [
        s
        for s in points
        if not rewritten_history(snapshot_changes(con, "lake", s, points[-1], {tid}), {tid})
    ]
    reads = [CountAt(T, tid, s) for s in points]
    from_metadata = _from_metadata(con, "lake", reads)
    expected = [live_then(con, s) for s in points]
    assert [scanned(con, s) for s in points] == expected
    assert live_row_counts(con, reads) == expected
    for read, mine, theirs in zip(reads, from_metadata, expected, strict=True):
        assert mine is None or mine == theirs, f"snapshot {read.snapshot}: {mine} != {theirs}"
        event("read from the metadata" if mine is not None else "counted by a scan")


@pytest.mark.slow
@examples(0.4)
@given(
    history=histories,
    inline_limit=st.sampled_from([0, 10]),
    row_group=st.sampled_from([4, 122880]),
)
def test_counts_from_the_metadata_equal_the_scan_over_random_histories(
    history, inline_limit, row_group
):
    with fresh_lake() as con:
        assert_counts(con, play(con, history, inline_limit=inline_limit, row_group=row_group))


@pytest.mark.slow
@examples(0.12)
@given(history=histories, inline_limit=st.sampled_from([0, 10]))
def test_counts_from_the_metadata_equal_the_scan_on_a_sqlite_catalog(history, inline_limit):
    with (
        tempfile.TemporaryDirectory(prefix="duckstream-test-") as directory,
        fresh_lake(f"sqlite:{directory}/lake.sqlite") as con,
    ):
        assert_counts(con, play(con, history, inline_limit=inline_limit, row_group=4))


def test_common_layouts_are_read_from_the_metadata(lake):
    """File rows deleted in several snapshots (one delete file spanning them), inlined rows
    and inlined deletions of file rows: counted without a scan, at every snapshot."""
    con = lake
    con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
    con.execute("CREATE TABLE t AS SELECT range AS k FROM range(1000)")
    for k in range(3):
        con.execute(f"DELETE FROM t WHERE k % 10 = {k}")
    con.execute("CALL lake.set_option('data_inlining_row_limit', 10)")
    con.execute("INSERT INTO t VALUES (5000), (5001)")
    con.execute("DELETE FROM t WHERE k IN (5000, 7, 8)")
    con.execute("ALTER TABLE t ADD COLUMN v INTEGER")
    con.execute("INSERT INTO t VALUES (6000, 1)")
    points = snapshots(con)[1:]
    reads = [CountAt(T, table_id(con), s) for s in points]
    assert _from_metadata(con, "lake", reads) == [scanned(con, s) for s in points]


def test_rows_merged_from_several_snapshots_are_counted_by_a_scan(lake):
    """A merged data file holds rows of several snapshots: at a snapshot between them the
    metadata cannot tell how many were live, and the scan counts them."""
    con = lake
    con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
    con.execute("CREATE TABLE t (k INTEGER)")
    for k in range(3):
        con.execute(f"INSERT INTO t VALUES ({k})")
    con.execute("CALL ducklake_merge_adjacent_files('lake')")
    points = snapshots(con)[1:]
    reads = [CountAt(T, table_id(con), s) for s in points]
    assert None in _from_metadata(con, "lake", reads)  # the snapshots between the inserts
    assert live_row_counts(con, reads) == [scanned(con, s) for s in points]


def test_inlined_rows_flushed_with_their_deletions_are_counted_at_each_snapshot(lake):
    """A flush of inlined rows and of their inlined deletions writes a delete file that dates
    each deletion but gives no ``partial_max``: between its deletions the metadata cannot tell
    the count, and the scan counts it (a property family's example: a model's span check
    found rows missing that the lake held)."""
    con = lake
    con.execute("CALL lake.set_option('data_inlining_row_limit', 10)")
    con.execute("CREATE TABLE t (k INTEGER)")
    con.execute("INSERT INTO t VALUES (NULL), (0)")
    con.execute("DELETE FROM t WHERE k IS NULL")
    con.execute("DELETE FROM t WHERE k = 0")
    flush_inlined_data(con)
    points = snapshots(con)[1:]
    reads = [CountAt(T, table_id(con), s) for s in points]
    assert live_row_counts(con, reads) == [scanned(con, s) for s in points] == [0, 2, 1, 0, 0]
