"""A model none of whose tables changed since its last run, known before its SQL compiles.

An orchestrator runs ``dbt run`` every few minutes, each time in a new process, and most
models find their sources unchanged. Compiling a model's plan reads its sources' schemas,
which loads the lake's catalog, and deciding reads its run log: 50-110 ms per model in a new
process (jaffle_shop's models, measured), for a run that then does nothing.

A run's commit therefore carries, in DuckLake's ``commit_extra_info``, what a later run
needs to know that nothing changed (``commit_info``): a fingerprint of the model's SQL, its
cursor (the pinned snapshot), the snapshot before which its sources' schemas were read, and
its sources' table ids. ``known_unchanged`` then reads only the lake's metadata catalog:
the model's latest labelled commit, its tables, and the snapshots since. It answers only
when the answer is certain, and otherwise leaves the run to the full decision (``decide``),
which it never contradicts:

- the SQL's fingerprint is the one the commit recorded (same text, model, default schema
  and plan format);
- every snapshot from the earlier of the schemas' read and the cursor up to now is still
  there (none expired);
- no snapshot after the cursor changed a source's rows, wrote the model or its state tables
  (but the run's own commit), or wrote the run log but as a run;
- no snapshot after the schemas were read altered or dropped a source (a change the plan,
  compiled before the pin, may not have seen);
- the model and its state tables are as the commit left them (none created or dropped
  since).

Compactions of any of these tables, and alterations of the model's own (dbt's
``persist_docs`` comments), change no row: ``decide`` takes them as no change too.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import duckdb

from ..compiler import PLAN_FORMAT, STATE_PREFIX, IVMPlan
from ..compiler.store_inputs import identity
from ..sql import TableRef, bare_statement, inlined
from . import runlog
from .decide import ALTERATIONS, COMPACTIONS, ROW_CHANGES
from .history import History, read
from .lake import SnapshotChange, metadata_catalog, snapshot_changes, snapshots_present

REASON = "no source changed"


def fingerprint(
    statement: str, target: TableRef, catalog: str, db: str, stored_inputs: tuple[str, ...] = ()
) -> str:
    """What the model's SQL (``statement``, bare: ``sql.bare_statement``, as a plan holds
    it) means to a run, before compiling it: its text, where it lands, where its unqualified
    names resolve, the plan format, and the inputs it stores (``compile_ivm``)."""
    text = f"{PLAN_FORMAT}\n{target.key}\n{catalog}.{db}\n{statement}{identity(stored_inputs)}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class CommitInfo:
    """What a run's commit records for ``known_unchanged`` (and ``token`` for
    ``known_runs``)."""

    token: str
    sql: str | None = None
    cursor: int | None = None
    #: the target catalog's snapshot before the plan read its sources' schemas
    described: int | None = None
    sources: tuple[int, ...] = ()

    def text(self) -> str:
        return json.dumps(
            {
                "token": self.token,
                "sql": self.sql,
                "cursor": self.cursor,
                "described": self.described,
                "sources": list(self.sources),
            },
            separators=(",", ":"),
        )

    @classmethod
    def parse(cls, text: str | None) -> CommitInfo | None:
        try:
            found = json.loads(text or "")
            return cls(
                str(found["token"]),
                found["sql"],
                found["cursor"],
                found["described"],
                tuple(int(t) for t in found["sources"]),
            )
        except (ValueError, TypeError, KeyError):
            return None


def commit_info(
    plan: IVMPlan, token: str, pinned: dict[str, int], ids: dict[str, int | None]
) -> CommitInfo:
    """What a run of ``plan`` pinned at ``pinned`` records in its commit: all of it when its
    sources live in the model's own catalog and their schemas' snapshot is known, else the
    token alone. A model that reads views gets no SQL fingerprint, so it is never known
    unchanged: its SQL as dbt gives it names the views, whose definitions may change with
    its text unchanged. Its cursor and snapshots are recorded all the same, so that its next
    run reads the history it asks about at its start (``history``) rather than asking the
    catalog question by question (a mart over staging views decided in 23 ms, against 13
    for the same aggregate over the table)."""
    catalog = plan.target.catalog
    source_ids = [ids.get(s.key) for s in plan.sources]
    if (
        not plan.sources
        or plan.described_at is None
        or catalog not in pinned
        or any(s.catalog != catalog for s in plan.sources)
        or any(tid is None for tid in source_ids)
    ):
        return CommitInfo(token)
    default_catalog, db = plan.default_schema
    return CommitInfo(
        token,
        None
        if plan.views
        else fingerprint(plan.sql, plan.target, default_catalog, db, plan.stored_inputs),
        pinned[catalog],
        plan.described_at,
        tuple(sorted(int(t) for t in source_ids if t is not None)),
    )


def known_unchanged(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    target: TableRef,
    *,
    catalog: str,
    db: str,
    history: History | None = None,
    stored_inputs: tuple[str, ...] = (),
) -> tuple[str, dict[str, tuple[int, int]]] | None:
    """The reason and window of a run that would find nothing changed, when the lake's
    metadata alone proves it (see the module); None when it does not. ``history``: the
    lake's snapshots as the run read them (``history``), read here when not given;
    ``stored_inputs``: the model's (``compile_ivm``)."""
    try:
        found = history or read(con, target)
        return _known_unchanged(con, sql, target, catalog, db, found, stored_inputs)
    except duckdb.Error:  # not a DuckLake, a catalog busy: the full run retries, or says why
        return None


def _known_unchanged(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    target: TableRef,
    catalog: str,
    db: str,
    history: History,
    stored_inputs: tuple[str, ...] = (),
) -> tuple[str, dict[str, tuple[int, int]]] | None:
    now, committed = history.now, history.committed
    if committed is None:
        return None
    info = CommitInfo.parse(history.extra_info)
    if (
        info is None
        or info.sql is None
        or info.cursor is None
        or info.described is None
        or info.sql != fingerprint(bare_statement(sql), target, catalog, db, stored_inputs)
    ):
        return None
    since = min(info.cursor, info.described)
    sources = set(info.sources)
    if history.covers(info.cursor, now) and _source_changed(history, info, sources, committed):
        return None  # most runs that get here: no need to look up the model's tables
    own = _own_tables(con, target, committed)
    if own is None:
        return None
    tables, log = own
    if history.covers(since, now):
        present = history.present(since, now)
        changes = history.changes(since, now, sources | tables)
    else:
        present = snapshots_present(con, target.catalog, since, now)
        changes = snapshot_changes(con, target.catalog, since, now, sources | tables)
    if not present:
        return None
    for change in changes:
        if change.snapshot_id != committed and not _benign(change, info, sources, log):
            return None
    return REASON, {target.catalog: (info.cursor, now)}


def _source_changed(history: History, info: CommitInfo, sources: set[int], committed: int) -> bool:
    """Whether a source's rows or columns changed after the cursor, from the rows the run
    read already (``covers``): what ``_benign`` refuses first, before the catalog is asked
    for the model's own tables."""
    return any(
        change.snapshot_id != committed and change.kind not in COMPACTIONS
        for change in history.changes(info.cursor or 0, history.now, sources)
    )


def _benign(change: SnapshotChange, info: CommitInfo, sources: set[int], log: int) -> bool:
    """Whether a change to a watched table (not the run's own commit) leaves the model as
    its last run left it, as ``decide`` judges it: a compaction anywhere; before the cursor,
    a source's rows changing (the run read them); after it, another model's run writing the
    log, or an alteration of the model's tables."""
    after = change.snapshot_id > (info.cursor or 0)
    if change.kind in COMPACTIONS:
        return True
    if change.table_id in sources:
        return not after and change.kind in ROW_CHANGES
    if change.table_id == log:
        return not after or change.author == runlog.AUTHOR
    return not after or change.kind in ALTERATIONS


def _own_tables(
    con: duckdb.DuckDBPyConnection, target: TableRef, committed: int
) -> tuple[set[int], int] | None:
    """The ids of the model, its state tables and its schema's run log, and the log's,
    when the model and the log exist and none of them was created or dropped after the
    run's commit ``committed``; else None. State tables are matched by their names' prefix,
    which a model whose name extends this one's shares: its tables can only make the answer
    None more often."""
    meta = metadata_catalog(target.catalog)
    rows = con.execute(
        inlined(
            "SELECT t.table_id, lower(t.table_name), t.begin_snapshot, t.end_snapshot "
            f"FROM {meta}.ducklake_table AS t JOIN {meta}.ducklake_schema AS s USING (schema_id) "
            "WHERE lower(s.schema_name) = lower(?) AND s.end_snapshot IS NULL "
            "AND (t.end_snapshot IS NULL OR t.end_snapshot > ?) "
            "AND (lower(t.table_name) IN (lower(?), lower(?)) "
            "OR starts_with(lower(t.table_name), lower(?)))",
            [
                target.schema,
                committed,
                target.name,
                runlog.RUN_LOG,
                f"{STATE_PREFIX}{target.name}_",
            ],
        )
    ).fetchall()
    if any(end is not None or begin > committed for _, _, begin, end in rows):
        return None
    ids = {name: int(tid) for tid, name, _, _ in rows}
    if target.name.lower() not in ids or runlog.RUN_LOG.lower() not in ids:
        return None
    return set(ids.values()), ids[runlog.RUN_LOG.lower()]
