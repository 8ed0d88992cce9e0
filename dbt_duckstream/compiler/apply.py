"""Apply a consolidated root delta to the maintained table.

The delta is first stored as a temporary table of the model's columns plus ``_ivm_m`` (net
multiplicity per distinct row, never zero). Then:

* keyed models (one row per group key, e.g. a GROUP BY whose keys are selected) delete every
  row whose key appears in the delta, then insert the rows with ``_ivm_m > 0``; a key with a
  string column is deleted by as a bag model is, by its narrow columns (``deleted_by_key``);
* bag models delete exactly ``-_ivm_m`` copies of each retracted row (rows are paired with
  copies by ``row_number()`` over the table's ``rowid``) and insert ``_ivm_m`` copies of each
  asserted row. NULLs match NULLs throughout (``IS NOT DISTINCT FROM``). Matching by every
  column reads every column of the model (TPC-H's wide join: 29 columns of 6M rows, 1.2 s of
  a 2.5 s run), so a model with a few narrow columns first counts, by those alone, the rows
  holding each retracted value of them (``match_by``): where it holds as many as are
  retracted, all of them go, unread; the other retracted rows, if the first delete left
  some, are matched by every column in a second.

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

import re
from dataclasses import dataclass, field

from ..sql import column_list, keyed_join, quote, same_key
from .render import MULT, Write


@dataclass
class Maintenance:
    """The statements of one maintenance run, in the order they run.

    ``build`` leaves the model's consolidated delta in a temporary table; ``delete`` and
    ``insert`` write it to the model (skipped when the delta is empty, and ``delete`` also
    when the delta retracts nothing and it ``deletes_only_retracted`` rows; ``delete``
    returns the number of rows it deleted, which is the number of rows the delta retracts
    when the model holds what its runs wrote); ``always`` updates state that changes even
    when the model's rows do not (each skipped when the temporary table it names is empty);
    ``cleanup`` drops the temporary tables.
    """

    build: list[str]
    delete: str
    insert: str
    #: the temporary table ``build`` leaves the consolidated delta in
    delta_table: str
    always: list[Write] = field(default_factory=list)
    #: the temporary table each ``build`` statement that fills one fills, by its index
    fills: dict[int, str] = field(default_factory=dict)
    cleanup: list[str] = field(default_factory=list)
    #: a bag model's delete, which would read the model to find nothing in an append's run
    deletes_only_retracted: bool = False
    #: when ``delete`` removes only the retracted rows its narrow columns tell apart
    #: (``match_by``): the delete of the others, by every column, run only if some remain
    delete_rest: str | None = None

    def all(self) -> list[str]:
        rest = [self.delete_rest] if self.delete_rest else []
        always = [write.sql for write in self.always]
        return [*self.build, self.delete, *rest, self.insert, *always, *self.cleanup]


def delete_sql(
    target: str,
    columns: tuple[str, ...],
    keys: tuple[str, ...] | None,
    delta: str,
    types: tuple[str, ...] | None = None,
    *,
    large: bool = False,
) -> tuple[str, str | None]:
    """The delete of the rows the delta retracts, and the delete of those it leaves (by every
    column), when it tells apart only those its narrow columns do (``match_by``). A ``large``
    model is matched by key in two joins (``sql.keyed_join``): by ``=`` the delta's keys reach
    its scan and skip its row groups (the wide join of TPC-H SF1, 6M rows, one order
    updated: its rows found in 50 ms by ``=``, 310 ms by ``IS NOT DISTINCT FROM``)."""
    if keys is not None and not keys:
        return f"DELETE FROM {target} WHERE EXISTS (SELECT 1 FROM {delta})", None
    if keys is not None:
        held = (
            keyed_join("s.rowid", target, "SEMI", delta, keys)
            if large
            else f"SELECT t.rowid FROM {target} AS t SEMI JOIN {delta} AS d "
            f"ON {same_key('t', 'd', keys)}"
        )
        return f"DELETE FROM {target} WHERE rowid IN ({held})", None
    retracted = retracted_copies(delta)
    by_every_column = (
        f"DELETE FROM {target} WHERE rowid IN (\n{copies_of(target, columns, retracted)}\n)"
    )
    narrow = match_by(columns, types)
    if not narrow:
        return by_every_column, None
    # a second statement, not a branch of this one: DuckDB scans the model's every column
    # for a join whose other side is empty (TPC-H Q10 at SF10: 20-30 ms of a 41 ms delete)
    listed = ", ".join(quote(c) for c in narrow)
    held = (
        keyed_join(
            f"s.rowid AS _ivm_rid, {column_list(narrow, 's.')}", target, "SEMI", "per_value", narrow
        )
        if large
        else f"SELECT t.rowid AS _ivm_rid, {column_list(narrow, 't.')} FROM {target} AS t\n"
        f"           SEMI JOIN per_value AS d ON {same_key('t', 'd', narrow)}"
    )
    return (
        f"DELETE FROM {target} WHERE rowid IN (\n"
        f"  WITH per_value AS (SELECT {listed}, sum(_ivm_copies) AS _ivm_copies "
        f"FROM {retracted} GROUP BY ALL),\n"
        f"  held AS ({held}),\n"
        f"  whole AS (SELECT d.* FROM per_value AS d\n"
        f"            JOIN (SELECT {listed}, count(*) AS _ivm_held FROM held GROUP BY ALL) AS h\n"
        f"            ON {same_key('h', 'd', narrow)} WHERE h._ivm_held = d._ivm_copies)\n"
        f"  SELECT h._ivm_rid FROM held AS h SEMI JOIN whole AS w ON {same_key('h', 'w', narrow)}\n"
        f")"
    ), by_every_column


def retracted_copies(delta: str) -> str:
    """The rows ``delta`` retracts, each with the number of its copies (``_ivm_copies``)."""
    return f"(SELECT *, -{MULT} AS _ivm_copies FROM {delta} WHERE {MULT} < 0)"


def copies_of(target: str, columns: tuple[str, ...], retracted: str) -> str:
    """The row ids of ``_ivm_copies`` rows of ``target`` equal to each row of ``retracted``."""
    return (
        f"  SELECT rid FROM (\n"
        f"    SELECT t.rowid AS rid, d._ivm_copies,\n"
        f"           row_number() OVER (PARTITION BY d._ivm_row ORDER BY t.rowid) AS n\n"
        f"    FROM {target} AS t\n"
        f"    JOIN (SELECT *, row_number() OVER () AS _ivm_row FROM {retracted}) AS d\n"
        f"    ON {same_key('t', 'd', columns)}\n"
        f"  ) WHERE n <= _ivm_copies"
    )


#: column types cheap to read and compare, that a run stores exactly as it computes them
NARROW_TYPES = re.compile(
    r"U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?|DATE|TIME|TIMESTAMP(_NS|_MS|_S)?( WITH TIME ZONE)?"
    r"|DECIMAL\(\d+,\d+\)|UUID"
)
#: how many narrow columns count a model's rows
MATCH_BY = 3


def match_by(columns: tuple[str, ...], types: tuple[str, ...] | None) -> tuple[str, ...]:
    """The first few narrow columns of a bag model, by which its rows holding a retracted
    row's values are counted; none when the model has no other column to skip reading, or a
    floating-point one.

    Deleting every row holding the values of a narrow column that the delta retracts as
    many times as the model holds them is exact while the retracted rows are rows of the
    model, which the run checks by counting what the delete removed. A float breaks that
    check's premise here: a value stored one bit off (``inlining``) would go unseen, so such a
    model is matched by every column, and a run that misses its retractions rebuilds.

    >>> match_by(("k", "name", "n", "d"), ("INTEGER", "VARCHAR", "BIGINT", "DATE"))
    ('k', 'n', 'd')
    >>> match_by(("k", "x", "name"), ("INTEGER", "DOUBLE", "VARCHAR"))
    ()
    """
    if types is None or any(re.search(r"FLOAT|DOUBLE|REAL", t) for t in types):
        return ()
    narrow = tuple(c for c, t in zip(columns, types, strict=True) if NARROW_TYPES.fullmatch(t))
    return narrow[:MATCH_BY] if len(narrow) < len(columns) or len(narrow) > MATCH_BY else ()


def deleted_by_key(
    columns: tuple[str, ...], keys: tuple[str, ...] | None, types: tuple[str, ...] | None
) -> tuple[str, ...] | None:
    """The key a keyed model's delete matches by, or None to delete by the retracted rows'
    values as a bag model does. A key with a wide column (a string) makes the keyed delete
    read it from every row of the model (TPC-H Q10 at SF10: seven key columns, five of them
    strings, of 380k rows, 66 ms), where counting by the model's narrow columns
    (``match_by``) reads those alone. Both delete the same rows: a keyed model's delta
    retracts the stored row of each group it changes or removes, and the run checks that the
    delete removed as many rows as the delta retracts.

    >>> deleted_by_key(("k", "name", "n"), ("k", "name"), ("INTEGER", "VARCHAR", "BIGINT"))
    >>> deleted_by_key(("k", "name", "n"), ("k",), ("INTEGER", "VARCHAR", "BIGINT"))
    ('k',)
    """
    if not keys or types is None or not match_by(columns, types):
        return keys
    kinds = dict(zip(columns, types, strict=True))
    return keys if all(NARROW_TYPES.fullmatch(kinds[k]) for k in keys) else None


def expanded(columns: tuple[str, ...], delta: str, *, retracted: bool = False) -> str:
    """A SELECT of ``columns`` of one row per copy that ``delta`` asserts (or retracts)."""
    cols = ", ".join(f"d.{quote(c)}" for c in columns)
    copies, sign = (f"-d.{MULT}", "<") if retracted else (f"d.{MULT}", ">")
    return f"SELECT {cols} FROM {delta} AS d, range({copies}) WHERE d.{MULT} {sign} 0"


def insert_sql(target: str, columns: tuple[str, ...], delta: str) -> str:
    return f"INSERT INTO {target} {expanded(columns, delta)}"
