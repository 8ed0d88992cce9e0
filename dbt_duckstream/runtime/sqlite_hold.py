"""Holding a SQLite catalog's write lock through a transaction that lost its commit before.

A SQLite catalog in WAL mode fails a commit whose read snapshot another connection has
committed past, and DuckLake reads the catalog from a transaction's first statement to its
commit. So beside a writer that commits back to back (a user's ingestion job, which takes no
turns with this package), a maintenance write loses nearly every attempt: measured, 8 of 30
transactions of 150 ms committed beside a process committing as fast as it could.

After a loss, the next attempt holds the catalog's write lock from before its first read: a
second connection of the same DuckDB instance (so the same SQLite library, whose locks see each
other within a process) starts a write on DuckLake's metadata database, and keeps it open until
just before the DuckLake commit. Other processes read meanwhile but cannot commit, so the
transaction's snapshot stays current; it releases the lock right before its own commit, which
wins unless another writer's commit slips into that gap (measured: 24 of 30 committed against
the same writer). The first attempt never holds: uncontended runs never block anyone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from contextlib import suppress

import duckdb

from ..sql import quote

LOGGER = logging.getLogger("dbt_duckstream")

#: how long to wait for another process to release the write lock (a commit holds it for
#: milliseconds; a long transaction of another tool, for as long as it runs) before going ahead
#: without holding it
HOLD_WAIT = 2.0


class SqliteWriteHold:
    """The write locks of some SQLite catalogs, held by a connection of their own."""

    def __init__(self, con: duckdb.DuckDBPyConnection, aliases: Iterable[str]) -> None:
        self._con = con
        self._aliases = sorted(aliases)
        self._holder: duckdb.DuckDBPyConnection | None = None

    def acquire(self, wait: float = HOLD_WAIT) -> None:
        """Take the write locks, waiting out other processes' commits (``wait`` seconds)."""
        if not self._aliases:
            return
        deadline = time.monotonic() + wait
        while True:
            holder = self._con.cursor()
            try:
                holder.execute("BEGIN TRANSACTION")
                for alias in self._aliases:
                    # a write that changes nothing takes SQLite's write lock until the rollback
                    holder.execute(
                        f"UPDATE {quote(f'__ducklake_metadata_{alias}')}.ducklake_metadata "
                        "SET value = value WHERE key = 'version'"
                    )
            except duckdb.Error as error:
                _close(holder)
                if time.monotonic() > deadline:
                    LOGGER.warning("could not hold the SQLite catalog's write lock: %s", error)
                    return
                time.sleep(0.002)
                continue
            self._holder = holder
            return

    def release(self) -> None:
        """Let the lock go (idempotent): right before the commit it made room for."""
        if self._holder is not None:
            _close(self._holder)
            self._holder = None


def _close(holder: duckdb.DuckDBPyConnection) -> None:
    with suppress(duckdb.Error):  # no transaction open
        holder.execute("ROLLBACK")
    holder.close()
