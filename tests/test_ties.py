"""Windows whose ORDER BY ties: which outputs the compiler finds tie-dependent, of what kind,
what ``explain`` says of them, and what the consistency check accepts and reports."""

from __future__ import annotations

import duckdb
import pytest

from dbt_duckstream.compiler.plan import IVMPlan, compile_ivm
from dbt_duckstream.runtime.consistency import differences

SCHEMA = {
    "memory": {
        "main": {
            "orders": {"id": "INTEGER", "customer": "INTEGER", "day": "DATE", "amount": "DOUBLE"}
        }
    }
}
NUMBERED = (
    "SELECT id, customer, day, row_number() OVER (PARTITION BY customer ORDER BY day) AS n "
    "FROM orders"
)


def plan(sql: str) -> IVMPlan:
    return compile_ivm(sql, target="m", schema=SCHEMA, catalog="memory")


def kinds(sql: str) -> list[tuple[str, tuple[str, ...], tuple[str, ...], bool]]:
    ties = plan(sql).ties
    assert not ties.unresolved, ties.unresolved
    return [(t.kind, t.columns, t.keys, t.complete) for t in ties.found]


@pytest.mark.parametrize(
    ("window", "kind"),
    [
        ("row_number()", "position"),
        ("ntile(3)", "position"),
        ("lag(amount)", "value"),
        ("lead(id, 2, 0)", "value"),
        ("first_value(amount)", "value"),
        ("last_value(id)", "value"),
        ("nth_value(id, 2)", "value"),
        ("sum(amount) OVER (PARTITION BY customer ORDER BY day ROWS 1 PRECEDING)", "value"),
        ("string_agg(id::VARCHAR, ',')", "value"),
        ("list(id)", "value"),
    ],
)
def test_each_window_kind_whose_ties_change_its_values(window: str, kind: str) -> None:
    call = window if " OVER " in window else f"{window} OVER (PARTITION BY customer ORDER BY day)"
    assert kinds(f"SELECT id, customer, day, {call} AS w FROM orders") == [
        (kind, ("w",), ("customer", "day"), True)
    ]


@pytest.mark.parametrize(
    "call",
    [
        "rank() OVER (PARTITION BY customer ORDER BY day)",
        "dense_rank() OVER (PARTITION BY customer ORDER BY day)",
        "cume_dist() OVER (PARTITION BY customer ORDER BY day)",
        "sum(amount) OVER (PARTITION BY customer ORDER BY day)",
        "count(*) OVER (PARTITION BY customer)",
        "row_number() OVER (PARTITION BY customer ORDER BY day, id, amount)",
    ],
)
def test_windows_that_give_tied_rows_the_same_values_have_no_ties(call: str) -> None:
    """Peers share a RANGE frame and a rank; rows tied on every column read are identical."""
    assert kinds(f"SELECT id, customer, day, amount, {call} AS w FROM orders") == []


def test_keys_follow_their_output_names_and_may_be_missing() -> None:
    renamed = "SELECT id AS order_id, customer AS who, row_number() OVER "
    renamed += "(PARTITION BY customer ORDER BY day) AS n FROM orders"
    assert kinds(renamed) == [("position", ("n",), ("who",), False)]
    derived = f"SELECT customer, day, n, n * 10 AS tens FROM ({NUMBERED})"
    assert kinds(derived) == [("position", ("n", "tens"), ("customer", "day"), True)]


def test_cuts_inside_a_tie() -> None:
    first = "SELECT customer, day, amount FROM orders "
    first += "QUALIFY row_number() OVER (PARTITION BY customer ORDER BY day) = 1"
    assert kinds(first) == [("cut", (), ("customer", "day"), True)]
    top = "SELECT id, day FROM orders ORDER BY day DESC LIMIT 3"
    assert kinds(top) == [("cut", (), ("day",), True)]
    assert kinds("SELECT id, day FROM orders ORDER BY day, id, customer, amount LIMIT 3") == []


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT customer, max(n) AS most FROM ({NUMBERED}) GROUP BY customer",
        f"SELECT * FROM ({NUMBERED}) WHERE id > 3",
        f"SELECT id, sum(n) OVER (PARTITION BY day) AS s FROM ({NUMBERED})",
        "SELECT id FROM orders QUALIFY lag(amount) OVER (PARTITION BY customer ORDER BY day) > 1",
        "SELECT id FROM orders QUALIFY row_number() OVER (PARTITION BY customer ORDER BY day) "
        "= 1 AND amount > 0",
        "SELECT customer, day, lag(amount) OVER (PARTITION BY customer ORDER BY day) "
        "+ lead(amount) OVER (PARTITION BY customer ORDER BY amount) AS mixed FROM orders",
    ],
)
def test_ties_whose_values_reach_the_output_otherwise_are_unresolved(sql: str) -> None:
    """No invariant is claimed: the model is compared exactly."""
    ties = plan(sql).ties
    assert ties.unresolved and ties.exact


def test_explain_names_the_window_and_what_a_tiebreaker_changes() -> None:
    (note,) = plan(NUMBERED).ties.notes()
    assert "ROW_NUMBER() OVER (PARTITION BY customer ORDER BY day)" in note
    assert "rows that share (customer, day) may come in either order" in note
    assert "n as a bag per (customer, day)" in note
    assert "a unique column ending its ORDER BY makes one result the only one" in note
    aggregated = f"SELECT customer, max(n) AS most FROM ({NUMBERED}) GROUP BY customer"
    (exact,) = plan(aggregated).ties.notes()
    assert "compares the model exactly" in exact


@pytest.fixture
def con():
    con = duckdb.connect()
    con.execute("CREATE TABLE orders (id INTEGER, customer INTEGER, day DATE, amount DOUBLE)")
    con.execute(
        "INSERT INTO orders VALUES (1, 1, '2024-01-01', 1), (2, 1, '2024-01-02', 2), "
        "(3, 1, '2024-01-02', 3), (4, 2, '2024-01-05', 4), (5, 2, '2024-01-06', 5)"
    )
    # customer 1's orders 2 and 3 tie: numbered the other way round from ORDER BY day, id
    con.execute(
        "CREATE TABLE m AS SELECT id, customer, day, row_number() OVER "
        "(PARTITION BY customer ORDER BY day, id DESC) AS n FROM orders"
    )
    yield con
    con.close()


def test_another_numbering_of_a_tie_is_no_difference(con) -> None:
    ties = plan(NUMBERED).ties
    recomputed = NUMBERED.replace("ORDER BY day", "ORDER BY day, id")
    assert differences(con, "m", recomputed) != []  # compared exactly, the numbers differ
    assert differences(con, "m", recomputed, ties=ties) == []


@pytest.mark.parametrize(
    "wrong",
    [
        "UPDATE m SET n = 1 WHERE id = 3",  # a number of another tie group
        "UPDATE m SET n = 3 WHERE id = 5",  # a number the partition does not have
        "DELETE FROM m WHERE id = 2",
        "INSERT INTO m VALUES (2, 1, '2024-01-02', 2)",
        "UPDATE m SET customer = 2 WHERE id = 1",
        "UPDATE m SET day = '2024-01-03' WHERE id = 2",
        "UPDATE m SET id = 9 WHERE id = 3",
    ],
)
def test_what_no_numbering_of_ties_explains_is_a_difference(con, wrong: str) -> None:
    con.execute(wrong)
    assert differences(con, "m", NUMBERED, ties=plan(NUMBERED).ties) != []


def test_values_of_partitions_without_ties_are_compared_exactly(con) -> None:
    previous = NUMBERED.replace("row_number()", "lag(id)")
    ties = plan(previous).ties
    other = previous.replace("ORDER BY day", "ORDER BY day, id DESC")
    con.execute(f"CREATE OR REPLACE TABLE m AS {other}")
    assert differences(con, "m", previous, ties=ties) == []
    con.execute("UPDATE m SET n = 7 WHERE id = 5")  # customer 2 has no ties
    assert differences(con, "m", previous, ties=ties) != []


def test_a_window_over_everything_compares_its_values_only_where_one_row_is(con) -> None:
    whole = "SELECT id, first_value(id) OVER () AS f FROM orders"
    ties = plan(whole).ties
    assert [(t.kind, t.keys, t.complete) for t in ties.found] == [("value", (), True)]
    con.execute("CREATE OR REPLACE TABLE m AS SELECT id, 5 AS f FROM orders")
    assert differences(con, "m", whole, ties=ties) == []  # any row may come first
    con.execute("DELETE FROM m WHERE id <> 1")
    assert differences(con, "m", whole, ties=ties) != []


def test_a_cut_compares_the_groups_it_keeps_whole_exactly(con) -> None:
    """Top three orders by day: the last day kept may lose tied orders, the others not."""
    top = "SELECT id, customer, day FROM orders ORDER BY day DESC LIMIT 3"
    ties = plan(top).ties
    assert [(t.kind, t.span, t.ordering) for t in ties.found] == [
        ("cut", "prefix", ('"day" DESC NULLS LAST',))
    ]
    # days 01-06, 01-05 kept whole; of the two orders of 01-02, either is right
    con.execute(
        "CREATE OR REPLACE TABLE m AS SELECT id, customer, day FROM orders WHERE id IN (5, 4, 2)"
    )
    assert differences(con, "m", top, ties=ties) == []
    con.execute("UPDATE m SET id = 3 WHERE id = 2")
    assert differences(con, "m", top, ties=ties) == []
    con.execute("UPDATE m SET customer = 1 WHERE id = 4")  # a row of a group kept whole
    assert differences(con, "m", top, ties=ties) != []


@pytest.mark.parametrize(
    ("predicate", "span"),
    [
        ("n <= 2", "prefix"),
        ("n = 1", "prefix"),
        ("2 > n", "prefix"),
        ("n = 2", "range"),
        ("n BETWEEN 2 AND 3", "range"),
        ("n % 2 = 0", None),
        ("n >= 2", None),
    ],
)
def test_which_positions_a_cut_keeps(predicate: str, span: str | None) -> None:
    sql = "SELECT id, customer, day, row_number() OVER (PARTITION BY customer ORDER BY day) AS n "
    sql += f"FROM orders QUALIFY {predicate}"
    assert [t.span for t in plan(sql).ties.found] == [span]


def test_a_model_whose_every_column_is_tied_still_compares_its_row_count() -> None:
    """nth_value over keys that are not output leaves no column to compare: the bag's size
    still is (a fuzz model, ``SELECT nth_value(...) OVER (ORDER BY ...) AS c0 FROM r``)."""
    from dbt_duckstream.compiler.ties import Tie, Ties
    from dbt_duckstream.runtime.consistency import differences_sql

    tie = Tie("value", "nth_value(x, 2) OVER (ORDER BY k)", ("c0",), (), False, 0, (), None)
    ties = Ties(found=(tie,), unresolved=())
    con = duckdb.connect()
    con.execute("CREATE TABLE m AS SELECT * FROM (VALUES (1), (2)) AS v(c0)")
    columns = [("c0", "INTEGER")]
    same = differences_sql("m", "SELECT * FROM (VALUES (2), (1)) AS v(c0)", columns, ties)
    assert con.execute(same).fetchall() == []
    fewer = differences_sql("m", "SELECT * FROM (VALUES (2)) AS v(c0)", columns, ties)
    assert len(con.execute(fewer).fetchall()) == 2
