"""The per-run choice between maintenance and a rebuild, from catalog metadata alone.

Two costs dominate a maintenance run. Every deleted or updated row's old values (its
pre-image) come from the data file that held it, and DuckLake reads that whole file to find
them; and each changed row then passes through the feed's netting, the operators' deltas and
the apply, which costs far more per row than a scan. A rebuild reads every input and writes
every model row. In rows read, from ``ducklake_data_file``, ``ducklake_delete_file`` and
``ducklake_table_stats``:

    maintain ~ rows of data files added in the window
             + rows of the data files whose deletes changed in the window
             + CHANGE_WEIGHT * rows changed
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

from .operators.base import quote

#: rebuild when the estimated maintenance work exceeds this share of a rebuild's
REBUILD_ABOVE = 1.0
#: a changed row through the feed, the deltas and the apply, against a row scanned
CHANGE_WEIGHT = 200
#: a model row written by a rebuild, against a row scanned
OUTPUT_WEIGHT = 20


@dataclass(frozen=True)
class Estimate:
    """Rows a maintenance run and a rebuild would read or write."""

    changed_rows: int  # rows inserted, plus rows deleted, in the window
    maintain_rows: int
    rebuild_rows: int

    @property
    def share(self) -> float:
        return self.maintain_rows / max(self.rebuild_rows, 1)

    def rebuild_is_cheaper(self, above: float = REBUILD_ABOVE) -> bool:
        return self.share > above

    def describe(self) -> str:
        return (
            f"~{self.changed_rows} rows changed; estimated maintenance cost {self.share:.0%} "
            "of a rebuild's"
        )


def estimate(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    window: tuple[int, int],
    changed: set[int],
    inputs: set[int],
    model: int | None,
) -> Estimate:
    """The estimate for the tables ``changed`` in ``window`` of ``catalog``, out of ``inputs``
    (table ids), with ``model`` the maintained table's id."""
    meta = quote(f"__ducklake_metadata_{catalog}")
    old, new = window
    ids = ", ".join(str(i) for i in sorted(changed)) or "NULL"
    row = con.execute(
        f"SELECT coalesce(sum(record_count), 0) FROM {meta}.ducklake_data_file "
        f"WHERE table_id IN ({ids}) AND begin_snapshot > ? AND begin_snapshot <= ?",
        [old, new],
    ).fetchone()
    inserted = int(row[0]) if row else 0
    row = con.execute(
        "SELECT coalesce(sum(f.record_count), 0), coalesce(sum(d.delete_count), 0) "
        f"FROM {meta}.ducklake_delete_file AS d JOIN {meta}.ducklake_data_file AS f "
        "USING (data_file_id) "
        f"WHERE d.table_id IN ({ids}) AND d.begin_snapshot <= ? "
        "AND coalesce(d.partial_max, d.begin_snapshot) > ? "
        "AND (d.end_snapshot IS NULL OR d.end_snapshot > ?)",
        [new, old, new],
    ).fetchone()
    pre_image_files, deleted = (int(row[0]), int(row[1])) if row else (0, 0)
    inputs_rows = _record_counts(con, meta, inputs)
    model_rows = _record_counts(con, meta, {model} if model is not None else set())
    changed_rows = inserted + deleted
    return Estimate(
        changed_rows,
        inserted + pre_image_files + CHANGE_WEIGHT * changed_rows,
        inputs_rows + OUTPUT_WEIGHT * model_rows,
    )


def _record_counts(con: duckdb.DuckDBPyConnection, meta: str, tables: set[int]) -> int:
    if not tables:
        return 0
    row = con.execute(
        f"SELECT coalesce(sum(record_count), 0) FROM {meta}.ducklake_table_stats "
        f"WHERE table_id IN ({', '.join(str(i) for i in sorted(tables))})"
    ).fetchone()
    return int(row[0]) if row else 0
