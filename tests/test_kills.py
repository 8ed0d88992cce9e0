"""`dbt run` killed with SIGKILL at random moments: every model is always before or after.

Each round reads every model of the integration project, then SIGKILLs several `dbt run`s in a
row, each at a random moment within the measured duration of a run's models (timed from its
first model's start), reading every model after each kill; then a run completes (`dbt build`:
the models, then their `ivm_consistent` tests). Every model read after a kill must equal, as a
bag of rows, either its state before the round or its state after the completed run: a run
commits each model in one transaction, so no kill leaves one half-applied. Rounds cycle through
the three kinds of run: initial (the models and the runtime's tables dropped first),
incremental (after a few commits of random source changes) and rebuild (`--full-refresh`,
after changes too).
At the end each model equals the same SQL built by dbt's `table` materialization.

``DUCKSTREAM_KILLS`` sets the number of kills (default 9: three rounds, one of each kind),
e.g. for a longer trial:

    DUCKSTREAM_KILLS=200 uv run pytest tests/test_kills.py -s
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from .dbt_launcher import DbtProcess
from .dbt_project import Project
from .lake_project import assert_equals_reference, seed
from .source_writer import commit_changes, next_order_id

pytestmark = [pytest.mark.xdist_group("kills"), pytest.mark.slow]

KILLS = int(os.environ.get("DUCKSTREAM_KILLS", "9"))
#: kills in a row before a run is let complete
KILLS_PER_ROUND = 3
PHASES = ("initial", "incremental", "rebuild", "incremental")

State = dict[str, Counter | None]  # per model: its rows as a bag, or None when it has no table


@dataclass
class KilledRun:
    """One `dbt run` started, and killed unless it finished first."""

    killed: bool
    running: str | None  # the model whose materialization had started and not finished
    finished_models: int


@dataclass
class Figures:
    kills: int = 0
    by_phase: Counter = field(default_factory=Counter)
    mid_model: int = 0
    finished_before_kill: int = 0
    before: int = 0  # model states found as before the round, after a kill
    after: int = 0  # ... and as after it


def model_states(project: Project) -> State:
    with project.connect() as con:
        tables = {
            name
            for (name,) in con.execute(
                "SELECT table_name FROM duckdb_tables() "
                "WHERE database_name = 'lake' AND schema_name = 'main'"
            ).fetchall()
        }
        return {
            model: Counter(con.execute(f"SELECT * FROM lake.main.{model}").fetchall())
            if model in tables
            else None
            for model in project.models()
        }


def drop_everything(project: Project) -> None:
    """The models and the runtime's own tables: the next run is an initial one."""
    with project.connect() as con:
        for (name,) in con.execute(
            "SELECT table_name FROM duckdb_tables() "
            "WHERE database_name = 'lake' AND schema_name = 'main'"
        ).fetchall():
            con.execute(f'DROP TABLE lake.main."{name}"')


def run_and_kill(project: Project, args: list[str], delay: float) -> KilledRun:
    """Start `dbt <args>`; SIGKILL it ``delay`` seconds after its first model started."""
    output = project.directory / "killed-run.log"
    process = DbtProcess(["--no-use-colors", *args], project.directory, project.env, output)
    started = threading.Event()
    lines: list[str] = []

    def read() -> None:
        for line in process.lines():
            lines.append(line)
            if " START sql " in line:
                started.set()
        started.set()  # the run ended without starting a model

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not started.wait(timeout=300):
        process.kill()
        raise AssertionError("dbt started no model in 300 s:\n" + "".join(lines))
    code = process.wait(timeout=delay)
    killed = code is None
    if killed:
        process.kill()
    reader.join(timeout=30)
    if not killed and code != 0:
        raise AssertionError(f"dbt {' '.join(args)} failed:\n" + process.text())
    starts = [line.split(" model ")[1].split()[0] for line in lines if " START sql " in line]
    ends = [line for line in lines if " OK created " in line or " ERROR " in line]
    running = starts[-1] if killed and len(starts) > len(ends) else None
    return KilledRun(killed, running, len(ends))


def models_span(results: Iterable[dict]) -> float:
    """Seconds from the first model's start to the last one's end (threads run several)."""
    times = [
        datetime.fromisoformat(t[edge].replace("Z", "+00:00"))
        for r in results
        for t in r["timing"]
        for edge in ("started_at", "completed_at")
        if t.get(edge)
    ]
    return max(1.0, (max(times) - min(times)).total_seconds()) if times else 4.0


def check_round(before: State, after: State, killed_states: list[State], figures: Figures) -> None:
    for state in killed_states:
        for model, rows in state.items():
            if rows == after[model]:
                figures.after += 1
            elif rows == before[model]:
                figures.before += 1
            else:
                raise AssertionError(
                    f"after a kill, {model} is neither as before the run nor as after it:\n"
                    f"before {before[model]}\nafter {after[model]}\nfound {rows}"
                )


def test_killed_runs_leave_every_model_before_or_after(tmp_path: Path) -> None:
    project = Project(tmp_path / "project")
    project.dbt("deps")
    seed(project)
    rng = random.Random(int(os.environ.get("DUCKSTREAM_KILL_SEED", "20261122")))
    figures = Figures()
    started = time.monotonic()
    rounds = kill_rounds(project, rng, figures)
    assert_equals_reference(project)
    print(
        f"\n{figures.kills} kills survived ({dict(figures.by_phase)}; {figures.mid_model} while "
        f"a model ran; {figures.finished_before_kill} runs finished before their kill) in "
        f"{rounds} rounds, {time.monotonic() - started:.0f}s; model states after a "
        f"kill: {figures.before} as before the run, {figures.after} as after"
    )


def kill_rounds(project: Project, rng: random.Random, figures: Figures) -> int:
    """Rounds of kills until ``KILLS``; the number of rounds."""
    window = 4.0  # seconds of model runs, until measured
    round_number = 0
    while figures.kills < KILLS:
        phase = PHASES[round_number % len(PHASES)]
        round_number += 1
        if phase == "initial":
            drop_everything(project)
        else:
            with project.connect() as con:
                next_id = next_order_id(con)
                for _ in range(rng.randint(2, 4)):
                    next_id = commit_changes(con, rng, next_id)
        args = ["run", "--full-refresh"] if phase == "rebuild" else ["run"]
        before = model_states(project)
        killed_states: list[State] = []
        for _ in range(min(KILLS_PER_ROUND, KILLS - figures.kills)):
            run = run_and_kill(project, args, rng.uniform(0, window))
            if not run.killed:
                figures.finished_before_kill += 1
                break
            figures.kills += 1
            figures.by_phase[phase] += 1
            figures.mid_model += run.running is not None
            killed_states.append(model_states(project))
        # the models, then their tests (not the seeds: they would reset the sources)
        invocation = project.dbt("build", "--exclude-resource-type", "seed", *args[1:])
        assert {r["status"] for r in invocation.results.values()} <= {"success", "pass"}
        # the next kills are drawn within the duration of this run's models
        window = models_span(invocation.models().values())
        check_round(before, model_states(project), killed_states, figures)
    return round_number
