"""What dbt itself costs per model in a DuckLake: the floor under every figure of the dbt
series (``dbt_tpch``).

A small dbt project, run as an orchestrator runs it (a fresh ``dbt run`` per repetition),
holds models that each do the least their materialization can do:

- ``select_one``: a materialization whose whole work is one ``select 1`` (dbt's own work per
  model: compiling, the statement's round trip, run results);
- ``view_of_one_row`` and ``table_of_one_row``: dbt's ``view`` and ``table`` of a constant;
- ``incremental_appending_nothing`` and ``incremental_appending_one_row``: dbt's own
  ``incremental`` materialization, the second committing one constant row to the lake per run;
- ``maintained_unchanged`` and ``maintained_one_row``: ``incremental_ivm`` aggregates over two
  sources of a few rows, the first never changed, the second given one row before each run;
- ``staging_view`` and ``maintained_over_view``: a dbt ``view`` over the second source, as
  staging models are, and the same aggregate maintained over it, as marts are.

Every model runs after ``first_model`` (a ``table`` of a constant), which pays what the first
model of an invocation to touch the lake pays (DuckLake's catalog loaded, the connection's
first statements), so the others show what any later model pays. The project runs on two
targets: with the project's plugin, as its users run dbt, and without it (plain dbt-duckdb,
whose models cannot include the maintained ones), which shows what the plugin adds to dbt's
own materializations.

    python -m benchmarks.dbt_floor --repetitions 5 --out docs/benchmark/dbt/floor
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from dbt_duckstream.bridge.dbt_process import Launch, dbt_command, dbt_environment, run_dbt
from dbt_duckstream.runtime.lake import attach_lake

from .twin_project import ATTACH_LAKE, REPOSITORY

#: model, materialization, what it does; in the report's order
MODELS = (
    ("select_one", "a materialization running `select 1`", "dbt's own work per model"),
    ("view_of_one_row", "`view`", "a view of a constant"),
    ("table_of_one_row", "`table`", "a table of a constant"),
    ("incremental_appending_nothing", "`incremental`", "nothing appended"),
    ("incremental_appending_one_row", "`incremental`", "one constant row appended"),
    ("maintained_unchanged", "`incremental_ivm`", "an aggregate, its source unchanged"),
    ("maintained_one_row", "`incremental_ivm`", "an aggregate, one row appended to its source"),
    ("staging_view", "`view`", "a view over that source, as a staging model"),
    ("maintained_over_view", "`incremental_ivm`", "the aggregate over that view, as a mart"),
)
MAINTAINED = ("maintained_unchanged", "maintained_one_row", "maintained_over_view")
FIRST = "first_model"
#: dbt targets: the project's plugin loaded, and not
WITH_PLUGIN, WITHOUT_PLUGIN = "with_plugin", "without_plugin"
SOURCES = "floor_sources"
#: untimed runs per target before the timed ones
WARM_UP = 2

_MATERIALIZATION = """{% materialization select_one, adapter='duckdb' %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {% call statement('main') -%} select 1 {%- endcall %}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
"""

#: each measured model runs after the first model of the invocation
_AFTER_FIRST = "-- depends_on: {{ ref('" + FIRST + "') }}\n"

_SQL = {
    FIRST: "{{ config(materialized='table') }}\nselect 1 as x\n",
    "select_one": "{{ config(materialized='select_one') }}\nselect 1 as x\n",
    "view_of_one_row": "{{ config(materialized='view') }}\nselect 1 as x\n",
    "table_of_one_row": "{{ config(materialized='table') }}\nselect 1 as x\n",
    "incremental_appending_nothing": (
        "{{ config(materialized='incremental') }}\nselect 1 as x\n"
        "{% if is_incremental() %}where false{% endif %}\n"
    ),
    "incremental_appending_one_row": "{{ config(materialized='incremental') }}\nselect 1 as x\n",
    "maintained_unchanged": (
        "{{ config(materialized='incremental_ivm') }}\n"
        f"select v, count(*) as n from lake.{SOURCES}.fixed group by v\n"
    ),
    "maintained_one_row": (
        "{{ config(materialized='incremental_ivm') }}\n"
        f"select v, count(*) as n from lake.{SOURCES}.growing group by v\n"
    ),
    "staging_view": (
        f"{{{{ config(materialized='view') }}}}\nselect id, v from lake.{SOURCES}.growing\n"
    ),
    "maintained_over_view": (
        "{{ config(materialized='incremental_ivm') }}\n"
        "select v, count(*) as n from {{ ref('staging_view') }} group by v\n"
    ),
}

_PROJECT = """name: floor
version: "0.1.0"
config-version: 2
profile: floor
model-paths: ["models"]
macro-paths: ["macros"]
flags:
  send_anonymous_usage_stats: false
"""

_PROFILE = """floor:
  target: with_plugin
  outputs:
    without_plugin: &plain
      type: duckdb
      path: ":memory:"
{attach}
      database: lake
      schema: without_plugin
      threads: 1
    with_plugin:
      <<: *plain
      schema: with_plugin
      plugins:
        - module: dbt_duckstream.plugin
"""


def write_project(directory: Path, lake: Path) -> None:
    """The floor's dbt project in ``directory``, its lake in ``lake``."""
    (directory / "models").mkdir(parents=True, exist_ok=True)
    (directory / "macros").mkdir(exist_ok=True)
    (directory / "dbt_project.yml").write_text(_PROJECT)
    (directory / "packages.yml").write_text(f"packages:\n  - local: {REPOSITORY}\n")
    (directory / "profiles.yml").write_text(_PROFILE.format(attach=ATTACH_LAKE.format(lake=lake)))
    (directory / "macros" / "select_one.sql").write_text(_MATERIALIZATION)
    for name, sql in _SQL.items():
        prefix = "" if name == FIRST else _AFTER_FIRST
        (directory / "models" / f"{name}.sql").write_text(prefix + sql)


def _lake(lake: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    attach_lake(con, str(lake / "lake.ducklake"), data_path=str(lake / "data"))
    return con


def create_sources(lake: Path) -> None:
    """The maintained models' two sources, a few rows each."""
    con = _lake(lake)
    try:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS lake.{SOURCES}")
        for table in ("fixed", "growing"):
            con.execute(
                f"CREATE TABLE lake.{SOURCES}.{table} AS "
                "SELECT i AS id, i % 3 AS v FROM range(5) AS t(i)"
            )
    finally:
        con.close()


def append_one_row(lake: Path, row: int) -> None:
    """One row more in the source of ``maintained_one_row``, as a writer lands it."""
    con = _lake(lake)
    try:
        con.execute(f"INSERT INTO lake.{SOURCES}.growing VALUES ({row}, {row % 3})")
    finally:
        con.close()


@dataclass
class Floor:
    """Each model's ``execution_time`` (ms) and each invocation's wall time (s), per target."""

    repetitions: int
    models: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    walls: dict[str, list[float]] = field(default_factory=dict)
    strategies: dict[str, list[str]] = field(default_factory=dict)
    #: the maintained models' summaries (their breakdown ends them)
    messages: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "repetitions": self.repetitions,
            "models": self.models,
            "walls": self.walls,
            "strategies": self.strategies,
            "messages": self.messages,
        }


def selection(target: str) -> list[str]:
    """The models a target runs: every one with the plugin, dbt's own without it."""
    names = [FIRST, *(name for name, _, _ in MODELS)]
    return names if target == WITH_PLUGIN else [n for n in names if n not in MAINTAINED]


def run(directory: Path, repetitions: int, launch: Launch = dbt_command) -> Floor:
    """Run the project twice per target untimed (the first builds the models, the second
    compiles the maintained ones' plans for the runs after), then time ``repetitions`` fresh
    ``dbt run``s per target, taking turns, one row appended to the growing source before
    each turn."""
    lake = directory / "lake"
    lake.mkdir(parents=True, exist_ok=True)
    project = directory / "project"
    write_project(project, lake)
    create_sources(lake)
    env = dbt_environment(lake, project)
    deps = run_dbt("deps", project_dir=project, env=env, launch=launch)
    if deps.returncode != 0:
        raise RuntimeError(f"dbt deps failed:\n{deps.output}")
    floor = Floor(repetitions)
    targets = (WITH_PLUGIN, WITHOUT_PLUGIN)
    for repetition in range(-WARM_UP, repetitions):
        append_one_row(lake, 100 + repetition)
        for target in targets if repetition % 2 else reversed(targets):
            models = selection(target)
            started = time.perf_counter()
            invocation = run_dbt(
                "run",
                "--target",
                target,
                "--select",
                *models,
                project_dir=project,
                env=env,
                target_path=project / f"target-{target}",
                log_path=project / f"logs-{target}",
                launch=launch,
            )
            wall = time.perf_counter() - started
            if invocation.returncode != 0 or set(invocation.models()) != set(models):
                raise RuntimeError(f"dbt run --target {target} failed:\n{invocation.output}")
            if repetition < 0:
                continue
            floor.walls.setdefault(target, []).append(wall)
            for name, result in invocation.models().items():
                times = floor.models.setdefault(name, {}).setdefault(target, [])
                times.append(result["execution_time"] * 1000)
            for name in MAINTAINED:
                if name in models:
                    floor.strategies.setdefault(name, []).append(invocation.strategies()[name])
                    message = invocation.response(name).get("_message", "")
                    floor.messages.setdefault(name, []).append(message)
    return floor


def _median(values: list[float] | None) -> str:
    return f"{statistics.median(values):.1f}" if values else ""


def markdown(floor: Floor) -> str:
    """The report: each model's median ``execution_time`` with and without the plugin."""
    lines = [
        "# What dbt itself costs per model in a DuckLake",
        "",
        "The floor under the dbt series' figures: models that do the least their "
        "materialization can do, in a DuckLake whose catalog is a DuckDB file, `threads: 1`, "
        f"each target a fresh `dbt run` process, medians of {floor.repetitions} runs. "
        f"Every model runs after `{FIRST}`, which pays what an invocation's first model pays. "
        "`with the plugin` is how this project's users run dbt; `without` is plain "
        "dbt-duckdb (it cannot run the `incremental_ivm` models).",
        "",
        "| model | materialization | what it does | with the plugin, ms | without, ms |",
        "|---|---|---|---|---|",
    ]
    for name, materialization, what in (
        (FIRST, "`table`", "a table of a constant, the invocation's first model"),
        *MODELS,
    ):
        times = floor.models.get(name, {})
        lines.append(
            f"| {name} | {materialization} | {what} | {_median(times.get(WITH_PLUGIN))} "
            f"| {_median(times.get(WITHOUT_PLUGIN))} |"
        )
    walls = {t: _median([w * 1000 for w in floor.walls.get(t, [])]) for t in floor.walls}
    for name in MAINTAINED:
        messages = floor.messages.get(name, [])
        if messages:
            lines += ["", f"`{name}`'s last run: {messages[-1]}"]
    lines += [
        "",
        f"`dbt run` wall ms (process start to exit, {len(selection(WITH_PLUGIN))} models with "
        f"the plugin, {len(selection(WITHOUT_PLUGIN))} without): with the plugin "
        f"{walls.get(WITH_PLUGIN, '')}, without {walls.get(WITHOUT_PLUGIN, '')}.",
        "",
        "Strategies of the maintained models: "
        + "; ".join(
            f"`{name}` {', '.join(sorted(set(floor.strategies.get(name, []))))}"
            for name in MAINTAINED
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("docs/benchmark/dbt/floor"))
    parser.add_argument("--workdir", type=Path, default=None, help="parent of the temp dir")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        floor = run(Path(tmp), args.repetitions)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "samples.json").write_text(json.dumps(floor.to_json(), indent=1) + "\n")
    report = markdown(floor)
    (args.out / "floor.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
