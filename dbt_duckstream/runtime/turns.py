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


#: the turns of this process's DuckLake statements and commits
LAKE = Turns()
