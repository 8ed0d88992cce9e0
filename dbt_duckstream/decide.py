"""The per-run choice between maintenance and a rebuild, from catalog metadata alone.

What a maintenance run costs is dominated by reading the change feed: inserted rows come from
the window's new data files, but every deleted or updated row's old values (its pre-image)
come from the data file that held it, and DuckLake reads that whole file to find them. So:

    maintain ~ rows of data files added in the window
             + rows of the data files that received deletes in the window
    rebuild  ~ rows of every input table + rows of the model (rewritten)

both in rows read or written, from ``ducklake_data_file``, ``ducklake_delete_file`` and
``ducklake_table_stats``. The run rebuilds when maintenance is estimated to cost more than
``REBUILD_ABOVE`` of a rebuild: a large batch, or deletes scattered through a big file whose
re-reading already costs what a rebuild does, never makes a run much slower than rebuilding.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from .operators.base import quote

#: rebuild when the estimated maintenance work exceeds this share of a rebuild's
REBUILD_ABOVE = 0.75


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
            f"{self.changed_rows} rows changed; maintenance reads ~{self.maintain_rows} rows, "
            f"{self.share:.0%} of a rebuild's {self.rebuild_rows}"
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
        f"WHERE d.table_id IN ({ids}) AND d.begin_snapshot > ? AND d.begin_snapshot <= ?",
        [old, new],
    ).fetchone()
    pre_image_files, deleted = (int(row[0]), int(row[1])) if row else (0, 0)
    everything = sorted(inputs | ({model} if model is not None else set()))
    row = con.execute(
        f"SELECT coalesce(sum(record_count), 0) FROM {meta}.ducklake_table_stats "
        f"WHERE table_id IN ({', '.join(str(i) for i in everything) or 'NULL'})"
    ).fetchone()
    rebuild = int(row[0]) if row else 0
    return Estimate(inserted + deleted, inserted + pre_image_files, rebuild)
