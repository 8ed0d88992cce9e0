"""Random change scenarios for the oracle: the tables, the operations, and their schedule.

Small value domains make duplicates, join matches and shared group keys common; every column
may be NULL. A scenario is an initial load, then several maintenance windows, each made of
several snapshots (some of them multi-statement transactions) of inserts, deletes and updates.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from dbt_duckstream.retry import sqlite_catalogs

TABLES: dict[str, dict[str, str]] = {
    "r": {"id": "INTEGER", "k": "INTEGER", "g": "VARCHAR", "v": "INTEGER", "x": "DOUBLE"},
    "s": {"k": "INTEGER", "name": "VARCHAR", "w": "INTEGER"},
    "t": {"k": "INTEGER", "z": "INTEGER"},
}

_VALUES = {
    "INTEGER": st.one_of(st.none(), st.integers(-2, 5)),
    # a quote, a backslash and characters beyond ASCII: catalogs may keep text as bytes
    "VARCHAR": st.one_of(st.none(), st.sampled_from(["a", "b", "c", "it's", "a\\b", "é€"])),
    "DOUBLE": st.one_of(st.none(), st.sampled_from([0.5, 1.25, -2.0, 3.1, 1e-3, 0.0])),
}
_KEY = st.one_of(st.none(), st.integers(0, 3))


def sql_value(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def create_tables(con) -> None:
    """The scenario's tables, in one snapshot (a DuckLake commit each would cost an example
    tens of milliseconds)."""
    con.execute("BEGIN TRANSACTION")
    for name, cols in TABLES.items():
        con.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in cols.items())})")
    con.execute("COMMIT")


@st.composite
def rows(draw, table: str, max_size: int = 4) -> list[tuple]:
    columns = TABLES[table]
    row = st.tuples(*(_KEY if c == "k" else _VALUES[t] for c, t in columns.items()))
    drawn = draw(st.lists(row, min_size=1, max_size=max_size))
    if draw(st.booleans()):  # an exact duplicate of a row in the same batch
        drawn.append(drawn[0])
    return drawn


@dataclass(frozen=True)
class Operation:
    """Statements applied either as one transaction (one snapshot) or one snapshot each."""

    statements: tuple[str, ...]
    transactional: bool = False

    def apply(self, con) -> None:
        if self.transactional:
            con.execute("BEGIN TRANSACTION")
        for statement in self.statements:
            execute(con, statement)
        if self.transactional:
            con.execute("COMMIT")


def _insert(table: str, batch: list[tuple]) -> str:
    values = ", ".join("(" + ", ".join(sql_value(v) for v in row) + ")" for row in batch)
    return f"INSERT INTO {table} VALUES {values}"


@st.composite
def statements(draw, tables: tuple[str, ...]) -> list[str]:
    table = draw(st.sampled_from(tables))
    columns = TABLES[table]
    kind = draw(st.sampled_from(["insert", "insert", "delete", "update", "insert_delete"]))
    if kind == "insert":
        return [_insert(table, draw(rows(table)))]
    where_col = draw(st.sampled_from(list(columns)))
    where_val = draw(_KEY if where_col == "k" else _VALUES[columns[where_col]])
    where = f"{where_col} IS NOT DISTINCT FROM {sql_value(where_val)}"
    if kind == "delete":
        return [f"DELETE FROM {table} WHERE {where}"]
    if kind == "update":
        set_col = draw(st.sampled_from(list(columns)))
        new = draw(_KEY if set_col == "k" else _VALUES[columns[set_col]])
        return [f"UPDATE {table} SET {set_col} = {sql_value(new)} WHERE {where}"]
    # a row that lives and dies inside one maintenance window
    batch = draw(rows(table, max_size=2))
    first = batch[0]
    match = " AND ".join(
        f"{c} IS NOT DISTINCT FROM {sql_value(v)}" for c, v in zip(columns, first, strict=True)
    )
    return [_insert(table, batch), f"DELETE FROM {table} WHERE {match}"]


def _merge(table: str, batch: list[tuple]) -> str:
    """Upsert ``batch`` keyed on the table's first column (one source row per key)."""
    columns = list(TABLES[table])
    key, rest = columns[0], columns[1:]
    unique = list({row[0]: row for row in batch}.values())
    values = ", ".join("(" + ", ".join(sql_value(v) for v in row) + ")" for row in unique)
    updates = ", ".join(f"{c} = src.{c}" for c in rest)
    return (
        f"MERGE INTO {table} USING (VALUES {values}) AS src({', '.join(columns)}) "
        f"ON {table}.{key} IS NOT DISTINCT FROM src.{key} "
        f"WHEN MATCHED THEN UPDATE SET {updates} WHEN NOT MATCHED THEN INSERT VALUES "
        f"({', '.join('src.' + c for c in columns)})"
    )


@st.composite
def touched_twice(draw, tables: tuple[str, ...]) -> list[str]:
    """Two statements of one transaction that touch the same rows: the change feed of a
    file-backed table reports such rows wrongly (duckdb/ducklake#1387), time travel does not."""
    table = draw(st.sampled_from(tables))
    columns = TABLES[table]
    where_col = draw(st.sampled_from(list(columns)))
    where_val = draw(_KEY if where_col == "k" else _VALUES[columns[where_col]])
    where = f"{where_col} IS NOT DISTINCT FROM {sql_value(where_val)} OR {where_col} IS NULL"
    set_col = draw(st.sampled_from(list(columns)))
    new = draw(_KEY if set_col == "k" else _VALUES[columns[set_col]])
    update = f"UPDATE {table} SET {set_col} = {sql_value(new)} WHERE {where}"
    second = draw(st.sampled_from(["update", "delete", "merge"]))
    if second == "update":
        other = draw(st.sampled_from(list(columns)))
        value = draw(_KEY if other == "k" else _VALUES[columns[other]])
        follow = f"UPDATE {table} SET {other} = {sql_value(value)} WHERE {where}"
    elif second == "delete":
        follow = f"DELETE FROM {table} WHERE {where}"
    else:
        follow = _merge(table, draw(rows(table)))
    first = draw(st.sampled_from([update, _merge(table, draw(rows(table)))]))
    return [first, follow]


FLUSH = "CALL ducklake_flush_inlined_data('lake')"
REWRITE = "CALL ducklake_rewrite_data_files('lake', delete_threshold => 0)"

#: maintenance of the lake between snapshots: compaction, rewrites, flushing inlined rows
COMPACTIONS = ("CALL ducklake_merge_adjacent_files('lake')", REWRITE, FLUSH)


def execute(con, statement: str) -> None:
    if statement == FLUSH:
        flush_inlined_data(con)
        return
    if statement == REWRITE and sqlite_catalogs(con):
        # DuckLake 1.5.5 on a SQLite catalog cannot rewrite a table whose files have deleted
        # rows while it holds inlined rows with a DOUBLE column: it reads their statistics
        # with isnan() of the column's text ("No function matches ... 'isnan(VARCHAR)'"),
        # whoever calls it. The rewrite follows a flush there (the lake's history stays one
        # a user could make); other catalogs rewrite beside inlined rows.
        flush_inlined_data(con)
    con.execute(statement)


def flush_inlined_data(con, catalog: str = "lake") -> None:
    """``ducklake_flush_inlined_data`` on one thread.

    DuckLake flushes several inlined tables as a union of sinks whose finalizers, running on
    several threads, append to one unguarded vector of the transaction
    (``MarkInlinedDataForDeletion``): now and then a double free aborts the process. One
    thread finalizes them one after the other."""
    (threads,) = con.execute("SELECT current_setting('threads')").fetchone()
    con.execute("SET threads = 1")
    try:
        con.execute(f"CALL ducklake_flush_inlined_data('{catalog}')")
    finally:
        con.execute(f"SET threads = {threads}")


@st.composite
def operations(draw, tables: tuple[str, ...]) -> Operation:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return Operation((draw(st.sampled_from(COMPACTIONS)),))
    if kind == 1:
        return Operation(tuple(draw(touched_twice(tables))), transactional=True)
    if kind == 2:
        table = draw(st.sampled_from(tables))
        return Operation((_merge(table, draw(rows(table))),))
    parts = draw(statements(tables))
    if draw(st.integers(0, 3)) == 0:
        parts += draw(statements(tables))
    return Operation(tuple(parts), transactional=len(parts) > 1 and draw(st.booleans()))


@dataclass(frozen=True)
class Scenario:
    initial: tuple[Operation, ...]
    windows: tuple[tuple[Operation, ...], ...]
    #: rows live in Parquet files from the first insert on (DuckLake inlines small inserts
    #: in its catalog by default, where the feed hazards do not show)
    file_backed: bool = False


@st.composite
def scenarios(draw, tables: tuple[str, ...] = ("r", "s", "t")) -> Scenario:
    initial = tuple(Operation((_insert(table, draw(rows(table, max_size=6))),)) for table in tables)
    windows = draw(
        st.lists(st.lists(operations(tables), min_size=1, max_size=4), min_size=1, max_size=3)
    )
    return Scenario(initial, tuple(tuple(w) for w in windows), draw(st.booleans()))
