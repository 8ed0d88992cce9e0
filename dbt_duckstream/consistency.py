"""Does a maintained table equal a fresh recomputation of its SQL?

Both directions of ``EXCEPT ALL`` (bags: a missing or extra copy is a difference). Floating
point columns are compared after rounding to 9 significant digits, because an incrementally
maintained sum may differ from a recomputed one in its last bits.
"""

from __future__ import annotations

import duckdb

from .operators.base import quote

FLOAT_TYPES = frozenset({"FLOAT", "DOUBLE", "REAL"})
SIGNIFICANT_DIGITS = 9


def _comparable(column: str, type_: str) -> str:
    name = quote(column)
    if type_.upper() not in FLOAT_TYPES:
        return name
    return (
        f"CASE WHEN {name} IS NULL OR {name} = 0 OR isnan({name}) OR isinf({name}) THEN {name} "
        f"ELSE round({name}, ({SIGNIFICANT_DIGITS} - ceil(log10(abs({name}))))::INTEGER) END "
        f"AS {name}"
    )


def differences_sql(table: str, query: str, columns: list[tuple[str, str]]) -> str:
    """Rows in one side but not the other, with a ``_side`` column naming where they are."""
    select = ", ".join(_comparable(c, t) for c, t in columns)
    maintained = f"SELECT {select} FROM {table}"
    expected = f"SELECT {select} FROM ({query})"
    return (
        f"(SELECT 'only in table' AS _side, * FROM ({maintained} EXCEPT ALL {expected}))\n"
        f"UNION ALL\n"
        f"(SELECT 'only in recomputation' AS _side, * FROM ({expected} EXCEPT ALL {maintained}))"
    )


def differences(
    con: duckdb.DuckDBPyConnection, table: str, query: str, limit: int = 20
) -> list[tuple]:
    columns = [(r[0], r[1]) for r in con.execute(f"DESCRIBE {table}").fetchall()]
    return con.execute(f"{differences_sql(table, query, columns)} LIMIT {limit}").fetchall()
