"""dbt imported once per test process; each dbt command then runs in a process forked from it.

Importing dbt costs 5-7 s of CPU on a 2-core machine, more than most of the suite's dbt
commands spend after it. multiprocessing's fork server imports dbt once per test process (its
``preload``) and forks a process per command: dbt's own CLI entry (``dbtRunner``, with the same
console output and exit code as the ``dbt`` command), in the command's directory and
environment, in a session of its own so that a test may SIGKILL it with all it started. The
test process itself does not import dbt, and the fork server opens no lake: each command holds
the lake alone, as the ``dbt`` command does.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

#: the fork server, started on a test process's first dbt command, imports these ahead
FORKS = multiprocessing.get_context("forkserver")
FORKS.set_forkserver_preload(
    ["dbt.adapters.duckdb", "dbt.cli.main", "dbt_duckstream.plugin", __name__]
)


def _dbt_main(arguments: list[str], cwd: str, env: dict[str, str], output: str) -> None:
    """The forked process: ``dbt <arguments>`` with its console output in ``output``."""
    os.setsid()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True)  # ty: ignore[unresolved-attribute]
    from dbt.cli.main import dbtRunner  # preloaded by the fork server

    result = dbtRunner().invoke(arguments)
    # dbt's exit codes: 0 success, 1 a node failed, 2 dbt itself failed
    raise SystemExit(0 if result.success else 1 if result.exception is None else 2)


class DbtProcess:
    """``dbt <arguments>`` running in a process forked from the fork server."""

    def __init__(self, arguments: list[str], cwd: Path, env: dict[str, str], output: Path):
        self.output = output
        output.write_text("")
        self.process = FORKS.Process(
            target=_dbt_main, args=(arguments, str(cwd), dict(env), str(output))
        )
        self.process.start()

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid

    def wait(self, timeout: float | None = None) -> int | None:
        """Its exit code, or None if it still runs after ``timeout`` seconds."""
        self.process.join(timeout)
        return self.process.exitcode

    def kill(self) -> None:
        """SIGKILL it with everything it started (before its ``setsid``: itself alone)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            self.process.kill()
        self.process.join()

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def lines(self) -> Iterator[str]:
        """Its console output line by line as it is written, until the process ends."""
        with self.output.open(errors="replace") as stream:
            pending = ""
            while True:
                ended = not self.process.is_alive()
                pending += stream.read()
                *complete, pending = pending.split("\n")
                yield from (line + "\n" for line in complete)
                if ended:
                    break
                time.sleep(0.01)
            if pending:
                yield pending


def forked_dbt(
    arguments: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int, str]:
    """``bridge.dbt_process.Launch`` by a fork of the fork server."""
    with tempfile.TemporaryDirectory(prefix="dbt-output-") as directory:
        process = DbtProcess(arguments, cwd, env, Path(directory) / "console.log")
        code = process.wait(timeout)
        if code is None:
            process.kill()
            raise subprocess.TimeoutExpired(["dbt", *arguments], timeout, process.text())
        return code, process.text()
