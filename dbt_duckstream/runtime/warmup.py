"""The old catalog versions that an invocation's models will read, loaded ahead beside its runs.

DuckLake reads a table's inlined rows at the schema version that inlined them, and a process
loads the whole catalog as of that version the first time it reads one (six catalog queries,
12-30 ms with 200 tables in the lake). Every DDL moves the lake's schema version on (a model
built, rebuilt or replaced), so most inlined tables are at older versions: at TPC-H SF1 a
``dbt run`` of nine maintained models paid 15 such loads, 250 ms, each inside the first model
to read the table (a source, a state table, the run log). DuckLake keeps what it loads for
the process, so one thread can load them for all: the first run of an invocation, once it
has read the run log, starts one with the tables the other models read, and it loads their
versions on a cursor of its own while dbt's thread runs the models before them.

Loading is all it does: a version it has not loaded yet when a run needs it, the run loads
itself, as without it, and a failure only leaves the runs to load theirs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import duckdb

from ..compiler.plan import STATE_PREFIX
from ..sql import TableRef, literal, quote
from . import invocation, known_runs
from .lake import ducklake_catalogs, live_at, metadata_catalog
from .turns import LAKE

#: the invocation (its models) each lake was last loaded ahead for
_loaded_for: dict[str, frozenset[str]] = {}
_lock = threading.Lock()


def ahead(
    target: TableRef, own: Iterable[int], *, lake: str, log_id: int
) -> threading.Thread | None:
    """Start loading, once per invocation and lake, the old catalog versions that the
    invocation's models other than ``target``'s will read: their sources (as the run log
    knows them), and their tables and state tables beside ``target``; not those of the run
    that starts it (``own``: its table ids), which it is loading itself. The thread, or None
    when nothing is started (no other model known, or no lasting cursor to load on)."""
    models = invocation.models()
    others = models - {target.name} if models is not None else frozenset()
    if models is None or not others:
        return None
    with _lock:
        if _loaded_for.get(lake) is models:
            return None
        cursor = invocation.lasting_cursor()
        if cursor is None:
            return None
        _loaded_for[lake] = models
    sources = known_runs.sources_read(lake, log_id, others)
    skip = set(own)

    def loading() -> None:
        try:
            lakes = ducklake_catalogs(cursor)
            if target.catalog in lakes:
                sources.setdefault(target.catalog, set())
            for catalog, tables in sorted(sources.items()):
                if catalog in lakes:
                    named = (target.schema, sorted(others)) if catalog == target.catalog else None
                    load(cursor, catalog, tables - skip, named)
        except duckdb.Error:
            pass  # the runs load what this did not
        finally:
            cursor.close()

    thread = threading.Thread(target=loading, name="duckstream-catalog-versions", daemon=True)
    thread.start()
    return thread


def load(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    tables: Iterable[int],
    models: tuple[str, list[str]] | None = None,
) -> int:
    """Load the old catalog versions of ``tables``' inlined rows, and of the tables and state
    tables of ``models`` (a schema and model names); how many versions it loaded."""
    with LAKE.reading():
        versions = old_versions(con, catalog, tables, models)
    for at, schema, name in versions:
        with LAKE.reading():  # a time travel to a version loads the catalog as of it
            con.execute(
                f"SELECT 1 FROM {quote(catalog)}.{quote(schema)}.{quote(name)} "
                f"AT (VERSION => {at}) LIMIT 0"
            ).fetchall()
    return len(versions)


def old_versions(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    tables: Iterable[int],
    models: tuple[str, list[str]] | None = None,
) -> list[tuple[int, str, str]]:
    """Per schema version older than the lake's that holds inlined rows of the tables: the
    snapshot that began it, and one of those tables (schema and name) as it was named then."""
    meta = metadata_catalog(catalog)
    wanted = [f"t.table_id IN ({', '.join(str(int(t)) for t in sorted(set(tables))) or 'NULL'})"]
    if models is not None:
        schema, names = models
        listed = ", ".join(literal(n.lower()) for n in names)
        prefixes = ", ".join(literal(f"{STATE_PREFIX}{n}_".lower()) for n in names)
        wanted.append(
            f"(lower(s.schema_name) = {literal(schema.lower())} "
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
        SELECT min(v.at_snapshot), arg_min(s.schema_name, v.at_snapshot),
               arg_min(t.table_name, v.at_snapshot)
        FROM versions AS v
        JOIN {meta}.ducklake_table AS t
          ON t.table_id = v.table_id AND {live_at("v.at_snapshot", "t")}
        JOIN {meta}.ducklake_schema AS s
          ON s.schema_id = t.schema_id AND {live_at("v.at_snapshot", "s")}
        GROUP BY v.schema_version
        ORDER BY v.schema_version
        """
    ).fetchall()
    return [(int(at), str(schema), str(name)) for at, schema, name in rows]
