"""Outer joins and subqueries: what the plan is made of, and the behaviours that random
scenarios do not reach (errors a recomputation raises)."""

from __future__ import annotations

import duckdb
import pytest

from dbt_duckstream import compile_ivm
from dbt_duckstream.compiler.operators import Aggregate

from .harness import Model

SCHEMA = {
    "lake": {
        "main": {
            "o": {"id": "INTEGER", "cid": "INTEGER", "amount": "DOUBLE"},
            "c": {"id": "INTEGER", "name": "VARCHAR"},
        }
    }
}


def kinds(sql: str) -> list[str]:
    plan = compile_ivm(sql, target="m", schema=SCHEMA, catalog="lake")
    return [node.kind for node in plan.root.walk()]


@pytest.mark.parametrize(
    ("sql", "operator"),
    [
        ("SELECT c.id, o.id AS oid FROM c LEFT JOIN o ON o.cid = c.id", "outer_join"),
        ("SELECT c.id, o.id AS oid FROM c RIGHT JOIN o ON o.cid = c.id", "outer_join"),
        ("SELECT c.id, o.id AS oid FROM c FULL JOIN o ON o.cid = c.id", "outer_join"),
        ("SELECT c.id FROM c WHERE EXISTS (SELECT 1 FROM o WHERE o.cid = c.id)", "semi_join"),
        ("SELECT c.id FROM c WHERE c.id IN (SELECT cid FROM o)", "semi_join"),
        ("SELECT c.id FROM c SEMI JOIN o ON o.cid = c.id", "semi_join"),
        ("SELECT c.id FROM c WHERE c.id NOT IN (SELECT cid FROM o)", "anti_join"),
        ("SELECT c.id FROM c WHERE NOT EXISTS (SELECT 1 FROM o WHERE o.cid = c.id)", "anti_join"),
        ("SELECT c.id FROM c ANTI JOIN o ON o.cid = c.id", "anti_join"),
        ("SELECT c.id, c.id IN (SELECT cid FROM o) AS buys FROM c", "mark_join"),
        ("SELECT c.id FROM c WHERE c.id = 1 OR c.id IN (SELECT cid FROM o)", "mark_join"),
        ("SELECT c.id FROM c WHERE c.id > ALL (SELECT cid FROM o)", "semi_join"),
        ("SELECT c.id, (SELECT count(*) FROM o WHERE o.cid = c.id) AS n FROM c", "scalar_subquery"),
        ("SELECT o.id FROM o WHERE o.amount > (SELECT avg(amount) FROM o)", "scalar_subquery"),
    ],
)
def test_each_construct_has_its_operator(sql: str, operator: str) -> None:
    assert operator in kinds(sql)


def test_a_correlated_aggregate_is_an_aggregate_grouped_by_its_correlation() -> None:
    plan = compile_ivm(
        "SELECT o.id FROM o WHERE o.amount < (SELECT 0.5 * avg(o2.amount) FROM o AS o2 "
        "WHERE o2.cid = o.cid)",
        target="m",
        schema=SCHEMA,
        catalog="lake",
    )
    aggregates = [n for n in plan.root.walk() if isinstance(n, Aggregate)]
    assert len(aggregates) == 1
    assert [k.sql() for k in aggregates[0].keys] == ['"o2.cid"']
    assert "scalar_subquery" in [n.kind for n in plan.root.walk()]


def test_a_scalar_subquery_with_more_than_one_row_fails_as_a_recomputation_does(lake):
    lake.execute("CREATE TABLE o (id INTEGER, cid INTEGER)")
    lake.execute("CREATE TABLE c (id INTEGER, name VARCHAR)")
    lake.execute("INSERT INTO o VALUES (1, 1), (2, 2), (3, NULL)")
    lake.execute("INSERT INTO c VALUES (1, 'a'), (2, 'b'), (5, 'x'), (5, 'y')")
    # two rows with id 5, but no order meets them: no error
    sql = "SELECT o.id, (SELECT c.name FROM c WHERE c.id = o.cid) AS name FROM o"
    model = Model(lake, "names", sql)
    model.refresh()
    model.assert_consistent()
    lake.execute("INSERT INTO c VALUES (3, 'z')")
    assert model.refresh().strategy == "incremental"
    model.assert_consistent()
    lake.execute("INSERT INTO c VALUES (1, 'again')")
    with pytest.raises(duckdb.InvalidInputException, match="More than one row returned"):
        lake.execute(sql).fetchall()
    with pytest.raises(duckdb.InvalidInputException, match="More than one row returned"):
        model.refresh()
    assert sorted(lake.execute("SELECT * FROM names").fetchall(), key=str) == [
        (1, "a"),
        (2, "b"),
        (3, None),
    ]


def test_an_uncorrelated_scalar_subquery_with_more_than_one_row_fails(lake):
    lake.execute("CREATE TABLE o (id INTEGER)")
    lake.execute("CREATE TABLE c (id INTEGER, name VARCHAR)")
    lake.execute("INSERT INTO o VALUES (1), (2)")
    lake.execute("INSERT INTO c VALUES (2, 'b')")
    model = Model(lake, "named", "SELECT o.id, (SELECT name FROM c WHERE id = 2) AS n FROM o")
    model.refresh()
    model.assert_consistent()
    lake.execute("INSERT INTO c VALUES (2, 'again')")
    with pytest.raises(duckdb.InvalidInputException, match="More than one row returned"):
        model.refresh()


def test_count_of_no_rows_is_zero_and_other_aggregates_null(lake):
    lake.execute("CREATE TABLE o (id INTEGER, cid INTEGER, amount DOUBLE)")
    lake.execute("CREATE TABLE c (id INTEGER, name VARCHAR)")
    lake.execute("INSERT INTO c VALUES (1, 'a'), (2, 'b'), (NULL, 'c')")
    lake.execute("INSERT INTO o VALUES (1, 1, 2.5)")
    sql = (
        "SELECT c.name, (SELECT count(*) FROM o WHERE o.cid = c.id) AS n, "
        "(SELECT sum(amount) FROM o WHERE o.cid = c.id) AS total, "
        "(SELECT coalesce(max(amount), -1) FROM o WHERE o.cid = c.id) AS top FROM c"
    )
    model = Model(lake, "counts", sql)
    model.refresh()
    assert sorted(lake.execute("SELECT * FROM counts").fetchall()) == [
        ("a", 1, 2.5, 2.5),
        ("b", 0, None, -1.0),
        ("c", 0, None, -1.0),
    ]
    lake.execute("DELETE FROM o")
    lake.execute("INSERT INTO o VALUES (2, 2, 1.0), (3, NULL, 4.0)")
    assert model.refresh().strategy == "incremental"
    model.assert_consistent()
