"""Rule examples that run: a tiny view, a change, and the delta maintenance applies.

Every operator's and accumulator's docstring shows its rule at work with ``show_delta``, and
the doctests run them, so an example is checked against a recomputation and cannot rot.
"""

from __future__ import annotations

import tempfile
from collections import Counter

import duckdb

from .compiler.plan import compile_ivm
from .runtime.consistency import differences
from .runtime.lake import attach_lake
from .runtime.run import prepare, refresh


def show_delta(
    view: str,
    tables: dict[str, tuple[str, str]],
    change: str,
    stored_inputs: tuple[str, ...] = (),
) -> None:
    """Build ``view`` over ``tables`` (name -> column definitions, rows as SQL ``VALUES``) in
    a fresh DuckLake, commit ``change`` (statements separated by ``;``) as one snapshot,
    maintain, and print the rows the model gained (``+n``) and lost (``-n``).

    Raises when the run did not maintain incrementally, or the model then differs from its
    SQL recomputed.
    """
    with tempfile.TemporaryDirectory() as directory:
        con = duckdb.connect()
        try:
            attach_lake(con, f"{directory}/lake.ducklake", data_path=f"{directory}/data")
            con.execute("USE lake")
            for name, (columns, rows) in tables.items():
                con.execute(f"CREATE TABLE {name} ({columns})")
                con.execute(f"INSERT INTO {name} VALUES {rows}")
            plan = prepare(con, view, "example", catalog="lake", stored_inputs=stored_inputs)
            refresh(con, plan, rebuild_above=None)
            before = Counter(con.execute("SELECT * FROM example").fetchall())
            con.execute("BEGIN")
            for statement in change.split(";"):
                con.execute(statement)
            con.execute("COMMIT")
            result = refresh(con, plan, rebuild_above=None)
            if result.strategy != "incremental":
                raise AssertionError(f"not maintained: {result.summary()}")
            diff = differences(con, "example", view, ties=plan.ties)
            if diff:
                raise AssertionError(f"differs from its recomputation: {diff}")
            after = Counter(con.execute("SELECT * FROM example").fetchall())
        finally:
            con.close()
    for sign, rows in (("-", before - after), ("+", after - before)):
        for row, n in sorted(rows.items(), key=repr):
            print(f"{sign}{n}", row)


def show_ties(view: str, tables: dict[str, str]) -> None:
    """Print the ties of ``view`` over ``tables`` (name -> column definitions), one a line
    (``compiler.ties``)."""
    schema = {
        "memory": {
            "main": {
                name: dict(c.strip().rsplit(" ", 1) for c in columns.split(","))
                for name, columns in tables.items()
            }
        }
    }
    ties = compile_ivm(view, target="example", schema=schema, catalog="memory").ties
    for tie in ties.found:
        print(tie.describe())
    for call in ties.unresolved:
        print(f"unresolved: {call}")
