"""Retrying a unit of work that lost a commit race on a shared DuckLake catalog.

Several processes share a lake (Spark jobs commit to the sources while ``dbt run`` maintains the
models), and a commit can lose to another one. DuckLake retries its own snapshot-id races a few
times; what reaches the caller is one of these (DuckDB 1.5.5, measured here):

- DuckLake's conflict check: ``Failed to commit DuckLake transaction. Transaction conflict -
  attempting to insert into table with index "5" - but another transaction has deleted inlined
  data from it`` (also: has deleted from it, has inserted into it, has dropped it already);
- a SQLite catalog busy with another process's transaction: ``Failed to flush changes into
  DuckLake: database is locked``, ``Failed to execute query "COMMIT": database is locked``, and
  before the commit ``Failed to query most recent snapshot for DuckLake: ... database is locked``;
- a PostgreSQL catalog whose snapshot-id race outlasted DuckLake's own retries: ``Exceeded the
  maximum retry count of 10 set by the ducklake_max_retry_count setting ... duplicate key value
  violates unique constraint "ducklake_snapshot_pkey"``, and PostgreSQL's serialization
  failures (SQLSTATE 40001 ``could not serialize access due to concurrent update``, 40P01
  ``deadlock detected``).

None of them leaves anything behind (the transaction is rolled back), so the cure is to run
the unit again, never to re-commit a half-built transaction. A maintenance run computes its
delta at its pinned snapshot before its write transaction, so its unit is the write alone
(``lost_commit``); when another run of the same model committed first, the delta no longer
holds, and the whole run starts over: new pin, new decision. A unit cheap to redo beside a
busy writer keeps being retried for a while (``RetryPolicy.patience``); one that gives up
names the contended catalog and what to do (``contended``).

A SQLite catalog needs more than retries. DuckLake holds a SQLite read transaction for the whole
DuckDB transaction and writes only when it commits; SQLite refuses at once to turn a read
transaction into a write while another connection is writing. So a long transaction (a
maintenance run) loses to any short one (a pipeline's commit) that starts committing meanwhile,
and with a pipeline committing every fraction of a second, it loses on every retry. Writers of
one SQLite catalog therefore take turns: ``sqlite_write_turn`` holds an exclusive lock on a file
beside the catalog for the length of a transaction, and every transaction of this package
(maintenance runs, Spark commits) takes it (``lake.transaction``). Writers that are not this
package take no turns; against them, an attempt that follows a lost commit holds SQLite's own
write lock until its commit (``runtime.sqlite_hold``, counted by ``commits_lost``). Readers
are another matter: dbt's own queries read the lake from other threads, and a commit in
SQLite's default journal mode cannot pass a reader, so SQLite catalogs are attached in WAL
mode (``lake.catalog_defaults``).

>>> is_retryable(RuntimeError("Failed to flush changes into DuckLake: database is locked"))
True
>>> is_retryable(RuntimeError("Binder Error: Referenced column amount not found"))
False
>>> calls = []
>>> def flaky():
...     calls.append(1)
...     if len(calls) < 3:
...         raise RuntimeError("Transaction conflict - attempting to insert into table")
...     return "done"
>>> retrying(flaky, "a test", policy=RetryPolicy(base_delay=0.0))
'done'
>>> len(calls)
3
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import time
from collections.abc import Callable, Generator, Mapping
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

import duckdb

from .errors import ConcurrentRunError, ContendedCatalogError
from .sql import BUILTIN

LOGGER = logging.getLogger("dbt_duckstream")

T = TypeVar("T")

#: commits lost so far by the units being retried around the caller: a transaction taken after
#: a loss holds its SQLite catalog's write lock while it runs (``runtime.sqlite_hold``)
_LOST = ContextVar("duckstream_commits_lost", default=0)


def commits_lost() -> int:
    """How many commits the enclosing ``retrying`` units have lost so far (0 outside them)."""
    return _LOST.get()


#: fragments of the messages of failures that a rerun of the same unit can get past
RETRYABLE_MESSAGES = (
    # DuckLake's optimistic concurrency: another transaction touched the same table
    "Transaction conflict",
    # DuckDB's own write-write conflicts (several connections of one process)
    "write-write conflict",
    # SQLite catalog: another process holds the database lock (SQLITE_BUSY, SQLITE_LOCKED)
    "database is locked",
    "database table is locked",
    # PostgreSQL catalog: DuckLake's snapshot-id race after its own retries, and PostgreSQL's
    # serialization failures (SQLSTATE 40001, 40P01)
    "Exceeded the maximum retry count",
    'violates unique constraint "ducklake_',
    "could not serialize access",
    "deadlock detected",
    # DuckDB 1.5.5 while several dbt threads build DuckLake tables at once, rarely (a few times
    # in dozens of runs of the integration project, always a model's rebuild): a
    # std::length_error from inside the engine. The transaction rolls back, and the same unit
    # run again succeeds.
    "basic_string::_M_create",
    # the same race seen at a rebuild's commit (threads: 4, a DuckDB-file catalog): DuckLake
    # reads a garbage schema id, "Failed to get path for schema with id 4922528105298997544 -
    # schema not found in metadata catalog"; the commit fails whole
    "schema not found in metadata catalog",
)


def lost_commit(error: BaseException) -> bool:
    """Whether ``error`` is a lost commit race that leaves what the unit computed before its
    transaction right: any but another run of the same model committing first."""
    return is_retryable(error) and not isinstance(error, ConcurrentRunError)


def is_retryable(error: BaseException) -> bool:
    """Whether ``error`` is a lost commit race, which rerunning the whole unit can get past."""
    if isinstance(error, ContendedCatalogError):
        return False  # a unit inside this one gave up already
    if isinstance(error, ConcurrentRunError):
        return True
    message = str(error)
    return any(fragment in message for fragment in RETRYABLE_MESSAGES)


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``attempts`` runs; between them, exponential backoff with full jitter.

    The n-th wait is drawn uniformly from ``[0, min(max_delay, base_delay * 2**n)]``, so that
    processes that collided once do not collide again in lockstep. The defaults (8 runs, waits
    of up to 0.1, 0.2, ... 3.2 s) give up after about 6 s of waiting on average. With
    ``patience``, a unit keeps being retried past ``attempts`` until that many seconds have
    passed since its first attempt: for a unit cheap to redo, beside a writer whose commits
    leave it a chance now and then.
    """

    attempts: int = 8
    base_delay: float = 0.1
    max_delay: float = 5.0
    patience: float = 0.0

    @classmethod
    def from_environment(cls, patience: float = 0.0) -> RetryPolicy:
        """``DUCKSTREAM_COMMIT_ATTEMPTS`` overrides the number of runs (1: never retry), and
        ``DUCKSTREAM_COMMIT_WAIT`` the ``patience`` (seconds) given."""
        attempts = os.environ.get("DUCKSTREAM_COMMIT_ATTEMPTS")
        wait = os.environ.get("DUCKSTREAM_COMMIT_WAIT")
        return cls(
            attempts=max(1, int(attempts)) if attempts else cls.attempts,
            patience=max(0.0, float(wait)) if wait else patience,
        )

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        """The wait before retry number ``retry`` (0 for the first retry)."""
        ceiling = min(self.max_delay, self.base_delay * 2**retry)
        return (rng or random).uniform(0.0, ceiling)


def retrying(
    unit: Callable[[], T],
    what: str,
    *,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
    catalogs: Mapping[str, str] | None = None,
    redo: Callable[[BaseException], bool] | None = None,
) -> T:
    """Run ``unit``; when it fails with a lost commit race, wait and run it again.

    ``unit`` must be the whole unit of work, from its first read to its commit, and must leave
    nothing behind when it fails (one transaction). Each retry is logged at warning level on
    the ``dbt_duckstream`` logger, naming ``what`` and the error; any failure that is not a
    commit race propagates unchanged. So does the last one, unless ``catalogs`` (the catalogs
    the unit writes, alias to location) are given: then it becomes a ``ContendedCatalogError``
    that names them and says what to do (``contended``). ``redo``: which failures to retry
    (by default ``is_retryable``); the others propagate.
    """
    redo = redo or is_retryable
    policy = policy or RetryPolicy.from_environment()
    started = time.monotonic()
    attempt = 0
    lost_before = _LOST.get()
    try:
        while True:
            attempt += 1
            try:
                return unit()
            except Exception as error:
                if not redo(error):
                    raise
                _LOST.set(_LOST.get() + 1)
                _wait_to_retry(what, error, attempt, started, policy, sleep, catalogs)
    finally:
        _LOST.set(lost_before)


def _wait_to_retry(
    what: str,
    error: Exception,
    attempt: int,
    started: float,
    policy: RetryPolicy,
    sleep: Callable[[float], None],
    catalogs: Mapping[str, str] | None,
) -> None:
    """Wait before attempt ``attempt + 1`` of a unit that lost its commit, saying why; or,
    the policy spent, give up with ``error`` (named as a contended catalog when ``catalogs``)."""
    waited = time.monotonic() - started
    if attempt >= policy.attempts and waited >= policy.patience:
        if catalogs:
            raise contended(what, error, catalogs, attempt, waited, policy) from error
        raise error
    wait = policy.delay(min(attempt - 1, 16))
    LOGGER.warning(
        "%s lost a commit race (attempt %d of %s), retrying in %.2fs: %s",
        what,
        attempt,
        f"{policy.attempts}, or more within {policy.patience:.0f}s"
        if policy.patience
        else policy.attempts,
        wait,
        _first_line(error),
    )
    sleep(wait)


#: what to do about a catalog that other writers keep committing to, by its kind
ADVICE = {
    "SQLite": "a SQLite catalog commits one writer at a time and fails the others' commits, "
    "and writers that do not use dbt-duckstream do not take turns with it: for concurrent "
    "writers choose a PostgreSQL catalog (ducklake:postgres:...)",
    "PostgreSQL": "commits to the same tables kept conflicting: let the other writers commit "
    "in fewer, larger transactions, or run the models while they pause",
    "DuckDB file": "a DuckDB-file catalog is locked by the one process that opened it for "
    "writing: for several processes choose a PostgreSQL catalog (ducklake:postgres:...)",
}


def catalog_kind(location: str) -> str:
    """What holds a DuckLake's catalog, from its location.

    >>> catalog_kind("sqlite:/data/lake.sqlite"), catalog_kind("postgres:dbname=lake")
    ('SQLite', 'PostgreSQL')
    >>> catalog_kind("/data/lake.ducklake")
    'DuckDB file'
    """
    location = location.removeprefix("ducklake:")
    if location.startswith("sqlite:"):
        return "SQLite"
    if location.startswith(("postgres:", "postgresql:")):
        return "PostgreSQL"
    return "DuckDB file"


def contended(
    what: str,
    error: BaseException,
    catalogs: Mapping[str, str],
    attempts: int,
    seconds: float = 0.0,
    policy: RetryPolicy | None = None,
) -> ContendedCatalogError:
    """The error of a unit that lost its commit on each of its ``attempts`` (in ``seconds``,
    under ``policy``): which catalog was contended, what it said, and what to do."""
    policy = policy or RetryPolicy(attempts=attempts)
    alias, location = sorted(catalogs.items())[0]
    kind = catalog_kind(location)
    if isinstance(error, ConcurrentRunError):
        advice = "another run of the same model kept committing first: run each model from "
        advice += "one place at a time"
    else:
        advice = ADVICE[kind]
    where = location.removeprefix("ducklake:").split(":", 1)[-1] if kind != "PostgreSQL" else ""
    named = f"the {kind} catalog {alias!r}" + (f" ({where})" if where else "")
    return ContendedCatalogError(
        f"{what} lost its commit to other writers of {named} on all {attempts} attempts in "
        f"{seconds:.0f}s ({_first_line(error)}). What to do: {advice}; or allow more attempts "
        f"with DUCKSTREAM_COMMIT_ATTEMPTS (now {policy.attempts}) and a longer wait with "
        f"DUCKSTREAM_COMMIT_WAIT (now {policy.patience:.0f} seconds).",
        catalog=alias,
        kind=kind,
    )


def _first_line(error: BaseException) -> str:
    """The error without DuckLake's multi-line SQL dumps: its first two lines."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    return " ".join(lines[:2])[:500]


#: how long a writer waits for its turn on a SQLite catalog before going ahead without it
TURN_TIMEOUT = 600.0


@contextmanager
def sqlite_write_turn(
    con: duckdb.DuckDBPyConnection,
    timeout: float = TURN_TIMEOUT,
    *,
    files: list[str] | None = None,
) -> Generator[None]:
    """Wait for this process's turn to write to the SQLite catalogs attached to ``con``.

    The turn is an exclusive ``flock`` on ``<catalog file>.lock``, held until the block ends;
    every transaction of this package takes it, so on one machine they write one at a time
    and none loses its commit to another. Nothing happens for other catalogs. A writer that
    has waited ``timeout`` seconds goes ahead (and may have to retry its commit).
    """
    if files is None:
        files = sqlite_catalogs(con)
    with ExitStack() as turns:
        for file in files:
            turns.enter_context(_file_lock(f"{file}.lock", timeout))
        yield


def ducklake_paths(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The catalog location of each DuckLake attached to ``con``, by alias."""
    rows = con.execute(
        f"SELECT database_name, path FROM {BUILTIN}.duckdb_databases() WHERE type = 'ducklake'"
    ).fetchall()
    return {name: str(path) for name, path in rows}


def sqlite_catalogs(
    con: duckdb.DuckDBPyConnection, paths: dict[str, str] | None = None
) -> list[str]:
    """The files of the SQLite catalogs of the DuckLakes attached to ``con`` (``paths``:
    their locations, when the caller has read them already)."""
    paths = ducklake_paths(con) if paths is None else paths
    return sorted({p.removeprefix("sqlite:") for p in paths.values() if p.startswith("sqlite:")})


@contextmanager
def _file_lock(path: str, timeout: float) -> Generator[None]:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as error:  # a read-only directory: no turns, only retries
        LOGGER.warning("cannot open the write lock %s (%s): writing without it", path, error)
        yield
        return
    try:
        deadline = time.monotonic() + timeout
        locked = False
        while not locked:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    LOGGER.warning("waited %.0fs for the write lock %s: going ahead", timeout, path)
                    break
                time.sleep(random.uniform(0.005, 0.02))
        yield
    finally:
        os.close(fd)  # releases the lock
