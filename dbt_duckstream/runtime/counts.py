"""Row counts of sources at past snapshots, counted once per process.

A maintenance run checks each changed source's row count at the start of its delta's span
against the count recorded with its cursor (``decide.Situation.verified_spans``), from the
lake's metadata (``live_rows``). The models of a ``dbt run`` share their spans, so each would
count the same table at the same snapshot again. A table's count at a
past snapshot changes only when a commit dates its changes before its own snapshot (what the
check looks for), and such a commit lists the table at its own snapshot: a count taken by a
run pinned at ``p`` serves every later run whose window lists no change to the table after
``p``. Counts are kept per lake (``lake.lake_identity``), the most recently used first.

A run records each changed source's count at its pin with its cursor (``run._record``): the
count at the last snapshot of its window that lists a change to the table, which the models
of a run that rebuild after the same changes share too: counted by the first that needs it,
or known without counting from a maintenance run's delta.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import duckdb

from ..sql import TableRef
from .lake import row_counts
from .live_rows import CountAt, live_row_counts

#: counts kept per process
LIMIT = 4096
_lock = threading.Lock()
#: (lake, table id, snapshot) -> (rows, the pin of the run that counted them)
_known: OrderedDict[tuple[str, int, int], tuple[int, int]] = OrderedDict()


@dataclass(frozen=True)
class CountRead:
    """A table's row count at a snapshot, as a run pinned at ``pinned`` sees it."""

    lake: str
    table: TableRef
    table_id: int
    snapshot: int
    pinned: int
    #: the last snapshot of the run's window that lists a change to the table (0 if none)
    last_listed: int = 0

    @property
    def key(self) -> tuple[str, int, int]:
        return self.lake, self.table_id, self.snapshot


def counts_at(con: duckdb.DuckDBPyConnection, reads: Sequence[CountRead]) -> list[int]:
    """The reads' row counts: known ones from earlier runs of the process, the others
    counted in one statement."""
    return _known_or_counted(
        reads,
        lambda missing: live_row_counts(
            con, [CountAt(r.table, r.table_id, r.snapshot) for r in missing]
        ),
    )


def counts_at_pins(con: duckdb.DuckDBPyConnection, reads: Sequence[CountRead]) -> list[int]:
    """The row counts of reads whose ``snapshot`` is the last one up to their pin that lists
    a change to the table (``last_listed``), so that the count there is the count at the pin:
    known ones, and the others counted at their pins (a scan of the newest rows takes less
    than reading the metadata, 4-5 ms for lineitem and orders at TPC-H SF1)."""
    assert all(r.snapshot == r.last_listed for r in reads)
    return _known_or_counted(
        reads, lambda missing: row_counts(con, [(r.table, r.pinned) for r in missing])
    )


def remember(reads: Sequence[CountRead], counts: Sequence[int]) -> None:
    """Keep counts a run knows without counting (its cursors' counts after maintenance: the
    recorded count plus the net rows of the delta it read) for the later models of the
    process (``counts_at_pins``)."""
    with _lock:
        _keep(zip(reads, counts, strict=True))


def _keep(counted: Iterable[tuple[CountRead, int]]) -> None:
    for read, rows in counted:
        _known[read.key] = (rows, read.pinned)
        _known.move_to_end(read.key)
    while len(_known) > LIMIT:
        _known.popitem(last=False)


def _known_or_counted(
    reads: Sequence[CountRead], count: Callable[[list[CountRead]], list[int]]
) -> list[int]:
    found: dict[int, int] = {}  # by position in ``reads``
    with _lock:
        for i, read in enumerate(reads):
            known = _known.get(read.key)
            if known is not None and known[1] >= read.last_listed:
                _known.move_to_end(read.key)
                found[i] = known[0]
    missing = [i for i in range(len(reads)) if i not in found]
    if missing:
        counted = count([reads[i] for i in missing])
        found |= dict(zip(missing, counted, strict=True))
        with _lock:
            _keep((reads[i], found[i]) for i in missing)
    return [found[i] for i in range(len(reads))]
