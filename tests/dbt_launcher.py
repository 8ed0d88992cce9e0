"""dbt imported ahead of time, then run on demand, in its own process.

    python -m tests.dbt_launcher    # prints "ready", then reads a JSON list of dbt arguments

Importing dbt takes seconds; the kill test starts the next launcher while the current run
goes, so that it spends its time running and killing dbt, not importing it. The run is dbt's
own CLI entry (``dbtRunner``), with the same console output as the ``dbt`` command.
"""

from __future__ import annotations

import json
import sys

import dbt.adapters.duckdb  # noqa: F401  (imported ahead, like the rest)
from dbt.cli.main import dbtRunner

import dbt_duckstream.plugin  # noqa: F401


def main() -> None:
    print("ready", flush=True)
    args = json.loads(sys.stdin.readline())
    result = dbtRunner().invoke(args)
    sys.exit(0 if result.success else 1)


if __name__ == "__main__":
    main()
