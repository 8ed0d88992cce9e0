"""One process's DuckLake work takes turns: a commit goes alone, reads go together.

DuckLake 0.4 (DuckDB 1.5.3 to 1.5.5, duckdb/ducklake#1248) cannot commit while another
connection of the same DuckDB instance runs a statement on the lake: the commit reads a
garbage schema id (``Failed to get path for schema with id 4922528105298538792 - schema not
found in metadata catalog``), and now and then the process dies in the extension. Measured
here: two threads committing in turns beside three threads reading failed 29 commits in 20 s;
with the readers waiting for each commit, none in 20 s. dbt runs models and tests on several
threads of one instance, so every DuckLake transaction that writes holds ``writing`` from its
``BEGIN`` to its end, and every other statement on the lake holds ``reading`` while it runs:
this package's reads, and dbt's own statements (``bridge.plugin``).

A thread that writes may read and write again within its turn; a writer waiting keeps new
readers out, so a stream of tests cannot starve a run.

>>> turns = Turns()
>>> with turns.writing():
...     with turns.reading(), turns.writing():
...         "nested turns of one thread"
'nested turns of one thread'
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Generator
from contextlib import contextmanager


class Turns:
    """A readers-writer lock, reentrant for its threads, that prefers writers."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._readers: Counter[int] = Counter()
        self._writer: int | None = None
        self._depth = 0
        self._waiting = 0

    @contextmanager
    def reading(self) -> Generator[None]:
        me = threading.get_ident()
        with self._changed:
            if self._writer != me and not self._readers[me]:
                while self._writer is not None or self._waiting:
                    self._changed.wait()
            self._readers[me] += 1
        try:
            yield
        finally:
            with self._changed:
                self._readers[me] -= 1
                if not self._readers[me]:
                    del self._readers[me]
                self._changed.notify_all()

    @contextmanager
    def writing(self) -> Generator[None]:
        me = threading.get_ident()
        with self._changed:
            if self._writer != me:
                self._waiting += 1
                try:
                    # a thread's own reads do not keep it out (it never waits on itself)
                    while self._writer is not None or any(
                        n for t, n in self._readers.items() if t != me
                    ):
                        self._changed.wait()
                finally:
                    self._waiting -= 1
                self._writer = me
            self._depth += 1
        try:
            yield
        finally:
            with self._changed:
                self._depth -= 1
                if not self._depth:
                    self._writer = None
                self._changed.notify_all()

    @contextmanager
    def alone(self) -> Generator[None]:
        """The process to this thread for a while, as ``writing``, even from within its reads:
        they are set aside while it waits (two readers that each waited for the other's reads
        to end would wait for ever), and taken up again once no other thread writes."""
        me = threading.get_ident()
        with self._changed:
            mine = self._readers.pop(me, 0)
            self._changed.notify_all()
        try:
            with self.writing():
                yield
        finally:
            if mine:
                with self._changed:
                    while self._writer not in (None, me) or self._waiting:
                        self._changed.wait()
                    self._readers[me] += mine


class Planning:
    """The statements that dbt plans outside the turns: calls of this package's bridge
    functions (``bridge.plugin``). DuckDB runs a bridge function on a thread of its own, which
    takes its turns itself; until it starts, its statement is being planned, and reads the
    instance's settings. ``quiet`` waits until no such statement is being planned, and keeps new
    ones waiting until it ends.

    >>> planning = Planning()
    >>> with planning.planning() as token:
    ...     planning.began(token)
    ...     with planning.quiet():
    ...         "no bridge call is being planned"
    'no bridge call is being planned'
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._pending: set[str] = set()
        self._closed = 0

    @contextmanager
    def planning(self) -> Generator[str]:
        """A bridge call being planned, until its function ``began`` (or the block ends):
        the token to pass it."""
        token = uuid.uuid4().hex
        with self._changed:
            while self._closed:
                self._changed.wait()
            self._pending.add(token)
        try:
            yield token
        finally:
            self.began(token)

    def began(self, token: str) -> None:
        """The bridge function of ``token``'s call runs: its statement is planned."""
        with self._changed:
            self._pending.discard(token)
            self._changed.notify_all()

    @contextmanager
    def quiet(self) -> Generator[None]:
        with self._changed:
            self._closed += 1
            try:
                while self._pending:
                    self._changed.wait()
            except BaseException:
                self._closed -= 1
                self._changed.notify_all()
                raise
        try:
            yield
        finally:
            with self._changed:
                self._closed -= 1
                self._changed.notify_all()


#: the turns of this process's DuckLake statements and commits
LAKE = Turns()
#: the bridge calls being planned
PLANNING = Planning()
