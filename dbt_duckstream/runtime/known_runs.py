"""Each model's latest run as this process last read or wrote it, checked against the lake.

Reading a model's latest run scans the run log, a DuckLake table: 5-6 ms at TPC-H SF1, and
every model of a ``dbt run`` read it again. Every run commits under its model's label
(``runlog.commit_message``) and a token of its own (the label's extra info), so DuckLake's
snapshot metadata tells, in one indexed query, whether a model's runs changed since the
process last saw them at snapshot ``as_of``: the snapshots ``(as_of, pinned]`` are all there
(none expired), none of them wrote the model's runs but the one commit this process made
itself, and nothing but a run wrote the log. Then the entry the process knows is the log's
latest; otherwise the log is read again. A read reads the latest run of every model in the
log (one scan, as for one), so the models of one ``dbt run`` after the first find theirs
here.
"""

from __future__ import annotations

import re
import threading
import uuid
from dataclasses import dataclass, replace

import duckdb

from ..sql import TableRef, inlined
from . import runlog
from .history import History
from .lake import metadata_catalog


@dataclass(frozen=True)
class _Known:
    """A model's latest run (None: it has none), as the log held it at snapshot ``as_of``
    or, with ``token``, as this process's commit labelled ``token`` after ``as_of`` wrote it."""

    entry: runlog.Entry | None
    as_of: int
    token: str | None = None


#: by lake identity, run log table id and model name
_known: dict[tuple[str, int, str], _Known] = {}
_lock = threading.Lock()


def new_token() -> str:
    """The extra info a run's commit carries, by which the process knows its own commit."""
    return uuid.uuid4().hex


def latest(
    con: duckdb.DuckDBPyConnection,
    target: TableRef,
    *,
    lake: str,
    log_id: int,
    pinned: int,
    history: History | None = None,
) -> runlog.Entry | None:
    """The model's latest run as of the snapshot ``pinned`` of the transaction ``con`` is in
    (``lake``: the catalog's ``lake_identity``; ``log_id``: the run log's table id;
    ``history``: the catalog's snapshots as the run read them, asked first)."""
    key = (lake, log_id, target.name)
    with _lock:
        known = _known.get(key)
    if known is not None and _unchanged(con, target, known, log_id, pinned, history):
        with _lock:
            _known[key] = _Known(known.entry, pinned)
        return known.entry
    entries = runlog.latest_runs(con, target)
    with _lock:
        for model in {target.name, *entries}:
            _known[(lake, log_id, model)] = _Known(entries.get(model), pinned)
    return entries.get(target.name)


def wrote(
    target: TableRef, entry: runlog.Entry, *, lake: str, log_id: int, as_of: int, token: str
) -> None:
    """This process committed ``entry`` as the model's latest run, labelled ``token``, in a run
    that read the log at ``as_of``: the entry's past runs gain it."""
    key = (lake, log_id, target.name)
    with _lock:
        known = _known.get(key)
        if known is None or known.as_of != as_of or known.token is not None:
            _known.pop(key, None)  # the run did not read its log here: read it next time
            return
        before = known.entry.past if known.entry is not None else ()
        past = (
            runlog.PastRun(entry.strategy, entry.seconds, entry.estimated_rows, entry.changed_rows),
            *before,
        )
        _known[key] = _Known(replace(entry, past=past[: runlog.PAST_RUNS]), as_of, token)


def _unchanged(
    con: duckdb.DuckDBPyConnection,
    target: TableRef,
    known: _Known,
    log_id: int,
    pinned: int,
    history: History | None = None,
) -> bool:
    """Whether the snapshots after ``known.as_of`` up to ``pinned`` left the model's runs as
    ``known`` holds them."""
    if known.as_of > pinned:
        return False
    expected = [known.token] if known.token is not None else []
    if (
        history is not None
        and history.catalog == target.catalog
        and history.covers(known.as_of, pinned)
    ):
        rows = history.between(known.as_of, pinned)
        writes_log = re.compile(f"(^|,)[a-z_]+:{log_id}(,|$)")
        return (
            len(rows) == pinned - known.as_of
            and [r.extra_info for r in rows if r.labelled(target)] == expected
            and not any(
                r.author != runlog.AUTHOR and writes_log.search(r.changes_made) for r in rows
            )
        )
    row = con.execute(
        inlined(
            "SELECT count(*), "
            f"list(commit_extra_info) FILTER (WHERE {runlog.labelled(target)}), "
            "count(*) FILTER (WHERE author IS DISTINCT FROM ? AND regexp_matches(changes_made, ?)) "
            f"FROM {metadata_catalog(target.catalog)}.ducklake_snapshot_changes "
            "WHERE snapshot_id > ? AND snapshot_id <= ?",
            [
                runlog.AUTHOR,
                f"(^|,)[a-z_]+:{log_id}(,|$)",
                known.as_of,
                pinned,
            ],
        ),
    ).fetchone()
    assert row is not None
    snapshots, own, foreign = row
    return snapshots == pinned - known.as_of and list(own or []) == expected and not foreign


def columns_read(
    lake: str, log_id: int, source: str, table_id: int, among: frozenset[str] | None = None
) -> tuple[str, ...]:
    """What the models of one run log (those named ``among``, when given), as this process
    knows their latest runs, read from a source table (``Cursor.columns`` of each, distinct):
    the columns a first read of its change feed may take for the models that follow it
    (``feeds``)."""
    return tuple(
        sorted(
            {
                cursor.columns
                for entry in _entries(lake, log_id, among)
                for cursor in entry.cursors
                if cursor.source == source and cursor.table_id == table_id and cursor.columns
            }
        )
    )


def sources_read(lake: str, log_id: int, among: frozenset[str]) -> dict[str, set[int]]:
    """The source tables that the models named ``among`` of one run log read, as this process
    knows their latest runs: table ids by catalog."""
    found: dict[str, set[int]] = {}
    for entry in _entries(lake, log_id, among):
        for cursor in entry.cursors:
            if cursor.table_id is not None:
                found.setdefault(cursor.catalog, set()).add(cursor.table_id)
    return found


def cursors(lake: str, log_id: int, among: frozenset[str]) -> list[runlog.Cursor]:
    """The cursors of the latest runs of the models named ``among`` of one run log, as this
    process knows them: where each stands on each of its sources."""
    return [cursor for entry in _entries(lake, log_id, among) for cursor in entry.cursors]


def _entries(lake: str, log_id: int, among: frozenset[str] | None) -> list[runlog.Entry]:
    """The latest runs this process knows of the models of one run log (those named
    ``among``, when given) that ran."""
    with _lock:
        return [
            known.entry
            for (known_lake, known_log, model), known in _known.items()
            if known_lake == lake
            and known_log == log_id
            and known.entry is not None
            and (among is None or model in among)
        ]


def learn(lake: str, log_id: int, entries: dict[str, runlog.Entry], as_of: int) -> None:
    """The log's latest runs as a read at snapshot ``as_of`` found them, ahead of the runs
    (``warmup``): kept for each model the process knows nothing later of."""
    with _lock:
        for model, entry in entries.items():
            known = _known.get((lake, log_id, model))
            if known is None or (known.token is None and known.as_of < as_of):
                _known[(lake, log_id, model)] = _Known(entry, as_of)
