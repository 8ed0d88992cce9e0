"""Hostile names: catalogs, schemas, tables, columns and models named with quotes, spaces,
dots, unicode and reserved words are quoted everywhere, and nothing is injected."""

from __future__ import annotations

import pytest

from dbt_duckstream import prepare, refresh
from dbt_duckstream.sql import TableRef, quote

from .harness import assert_consistent, fresh_lake

NAMES = [
    'we"ird',
    "with space",
    "dot.ted",
    "ünïcødé_表",
    "select",
    "it's",
    "x'); DROP TABLE t; --",
    "MixedCase",
]


@pytest.mark.parametrize("name", NAMES)
def test_hostile_names_are_maintained(name: str) -> None:
    with fresh_lake() as con:
        schema, table, column, model = f"s {name}", f"t {name}", f"c {name}", f"m {name}"
        con.execute(f"CREATE SCHEMA lake.{quote(schema)}")
        source = TableRef("lake", schema, table)
        con.execute(f"CREATE TABLE {source.sql()} (k INTEGER, {quote(column)} DOUBLE)")
        con.execute(f"INSERT INTO {source.sql()} VALUES (1, 1.5), (1, 2.5), (2, NULL)")
        sql = (
            f"SELECT k, sum({quote(column)}) AS {quote(column)}, count(*) AS n "
            f"FROM {source.sql()} GROUP BY k"
        )
        rows = f"SELECT * FROM {source.sql()} WHERE {quote(column)} IS NOT NULL"
        target = TableRef("lake", schema, model)
        rows_target = TableRef("lake", schema, f"{model} rows")
        plans = [
            prepare(con, sql, target, catalog="lake", db=schema),
            prepare(con, rows, rows_target, catalog="lake", db=schema),
        ]
        for plan in plans:
            assert refresh(con, plan).strategy == "initial"
        con.execute(f"INSERT INTO {source.sql()} VALUES (2, 4.0), (3, 0.5)")
        con.execute(f"UPDATE {source.sql()} SET {quote(column)} = 9 WHERE k = 1")
        con.execute(f"DELETE FROM {source.sql()} WHERE {quote(column)} = 0.5")
        for plan, query in zip(plans, [sql, rows], strict=True):
            assert refresh(con, plan, rebuild_above=None).strategy == "incremental"
            assert_consistent(con, plan.target.sql(), query)
        assert con.execute(f"SELECT count(*) FROM {source.sql()}").fetchone() == (4,)


def test_model_sql_with_comments_and_semicolons(lake) -> None:
    lake.execute("CREATE TABLE t (k INTEGER, v INTEGER)")
    lake.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
    sql = (
        "-- a model as Jinja leaves it\n\n"
        "SELECT k, /* the total */ sum(v) AS total -- per key\n"
        "FROM t\nGROUP BY k -- last line\n;\n\n"
    )
    plan = prepare(lake, sql, "commented", catalog="lake")
    assert refresh(lake, plan).strategy == "initial"
    lake.execute("INSERT INTO t VALUES (1, 5)")
    assert refresh(lake, plan, rebuild_above=None).strategy == "incremental"
    assert_consistent(lake, "lake.main.commented", plan.sql)
