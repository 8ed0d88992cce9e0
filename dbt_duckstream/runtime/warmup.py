"""What an invocation's runs read first, read ahead beside dbt's start: the run logs, the
sources' changes, and the old catalog versions of the models' tables (and this package's
code version, which a kept plan is checked against).

DuckLake reads a table's inlined rows at the schema version that inlined them, and a process
loads the whole catalog as of that version the first time it reads one (six catalog queries,
12-30 ms with 200 tables in the lake). Every DDL moves the lake's schema version on (a model
built, rebuilt or replaced), so most inlined tables are at older versions: at TPC-H SF1 a
``dbt run`` of nine maintained models paid 15 such loads, 250 ms, each inside the first model
to read the table (a source, a state table, the run log), and its first model read the run
log besides. DuckLake keeps what it loads for the process, and the process keeps the latest
runs it read (``known_runs``), so one thread can do both for all: when dbt opens its
connection the plugin starts one (``on_open``), which reads each run log of the lake, reads
the change of each source that the invocation's first model to read it would read
(``first_windows``: a mixed batch's ended rows cost the first model most of its run), and
loads the versions of the sources, tables and state tables of the invocation's models, while
dbt's own thread creates schemas, runs hooks and compiles.

Only the run logs of the schemas the invocation's models are built in are read, when dbt
says which (``schemas``): a lake that many developers, or a CI run per pull request, share
holds a run log per schema, and the models of every one share their names.

Reading ahead is all it does: what it has not loaded when a run needs it, the run loads
itself, as without it; a failure only leaves the runs to read theirs. Models are known by
name, as in ``invocation``: one whose alias differs from its name is not read ahead for.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import suppress

import duckdb

from ..compiler.plan import STATE_PREFIX
from ..errors import DuckstreamError
from ..sql import TableRef, literal, quote
from . import first_windows, known_runs, plan_cache, runlog
from .feeds import FeedRequest
from .lake import (
    current_snapshot,
    ducklake_catalogs,
    lake_identity,
    live_at,
    metadata_catalog,
    transaction,
)
from .turns import LAKE

#: the thread's name (tests wait for it)
THREAD = "duckstream-read-ahead"
LOGGER = logging.getLogger("dbt_duckstream")
#: how long the process's exit waits for reading ahead to stop, in seconds
STOP_WAIT = 10.0

#: the threads reading ahead now, each with its cursor (``stop_reading``)
_reading: dict[threading.Thread, duckdb.DuckDBPyConnection] = {}
_reading_lock = threading.Lock()


#: (catalog, schema), lower case
Schema = tuple[str, str]


def on_open(
    cursors: Callable[[], duckdb.DuckDBPyConnection],
    models: frozenset[str] | None,
    schemas: frozenset[Schema] | None = None,
) -> threading.Thread | None:
    """Start reading ahead for an invocation of ``models`` (None: unknown, nothing to do),
    built in ``schemas`` (None: unknown, every schema with a run log), on a cursor opened by
    ``cursors`` from a connection that outlives the invocation's runs."""
    if not models:
        return None
    cursor = cursors()

    def reading() -> None:
        try:
            with suppress(OSError):  # the runs' first look for a kept plan asks it
                plan_cache.code_version()
            for catalog in sorted(ducklake_catalogs(cursor)):
                read_ahead(cursor, catalog, models, schemas)
        except (duckdb.Error, DuckstreamError, runlog.OutdatedRunLog) as error:
            # the runs read what this did not, and report what fails them
            LOGGER.debug("reading ahead stopped: %s", error)
        finally:
            with _reading_lock:
                _reading.pop(threading.current_thread(), None)
            cursor.close()

    thread = threading.Thread(target=reading, name=THREAD, daemon=True)
    with _reading_lock:
        _reading[thread] = cursor
    thread.start()
    return thread


def stop_reading(wait: float = STOP_WAIT) -> None:
    """Interrupt the threads reading ahead and wait until they end, before the interpreter
    exits: a daemon thread still inside DuckDB then aborted the process ("terminate called
    without an active exception", exit status 134), after a ``dbt run`` whose nine models
    were all unchanged had finished before its reading ahead did. Each query the thread
    starts is interrupted in turn, until it gives up."""
    deadline = time.monotonic() + wait
    with _reading_lock:
        running = list(_reading.items())
    for thread, cursor in running:
        while thread.is_alive() and time.monotonic() < deadline:
            with suppress(duckdb.Error):
                cursor.interrupt()
            thread.join(0.02)


atexit.register(stop_reading)


def read_ahead(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    models: frozenset[str],
    schemas: frozenset[Schema] | None = None,
) -> None:
    """Read each run log of the catalog (of ``schemas`` alone, when given) into the process's
    known runs (``known_runs.learn``), then the changes of their sources that the first of
    ``models`` will read (``first_windows``), then load the old catalog versions of what the
    models read: their sources in the catalog, their tables and state tables."""
    meta = metadata_catalog(catalog)
    with LAKE.reading():
        logs = con.execute(
            f"SELECT s.schema_name, t.table_id FROM {meta}.ducklake_table AS t "
            f"JOIN {meta}.ducklake_schema AS s USING (schema_id) "
            f"WHERE t.table_name = {literal(runlog.RUN_LOG)} "
            "AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL ORDER BY 1"
        ).fetchall()
        if schemas is not None:
            logs = [log for log in logs if (catalog.lower(), str(log[0]).lower()) in schemas]
        if not logs:
            return
        lake = lake_identity(con, catalog)
    sources: set[int] = set()
    ahead: list[FeedRequest] = []
    for schema, log_id in logs:
        log = TableRef(catalog, str(schema), runlog.RUN_LOG)
        with transaction(con, writes=False):
            as_of = current_snapshot(con, catalog)
            entries = runlog.latest_runs(con, log)
            known_runs.learn(lake, int(log_id), entries, as_of)
            ahead += first_windows.requests(con, catalog, lake, int(log_id), models, as_of)
        sources |= known_runs.sources_read(lake, int(log_id), models).get(catalog, set())
    # a window that two run logs' models read is read once: the cache serves the second
    first_windows.read(con, lake, ahead)
    load(con, catalog, sources, models, [str(schema) for schema, _ in logs])


def load(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    tables: Iterable[int],
    models: Iterable[str] = (),
    schemas: Iterable[str] = (),
) -> int:
    """Load the old catalog versions of ``tables``' inlined rows, and of the tables and state
    tables of ``models`` in ``schemas``; how many versions it loaded."""
    with LAKE.reading():
        versions = old_versions(con, catalog, tables, models, schemas)
    loaded = 0
    for at, schema, name in versions:
        # a time travel to a version loads the catalog as of it; a table dropped meanwhile
        # only leaves its version to the runs
        with LAKE.reading(), suppress(duckdb.CatalogException):
            con.execute(
                f"SELECT 1 FROM {quote(catalog)}.{quote(schema)}.{quote(name)} "
                f"AT (VERSION => {at}) LIMIT 0"
            ).fetchall()
            loaded += 1
    return loaded


def old_versions(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    tables: Iterable[int],
    models: Iterable[str] = (),
    schemas: Iterable[str] = (),
) -> list[tuple[int, str, str]]:
    """Per schema version older than the lake's that holds inlined rows of the tables: the
    snapshot that began it, and one of those tables (schema and name) as it was named then."""
    meta = metadata_catalog(catalog)
    wanted = [f"t.table_id IN ({', '.join(str(int(t)) for t in sorted(set(tables))) or 'NULL'})"]
    names, within = sorted(models), sorted(schemas)
    if names and within:
        listed = ", ".join(literal(n.lower()) for n in names)
        prefixes = ", ".join(literal(f"{STATE_PREFIX}{n}_".lower()) for n in names)
        wanted.append(
            f"(lower(s.schema_name) IN ({', '.join(literal(n.lower()) for n in within)}) "
            f"AND (lower(t.table_name) IN ({listed}) "
            f"OR list_any_value(list_filter([{prefixes}], p -> "
            "starts_with(lower(t.table_name), p))) IS NOT NULL))"
        )
    rows = con.execute(
        f"""
        WITH versions AS (
            SELECT i.table_id, i.schema_version,
                   coalesce(v.begin_snapshot, t.begin_snapshot) AS at_snapshot
            FROM {meta}.ducklake_inlined_data_tables AS i
            JOIN {meta}.ducklake_table AS t ON t.table_id = i.table_id AND t.end_snapshot IS NULL
            JOIN {meta}.ducklake_schema AS s
              ON s.schema_id = t.schema_id AND s.end_snapshot IS NULL
            LEFT JOIN {meta}.ducklake_schema_versions AS v
              ON v.table_id = i.table_id AND v.schema_version = i.schema_version
            WHERE ({" OR ".join(wanted)})
              AND i.schema_version < (SELECT max(schema_version) FROM {meta}.ducklake_snapshot)
        )
        SELECT min(v.at_snapshot), arg_min([s.schema_name, t.table_name], v.at_snapshot)
        FROM versions AS v
        JOIN {meta}.ducklake_table AS t
          ON t.table_id = v.table_id AND {live_at("v.at_snapshot", "t")}
        JOIN {meta}.ducklake_schema AS s
          ON s.schema_id = t.schema_id AND {live_at("v.at_snapshot", "s")}
        GROUP BY v.schema_version
        ORDER BY v.schema_version
        """
    ).fetchall()
    return [(int(at), str(named[0]), str(named[1])) for at, named in rows]
