"""The Spark writer records the rows it ends, and maintenance reads them in place of the files.

Random histories of one source mix the writer's merges (upserts and deletes by key, keys the
table holds several times), overwrites and appends, with DuckDB SQL writes the captures know
nothing of (deletes, updates, transactions touching a row twice), a column added, and
compaction between batches, with inlining on and off. Every window's minus side read with the
captured pre-images makes the exact delta and equals the time-travel pre-images; models
maintained over the same histories equal their recomputation after every step.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from pyspark.sql import types as T

from dbt_duckstream import prepare, refresh
from dbt_duckstream.errors import ConfigurationError
from dbt_duckstream.runtime import captured
from dbt_duckstream.runtime.change_tables import (
    change_table,
    expire_captured_rows,
)
from dbt_duckstream.runtime.lake import attach_lake
from dbt_duckstream.spark.options import LakeOptions
from dbt_duckstream.spark.writer import DuckLakeWriter

from .budget import EXAMPLES, SLOW_EXAMPLES
from .capture_histories import (
    BASE,
    SOURCE,
    SPARK_TYPES,
    Step,
    assert_window,
    fresh_lake,
    histories,
    play,
    source_id,
)
from .harness import assert_consistent, maintained

CHANGES = change_table(SOURCE).sql()


def captured_rows(lake, columns: str = "*") -> list[tuple]:
    with lake.connection() as con:
        return con.execute(f"SELECT {columns} FROM {CHANGES} ORDER BY ALL").fetchall()


def windows(points: list[int], limit: int = 24) -> list[tuple[int, int]]:
    pairs = list(itertools.combinations(points, 2))
    step = max(1, len(pairs) // limit)
    return sorted(set(itertools.pairwise(points)) | set(pairs[::step]))


# -- the property families -----------------------------------------------------------------------


@given(history=histories, inline_limit=st.sampled_from([0, 10]))
@settings(max_examples=EXAMPLES, deadline=None)
def test_captured_minus_side_equals_the_time_travel_pre_images(history, inline_limit):
    first, steps = history
    with fresh_lake(inline_limit=inline_limit) as lake:
        points = play(lake, first, steps)
        with lake.connection() as con:
            for old, new in windows(points):
                assert_window(con, old, new)


#: models over the source: an aggregate, a filter, and a self-join
VIEWS = {
    "by_key": "SELECT k, count(*) AS n, sum(w) AS sw, min(v) AS mv FROM lake.raw.t GROUP BY k",
    "positive": "SELECT k, v, w FROM lake.raw.t WHERE w > 0",
    "pairs": "SELECT a.k, a.v, b.w FROM lake.raw.t AS a JOIN lake.raw.t AS b ON a.k = b.k",
}


@contextlib.contextmanager
def attached(lake) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection of the runs to the lake (a DuckDB catalog: the maintenance runs read their
    feeds through the shared cache, captured pre-images included; a SQLite catalog's runs read
    them inside their own transaction, by time travel)."""
    con = duckdb.connect()
    try:
        attach_lake(con, lake.catalog, data_path=lake.options["data_path"])
        con.execute("USE lake")
        yield con
    finally:
        con.close()


def writing(con: duckdb.DuckDBPyConnection, lake, step: Step) -> None:
    """Apply a step while the runs' connection lets go of the catalog file (one process
    holds a DuckDB catalog at a time), as a Spark job between two ``dbt run``s."""
    con.execute("USE memory")
    con.execute("DETACH lake")
    step.apply(lake)
    attach_lake(con, lake.catalog, data_path=lake.options["data_path"])
    con.execute("USE lake")


@given(history=histories, inline_limit=st.sampled_from([0, 10]))
@settings(max_examples=SLOW_EXAMPLES, deadline=None)
def test_models_maintained_from_captured_pre_images_equal_their_recomputation(
    history, inline_limit
):
    first, steps = history
    with fresh_lake(inline_limit=inline_limit) as lake:
        first.apply(lake)
        with attached(lake) as con:
            plans = {name: prepare(con, sql, name, catalog="lake") for name, sql in VIEWS.items()}
            for plan in plans.values():
                refresh(con, plan, rebuild_above=None)
            for step in steps:
                writing(con, lake, step)
                for name, plan in plans.items():
                    result = refresh(con, plan, rebuild_above=None)
                    # an expiry takes the model's last commit with it: that run rebuilds
                    assert maintained(result) or "expired" in result.reason, result.summary()
                    assert_consistent(con, f"lake.main.{name}", VIEWS[name], types=False)


# -- what the writer records ---------------------------------------------------------------------


def test_appends_record_nothing():
    with fresh_lake() as lake:
        Step("overwrite", ((1, "a", 1.0, None),)).apply(lake)
        Step("append", ((2, "b", 2.0, None),)).apply(lake)
        with lake.connection() as con:
            found = con.execute(
                "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'duckstream_preimages'"
            ).fetchone()
        assert found == (0,)


def test_a_merge_records_the_old_values_and_row_ids_of_the_rows_it_ends():
    with fresh_lake() as lake:
        Step("overwrite", ((1, "a", 1.0, None), (2, "b", 2.0, None), (3, "c", 3.0, None))).apply(
            lake
        )
        Step("append", ((2, "b2", 2.5, None),)).apply(lake)  # key 2 twice
        with lake.connection() as con:
            before = con.execute(
                "SELECT snapshot_id, rowid, k, v, w FROM lake.raw.t ORDER BY rowid"
            ).fetchall()
        Step(
            "merge",
            (
                (1, "upsert", "A", 10.0, None),
                (2, "delete", None, None, None),
                (9, "insert", "n", 0.0, None),
            ),
        ).apply(lake)
        with lake.connection() as con:
            (merged,) = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()
            rows = con.execute(
                f"SELECT snapshot_id, _source_table_id, _begin_snapshot, _rowid, k, v, w "
                f"FROM {CHANGES} ORDER BY _rowid"
            ).fetchall()
            tid = source_id(con)
        expected = [(merged, tid, s, r, k, v, w) for s, r, k, v, w in before if k in (1, 2)]
        assert rows == expected


def test_an_overwrite_records_every_row_it_replaces():
    with fresh_lake(inline_limit=10) as lake:
        Step("overwrite", ((1, "a", 1.0, None), (None, "b", None, None))).apply(lake)
        Step("overwrite", ((5, "z", 5.0, None),)).apply(lake)
        assert captured_rows(lake, "k, v, w") == [(1, "a", 1.0), (None, "b", None)]


def test_a_job_failing_after_its_capture_leaves_no_snapshot_and_no_captured_rows():
    with fresh_lake() as lake:
        Step("overwrite", ((1, "a", 1.0, None),)).apply(lake)
        Step("merge", ((1, "upsert", "b", 2.0, None),)).apply(lake)
        before = captured_rows(lake)
        # an overwrite whose file holds text where the table has DOUBLE: registering it fails
        # after the old rows were captured and deleted, inside the one transaction
        schema = T.StructType([T.StructField(c, SPARK_TYPES[c]) for c in BASE])
        writer = DuckLakeWriter(LakeOptions.parse(lake.options), schema, overwrite=True)
        batch = pa.record_batch(
            [pa.array([2]), pa.array(["c"]), pa.array(["not a number"])], names=list(BASE)
        )
        with pytest.raises(duckdb.Error):
            writer.commit([writer.write(iter([batch]))])
        with lake.connection() as con:
            (snapshots,) = con.execute("SELECT count(*) FROM lake.snapshots()").fetchone()
            assert con.execute("SELECT k, v, w FROM lake.raw.t").fetchall() == [(1, "b", 2.0)]
        assert captured_rows(lake) == before
        assert snapshots == 3  # the lake, the first load, the merge


def test_a_column_the_source_gains_is_added_to_its_change_table():
    with fresh_lake() as lake:
        Step("overwrite", ((1, "a", 1.0, None), (2, "b", 2.0, None))).apply(lake)
        Step("merge", ((1, "upsert", "A", 1.5, None),)).apply(lake)
        Step("add_column").apply(lake)
        Step("merge", ((2, "upsert", "B", 2.5, 7),)).apply(lake)
        Step("merge", ((2, "delete", None, None, None),)).apply(lake)
        assert captured_rows(lake, "k, v, w, x") == [
            (1, "a", 1.0, None),
            (2, "B", 2.5, 7),
            (2, "b", 2.0, None),
        ]


def test_capture_can_be_turned_off():
    with fresh_lake() as lake:
        Step("overwrite", ((1, "a", 1.0, None),)).apply(lake)
        assert LakeOptions.parse({**lake.options, "capture_preimages": "false"}).capture is False
        with pytest.raises(ConfigurationError, match="true or false"):
            LakeOptions.parse({**lake.options, "capture_preimages": "maybe"})


# -- what maintenance reads ----------------------------------------------------------------------


def test_a_window_of_merges_reads_captured_pre_images_alone():
    with fresh_lake() as lake:
        Step("overwrite", tuple((k, "a", float(k), None) for k in range(20))).apply(lake)
        Step("merge", ((1, "upsert", "b", 0.5, None), (2, "delete", None, None, None))).apply(lake)
        Step("merge", ((1, "upsert", "c", 0.5, None), (3, "delete", None, None, None))).apply(lake)
        with lake.connection() as con:
            (new,) = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()
            read = captured.ended_rows(con, SOURCE, source_id(con), new - 2, new, BASE)
            assert read.note == "ended rows of lake.raw.t read from captured pre-images"
            assert read.rows.sql is not None and "read_parquet" not in read.rows.sql
            assert sorted(con.execute(read.rows.sql).fetchall())[:3] == [
                (1, "a", 1.0, 1),
                (2, "a", 2.0, 2),
                (3, "a", 3.0, 3),
            ]
            assert_window(con, new - 2, new)


def test_a_write_by_duckdb_sql_is_read_from_the_files_and_says_so():
    with fresh_lake() as lake:
        Step("overwrite", tuple((k, "a", float(k), None) for k in range(20))).apply(lake)
        Step("merge", ((1, "upsert", "b", 0.5, None),)).apply(lake)
        Step("sql", statements=("DELETE FROM raw.t WHERE k = 5",)).apply(lake)
        with lake.connection() as con:
            (new,) = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()
            read = captured.ended_rows(con, SOURCE, source_id(con), new - 2, new, BASE)
            assert read.note == (
                "ended rows of lake.raw.t read from captured pre-images; ended rows of "
                f"lake.raw.t read from data files for snapshot(s) {new} (without captured "
                "pre-images)"
            )
            assert sorted(con.execute(read.rows.sql).fetchall()) == [
                (1, "a", 1.0, 1),
                (5, "a", 5.0, 5),
            ]
            assert_window(con, new - 2, new)


def test_the_run_reason_says_where_ended_rows_were_read():
    with fresh_lake() as lake:
        Step("overwrite", tuple((k, "a", float(k), None) for k in range(20))).apply(lake)
        with attached(lake) as con:
            plan = prepare(con, VIEWS["by_key"], "by_key", catalog="lake")
            refresh(con, plan, rebuild_above=None)
            merge = ((1, "upsert", "b", 0.5, None), (2, "delete", None, None, None))
            writing(con, lake, Step("merge", merge))
            result = refresh(con, plan, rebuild_above=None)
            assert result.strategy == "incremental"
            assert "ended rows of lake.raw.t read from captured pre-images" in result.reason
            assert_consistent(con, "lake.main.by_key", VIEWS["by_key"])


def test_expiry_deletes_the_captured_rows_of_expired_snapshots():
    with fresh_lake() as lake:
        Step("overwrite", tuple((k, "a", float(k), None) for k in range(5))).apply(lake)
        Step("merge", ((1, "upsert", "b", 0.5, None),)).apply(lake)
        Step("merge", ((2, "upsert", "b", 0.5, None),)).apply(lake)
        with lake.connection() as con:
            (last,) = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()
            con.execute(f"CALL ducklake_expire_snapshots('lake', versions => [0, {last - 2}])")
            assert expire_captured_rows(con, "lake") == 1
            assert con.execute(f"SELECT k FROM {CHANGES}").fetchall() == [(2,)]
            assert expire_captured_rows(con, "lake") == 0
            con.execute("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
            assert con.execute(f"SELECT k FROM {CHANGES}").fetchall() == [(2,)]


def test_a_widened_column_is_widened_in_the_change_table():
    with fresh_lake() as lake:
        lake.sql(["CREATE SCHEMA raw", "CREATE TABLE raw.t (k BIGINT, v VARCHAR, w FLOAT)"])
        lake.sql(["INSERT INTO raw.t VALUES (1, 'a', 1.5), (2, 'b', 2.5)"])

        def merge(w_type, arrow_type, key: int) -> None:
            fields = [("k", T.LongType(), pa.int64()), ("v", T.StringType(), pa.string())]
            fields += [("w", w_type, arrow_type), ("_op", T.StringType(), pa.string())]
            schema = T.StructType([T.StructField(n, t) for n, t, _ in fields])
            options = LakeOptions.parse({**lake.options, "merge_on": "k"})
            writer = DuckLakeWriter(options, schema, overwrite=False)
            values = [[key], ["c"], [0.25], ["upsert"]]
            batch = pa.record_batch(
                [pa.array(v, type=a) for v, (_, _, a) in zip(values, fields, strict=True)],
                names=[n for n, _, _ in fields],
            )
            writer.commit([writer.write(iter([batch]))])

        merge(T.FloatType(), pa.float32(), 1)
        lake.sql(["ALTER TABLE raw.t ALTER w SET DATA TYPE DOUBLE"])
        merge(T.DoubleType(), pa.float64(), 2)
        with lake.connection() as con:
            kinds = dict(
                con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {CHANGES})").fetchall()
            )
        assert kinds["w"] == "DOUBLE"
        assert captured_rows(lake, "k, v, w") == [(1, "a", 1.5), (2, "b", 2.5)]


# -- what the cost estimate prices ---------------------------------------------------------------


def test_the_estimate_prices_captured_pre_images_as_the_rows_read_not_their_row_groups():
    """A merge ending 2 of 2,000 file rows: read from the change table, its pre-images cost
    those 2 rows; the same deletions by DuckDB SQL cost the row groups that held them (the
    whole file here), as the reader of data files decodes them."""
    from dbt_duckstream.runtime.decide.costs import PRE_IMAGE_WEIGHT, estimate
    from dbt_duckstream.runtime.lake import lake_identity, table_ids

    rows = tuple((k, "a", float(k), None) for k in range(2_000))
    priced = {}
    for how, step in (
        (
            "captured",
            Step("merge", ((1, "delete", None, None, None), (2, "delete", None, None, None))),
        ),
        ("sql", Step("sql", statements=("DELETE FROM raw.t WHERE k IN (1, 2)",))),
    ):
        with fresh_lake() as lake:
            Step("overwrite", rows).apply(lake)
            with attached(lake) as con:
                plan = prepare(con, VIEWS["positive"], "positive", catalog="lake")
                refresh(con, plan, rebuild_above=None)
                (old,) = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()
                writing(con, lake, step)
                (new,) = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()
                ids = table_ids(con, [SOURCE, plan.target])
                priced[how] = estimate(
                    con,
                    plan,
                    {"lake": (old, new)},
                    {SOURCE.key: (old, new)},
                    ids,
                    {SOURCE.key: len(rows), plan.target.key: len(rows)},
                    lambda catalog, con=con: lake_identity(con, catalog),
                )
    assert priced["captured"].changed_rows == priced["sql"].changed_rows == 2
    difference = priced["sql"].maintain_rows - priced["captured"].maintain_rows
    assert difference == int(PRE_IMAGE_WEIGHT * len(rows)) - 2


def test_a_file_ending_whole_after_a_captured_merge_yields_each_ended_row_once():
    """Found by the Spark family: a merge (captured) ends a row of the first file, and a later
    SQL transaction touching a row twice ends that whole file. The file's rows are read but
    for those the merge ended, which come from the change table; they used to come twice."""
    nulls = (None, None, None, None)
    overwrite = (nulls, nulls, (5, None, None, None), nulls, nulls, nulls, (7, None, None, None))
    steps = [
        Step("add_column"),
        Step(
            "merge",
            (
                (6, "delete", None, 1.5, None),
                (7, "insert", "a", None, None),
                (0, "insert", "c", None, 1),
                (2, "insert", "c", 0.0, None),
                (5, "insert", None, None, None),
                (1, "upsert", None, None, -2),
            ),
        ),
        Step(
            "merge",
            (
                (8, "insert", "a", None, 0),
                (4, "upsert", "c", -1.0, -2),
                (7, "upsert", "b", None, None),
            ),
        ),
        Step("expire"),
        Step(
            "sql",
            statements=(
                "UPDATE raw.t SET w = 9.5 WHERE k IN (5, 1)",
                "UPDATE raw.t SET v = 'twice' WHERE k = 5",
            ),
        ),
    ]
    with fresh_lake() as lake:
        points = play(lake, Step("overwrite", overwrite), steps)
        with lake.connection() as con:
            for old, new in windows(points):
                assert_window(con, old, new)
