"""``duckstream status``: where each maintained model of a schema stands.

From the run log and DuckLake's snapshot metadata only: each model's last run (strategy,
reason, rows, duration, when), and how many snapshots have changed its sources since.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from . import runlog
from .lake import current_snapshot, snapshot_changes, table_ids


@dataclass(frozen=True)
class ModelStatus:
    model: str
    last_run: runlog.Entry
    #: snapshots that changed one of the model's sources since its cursor (None: unknown)
    behind: int | None


def status(con: duckdb.DuckDBPyConnection, catalog: str, schema: str) -> list[ModelStatus]:
    found = []
    for target in runlog.models(con, catalog, schema):
        entry = runlog.last(con, target)
        if entry is not None:
            found.append(ModelStatus(target.key, entry, _behind(con, entry)))
    return found


def _behind(con: duckdb.DuckDBPyConnection, entry: runlog.Entry) -> int | None:
    """Snapshots since the cursor that changed a source (a recreated source: unknown)."""
    if not entry.cursors:
        return None
    snapshots: set[tuple[str, int]] = set()
    for catalog in sorted({c.catalog for c in entry.cursors}):
        cursors = [c for c in entry.cursors if c.catalog == catalog]
        ids = table_ids(con, [c.ref for c in cursors])
        if any(ids[c.source] != c.table_id for c in cursors):
            return None
        tables = {c.table_id for c in cursors if c.table_id is not None}
        after, upto = cursors[0].snapshot_id, current_snapshot(con, catalog)
        for change in snapshot_changes(con, catalog, after, upto, tables):
            snapshots.add((catalog, change.snapshot_id))
    return len(snapshots)


def format_status(rows: list[ModelStatus]) -> str:
    """A plain-text table, one line per model."""
    header = ("model", "last run", "strategy", "rows +/-", "seconds", "behind", "reason")
    lines = [header]
    for row in rows:
        entry = row.last_run
        when = entry.finished_at.strftime("%Y-%m-%d %H:%M:%S") if entry.finished_at else "?"
        lines.append(
            (
                row.model,
                when,
                entry.strategy,
                f"+{entry.rows_inserted} -{entry.rows_deleted}",
                f"{entry.seconds:.2f}",
                "?" if row.behind is None else str(row.behind),
                entry.reason,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=False))
        + "  "
        + line[-1]
        for line in lines
    )
