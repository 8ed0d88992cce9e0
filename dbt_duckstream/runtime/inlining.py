"""Floating-point values written to a model's tables exactly, whatever DuckLake inlines.

DuckLake stores a small insert (``data_inlining_row_limit`` rows, 10 by default) in its
catalog instead of a Parquet file. With a DuckDB catalog (a file or ``:memory:``, not SQLite
or PostgreSQL) it writes each value there as SQL text, and DuckDB reads a finite FLOAT or
DOUBLE back from that text as a DECIMAL literal cast to DOUBLE, which is not correctly
rounded: ``10 / 11`` is stored as ``0.9090909090909092``, one bit off, as are about one value
in twenty. A maintenance run matches the rows it retracts by their values, so a row stored
one bit off is never found: it stays in the model for good, and a state table keyed on a
computed DOUBLE splits a group in two.

The values a model's own tables hold must therefore be the values its runs computed: while
a run writes the model and its state tables, DuckLake's default inlining limit is 0 for the
run's session, when the lake's catalog is a DuckDB one and the tables hold floating-point
columns (every build, whose tables' types are not known before it runs, counts as holding
them). Other writers, and inserts into tables without such columns, keep inlining. A limit
that a user set on the catalog, schema or table with ``set_option`` outranks the session's;
the retraction count each run checks (``run._maintain``) then catches a row stored one bit
off, and the run rebuilds.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from contextlib import contextmanager, suppress

import duckdb

from ..sql import TableRef

#: the DuckLake setting that holds inserts with fewer rows in the catalog
SETTING = "ducklake_default_data_inlining_row_limit"

#: catalog backends that parse an inlined float literal as a correctly rounded DOUBLE
EXACT_BACKENDS = ("sqlite:", "postgres:")

#: a column type holding floating-point values, itself or inside a LIST, STRUCT, MAP, ARRAY
_FLOAT_TYPE = r"\b(FLOAT|DOUBLE|REAL)\b"


def rounds_inlined_floats(path: str | None) -> bool:
    """Whether a DuckLake attached from ``path`` (as ``duckdb_databases()`` gives it) stores
    inlined floats one bit off.

    >>> rounds_inlined_floats("/data/lake.ducklake"), rounds_inlined_floats(":memory:")
    (True, True)
    >>> rounds_inlined_floats("sqlite:/data/lake.sqlite")
    False
    """
    return path is not None and not path.startswith(EXACT_BACKENDS)


def is_float_type(column_type: str) -> bool:
    """Whether a DuckDB column type holds floating-point values.

    >>> is_float_type("DOUBLE"), is_float_type("STRUCT(a FLOAT, b INTEGER)[]")
    (True, True)
    >>> is_float_type("DECIMAL(12,2)")
    False
    """
    return re.search(_FLOAT_TYPE, column_type) is not None


def holds_floats(con: duckdb.DuckDBPyConnection, tables: list[TableRef]) -> bool:
    """Whether any of ``tables`` (which exist) has a floating-point column: their columns'
    types from one query that reads no row (0.3 ms, where ``duckdb_columns()`` takes 1.2)."""
    relation = con.execute(f"SELECT * FROM {', '.join(t.sql() for t in tables)} LIMIT 0")
    return any(is_float_type(str(column[1])) for column in relation.description or [])


@contextmanager
def exact_floats(con: duckdb.DuckDBPyConnection, needed: bool = True) -> Generator[None]:
    """Inserts planned inside the block write Parquet files, not inlined rows (this
    session only), unless a ``set_option`` limit outranks the session's default.

    When the block fails, its transaction may be aborted, and an aborted transaction refuses
    every statement until it rolls back: ``restored``, around the whole run, resets then."""
    if not needed:
        yield
        return
    con.execute(f"SET SESSION {SETTING} = 0")
    yield
    con.execute(f"RESET SESSION {SETTING}")


@contextmanager
def restored(con: duckdb.DuckDBPyConnection) -> Generator[None]:
    """Around a run and its transactions: the session's inlining as the run found it, also
    after a failed attempt (retried or not) left it at 0."""
    reset = f"RESET SESSION {SETTING}"
    try:
        yield
    except BaseException:
        with suppress(duckdb.Error):  # the run's own error says more than this one would
            con.execute(reset)
        raise
    con.execute(reset)
