"""Apply a consolidated root delta to the maintained table.

The delta is first stored as a temporary table of the model's columns plus ``_ivm_m`` (net
multiplicity per distinct row, never zero). Then:

* keyed models (one row per group key, e.g. a GROUP BY whose keys are selected) delete every
  row whose key appears in the delta, then insert the rows with ``_ivm_m > 0``;
* bag models delete exactly ``-_ivm_m`` copies of each retracted row (rows are paired with
  copies by ``row_number()`` over the table's ``rowid``) and insert ``_ivm_m`` copies of each
  asserted row. NULLs match NULLs throughout (``IS NOT DISTINCT FROM``).

Matching a retracted row by its values is exact because every value the delta carries is
either read from a table (a source at a snapshot, an operator's state) or computed from such
values, row by row, by the same expressions that computed the stored row. The values that a
recomputation would not reproduce bit for bit (floating-point sums, averages, ...) come from
aggregate state tables, never from a second evaluation of the aggregate. And the model's
tables hold the values the runs computed, bit for bit: DuckLake's inlined rows could store a
float one bit off, so the runtime writes them without inlining (``runtime/inlining.py``), and
checks that every delete removes as many rows as the delta retracts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..sql import quote, same_key
from .render import MULT


@dataclass
class Maintenance:
    """The statements of one maintenance run, in the order they run.

    ``build`` leaves the model's consolidated delta in a temporary table; ``delete`` and
    ``insert`` write it to the model (skipped when the delta is empty; ``delete`` returns the
    number of rows it deleted, which is the number of rows the delta retracts when the model
    holds what its runs wrote); ``always`` updates state that changes even when the model's
    rows do not; ``cleanup`` drops the temporary tables.
    """

    build: list[str]
    delete: str
    insert: str
    #: the temporary table ``build`` leaves the consolidated delta in
    delta_table: str
    always: list[str] = field(default_factory=list)
    cleanup: list[str] = field(default_factory=list)

    def all(self) -> list[str]:
        return [*self.build, self.delete, self.insert, *self.always, *self.cleanup]


def delete_sql(target: str, columns: tuple[str, ...], keys: tuple[str, ...] | None, delta: str):
    if keys is not None and not keys:
        return f"DELETE FROM {target} WHERE EXISTS (SELECT 1 FROM {delta})"
    if keys is not None:
        return (
            f"DELETE FROM {target} WHERE rowid IN (SELECT t.rowid FROM {target} AS t "
            f"SEMI JOIN {delta} AS d ON {same_key('t', 'd', keys)})"
        )
    return (
        f"DELETE FROM {target} WHERE rowid IN (\n"
        f"  SELECT rid FROM (\n"
        f"    SELECT t.rowid AS rid, d._ivm_copies,\n"
        f"           row_number() OVER (PARTITION BY d._ivm_row ORDER BY t.rowid) AS n\n"
        f"    FROM {target} AS t\n"
        f"    JOIN (SELECT *, -{MULT} AS _ivm_copies, row_number() OVER () AS _ivm_row\n"
        f"          FROM {delta} WHERE {MULT} < 0) AS d\n"
        f"    ON {same_key('t', 'd', columns)}\n"
        f"  ) WHERE n <= _ivm_copies\n"
        f")"
    )


def insert_sql(target: str, columns: tuple[str, ...], delta: str) -> str:
    cols = ", ".join(f"d.{quote(c)}" for c in columns)
    return (
        f"INSERT INTO {target} SELECT {cols} FROM {delta} AS d, range(d.{MULT}) WHERE d.{MULT} > 0"
    )
