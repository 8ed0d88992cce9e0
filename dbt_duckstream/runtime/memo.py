"""Metadata read once per process: what a window of snapshots changed never changes.

The models of one ``dbt run`` share their sources' windows (each starts where the last run
of the model left off, and ends at the snapshot the run pins), and each model's cost estimate
reads the same metadata of the same window again: a few milliseconds per statement, most of
them planning. Keyed by the lake (``lake.lake_identity``), the table ids and the window, a value
serves every later model of the process; the most recently used are kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Memo(Generic[K, V]):
    """Values by key, read in batches of the missing ones, at most ``limit`` kept."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._known: OrderedDict[K, V] = OrderedDict()

    def get(self, keys: Iterable[K], read: Callable[[list[K]], dict[K, V]]) -> dict[K, V]:
        """The keys' values: known ones, and the others read in one call of ``read`` (which
        returns a value for every key it was given)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[K, V] = {}
        with self._lock:
            for key in wanted:
                if key in self._known:
                    self._known.move_to_end(key)
                    found[key] = self._known[key]
        missing = [key for key in wanted if key not in found]
        if missing:
            fresh = read(missing)
            with self._lock:
                for key in missing:
                    found[key] = self._known[key] = fresh[key]
                    self._known.move_to_end(key)
                while len(self._known) > self.limit:
                    self._known.popitem(last=False)
        return found

    def clear(self) -> None:
        with self._lock:
            self._known.clear()
