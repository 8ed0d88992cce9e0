"""The per-run choice between maintenance and a rebuild, from catalog metadata alone.

Two costs dominate a maintenance run. Every deleted or updated row's old values (its
pre-image) come from the data file that held it, and DuckLake reads that whole file to find
them; and each changed row then passes through the feed's netting, the operators' deltas and
the apply, which costs far more per row than a scan. A rebuild reads every input and writes
every model row. In rows read, from ``ducklake_data_file``, ``ducklake_delete_file`` and
``ducklake_table_stats``:

    maintain ~ rows of data files added in the window
             + rows of the data files whose deletes changed in the window
             + INSERT_WEIGHT * rows inserted + DELETE_WEIGHT * rows deleted
             + rows of the inputs a join term or a recomputed aggregate reads in full
    rebuild  ~ rows of every input table + OUTPUT_WEIGHT * rows of the model

The weights are per-row costs relative to scanning a row, measured with the TPC-H benchmark
(``make bench``) on DuckDB 1.5. A run rebuilds when maintenance is estimated to cost more than
``REBUILD_ABOVE`` of a rebuild, so a large batch never costs much more than rebuilding.

Deleted rows are counted from the cumulative counts of the delete files the window touched
(DuckLake extends one delete file per data file across snapshots), an upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from .compiler import IVMPlan
from .lake import metadata_catalog
from .operators import Aggregate, Join, Operator

#: rebuild when the estimated maintenance work exceeds this share of a rebuild's
REBUILD_ABOVE = 1.0
#: an inserted row through the feed, the deltas and the apply, against a row scanned
INSERT_WEIGHT = 20
#: a deleted row, whose pre-image the feed looks up (about 1.5 µs a row in DuckLake 1.5)
DELETE_WEIGHT = 200
#: a model row written by a rebuild, against a row scanned
OUTPUT_WEIGHT = 20


@dataclass(frozen=True)
class Estimate:
    """Rows a maintenance run and a rebuild would read or write."""

    changed_rows: int  # rows inserted, plus (at most) rows deleted, in the window
    maintain_rows: int
    rebuild_rows: int

    @property
    def share(self) -> float:
        return self.maintain_rows / max(self.rebuild_rows, 1)

    def rebuild_is_cheaper(self, above: float = REBUILD_ABOVE) -> bool:
        return self.share > above

    def describe(self) -> str:
        return (
            f"up to {self.changed_rows} rows changed; estimated maintenance cost "
            f"{self.share:.0%} of a rebuild's"
        )


def estimate(
    con: duckdb.DuckDBPyConnection,
    plan: IVMPlan,
    windows: dict[str, tuple[int, int]],
    changed: frozenset[str],
    ids: dict[str, int | None],
) -> Estimate:
    """The estimate for a window in which the sources ``changed`` (keys) changed; ``ids``
    holds the table ids of the sources and of the model."""
    rows: dict[str, int] = {}
    feed_rows = inserted_rows = deleted_rows = 0
    tables = [*plan.sources, plan.target]
    for catalog, window in windows.items():
        known = {
            t.key: tid
            for t in tables
            if t.catalog == catalog and (tid := ids.get(t.key)) is not None
        }
        counts = _record_counts(con, catalog, set(known.values()))
        rows |= {key: counts.get(tid, 0) for key, tid in known.items()}
        touched = {tid for key, tid in known.items() if key in changed}
        inserted, pre_images, deleted = _window_files(con, catalog, window, touched)
        feed_rows += inserted + pre_images
        inserted_rows += inserted
        deleted_rows += deleted
    model_rows = rows.pop(plan.target.key, 0)
    return Estimate(
        inserted_rows + deleted_rows,
        feed_rows
        + INSERT_WEIGHT * inserted_rows
        + DELETE_WEIGHT * deleted_rows
        + full_reads(plan, changed, rows),
        sum(rows.values()) + OUTPUT_WEIGHT * model_rows,
    )


def full_reads(plan: IVMPlan, changed: frozenset[str], rows: dict[str, int]) -> int:
    """Rows of inputs read in full by the delta: a join term joins one input's delta with
    every other input's whole state; an aggregate below the model's last step recomputes the
    touched groups from its input at both snapshots."""
    root_aggregate = plan.accumulated.aggregate if plan.accumulated else None
    total = 0
    for node in _nodes(plan.root):
        if isinstance(node, Join):
            for i, child in enumerate(node.children):
                if _changes(child, changed):
                    others = [c for j, c in enumerate(node.children) if j != i]
                    total += sum(_rows(c, rows) for c in others)
        elif isinstance(node, Aggregate) and node is not root_aggregate and _changes(node, changed):
            total += 2 * _rows(node.child, rows)
    return total


def _nodes(root: Operator) -> list[Operator]:
    seen: dict[int, Operator] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen[id(node)] = node
            stack.extend(node.children)
    return list(seen.values())


def _changes(node: Operator, changed: frozenset[str]) -> bool:
    return any(s.key in changed for s in node.sources())


def _rows(node: Operator, rows: dict[str, int]) -> int:
    return sum(rows.get(s.key, 0) for s in node.sources())


def _window_files(
    con: duckdb.DuckDBPyConnection, catalog: str, window: tuple[int, int], tables: set[int]
) -> tuple[int, int, int]:
    """Rows inserted in the window's new data files; rows of the data files whose deletes
    changed in the window (their pre-images are read from them); deleted rows (at most)."""
    if not tables:
        return 0, 0, 0
    meta = metadata_catalog(catalog)
    old, new = window
    ids = ", ".join(str(i) for i in sorted(tables))
    row = con.execute(
        f"SELECT coalesce(sum(record_count), 0) FROM {meta}.ducklake_data_file "
        f"WHERE table_id IN ({ids}) AND begin_snapshot > ? AND begin_snapshot <= ?",
        [old, new],
    ).fetchone()
    inserted = int(row[0]) if row else 0
    # DuckLake extends one delete file per data file across snapshots (``partial_max``)
    row = con.execute(
        "SELECT coalesce(sum(f.record_count), 0), coalesce(sum(d.delete_count), 0) "
        f"FROM {meta}.ducklake_delete_file AS d JOIN {meta}.ducklake_data_file AS f "
        "USING (data_file_id) "
        f"WHERE d.table_id IN ({ids}) AND d.begin_snapshot <= ? "
        "AND coalesce(d.partial_max, d.begin_snapshot) > ? "
        "AND (d.end_snapshot IS NULL OR d.end_snapshot > ?)",
        [new, old, new],
    ).fetchone()
    pre_images, deleted = (int(row[0]), int(row[1])) if row else (0, 0)
    return inserted, pre_images, deleted


def _record_counts(
    con: duckdb.DuckDBPyConnection, catalog: str, tables: set[int]
) -> dict[int, int]:
    if not tables:
        return {}
    meta = metadata_catalog(catalog)
    found = con.execute(
        f"SELECT table_id, record_count FROM {meta}.ducklake_table_stats "
        f"WHERE table_id IN ({', '.join(str(i) for i in sorted(tables))})"
    ).fetchall()
    return {int(t): int(n or 0) for t, n in found}
