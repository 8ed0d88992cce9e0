"""dbt's CLI as a subprocess, the way an orchestrator runs it: one invocation, its console
output and its run results.

The demo and the integration tests touch the lake between dbt commands, and a DuckLake whose
catalog is a DuckDB file is held by one process at a time, so dbt runs out of process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Invocation:
    """One dbt command: its exit code, its console output, and its run results by unique id."""

    returncode: int
    output: str
    results: dict[str, dict]

    def by_name(self) -> dict[str, dict]:
        """Run results keyed by node name (``orders``, not ``model.project.orders``)."""
        return {uid.split(".")[-1]: r for uid, r in self.results.items()}

    def models(self) -> dict[str, dict]:
        """Run results of models only, keyed by model name."""
        return {
            uid.split(".")[-1]: r for uid, r in self.results.items() if uid.startswith("model.")
        }

    def response(self, model: str) -> dict:
        return self.models()[model]["adapter_response"]

    def strategies(self) -> dict[str, str]:
        """Each model's strategy (``adapter_response.code`` of ``incremental_ivm``)."""
        return {name: r["adapter_response"].get("code", "") for name, r in self.models().items()}


def dbt_environment(lake: Path, profiles_dir: Path) -> dict[str, str]:
    """The environment of a dbt process using the lake at ``lake`` (``DUCKSTREAM_LAKE``)."""
    return {
        **os.environ,
        "DUCKSTREAM_LAKE": str(lake),
        "DBT_PROFILES_DIR": str(profiles_dir),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "DO_NOT_TRACK": "1",
    }


#: how a dbt command is run: its arguments (after ``dbt``), directory, environment and timeout
#: in seconds, to its exit code and console output
Launch = Callable[[list[str], Path, dict[str, str], float], tuple[int, str]]


def dbt_command(
    arguments: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int, str]:
    """``dbt <arguments>`` as the command line runs it: a new Python process."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "dbt"), *arguments],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout + done.stderr


def run_dbt(
    *args: str,
    project_dir: Path,
    env: dict[str, str],
    target_path: Path | None = None,
    log_path: Path | None = None,
    timeout: float = 600,
    launch: Launch = dbt_command,
) -> Invocation:
    """Run ``dbt <args>`` in ``project_dir``; artifacts go to ``target_path`` when given."""
    arguments = ["--no-use-colors", *args]
    if args and args[0] != "deps":  # deps takes no artifact paths
        if target_path is not None:
            arguments += ["--target-path", str(target_path)]
        if log_path is not None:
            arguments += ["--log-path", str(log_path)]
    run_results = (target_path or project_dir / "target") / "run_results.json"
    run_results.unlink(missing_ok=True)
    returncode, output = launch(arguments, project_dir, env, timeout)
    results: dict[str, dict] = {}
    if run_results.exists():
        for result in json.loads(run_results.read_text())["results"]:
            results[result["unique_id"]] = result
    return Invocation(returncode, output, results)
