"""What a test worker killed by native code leaves behind, printed at the end of a failed run.

pytest-xdist reports only that a worker crashed. The worker's last words (glibc's or DuckDB's
message, Python's traceback of every thread) go to its stderr, which is buried in the middle
of a long log, and the native stack is lost. So each worker writes its stderr to
``.test-output/<worker>.stderr`` (see ``conftest``), with the Hypothesis example it was
running in ``<worker>.example``; ``make test`` keeps core files, and after a failed run
``python -m tests.crash_report`` prints each dead worker's last words, its example, and the
native backtrace of each core file (with gdb, where the machine has it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

OUTPUT = Path(__file__).resolve().parent.parent / ".test-output"
FATAL = "Fatal Python error"
_worker: str | None = None


def attach_worker_output(worker: str) -> None:
    """Send this worker's stderr (native messages included) to its file, and have glibc
    write its fatal messages there rather than to a terminal."""
    import faulthandler

    OUTPUT.mkdir(exist_ok=True)
    stream = open(OUTPUT / f"{worker}.stderr", "w", buffering=1)  # noqa: SIM115 (process-long)
    os.dup2(stream.fileno(), 2)
    os.environ["LIBC_FATAL_STDERR_"] = "1"
    faulthandler.enable(stream, all_threads=True)
    global _worker
    _worker = worker


def record_example(text: str) -> None:
    """Keep what this worker runs now, so that a crash names it."""
    if _worker is not None:
        (OUTPUT / f"{_worker}.example").write_text(text)


def _last_words(path: Path, frames: int = 12) -> list[str]:
    """The lines before Python's fatal error (glibc's or DuckDB's message), that line, and the
    innermost frames of the thread that died."""
    lines = path.read_text(errors="replace").splitlines()
    fatal = next((i for i, line in enumerate(lines) if FATAL in line), None)
    if fatal is None:
        return []
    current = next((i for i in range(fatal, len(lines)) if "Current thread" in lines[i]), fatal)
    return lines[max(fatal - 5, 0) : fatal + 1] + lines[current : current + frames + 1]


def _backtrace(core: Path, frames: int = 20) -> list[str]:
    if shutil.which("gdb") is None:
        return [f"{core.name}: gdb is not installed"]
    done = subprocess.run(
        ["gdb", "-batch", "-nx", "-ex", f"bt {frames}", sys.executable, str(core)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    frames_seen = [line for line in done.stdout.splitlines() if line.startswith("#")]
    return [line[:200] for line in dict.fromkeys(frames_seen)]


def main() -> None:
    """Most telling last: the excerpt of a long log that a CI shows is usually its end."""
    for path in sorted(OUTPUT.glob("*.stderr")) if OUTPUT.is_dir() else []:
        words = _last_words(path)
        if not words:
            continue
        example = path.with_suffix(".example")
        if example.exists():
            print(f"===== {path.stem} was running =====")
            print(example.read_text()[:3000])
        print(f"===== {path.stem} died =====")
        print("\n".join(words))
    for core in sorted(OUTPUT.parent.glob("core*")):
        if core.is_file():
            print(f"===== native backtrace of {core.name} =====")
            print("\n".join(_backtrace(core)))


if __name__ == "__main__":
    main()
