"""The capture property through Spark itself: random histories written with
``df.write.format("ducklake")`` (Spark in local mode, one session for the module), each
window's captured minus side equal to the time-travel pre-images and exact. Spark takes
seconds a job, so a few histories here; ``test_capture`` draws hundreds through the writer's
own code, and the ``slow`` family below more through Spark.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import SparkSession  # noqa: E402

from dbt_duckstream.runtime.change_tables import change_table  # noqa: E402

from .capture_histories import (  # noqa: E402
    SOURCE,
    Step,
    assert_window,
    fresh_lake,
    histories,
    play,
)
from .test_capture import windows  # noqa: E402

pytestmark = pytest.mark.xdist_group("spark")


def check(spark: SparkSession, history, inline_limit: int) -> None:
    first, steps = history
    with fresh_lake(inline_limit=inline_limit, spark=spark) as lake:
        points = play(lake, first, steps)
        with lake.connection() as con:
            for old, new in windows(points):
                assert_window(con, old, new)


@given(history=histories, inline_limit=st.sampled_from([0, 10]))
@settings(max_examples=3, deadline=None)
def test_spark_histories_capture_the_time_travel_pre_images(spark, history, inline_limit):
    check(spark, history, inline_limit)


@pytest.mark.slow
@given(history=histories, inline_limit=st.sampled_from([0, 10]))
@settings(max_examples=25, deadline=None)
def test_more_spark_histories_capture_the_time_travel_pre_images(spark, history, inline_limit):
    check(spark, history, inline_limit)


def test_a_spark_merge_and_overwrite_record_what_they_end(spark):
    with fresh_lake(inline_limit=10, spark=spark) as lake:
        Step("overwrite", tuple((k, "a", float(k), None) for k in range(6))).apply(lake)
        Step("append", ((1, "dup", 1.5, None),)).apply(lake)
        merge = ((1, "upsert", "b", 0.5, None), (2, "delete", None, None, None))
        Step("merge", merge).apply(lake)
        Step("overwrite", ((9, "z", 9.0, None),)).apply(lake)
        with lake.connection() as con:
            snapshots = [
                s for (s,) in con.execute("SELECT snapshot_id FROM lake.snapshots()").fetchall()
            ]
            rows = con.execute(
                f"SELECT snapshot_id, k, v FROM {change_table(SOURCE).sql()} ORDER BY ALL"
            ).fetchall()
            merged, replaced = snapshots[-2], snapshots[-1]
            assert rows == [
                (merged, 1, "a"),
                (merged, 1, "dup"),
                (merged, 2, "a"),
                *sorted(
                    [(replaced, k, "a") for k in (0, 1, 3, 4, 5) if k != 1]
                    + [(replaced, 1, "b"), (replaced, 1, "b")]
                ),
            ]
            for old in snapshots[-4:-1]:
                assert_window(con, old, replaced)
