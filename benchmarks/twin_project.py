"""A dbt project whose models are the benchmark's views, built two ways from the same files.

Target ``ivm`` maintains them (``incremental_ivm``, schema ``ivm``); target ``rebuild`` with
``--vars '{materialized: table}'`` builds the same SQL as dbt's ``table`` models (schema
``rebuild``). Each side is a fresh ``dbt run`` process with its own target directory, so
neither side's partial parse is invalidated by the other's variables. Tables are named fully
(``lake.tpch.lineitem``), as in the Python series.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp

from dbt_duckstream.bridge.dbt_process import Invocation, Launch, dbt_command, run_dbt

from .queries import VIEWS

REPOSITORY = Path(__file__).resolve().parent.parent
CATALOG = "lake"
SOURCES = "tpch"


@dataclass(frozen=True)
class Side:
    """One way of building the models: a dbt target and the variables it runs with."""

    name: str
    target: str
    vars: str | None = None

    @property
    def schema(self) -> str:
        return self.target

    def relation(self, view: str) -> str:
        """Where this side builds ``view``."""
        return f"{CATALOG}.{self.schema}.{view}"


MAINTAINED = Side("maintained", "ivm")
REBUILT = Side("rebuild", "rebuild", "{materialized: table}")
SIDES = (MAINTAINED, REBUILT)

_PROJECT = """name: bench
version: "0.1.0"
config-version: 2
profile: bench
model-paths: ["models"]
flags:
  send_anonymous_usage_stats: false
models:
  bench:
    +materialized: "{{ var('materialized', 'incremental_ivm') }}"
"""

_PROFILE = """bench:
  target: ivm
  outputs:
    ivm: &lake
      type: duckdb
      path: ":memory:"
      plugins:
        - module: dbt_duckstream.plugin
{attach}
      database: lake
      schema: ivm
      threads: 1
    rebuild:
      <<: *lake
      schema: rebuild
"""


#: a dbt-duckdb output's ``attach`` of the lake in ``{lake}`` as ``lake``
ATTACH_LAKE = (
    "      attach:\n"
    '        - path: "ducklake:{lake}/lake.ducklake"\n'
    "          alias: lake\n"
    "          options:\n"
    '            data_path: "{lake}/data"'
)


def model_sql(sql: str) -> str:
    """A view's SQL with every table named in full (``lake.tpch.<table>``)."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    for table in tree.find_all(exp.Table):
        table.set("db", exp.to_identifier(SOURCES))
        table.set("catalog", exp.to_identifier(CATALOG))
    return tree.sql(dialect="duckdb", pretty=True) + "\n"


#: the sources whose rows a view's joins keep beside it (``ivm_stored_inputs``): those its own
#: conditions keep few of (Q12: 0.5% of lineitem, Q10: 4% of orders), as a user would choose
STORED_INPUTS = {"q12": ["lineitem"], "q10": ["orders"]}


def project_yml(views: list[str]) -> str:
    """The project's ``dbt_project.yml``: each view's stored inputs configured."""
    configured = "".join(
        f"    {view}:\n      +ivm_stored_inputs: {STORED_INPUTS[view]}\n"
        for view in views
        if view in STORED_INPUTS
    )
    return _PROJECT + configured


def write_project(directory: Path, lake: Path, views: list[str]) -> None:
    """The project in ``directory``, its models the ``views``, its lake in ``lake``."""
    models = directory / "models"
    models.mkdir(parents=True, exist_ok=True)
    (directory / "dbt_project.yml").write_text(project_yml(views))
    (directory / "packages.yml").write_text(f"packages:\n  - local: {REPOSITORY}\n")
    (directory / "profiles.yml").write_text(_PROFILE.format(attach=ATTACH_LAKE.format(lake=lake)))
    for name in views:
        (models / f"{name}.sql").write_text(model_sql(VIEWS[name]))


@dataclass
class Timed:
    """One dbt invocation and its wall time, process start to exit."""

    invocation: Invocation
    wall_s: float


def run_side(
    side: Side,
    directory: Path,
    env: dict[str, str],
    views: list[str],
    launch: Launch = dbt_command,
) -> Timed:
    """``dbt run`` of the views on one side, as a new process; a failure stops everything."""
    args = ["run", "--target", side.target, "--select", *views]
    if side.vars is not None:
        args += ["--vars", side.vars]
    started = time.perf_counter()
    invocation = run_dbt(
        *args,
        project_dir=directory,
        env=env,
        target_path=directory / f"target-{side.target}",
        log_path=directory / f"logs-{side.target}",
        timeout=3600,
        launch=launch,
    )
    wall = time.perf_counter() - started
    if invocation.returncode != 0 or set(invocation.models()) != set(views):
        raise RuntimeError(f"dbt {' '.join(args)} failed:\n{invocation.output}")
    return Timed(invocation, wall)
