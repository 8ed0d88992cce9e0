"""Random histories of a source written by the Spark writer and by DuckDB SQL, and the checks
that its captured pre-images make the exact minus side of every window.

The writer is driven through its own code, the part each executor runs (``write``: a Parquet
file per task) and the part the driver runs (``commit``), with Arrow batches as Spark would
hand them over; ``test_capture_spark`` runs the same histories through Spark itself.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from dbt_duckstream.runtime import captured
from dbt_duckstream.runtime.lake import attach_lake, table_id
from dbt_duckstream.spark.options import LakeOptions
from dbt_duckstream.spark.writer import DuckLakeWriter
from dbt_duckstream.sql import TableRef

from .harness import expire_before
from .test_preimages import bag_difference, definition_sql, exact_delta

SOURCE = TableRef("lake", "raw", "t")
#: the source's columns (``x`` once a step added it), as Spark and Arrow type them
SPARK_TYPES = {"k": T.LongType(), "v": T.StringType(), "w": T.DoubleType(), "x": T.LongType()}
ARROW_TYPES = {"k": pa.int64(), "v": pa.string(), "w": pa.float64(), "x": pa.int64()}
BASE = ("k", "v", "w")


@dataclass
class Lake:
    """A lake in a temporary directory, its catalog a SQLite file (several connections of one
    process may attach it) or a DuckDB file (one at a time: ``connection`` closes after use).
    With ``spark``, writes go through Spark's ``df.write.format("ducklake")``."""

    directory: Path
    catalog: str
    columns: list[str] = field(default_factory=lambda: list(BASE))
    spark: SparkSession | None = None

    @property
    def options(self) -> dict[str, str]:
        return {
            "catalog": self.catalog,
            "data_path": str(self.directory / "data"),
            "table": f"{SOURCE.schema}.{SOURCE.name}",
        }

    @contextlib.contextmanager
    def connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        con = duckdb.connect()
        try:
            attach_lake(con, self.catalog, data_path=self.options["data_path"])
            yield con
        finally:
            con.close()

    def write(self, rows: list[tuple], mode: str = "append", merge_on: str = "") -> None:
        """What ``df.write.format("ducklake")`` does with a DataFrame of ``rows`` (the
        current columns, then the operation when ``merge_on`` is set), in one task."""
        names = list(self.columns) + (["_op"] if merge_on else [])
        spark_types = {**SPARK_TYPES, "_op": T.StringType()}
        arrow_types = {**ARROW_TYPES, "_op": pa.string()}
        schema = T.StructType([T.StructField(n, spark_types[n]) for n in names])
        options = {**self.options, **({"merge_on": merge_on} if merge_on else {})}
        if self.spark is not None:
            frame = self.spark.createDataFrame(rows, schema)
            frame.write.format("ducklake").options(**options).mode(mode).save()
            return
        writer = DuckLakeWriter(LakeOptions.parse(options), schema, mode == "overwrite")
        batch = pa.record_batch(
            [pa.array([r[i] for r in rows], type=arrow_types[n]) for i, n in enumerate(names)],
            names=names,
        )
        writer.commit([writer.write(iter([batch]))])

    def sql(self, statements: list[str]) -> None:
        """One transaction of DuckDB SQL (a write this lake's captures know nothing of)."""
        with self.connection() as con:
            con.execute("USE lake")
            con.execute("BEGIN")
            for statement in statements:
                con.execute(statement)
            con.execute("COMMIT")


@contextlib.contextmanager
def fresh_lake(
    backend: str = "duckdb", inline_limit: int = 0, spark: SparkSession | None = None
) -> Iterator[Lake]:
    directory = Path(tempfile.mkdtemp(prefix="duckstream-capture-"))
    catalog = (
        f"sqlite:{directory / 'lake.sqlite'}"
        if backend == "sqlite"
        else str(directory / "lake.ducklake")
    )
    lake = Lake(directory, catalog, spark=spark)
    try:
        with lake.connection() as con:
            con.execute(f"CALL lake.set_option('data_inlining_row_limit', {inline_limit})")
            con.execute("CALL lake.set_option('parquet_row_group_size', 4)")
        yield lake
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# -- steps ---------------------------------------------------------------------------------------

keys = st.integers(0, 9)
texts = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "dd"]))
weights = st.one_of(st.none(), st.integers(-3, 3).map(lambda i: i / 2))
extras = st.one_of(st.none(), st.integers(-5, 5))
row = st.tuples(st.one_of(st.none(), keys), texts, weights, extras)
rows = st.lists(row, min_size=1, max_size=12)
changes = st.lists(
    st.tuples(
        keys, st.sampled_from(["upsert", "update", "insert", "delete"]), texts, weights, extras
    ),
    min_size=1,
    max_size=8,
    unique_by=lambda c: c[0],
)


@dataclass(frozen=True)
class Step:
    kind: str  # append, overwrite, merge, sql, add_column, expire, compact
    rows: tuple = ()
    statements: tuple[str, ...] = ()

    def apply(self, lake: Lake) -> None:
        width = len(lake.columns)
        if self.kind in ("append", "overwrite"):
            lake.write([r[:width] for r in self.rows], self.kind)
        elif self.kind == "merge":
            merged = [(*(k, v, w, x)[:width], op) for k, op, v, w, x in self.rows]
            lake.write(merged, merge_on="k")
        elif self.kind == "sql":
            lake.sql(list(self.statements))
        elif self.kind == "add_column":
            if "x" not in lake.columns:
                lake.sql(["ALTER TABLE raw.t ADD COLUMN x BIGINT"])
                lake.columns.append("x")
        elif self.kind == "expire":
            # every snapshot but the last two, and the rows captured in them
            with lake.connection() as con:
                (last,) = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()
                (older,) = con.execute(
                    f"SELECT count(*) FROM lake.snapshots() WHERE snapshot_id < {last - 1}"
                ).fetchone()
                if older:
                    expire_before(con, last - 1)
        elif self.kind == "compact":
            with lake.connection() as con:
                con.execute("CALL ducklake_flush_inlined_data('lake')")
                con.execute("CALL ducklake_merge_adjacent_files('lake')")


def _sql_steps(k: int, j: int) -> st.SearchStrategy[Step]:
    return st.sampled_from(
        [
            Step("sql", statements=(f"DELETE FROM raw.t WHERE k = {k}",)),
            Step("sql", statements=(f"UPDATE raw.t SET v = 'sql' WHERE k = {k}",)),
            # one transaction touching a row twice (duckdb/ducklake#1387)
            Step(
                "sql",
                statements=(
                    f"UPDATE raw.t SET w = 9.5 WHERE k IN ({k}, {j})",
                    f"UPDATE raw.t SET v = 'twice' WHERE k = {k}",
                ),
            ),
            Step(
                "sql",
                statements=(
                    f"UPDATE raw.t SET v = 'gone' WHERE k = {k}",
                    f"DELETE FROM raw.t WHERE k = {j}",
                ),
            ),
        ]
    )


steps = st.one_of(
    rows.map(lambda r: Step("append", tuple(r))),
    rows.map(lambda r: Step("overwrite", tuple(r))),
    changes.map(lambda c: Step("merge", tuple(c))),
    changes.map(lambda c: Step("merge", tuple(c))),
    st.tuples(keys, keys).flatmap(lambda kj: _sql_steps(*kj)),
    st.tuples(keys, keys).flatmap(lambda kj: _sql_steps(*kj)),
    st.just(Step("add_column")),
    st.just(Step("compact")),
    st.just(Step("expire")),
)
#: histories start with an overwrite (the table's first load), then change it
histories = st.tuples(rows.map(lambda r: Step("overwrite", tuple(r))), st.lists(steps, max_size=8))


def play(lake: Lake, first: Step, history: list[Step]) -> list[int]:
    """Apply the steps; the live snapshots from the table's creation on."""
    first.apply(lake)
    for step in history:
        step.apply(lake)
    with lake.connection() as con:
        # the snapshots left (an expiry leaves the table's creation behind)
        found = con.execute(
            "SELECT snapshot_id FROM lake.snapshots() WHERE snapshot_id >= coalesce(("
            "SELECT min(snapshot_id) FROM lake.snapshots() "
            "WHERE list_contains(changes['tables_created'], 'raw.t')), 0) ORDER BY 1"
        ).fetchall()
    return [int(s) for (s,) in found]


# -- the checks ----------------------------------------------------------------------------------


def source_id(con: duckdb.DuckDBPyConnection) -> int:
    found = table_id(con, SOURCE)
    assert found is not None
    return found


def assert_window(con: duckdb.DuckDBPyConnection, old: int, new: int) -> str:
    """The minus side read with captured pre-images makes the exact delta of ``(old, new]``
    and equals the time-travel pre-images wherever those make it too; returns the note."""
    read = captured.ended_rows(con, SOURCE, source_id(con), old, new, BASE)
    minus = read.rows.sql
    definition = definition_sql(SOURCE, old, new, BASE)
    exact = exact_delta(con, definition, old, new, BASE, SOURCE)
    if minus is None:  # a layout only time travel reads: the runtime uses the definition
        return read.note
    assert exact_delta(con, minus, old, new, BASE, SOURCE), (old, new, read.note)
    if exact:
        _, _, extra, missing = bag_difference(con, minus, definition)
        assert extra == missing == 0, (old, new, read.note)
    return read.note
