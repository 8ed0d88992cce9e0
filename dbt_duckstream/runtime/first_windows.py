"""The change of each source that an invocation's first model will read, read ahead while dbt
starts (``warmup``).

The first model of a ``dbt run`` to need a source's change over a window reads it for every
model of the invocation (``feeds``). After a mixed batch written by DuckDB SQL, that read
holds the old values of the rows the batch ended, a read of every row group holding one: at
TPC-H SF1 with 0.1% batches, 0.4-1 s for lineitem's columns, inside the first model's run.
The models' latest runs (``known_runs``) say where each stands on the source and which of
its columns it reads, and DuckLake's snapshot metadata what changed since: the request the
first model's decision builds (``run._feed_requests``) can be built and read before it runs.

Only a plain window is read ahead, as a decision would span it (``decide.changes``): every
change to the source since the models' cursor inserted or deleted rows (no compaction, flush,
rewrite or alteration; no deletion vectors; no column named ``snapshot_id``), over the span
of snapshots that changed it, and it changed at most ``AHEAD_SHARE`` of the source's rows (a
larger change is often rebuilt, and its read would only compete with the rebuilds). A model
whose decision spans the source otherwise, or asks for other columns, reads its own as
without it; an entry read ahead only ever serves the request of its own window.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import duckdb

from ..sql import inlined
from . import known_runs
from .decide.changes import INSERTIONS, ROW_CHANGES
from .feeds import FeedRequest, held
from .lake import (
    feed_safe_optimizers,
    metadata_catalog,
    record_counts,
    snapshot_changes,
    snapshot_exists,
    uses_deletion_vectors,
)
from .runlog import Cursor
from .turns import LAKE
from .window_rows import WindowRows, per_table

#: the largest share of a source's rows whose change is read ahead
AHEAD_SHARE = 0.01


def requests(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    lake: str,
    log_id: int,
    models: frozenset[str],
    now: int,
) -> list[FeedRequest]:
    """The feed requests that the first of ``models`` (of the run log ``log_id``) to read
    each of their changed sources in ``catalog`` will make, as of the snapshot ``now`` of
    the read transaction ``con`` is in; ``lake`` is the catalog's ``lake_identity``."""
    found = []
    for cursors in _by_source(lake, log_id, models, catalog).values():
        request = _request(con, catalog, lake, log_id, models, cursors, now)
        if request is not None:
            found.append(request)
    return found


def read(con: duckdb.DuckDBPyConnection, lake: str, ahead: Iterable[FeedRequest]) -> None:
    """Read each request's change into the feed cache, outside any transaction (``feeds``)."""
    with feed_safe_optimizers(con):
        for request in ahead:
            with LAKE.reading(), held(con, {"ahead": request}, {request.source.catalog: lake}):
                pass


def _by_source(
    lake: str, log_id: int, models: frozenset[str], catalog: str
) -> dict[int, list[Cursor]]:
    """The cursors of the models' latest runs on the sources in ``catalog``, by table id."""
    found: dict[int, list[Cursor]] = {}
    for cursor in known_runs.cursors(lake, log_id, models):
        if cursor.catalog == catalog and cursor.table_id is not None and cursor.table:
            found.setdefault(cursor.table_id, []).append(cursor)
    return found


def _request(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    lake: str,
    log_id: int,
    models: frozenset[str],
    cursors: list[Cursor],
    now: int,
) -> FeedRequest | None:
    """The request for one source whose models stand at ``cursors``: over the span that
    changed it since the cursor most of them share, when the window is plain."""
    table_id = int(cursors[0].table_id or 0)
    counted = Counter(c.snapshot_id for c in cursors)
    old = min(counted, key=lambda snapshot: (-counted[snapshot], snapshot))
    if old >= now or not snapshot_exists(con, catalog, old):
        return None
    changes = snapshot_changes(con, catalog, old, now, {table_id})
    kinds = {change.kind for change in changes}
    if not changes or not kinds <= ROW_CHANGES:
        return None
    if uses_deletion_vectors(con, catalog, {table_id}) or _hides_snapshot_id(
        con, catalog, table_id
    ):
        return None
    span = (min(c.snapshot_id for c in changes) - 1, max(c.snapshot_id for c in changes))
    changed = per_table(con, lake, catalog, {table_id: span}).get(table_id)
    rows = record_counts(con, catalog, {table_id}).get(table_id, 0)
    if changed is None or _changed_rows(changed) > AHEAD_SHARE * max(rows, 1):
        return None
    source = cursors[0]
    read_by = known_runs.columns_read(lake, log_id, source.source, table_id, among=models)
    if not read_by:
        return None
    return FeedRequest(
        source.ref,
        table_id,
        span,
        (),
        appended=kinds <= INSERTIONS,
        read_by_others=read_by,
        others_invoked=True,
    )


def _changed_rows(changed: WindowRows) -> int:
    return changed.inserted + changed.deleted + changed.inlined_deleted


def _hides_snapshot_id(con: duckdb.DuckDBPyConnection, catalog: str, table_id: int) -> bool:
    """Whether the table has a column named ``snapshot_id`` (``Scan.hides_snapshot_id``)."""
    row = con.execute(
        inlined(
            f"SELECT count(*) FROM {metadata_catalog(catalog)}.ducklake_column "
            "WHERE table_id = ? AND parent_column IS NULL AND end_snapshot IS NULL "
            "AND lower(column_name) = 'snapshot_id'",
            [table_id],
        )
    ).fetchone()
    return bool(row and row[0])
