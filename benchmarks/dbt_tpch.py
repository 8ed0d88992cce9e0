"""The TPC-H benchmark through dbt: what a user's ``dbt run`` costs, maintained against rebuilt.

    python -m benchmarks.dbt_tpch [--scale 1] [--out docs/benchmark/dbt]
                                  [--batches one,0.001,0.1] [--mixes append,mixed[,spark]]
                                  [--repetitions 3] [--views q1,q3,...]

The views (``queries.VIEWS``) are the models of a dbt project (``twin_project``), built both as
``incremental_ivm`` and as ``table`` models of the same SQL. After every refresh batch each side
runs as a fresh ``dbt run`` process, as an orchestrator starts it, the side that goes first
alternating per repetition; each model's ``execution_time`` and strategy, its run's breakdown
(``Breakdown.parse`` of its summary) and each invocation's wall time are kept. After each pair
every maintained model must equal its ``table`` twin, or the benchmark stops. Batches: one
order (``one``: appended, or one order each inserted, deleted and updated) or a share of
lineitem's rows (``refresh.batch_for``); ``append`` or ``mixed``, written by DuckDB SQL, or
``spark``: mixed batches of the same shape and size that Spark lands through the project's
writer (``spark_refresh``: merges that capture their pre-images; one Spark session for the
whole benchmark, stopped before the runs with no change). Last, both sides run with no
change. Both sides run with ``DUCKSTREAM_PROFILE=1``, so both pay the query log's overhead;
last, the maintained side runs with and without it after one appended order, which measures
that overhead.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from dbt_duckstream.bridge.dbt_process import Launch, dbt_command, dbt_environment, run_dbt
from dbt_duckstream.runtime.breakdown import PROFILE, Breakdown
from dbt_duckstream.runtime.lake import attach_lake

from . import dbt_report
from .dbt_report import NONE, ONE, OVERHEAD, SPARK
from .queries import VIEWS
from .refresh import LINES_PER_ORDER, MIXES, Batch, apply_batch, batch_for, generate
from .tpch import check
from .twin_project import MAINTAINED, REBUILT, SIDES, SOURCES, Side, Timed, run_side, write_project

if TYPE_CHECKING:  # Spark is an extra: imported when a series has the spark mix
    from .spark_refresh import SparkWriter

SOURCE = f"lake.{SOURCES}"


@dataclass
class Sample:
    """One model's run on one side after one batch."""

    mix: str  # "append", "mixed", "spark", "none" (no change), "overhead" (the profile's cost)
    batch: str  # "one", a ratio ("0.001"), or "none"
    repetition: int
    view: str
    side: str
    first: bool  # its side ran first after the batch
    position: int  # the model's place in its invocation's run order, from 0
    strategy: str
    execution_ms: float
    breakdown: dict[str, float]
    batch_rows: int  # lineitem rows the batch touched
    message: str  # the maintained run's summary


@dataclass
class Wall:
    """One ``dbt run`` invocation's wall time, the process's start to its exit."""

    mix: str
    batch: str
    repetition: int
    side: str
    first: bool
    wall_ms: float


@dataclass
class Series:
    """Everything one benchmark measured, as ``samples.json`` keeps it."""

    scale: float
    repetitions: int
    views: list[str]
    profiled: bool
    samples: list[Sample] = field(default_factory=list)
    walls: list[Wall] = field(default_factory=list)
    setup_s: dict[str, float] = field(default_factory=dict)


#: the mixes a series may run: DuckDB SQL's, and Spark's (``spark_refresh``)
KNOWN_MIXES = (*MIXES, SPARK)


def shape(mix: str) -> str:
    """The refresh mix whose shape and sizes a mix's batches have: Spark's are mixed."""
    return "mixed" if mix == SPARK else mix


def one_order(mix: str) -> Batch:
    """One order appended, or one order each inserted, deleted and updated (and one
    lineitem's discount)."""
    return Batch(0.0, LINES_PER_ORDER if mix == "append" else 3, shape(mix))


def _batch(con: duckdb.DuckDBPyConnection, mix: str, batch: str) -> Batch:
    """What a batch of the mix touches: one order, or a share of lineitem's rows."""
    return one_order(mix) if batch == ONE else batch_for(con, SOURCE, float(batch), shape(mix))


class Lake:
    """The lake's files, opened from this process only between dbt runs (a DuckDB catalog
    file is held by one process at a time), and the Spark session that lands the ``spark``
    mix's batches, started at the first of them (``spark_refresh`` says why it may stay up
    while dbt runs)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._spark: SparkWriter | None = None

    @property
    def catalog(self) -> Path:
        return self.directory / "lake.ducklake"

    @property
    def data_path(self) -> Path:
        return self.directory / "data"

    def connect(self) -> duckdb.DuckDBPyConnection:
        con = duckdb.connect()
        attach_lake(con, str(self.catalog), data_path=str(self.data_path))
        return con

    def apply(self, mix: str, batch: str, seed: int) -> int:
        """Land one batch; the lineitem rows it touches."""
        if mix == SPARK:
            return self._land_with_spark(batch, seed)
        con = self.connect()
        try:
            found = _batch(con, mix, batch)
            apply_batch(con, SOURCE, found, seed)
        finally:
            con.close()
        return found.lineitems

    def _land_with_spark(self, batch: str, seed: int) -> int:
        """A Spark batch: drawn with this process's connection, written by Spark once it is
        closed, so that the writer can open the catalog."""
        from .spark_refresh import change_sets

        con = self.connect()
        try:
            found = _batch(con, SPARK, batch)
            changes = change_sets(con, SOURCE, found, seed)
        finally:
            con.close()
        seconds = self.spark.land(changes, SOURCES)
        _say(f"{SPARK:>6} {batch:>5}: the batch's four Spark jobs took {seconds:.2f} s")
        return found.lineitems

    @property
    def spark(self) -> SparkWriter:
        if self._spark is None:
            from .spark_refresh import SparkWriter

            self._spark = SparkWriter(self.catalog, self.data_path)
        return self._spark

    def stop_spark(self) -> None:
        """Stop the Spark session if one was started: its JVM is not left running beside the
        runs that follow."""
        if self._spark is not None:
            self._spark.stop()
            self._spark = None

    def check_twins(self, views: list[str], when: str) -> None:
        """Every maintained model equals its ``table`` twin; the benchmark stops if not."""
        con = self.connect()
        try:
            for view in views:
                twin = f"SELECT * FROM {REBUILT.relation(view)}"
                try:
                    check(con, view, twin, schema=MAINTAINED.schema)
                except AssertionError as error:
                    raise AssertionError(f"after {when}: {error}") from None
        finally:
            con.close()


def run(
    directory: Path,
    scale: float,
    batches: list[str],
    mixes: list[str],
    repetitions: int,
    views: list[str],
    *,
    launch: Launch = dbt_command,
    profiled: bool = True,
) -> Series:
    """The whole series in ``directory``: the lake, the project, the first builds, every
    batch's pair of runs, the runs with no change, and what profiling costs."""
    series = Series(scale, repetitions, views, profiled)
    lake = Lake(directory / "lake")
    project = directory / "project"
    env = _set_up(series, lake, project, launch)

    def pair(mix: str, batch: str, repetition: int, rows: int) -> None:
        order = SIDES if repetition % 2 == 0 else SIDES[::-1]
        for position, side in enumerate(order):
            timed = run_side(side, project, env, views, launch)
            _record(series, timed, side, mix, batch, repetition, position == 0, rows)

    try:
        for m, mix in enumerate(mixes):
            for b, batch in enumerate(batches):
                for repetition in range(repetitions):
                    seed = 10 * (100 * m + 10 * b + repetition) + 1
                    rows = lake.apply(mix, batch, seed)
                    pair(mix, batch, repetition, rows)
                    lake.check_twins(views, f"{mix} batch {batch}, repetition {repetition + 1}")
    finally:
        lake.stop_spark()
    for repetition in range(repetitions):
        pair(NONE, NONE, repetition, 0)
    if profiled:
        _profile_overhead(series, lake, project, env, launch)
    return series


def _set_up(series: Series, lake: Lake, project: Path, launch: Launch) -> dict[str, str]:
    """TPC-H in the lake, the project, its first builds on both sides; the environment of
    its dbt runs."""
    started = time.perf_counter()
    con = lake.connect()
    try:
        generate(con, series.scale, SOURCE)
    finally:
        con.close()
    series.setup_s["generate"] = time.perf_counter() - started
    _say(f"TPC-H SF{series.scale:g} generated into DuckLake in {series.setup_s['generate']:.1f} s")
    write_project(project, lake.directory, series.views)
    env = dbt_environment(lake.directory, project)
    if series.profiled:
        env[PROFILE] = "1"
    else:
        env.pop(PROFILE, None)
    deps = run_dbt("deps", project_dir=project, env=env, launch=launch)
    if deps.returncode != 0:
        raise RuntimeError(f"dbt deps failed:\n{deps.output}")
    for side in SIDES:
        built = run_side(side, project, env, series.views, launch)
        series.setup_s[f"build {side.name}"] = built.wall_s
        _say(f"first build, {side.name}: {built.wall_s:.1f} s")
    lake.check_twins(series.views, "the first builds")
    return env


#: the maintained side run without ``DUCKSTREAM_PROFILE``
UNPROFILED = Side("unprofiled", MAINTAINED.target)


def _profile_overhead(
    series: Series, lake: Lake, project: Path, env: dict[str, str], launch: Launch
) -> None:
    """What the query log and the statement counts cost: the maintained side after one
    appended order, with and without the profile, taking turns. A run first that is not
    kept: a view whose last run chose to rebuild for cost has no state, and builds it then.
    The rebuild side runs once after them, and the maintained models are checked against it."""
    plain = {key: value for key, value in env.items() if key != PROFILE}
    lake.apply("append", ONE, 10_001)
    run_side(MAINTAINED, project, env, series.views, launch)
    for repetition in range(series.repetitions):
        turns = [(UNPROFILED, plain), (MAINTAINED, env)]
        if repetition % 2:
            turns.reverse()
        for position, (side, environment) in enumerate(turns):
            seed = 10 * (1001 + 2 * repetition + position) + 1
            rows = lake.apply("append", ONE, seed)
            timed = run_side(side, project, environment, series.views, launch)
            _record(series, timed, side, OVERHEAD, ONE, repetition, position == 0, rows)
    run_side(REBUILT, project, env, series.views, launch)
    lake.check_twins(series.views, "the runs measuring the profile's cost")


def _record(
    series: Series,
    timed: Timed,
    side: Side,
    mix: str,
    batch: str,
    repetition: int,
    first: bool,
    rows: int,
) -> None:
    series.walls.append(Wall(mix, batch, repetition, side.name, first, timed.wall_s * 1000))
    parts = []
    for position, (view, result) in enumerate(timed.invocation.models().items()):
        response = result["adapter_response"]
        sample = Sample(
            mix=mix,
            batch=batch,
            repetition=repetition,
            view=view,
            side=side.name,
            first=first,
            position=position,
            strategy=response.get("code", ""),
            execution_ms=result["execution_time"] * 1000,
            breakdown=Breakdown.parse(response.get("_message", "")),
            batch_rows=rows,
            message=response.get("_message", "") if side.target == MAINTAINED.target else "",
        )
        series.samples.append(sample)
        parts.append(f"{view} {sample.execution_ms:.0f}")
    _say(
        f"{mix:>6} {batch:>5} rep {repetition + 1} {side.name:>10}"
        f"{' (first)' if first else '        '}: wall {timed.wall_s:6.2f} s; "
        + ", ".join(parts)
        + " ms"
    )


def _say(line: str) -> None:
    print(line, flush=True)


def write(series: Series, out: Path) -> str:
    """samples.json, tpch.md and tpch.png in ``out``; the Markdown report."""
    out.mkdir(parents=True, exist_ok=True)
    data = asdict(series)
    (out / "samples.json").write_text(json.dumps(data, indent=1))
    markdown = dbt_report.markdown(data)
    (out / "tpch.md").write_text(markdown)
    dbt_report.plot(data, out / "tpch.png")
    return markdown


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dbt_tpch", description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--batches", default=f"{ONE},0.001,0.1")
    parser.add_argument("--mixes", default="append,mixed")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--views", default=",".join(VIEWS))
    parser.add_argument("--out", type=Path, default=Path("docs/benchmark/dbt"))
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    batches = _listed(args.batches)
    mixes = _listed(args.mixes)
    views = _listed(args.views)
    for what, chosen, known in (("views", views, VIEWS), ("mixes", mixes, KNOWN_MIXES)):
        if set(chosen) - set(known):
            sys.exit(f"unknown {what} {sorted(set(chosen) - set(known))}; choose from {known}")
    for batch in batches:
        if batch != ONE:
            float(batch)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="dbt-tpch-") as directory:
        series = run(Path(directory), args.scale, batches, mixes, args.repetitions, views)
    series.setup_s["total"] = time.perf_counter() - started
    print(write(series, args.out))


def _listed(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


if __name__ == "__main__":
    main()
