"""The lake's snapshot history, read once per run.

A snapshot's row of DuckLake's ``ducklake_snapshot_changes`` (what it changed, who committed
it, its message and extra info) never changes once committed. A run used to ask the catalog
about its window five times over: whether the model is known unchanged (``unchanged``),
whether a kept plan still holds (``plan_cache``), whether the model's runs changed
(``known_runs``), what changed in the window (``decide``), and which lake this is; each a
round trip to the catalog, 1-3 ms apiece, for every model of every ``dbt run``. A run now reads
at its start, in two queries, the lake's identity, its latest snapshot, the model's latest
labelled commit and every snapshot's row since the older of that commit's cursor and the
snapshot its plan was described at, and asks those rows instead. A question about snapshots
the rows do not cover (a window starting earlier, a pin later than the read) is asked of the
catalog as before, or the rows are extended.

Whether a snapshot still exists is a question of now, not of the rows: snapshots expire.
Checks that a window can still be read from the change feed keep asking the catalog inside
the run's pinned transaction (``decide.changes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

from ..sql import BUILTIN, TableRef, inlined
from . import runlog
from .lake import SnapshotChange, identity_text, metadata_catalog, table_changes

#: the most snapshots a run reads ahead; a model that has not run for longer asks the catalog
MAX_ROWS = 10_000


@dataclass(frozen=True)
class SnapshotRow:
    snapshot_id: int
    changes_made: str
    author: str | None
    message: str | None
    extra_info: str | None

    def table_changes(self, tables: set[int]) -> list[SnapshotChange]:
        return table_changes(self.snapshot_id, self.changes_made, self.author, self.message, tables)

    def labelled(self, target: TableRef) -> bool:
        """``runlog.labelled``: a run of ``target`` committed it."""
        return self.author == runlog.AUTHOR and (self.message or "").startswith(
            runlog.commit_prefix(target)
        )


@dataclass
class History:
    """One lake's snapshots as a run read them: each present snapshot in ``[start, now]``."""

    catalog: str
    identity: str
    now: int
    #: the target model's latest labelled commit (``runlog.labelled``) and its extra info
    committed: int | None
    extra_info: str | None
    start: int
    rows: dict[int, SnapshotRow] = field(default_factory=dict)

    def covers(self, after: int, upto: int) -> bool:
        """Whether the rows answer for the snapshots ``(after, upto]``."""
        return self.start <= after and upto <= self.now

    def present(self, after: int, upto: int) -> bool:
        """Whether every snapshot in ``(after, upto]`` was there when read (``covers``)."""
        return all(i in self.rows for i in range(after + 1, upto + 1))

    def between(self, after: int, upto: int) -> list[SnapshotRow]:
        return [self.rows[i] for i in range(after + 1, upto + 1) if i in self.rows]

    def changes(self, after: int, upto: int, tables: set[int]) -> list[SnapshotChange]:
        """``lake.snapshot_changes`` over ``(after, upto]``, from the rows (``covers``)."""
        return [c for row in self.between(after, upto) for c in row.table_changes(tables)]

    def extend(self, con: duckdb.DuckDBPyConnection, upto: int) -> None:
        """Read the snapshots after ``now`` up to ``upto`` too (a pin taken after the read)."""
        if upto > self.now:
            self.rows |= _rows(con, self.catalog, self.now + 1, upto)
            self.now = upto


def read(
    con: duckdb.DuckDBPyConnection, target: TableRef, start_from: int | None = None
) -> History:
    """The history of ``target``'s catalog: its identity, latest snapshot and the model's
    latest labelled commit; and the rows from ``start_from``, or, when None, from where the
    commit's extra info says the model's next run looks back to (``unchanged.CommitInfo``)."""
    from .unchanged import CommitInfo

    meta = metadata_catalog(target.catalog)
    row = con.execute(
        f"SELECT (SELECT {BUILTIN}.max(snapshot_id) FROM {meta}.ducklake_snapshot), "
        f"(SELECT {BUILTIN}.max(value) FROM {meta}.ducklake_metadata "
        "WHERE key = 'data_path' AND scope IS NULL), "
        f"(SELECT {BUILTIN}.min(snapshot_time) FROM {meta}.ducklake_snapshot), "
        f"{BUILTIN}.max(snapshot_id), {BUILTIN}.arg_max(commit_extra_info, snapshot_id) "
        f"FROM {meta}.ducklake_snapshot_changes WHERE {runlog.labelled(target)}"
    ).fetchone()
    assert row is not None
    now, path, created, committed, extra = row
    now = int(now)
    if start_from is None:
        info = CommitInfo.parse(extra)
        looks = [v for v in (info.cursor, info.described) if v is not None] if info else []
        start_from = min(looks) if looks else now
    start = max(min(start_from, now), now - MAX_ROWS)
    history = History(
        target.catalog,
        identity_text(target.catalog, path, created),
        now,
        None if committed is None else int(committed),
        extra,
        start,
    )
    if start < now:
        history.rows = _rows(con, target.catalog, start, now)
    return history


def _rows(
    con: duckdb.DuckDBPyConnection, catalog: str, first: int, last: int
) -> dict[int, SnapshotRow]:
    """The present snapshots' rows in ``[first, last]``."""
    meta = metadata_catalog(catalog)
    rows = con.execute(
        inlined(
            "SELECT c.snapshot_id, c.changes_made, c.author, c.commit_message, "
            f"c.commit_extra_info FROM {meta}.ducklake_snapshot_changes AS c "
            f"JOIN {meta}.ducklake_snapshot AS s USING (snapshot_id) "
            "WHERE c.snapshot_id >= ? AND c.snapshot_id <= ?",
            [first, last],
        )
    ).fetchall()
    return {int(r[0]): SnapshotRow(int(r[0]), r[1] or "", r[2], r[3], r[4]) for r in rows}
