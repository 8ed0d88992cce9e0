"""The ``ducklake`` Spark data source, with Spark in local mode."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

from dbt_duckstream.runtime.lake import attach_lake  # noqa: E402

from .postgres import create_database  # noqa: E402

pytestmark = pytest.mark.xdist_group("spark")


@pytest.fixture(params=["duckdb", "sqlite", "postgres"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """Options naming a fresh lake, with each catalog backend."""
    catalog = str(tmp_path / "lake.ducklake")
    if request.param == "sqlite":
        catalog = f"sqlite:{tmp_path / 'lake.sqlite'}"
    if request.param == "postgres":
        name = f"lake_{uuid.uuid4().hex[:12]}"
        catalog = f"postgres:{create_database(request.getfixturevalue('postgres'), name)}"
    return {"catalog": catalog, "data_path": str(tmp_path / "data"), "table": "raw.t"}


def query(lake: dict[str, str], sql: str) -> list[tuple]:
    con = duckdb.connect()
    try:
        attach_lake(con, lake["catalog"], data_path=lake["data_path"])
        return con.execute(sql).fetchall()
    finally:
        con.close()


def snapshots(lake: dict[str, str]) -> list[tuple]:
    return query(lake, "SELECT snapshot_id, changes, commit_message FROM lake.snapshots()")


def changes(lake: dict[str, str], snapshot: int) -> dict[str, int]:
    rows = query(
        lake,
        "SELECT change_type, count(*) FROM "
        f"ducklake_table_changes('lake', 'raw', 't', {snapshot}, {snapshot}) GROUP BY ALL",
    )
    return dict(rows)


def parquet_files(lake: dict[str, str]) -> set[str]:
    return {str(p) for p in Path(lake["data_path"]).rglob("*") if p.is_file()}


def frame(spark: SparkSession, ids: range, status: str = "placed"):
    return spark.range(ids.start, ids.stop, numPartitions=2).select(
        F.col("id").cast("int").alias("id"),
        F.lit(status).alias("status"),
        (F.col("id") / 4).cast("decimal(12,2)").alias("amount"),
    )


def write(df, lake: dict[str, str], mode: str = "append", **options: str) -> None:
    df.write.format("ducklake").options(**lake, **options).mode(mode).save()


def test_append_is_one_snapshot_of_inserts(spark: SparkSession, lake: dict[str, str]) -> None:
    write(frame(spark, range(0, 1000)), lake)
    write(frame(spark, range(1000, 1500)), lake)
    history = snapshots(lake)
    assert len(history) == 3  # the lake's creation, then one snapshot per job
    assert history[-1][2].startswith("spark append into lake.raw.t: 2 files")
    assert changes(lake, history[-1][0]) == {"insert": 500}
    assert query(lake, "SELECT count(*), sum(id) FROM lake.raw.t") == [(1500, sum(range(1500)))]


def test_overwrite_replaces_in_one_snapshot(spark: SparkSession, lake: dict[str, str]) -> None:
    write(frame(spark, range(0, 100)), lake)
    write(frame(spark, range(50, 60), "shipped"), lake, mode="overwrite")
    history = snapshots(lake)
    assert len(history) == 3
    assert changes(lake, history[-1][0]) == {"delete": 100, "insert": 10}
    assert query(lake, "SELECT count(*), min(status) FROM lake.raw.t") == [(10, "shipped")]


def test_merge_updates_deletes_and_inserts_by_key(
    spark: SparkSession, lake: dict[str, str]
) -> None:
    write(frame(spark, range(0, 100)), lake)
    change_set = spark.createDataFrame(
        [
            (1, "shipped", Decimal("9.50"), "update"),
            (2, "x", None, "delete"),
            (3, "returned", None, "upsert"),
            (500, "placed", Decimal("1.00"), "insert"),
            (999, "x", None, "delete"),
        ],
        "id int, status string, amount decimal(12,2), _op string",
    )
    write(change_set, lake, merge_on="id")
    history = snapshots(lake)
    assert len(history) == 3
    assert changes(lake, history[-1][0]) == {
        "update_preimage": 2,
        "update_postimage": 2,
        "delete": 1,
        "insert": 1,
    }
    rows = query(
        lake, "SELECT id, status, amount FROM lake.raw.t WHERE id IN (1, 2, 3, 500) ORDER BY id"
    )
    assert rows == [
        (1, "shipped", Decimal("9.50")),
        (3, "returned", None),
        (500, "placed", Decimal("1.00")),
    ]


def test_a_merge_lands_floats_as_spark_had_them(spark: SparkSession, lake: dict[str, str]) -> None:
    """A small merge is inlined into the catalog; with a DuckDB catalog, DuckLake would store
    about one float in twenty one bit off (``runtime/inlining.py``)."""
    values = [10 / 11, 0.12088995980580641, 0.9321874718936273, 0.00018092983640471738]
    write(spark.createDataFrame([(0, 0.5)], "id int, x double"), lake)
    change_set = spark.createDataFrame(list(enumerate(values)), "id int, x double")
    write(change_set, lake, merge_on="id")
    assert query(lake, "SELECT x FROM lake.raw.t ORDER BY id") == [(v,) for v in values]


def test_merge_refuses_two_changes_to_one_key(spark: SparkSession, lake: dict[str, str]) -> None:
    write(frame(spark, range(0, 10)), lake)
    before = snapshots(lake)
    twice = spark.createDataFrame(
        [(1, "a", None, "update"), (1, "b", None, "delete")],
        "id int, status string, amount decimal(12,2), _op string",
    )
    with pytest.raises(Exception, match="several rows for key"):
        write(twice, lake, merge_on="id")
    assert snapshots(lake) == before
    assert not list(Path(lake["data_path"]).rglob("_duckstream_staging/*"))


def test_schema_mismatch_names_the_columns(spark: SparkSession, lake: dict[str, str]) -> None:
    write(frame(spark, range(0, 10)), lake)
    before, files = snapshots(lake), parquet_files(lake)
    wrong = (
        frame(spark, range(10, 20))
        .drop("status")
        .withColumn("amount", F.col("amount").cast("double"))
        .withColumn("note", F.lit("n"))
    )
    with pytest.raises(Exception) as raised:
        write(wrong, lake)
    message = str(raised.value)
    assert "missing from the DataFrame: status" in message
    assert "not in the table: note" in message
    assert "amount (DOUBLE in the DataFrame, DECIMAL(12,2) in the table)" in message
    assert snapshots(lake) == before
    assert parquet_files(lake) == files


def test_a_job_failing_midway_leaves_the_table_as_it_was(
    spark: SparkSession, lake: dict[str, str]
) -> None:
    write(frame(spark, range(0, 100)), lake)
    before, files = snapshots(lake), parquet_files(lake)

    @F.udf("int")
    def explode_on_the_last_row(value: int) -> int:
        if value == 1999:
            raise ValueError("the pipeline broke")
        return value

    failing = frame(spark, range(100, 2000)).withColumn("id", explode_on_the_last_row("id"))
    with pytest.raises(Exception, match="the pipeline broke"):
        write(failing, lake)
    assert snapshots(lake) == before
    assert parquet_files(lake) == files  # no orphaned Parquet files
    assert query(lake, "SELECT count(*) FROM lake.raw.t") == [(100,)]


def test_types_map_both_ways(spark: SparkSession, lake: dict[str, str]) -> None:
    schema = T.StructType(
        [
            T.StructField("b", T.BooleanType()),
            T.StructField("i8", T.ByteType()),
            T.StructField("i16", T.ShortType()),
            T.StructField("i32", T.IntegerType()),
            T.StructField("i64", T.LongType()),
            T.StructField("f32", T.FloatType()),
            T.StructField("f64", T.DoubleType()),
            T.StructField("dec", T.DecimalType(20, 4)),
            T.StructField("s", T.StringType()),
            T.StructField("bin", T.BinaryType()),
            T.StructField("d", T.DateType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("ntz", T.TimestampNTZType()),
            T.StructField("arr", T.ArrayType(T.IntegerType())),
        ]
    )
    instant = dt.datetime(2026, 11, 21, 12, 30, 15, 123456, tzinfo=dt.UTC)
    row = (
        True,
        1,
        2,
        3,
        4,
        1.5,
        2.25,
        Decimal("12345678.1234"),
        "é",
        b"\x00\x01",
        dt.date(2026, 1, 2),
        instant,
        dt.datetime(2026, 1, 2, 3, 4, 5),
        [1, None, 3],
    )
    df = spark.createDataFrame([row, tuple(None for _ in row)], schema)
    write(df, lake)
    types = dict(query(lake, "SELECT column_name, column_type FROM (DESCRIBE lake.raw.t)"))
    assert types == {
        "b": "BOOLEAN",
        "i8": "TINYINT",
        "i16": "SMALLINT",
        "i32": "INTEGER",
        "i64": "BIGINT",
        "f32": "FLOAT",
        "f64": "DOUBLE",
        "dec": "DECIMAL(20,4)",
        "s": "VARCHAR",
        "bin": "BLOB",
        "d": "DATE",
        "ts": "TIMESTAMP WITH TIME ZONE",
        "ntz": "TIMESTAMP",
        "arr": "INTEGER[]",
    }
    back = spark.read.format("ducklake").options(**lake).load()
    assert back.schema == schema
    assert sorted(back.collect(), key=lambda r: r.b is None) == sorted(
        df.collect(), key=lambda r: r.b is None
    )


def test_read_at_a_snapshot_sees_deletes(spark: SparkSession, lake: dict[str, str]) -> None:
    write(frame(spark, range(0, 3000)), lake)
    old = snapshots(lake)[-1][0]
    deletes = spark.createDataFrame(
        [(i, "", None, "delete") for i in range(0, 3000, 3)],
        "id int, status string, amount decimal(12,2), _op string",
    )
    write(deletes, lake, merge_on="id")
    now = spark.read.format("ducklake").options(**lake, partitions="3").load()
    assert now.count() == 2000
    assert now.filter("id % 3 = 0").count() == 0
    then = spark.read.format("ducklake").options(**lake, snapshot=str(old)).load()
    assert then.count() == 3000


def test_missing_options_say_what_to_set(spark: SparkSession) -> None:
    with pytest.raises(Exception, match='option\\("catalog"'):
        spark.range(1).write.format("ducklake").mode("append").save()


def test_a_snapshot_before_a_rewrite_and_a_flush_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    """DuckLake reads such a snapshot wrongly (duckdb/ducklake#1406): deleted rows come back."""
    lake = {
        "catalog": str(tmp_path / "lake.ducklake"),
        "data_path": str(tmp_path / "data"),
        "table": "raw.t",
    }
    write(frame(spark, range(0, 30)), lake)
    con = duckdb.connect()
    try:
        attach_lake(con, lake["catalog"], data_path=lake["data_path"])
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute("DELETE FROM lake.raw.t WHERE id = 0")  # a delete file
        con.execute("CALL lake.set_option('data_inlining_row_limit', 10)")
        con.execute("DELETE FROM lake.raw.t WHERE id = 1")  # an inlined deletion of a file row
        (old,) = con.execute("SELECT id FROM lake.current_snapshot()").fetchone()
        (live_then,) = con.execute("SELECT count(*) FROM lake.raw.t").fetchone()
        con.execute("CALL ducklake_rewrite_data_files('lake', delete_threshold => 0)")
        (rewritten,) = con.execute("SELECT id FROM lake.current_snapshot()").fetchone()
        con.execute("INSERT INTO lake.raw.t VALUES (100, 'late', 1.00)")  # inlined
        con.execute("SET threads = 1")  # see the README on flushing
        con.execute("CALL ducklake_flush_inlined_data('lake')")
        (travelled,) = con.execute(
            f"SELECT count(*) FROM lake.raw.t AT (VERSION => {old})"
        ).fetchone()
        changes = con.execute(
            "SELECT string_agg(changes_made, ',') "
            "FROM __ducklake_metadata_lake.ducklake_snapshot_changes"
        ).fetchone()
    finally:
        con.close()
    assert changes is not None and "rewrite_delete" in changes[0] and "inline_flush" in changes[0]
    # what the refusal spares a job: here 43 rows read for the 28 that lived (DuckLake d8a1881e)
    assert live_then == 28 and travelled != live_then
    with pytest.raises(Exception, match=f"snapshot {old} of lake.raw.t cannot be read"):
        spark.read.format("ducklake").options(**lake, snapshot=str(old)).load().count()
    then = spark.read.format("ducklake").options(**lake, snapshot=str(rewritten)).load()
    assert then.count() == 28
    assert spark.read.format("ducklake").options(**lake).load().count() == 29
