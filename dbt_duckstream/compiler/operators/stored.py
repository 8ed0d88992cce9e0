"""Shared steps of the operators that keep their output rows in a state table (windows whose
values a second evaluation might not reproduce, top-N, recursive CTEs).

A stored operator's old rows are read from its table, never recomputed, so a retraction always
finds the row it once asserted, bit for bit, whatever the rows' floating-point values or ties.
A build fills the table; a maintenance run retracts the stored rows of what the delta touches,
asserts the recomputed ones, and at the end of the run replaces the first by the second.
"""

from __future__ import annotations

from ...sql import column_list
from ..render import MULT, RenderContext
from .base import Operator


def build_state(ctx: RenderContext, node: Operator, rows: str) -> str:
    """Create ``node``'s state table from the SELECT ``rows``, once per build; return the
    table's name."""
    table = node.state_table_sql()

    def create() -> str:
        return ctx.state_table(table, ctx.query(rows))

    name = ctx.once(node.node_id, "build", create)
    assert name is not None
    return name


def replace_stored(
    ctx: RenderContext, node: Operator, stale: str, recomputed: str, *, touched: str
) -> None:
    """At the end of the run, replace ``node``'s stored rows whose rowids the SELECT ``stale``
    gives by the rows of the temporary table ``recomputed``; ``stale`` finds none when the
    temporary table ``touched`` is empty."""
    table = node.state_table_sql()
    ctx.write(f"DELETE FROM {table} WHERE rowid IN ({stale})", unless_empty=touched)
    columns = column_list(node.columns)
    inserted = f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {recomputed}"
    ctx.write(inserted, unless_empty=recomputed)


def retract_assert(old: str, new: str) -> str:
    """The signed difference of two SELECTs with the same columns: ``old`` retracted,
    ``new`` asserted."""
    return f"SELECT *, -1 AS {MULT} FROM ({old})\nUNION ALL\nSELECT *, 1 AS {MULT} FROM ({new})"


def consolidated(delta: str, columns: tuple[str, ...]) -> str:
    """``delta`` with the copies of each distinct row netted, and rows that cancel dropped:
    an unchanged row retracted and asserted again leaves nothing for the operators above."""
    cols = column_list(columns)
    return (
        f"SELECT {cols}, SUM({MULT})::BIGINT AS {MULT} FROM (\n{delta}\n) "
        f"GROUP BY ALL HAVING SUM({MULT}) <> 0"
    )
