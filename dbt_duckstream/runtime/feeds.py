"""A source's change over a snapshot window, read once and shared by every model of a run.

Snapshots are immutable, so the delta of (lake, table id, window, columns) never changes: the
first model that needs it reads it into a table of an in-memory database that every
connection of the DuckDB instance sees (every thread of a ``dbt run``), and later models
project it. The registry of those tables is kept in Python, per instance (a token in the
cache database tells instances apart): a statement on a table, outside a transaction and
with a DuckLake as the default database, costs a DuckLake snapshot read, about 1 ms.

An entry of a window that only inserted keeps its rows unnetted, each with multiplicity 1: no
row can cancel there, so grouping by every column would only merge duplicates (8 of 44 ms for
60k lineitem rows), and its readers project it where they use it, unnetted too (``Scan``).

An entry serves any request for a subset of its columns. dbt runs one model at a time, so the
first model to read a window cannot know what the next ones ask: it reads its own columns and
those the other models of its run log last read from the table (``FeedRequest.read_by_others``,
from the log the process already read). When the window ended rows, whose old values cost a
read per column of every row group holding one, it takes those only for the models of its dbt
invocation (``invocation``; unknown from the Python API, where it reads its own alone). At
TPC-H SF1 with 0.1% mixed batches a second read of lineitem's window cost the model that
needed more columns 340 ms, more than its rebuild. A request for columns an entry lacks reads
the window again, once, with every column the table had throughout it, or, when the window
ended rows, with those the models of its run log read (``_next_read_columns``). When dbt
opens its connection, the read a source's first reader will make is made ahead, the same way
(``first_windows``).

Entries live as long as the process, within a memory budget (``DUCKSTREAM_FEED_CACHE_MB``,
default 1024): the least recently used are dropped first.

DuckDB lets one transaction write to one attached database only, so entries are written before
a run's own transaction begins; a run holds its entries (``held``) until it is done, and
eviction passes them by.

A window that ended row versions (deleted or updated rows) reads them from the pre-images its
writers captured (``captured``), and the rest from the data files that hold them, only the
asked columns at the deleted positions (``preimages``); a layout that reader does not handle
falls back to DuckLake's feed and time travel, and the entry keeps why.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import duckdb

from ..compiler.operators.scan import source_delta_sql
from ..sql import BUILTIN, TableRef, inlined, quote
from . import captured
from .lake import lake_identity, metadata_catalog

CACHE = "_duckstream_feeds"
#: an entry's estimated bytes per row and column (values, validity and the table's overhead)
ROW_BYTES_PER_COLUMN = 16
TABLE_BYTES = 4096
#: the cache database's table holding its instance's token
_TOKEN = f"{quote(CACHE)}.main.instance"
#: one reader of the registries at a time per process
_lock = threading.Lock()
#: entries that runs of this process are using, with how many runs use each
_holders: Counter[str] = Counter()
#: per (lake, table id, window), the lock its readers take turns under (``shared_feed``)
_flights: dict[WindowKey, threading.Lock] = {}


def budget_bytes() -> int:
    return int(float(os.environ.get("DUCKSTREAM_FEED_CACHE_MB", "1024")) * 2**20)


@dataclass(frozen=True)
class FeedRequest:
    """The delta a model needs from one source."""

    source: TableRef
    table_id: int
    window: tuple[int, int]
    columns: tuple[str, ...]
    hides_snapshot_id: bool = False
    #: a rewrite, compaction or flush of the table falls in the model's window (the delta is
    #: then read per rowid; over a span without one both ways are exact: entries are shared)
    reorganized: bool = False
    #: the window only inserted into the table (the delta ends no row)
    appended: bool = False
    #: what the other models of the run log last read from the table (``Cursor.columns``):
    #: the first read of a window takes those columns too, so that the models after it in
    #: the invocation find theirs in its entry
    read_by_others: tuple[str, ...] = ()
    #: ``read_by_others`` holds only the models of this run's dbt invocation (``invocation``)
    others_invoked: bool = False
    #: a later snapshot than the window's end at which the table is as it was there (no
    #: change to it in between), to read the window's new rows at: the run's pinned one,
    #: whose catalog version the process has loaded. DuckLake loads the whole catalog of
    #: every schema version it reads at, and a project's `view` and `table` models move the
    #: version on during an invocation (20 ms a load in a small lake)
    read_at: int | None = None


@dataclass(frozen=True)
class Feed:
    """An entry holding a request's delta."""

    name: str
    #: why its ended rows were read by time travel instead of from their files ("" if not)
    time_travel: str = ""
    #: where its ended rows were read when its source has captured pre-images ("" if not)
    preimages: str = ""

    @property
    def relation(self) -> str:
        return _relation(self.name)


#: a source table's change over a window: (lake identity, table id, window)
WindowKey = tuple[str, int, tuple[int, int]]


@dataclass
class _Entry:
    """A table of the cache: the delta it holds, when it was last used, and its size."""

    lake: str
    table_id: int
    window: tuple[int, int]
    columns: tuple[str, ...]
    feed: Feed
    used: int
    size: int

    @property
    def key(self) -> WindowKey:
        return (self.lake, self.table_id, self.window)

    def serves(self, key: WindowKey, columns: tuple[str, ...]) -> bool:
        """Whether the entry holds the delta of ``columns`` over the window ``key``."""
        return self.key == key and set(columns) <= set(self.columns)


#: per DuckDB instance (its token), the entries of its cache by table name
_registries: dict[str, dict[str, _Entry]] = {}


@contextmanager
def held(
    con: duckdb.DuckDBPyConnection,
    requests: Mapping[str, FeedRequest],
    known: Mapping[str, str] | None = None,
) -> Generator[dict[str, Feed]]:
    """The entries holding each request's delta (by the request's key), kept until the
    block ends. ``known``: the lake identities of catalogs (``lake_identity``), when the
    caller has read them."""
    names: list[str] = []
    lakes = dict(known or {})
    try:
        feeds = {}
        for key, request in requests.items():
            catalog = request.source.catalog
            if catalog not in lakes:
                lakes[catalog] = lake_identity(con, catalog)
            feeds[key] = shared_feed(con, request, lake=lakes[catalog])
            names.append(feeds[key].name)
        yield feeds
    finally:
        with _lock:
            _holders.subtract(names)
            for name in names:
                if _holders[name] <= 0:
                    del _holders[name]


def shared_feed(
    con: duckdb.DuckDBPyConnection, request: FeedRequest, *, lake: str | None = None
) -> Feed:
    """An entry holding the netted delta of (at least) the requested columns, held for the
    caller (``held`` lets it go). ``lake`` is the source's lake identity, when known."""
    if lake is None:
        lake = lake_identity(con, request.source.catalog)
    registry = _registry(con)
    key = (lake, request.table_id, request.window)
    with _lock:
        flight = _flights.setdefault(key, threading.Lock())
    # one read of a window at a time: dbt's threads running models of the same sources at
    # once wait for the first read instead of each reading the window beside it
    with flight:
        return _shared_feed(con, request, registry, key)


def _shared_feed(
    con: duckdb.DuckDBPyConnection,
    request: FeedRequest,
    registry: dict[str, _Entry],
    key: WindowKey,
) -> Feed:
    lake = key[0]
    with _lock:
        same = [e for e in registry.values() if e.key == key]
        for entry in same:
            if entry.serves(key, request.columns):
                entry.used = _tick()
                _holders[entry.feed.name] += 1
                return entry.feed
    name = f"feed_{uuid.uuid4().hex[:16]}"
    # the ended rows' query reads the catalog's inlined rows: it runs where it was planned
    con.execute("BEGIN TRANSACTION")
    try:
        columns = _next_read_columns(con, request) if same else _first_read_columns(con, request)
        sql, time_travel, note = _delta_sql(con, request, columns)
        created = con.execute(f"CREATE TABLE {_relation(name)} AS {sql}").fetchone()
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    feed = Feed(name, time_travel, note)
    written = int(created[0]) if created else 0
    size = TABLE_BYTES + written * ROW_BYTES_PER_COLUMN * (len(columns) + 1)
    with _lock:
        entry = _Entry(lake, request.table_id, request.window, columns, feed, _tick(), size)
        registry[name] = entry
        _holders[name] += 1
        _evict(con, registry)
    return feed


def cached(lake: str, table_id: int, window: tuple[int, int], columns: tuple[str, ...]) -> bool:
    """Whether an entry holds the delta of ``columns`` of the table over ``window``: a model
    deciding after the first reader of its sources' window reads them for nothing
    (``decide.costs``). Asked of every instance's registry, without a statement: a deciding
    run is inside a transaction, which may not see the cache database another thread created
    since it began (a process with several DuckDB instances reading one lake is rare, and
    the answer only weighs a choice)."""
    key = (lake, table_id, window)
    with _lock:
        return any(
            e.serves(key, columns) for registry in _registries.values() for e in registry.values()
        )


def _delta_sql(
    con: duckdb.DuckDBPyConnection, request: FeedRequest, columns: tuple[str, ...]
) -> tuple[str, str, str]:
    """The request's delta of ``columns``, why its ended rows are read by time travel
    ("" when they are read from their files, or when the window ended none), and where
    captured pre-images served, or could not (``captured``; "" when the source has none)."""
    ended, time_travel, note = None, "", ""
    if not (request.appended or request.reorganized or request.hides_snapshot_id):
        read = captured.ended_rows(con, request.source, request.table_id, *request.window, columns)
        rows, note = read.rows, read.note
        ended, time_travel = rows.sql, "" if rows.sql is not None else rows.reason
    sql = source_delta_sql(
        request.source,
        columns,
        request.window,
        request.hides_snapshot_id,
        reorganized=request.reorganized,
        appended=request.appended,
        ended_rows=ended,
        read_at=request.read_at,
        # the rows of a window that only inserted cannot cancel: netting them would cost a
        # grouping by every column, and readers take them as they are (``Scan``)
        netted=False,
    )
    return sql, time_travel, note


def _tick() -> int:
    """When an entry was last used, for eviction: a clock read in Python (``now()`` in SQL
    would search the default DuckLake for the function, a metadata read per statement)."""
    return time.monotonic_ns()


def _relation(name: str) -> str:
    return f"{quote(CACHE)}.main.{quote(name)}"


def _registry(con: duckdb.DuckDBPyConnection) -> dict[str, _Entry]:
    """The registry of the cache of ``con``'s instance, which is created on its first read."""
    with _lock:
        try:
            row = con.execute(f"SELECT token FROM {_TOKEN}").fetchone()
        except (duckdb.CatalogException, duckdb.BinderException):
            con.execute(f"ATTACH IF NOT EXISTS ':memory:' AS {quote(CACHE)}")
            con.execute(f"CREATE TABLE IF NOT EXISTS {_TOKEN} AS SELECT {BUILTIN}.uuid() AS token")
            row = con.execute(f"SELECT token FROM {_TOKEN}").fetchone()
        assert row is not None
        return _registries.setdefault(str(row[0]), {})


def _lasting_columns(con: duckdb.DuckDBPyConnection, request: FeedRequest) -> list[tuple[int, str]]:
    """The ids and names of the table's columns that existed, under the same name, at both
    ends of the request's window."""
    old, new = request.window
    rows = con.execute(
        inlined(
            f"SELECT column_id, column_name FROM {metadata_catalog(request.source.catalog)}"
            ".ducklake_column WHERE table_id = ? AND parent_column IS NULL "
            "AND begin_snapshot <= ? AND (end_snapshot IS NULL OR end_snapshot > ?) "
            "ORDER BY column_order",
            [request.table_id, old, new],
        ),
    ).fetchall()
    return [(int(cid), str(name)) for cid, name in rows]


def _first_read_columns(con: duckdb.DuckDBPyConnection, request: FeedRequest) -> tuple[str, ...]:
    """The columns the first read of a window takes: the request's, and, when the window only
    inserted or the others are those of the run's invocation, those the other models of the
    run log read (``FeedRequest.read_by_others``) that the table had throughout the window. A
    column is known by its id and name as the run log records them (``cid:name:type`` in
    ``lake.tables_columns``): a column dropped, or renamed, since is not read. The old values
    of deleted rows are read where they lie, a read per column of every row group holding one
    (``preimages``): there, not knowing the invocation, the first model would pay for columns
    that only models outside it may ask for."""
    if not request.read_by_others or not (request.appended or request.others_invoked):
        return request.columns
    lasting = _lasting_columns(con, request)
    others = _read_by_others(request, lasting)
    wanted = set(request.columns)
    return request.columns + tuple(
        name for _, name in lasting if name in others and name not in wanted
    )


def _next_read_columns(con: duckdb.DuckDBPyConnection, request: FeedRequest) -> tuple[str, ...]:
    """The columns a read of a window already read with other columns takes, once: when the
    window only inserted, every column the table had throughout it (its new files are read
    whole anyway); when it ended rows, the request's and those the other models of the run log
    read, in the table's order: there every column costs a read of every row group holding an
    ended row (at TPC-H SF10, all 16 of lineitem's took Q10's read from 0.9 s to 3.4 s)."""
    lasting = _lasting_columns(con, request)
    if request.appended:
        return tuple(name for _, name in lasting)
    kept = set(request.columns) | _read_by_others(request, lasting)
    found = tuple(name for _, name in lasting if name in kept)
    return found + tuple(name for name in request.columns if name not in found)


def _read_by_others(request: FeedRequest, lasting: list[tuple[int, str]]) -> set[str]:
    """The names of the ``lasting`` columns (``_lasting_columns``) that the other models of
    the run log read, each known by its id and name as the log records them (``cid:name:type``
    in ``lake.tables_columns``)."""
    return {
        name
        for cid, name in lasting
        if any(f"{cid}:{name}:" in identity for identity in request.read_by_others)
    }


def _evict(con: duckdb.DuckDBPyConnection, registry: dict[str, _Entry]) -> None:
    """Drop the least recently used entries that no run holds while the cache is over its
    budget (sizes as estimated when each entry was written: asking DuckDB for its tables'
    sizes lists every table of every attached lake). Under ``_lock``."""
    total = sum(entry.size for entry in registry.values())
    for entry in sorted(registry.values(), key=lambda e: e.used):
        if total <= budget_bytes():
            break
        if entry.feed.name in _holders:
            continue
        con.execute(f"DROP TABLE IF EXISTS {_relation(entry.feed.name)}")
        del registry[entry.feed.name]
        total -= entry.size
        if not any(e.key == entry.key for e in registry.values()):
            _flights.pop(entry.key, None)


def cached_entries(con: duckdb.DuckDBPyConnection) -> list[tuple[int, int, int, list[str]]]:
    """(table id, old, new, columns) of every entry, least recently used first: what the
    cache holds, for tests."""
    entries = sorted(_registry(con).values(), key=lambda e: e.used)
    return [(e.table_id, *e.window, list(e.columns)) for e in entries]
