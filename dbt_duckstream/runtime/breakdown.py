"""Where one run's time went: its phases, and, when profiled, the statements it issued.

A run's fixed cost (binding its SQL, reading the catalog, committing) is invisible in its
total, and it is what decides whether maintaining a small change beats a rebuild. Every run
therefore times its phases, and says so in its summary (the dbt run line and
``adapter_response._message``)::

    ... snapshots lake 5->9; bind 0.1 ms, decide 2.1 ms, read 1.3 ms, delta 3.0 ms,
    write 1.2 ms, commit 4.4 ms, transaction 6.1 ms

``transaction`` is the length of the run's write transaction that committed, from ``BEGIN``
to the end of ``COMMIT`` (it includes its ``write`` and ``commit``): the window in which
another writer's commit can make the run's commit fail. A run that lost commits says how many times
it retried (``retries 2``).

With ``DUCKSTREAM_PROFILE=1`` in the environment, the process also keeps DuckDB's query log
in memory, and each run counts the statements it issued and, among them, the DuckLake
catalog's own round trips (the queries DuckLake sends to its metadata database). Each run
empties the log when it starts. The log holds every connection of the instance, so with
several dbt threads a run's counts are wrong (its neighbours' statements in them, or its own
emptied by a neighbour): profile with ``threads: 1``.

>>> b = Breakdown()
>>> b.add("decide", 0.0021); b.add("commit", 0.0044)
>>> b.describe()
'decide 2.1 ms, commit 4.4 ms'
>>> Breakdown.parse("incremental (x): +1 -0 rows, snapshots lake 5->9; decide 2.1 ms")
{'decide': 2.1}
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import duckdb

#: the phases of a run, in the order they happen
PHASES = ("bind", "decide", "read", "delta", "write", "commit")
#: spans that enclose phases, reported beside them (never added to them)
SPANS = ("transaction",)
#: counts a profiled run adds to its breakdown
COUNTS = ("statements", "catalog")
#: counts any run adds when it has them
TALLIES = ("retries",)
#: the environment variable that turns profiling on
PROFILE = "DUCKSTREAM_PROFILE"
#: what DuckLake's catalog queries name: its metadata database
_CATALOG_MARK = "__ducklake_metadata_"
_ENTRY = re.compile(r"(\w+) (\d+(?:\.\d+)?)(?: ms)?")


@dataclass
class Breakdown:
    """Milliseconds per phase, and the statement counts of a profiled run."""

    ms: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, phase: str, seconds: float) -> None:
        self.ms[phase] = self.ms.get(phase, 0.0) + seconds * 1000

    def describe(self) -> str:
        counted = (*TALLIES, *COUNTS)
        parts = [f"{name} {self.counts[name]}" for name in counted if name in self.counts]
        listed = (*PHASES, *SPANS)
        ordered = [p for p in listed if p in self.ms] + [p for p in self.ms if p not in listed]
        parts += [f"{phase} {self.ms[phase]:.1f} ms" for phase in ordered]
        return ", ".join(parts)

    def to_dict(self) -> dict[str, float]:
        return {**{k: round(v, 3) for k, v in self.ms.items()}, **self.counts}

    @staticmethod
    def parse(summary: str) -> dict[str, float]:
        """The breakdown a run's summary ends with, as ``to_dict`` gives it (for reports that
        only see dbt's run results)."""
        _, _, tail = summary.rpartition("; ")
        found = dict(_ENTRY.findall(tail))
        known = {*PHASES, *SPANS, *COUNTS, *TALLIES}
        return {k: float(v) for k, v in found.items() if k in known}


_current: ContextVar[Breakdown | None] = ContextVar("duckstream_breakdown", default=None)


@contextmanager
def recording() -> Generator[Breakdown]:
    """The breakdown of the run inside the block (the phases its code marks with ``phase``)."""
    found = Breakdown()
    token = _current.set(found)
    counter = _StatementCounter.start()
    try:
        yield found
    finally:
        _current.reset(token)
        if counter is not None:
            found.counts.update(counter.stop())


@contextmanager
def phase(name: str) -> Generator[None]:
    """Count the block's time to ``name`` in the current run's breakdown, if any."""
    started = time.perf_counter()
    try:
        yield
    finally:
        found = _current.get()
        if found is not None:
            found.add(name, time.perf_counter() - started)


def span(name: str, seconds: float) -> None:
    """Set the current run's span ``name`` (if a run is being recorded): the last one wins."""
    found = _current.get()
    if found is not None:
        found.ms[name] = seconds * 1000


def tally(name: str, n: int = 1) -> None:
    """Add ``n`` to the current run's count ``name``, if a run is being recorded."""
    found = _current.get()
    if found is not None:
        found.counts[name] = found.counts.get(name, 0) + n


def profiling() -> bool:
    return os.environ.get(PROFILE, "") not in ("", "0")


def enable_profiling(con: duckdb.DuckDBPyConnection) -> None:
    """Keep the instance's query log in memory when ``DUCKSTREAM_PROFILE`` asks for it."""
    if profiling():
        con.execute("CALL enable_logging('QueryLog')")
        _StatementCounter.connection = con


class _StatementCounter:
    """Counts the statements a run issued: the log is emptied when the run starts, so that
    counting reads the run's own entries alone (reading where a log of a whole ``dbt run``
    stood, and then what it gained, took 1.5-5 ms each, paid by maintained runs alone)."""

    connection: duckdb.DuckDBPyConnection | None = None

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con.cursor()
        # logged before it runs, so it empties its own entry too
        self.con.execute("CALL truncate_duckdb_logs()")

    @classmethod
    def start(cls) -> _StatementCounter | None:
        return cls(cls.connection) if cls.connection is not None and profiling() else None

    def stop(self) -> dict[str, int]:
        # this query's own entry is not among those it reads
        row = self.con.execute(
            "SELECT count(*), count(*) FILTER (WHERE contains(message, ?)) FROM duckdb_logs "
            "WHERE type = 'QueryLog'",
            [_CATALOG_MARK],
        ).fetchone()
        self.con.close()
        statements, catalog = (int(row[0]), int(row[1])) if row else (0, 0)
        return {"statements": statements, "catalog": catalog}
