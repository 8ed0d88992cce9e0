"""The oracle itself: what it pairs as equal and what it reports."""

from __future__ import annotations

import duckdb
import pytest

from dbt_duckstream.runtime.consistency import differences

COLUMNS = (
    "n BIGINT, s STRUCT(n BIGINT, s DOUBLE), l DOUBLE[], "
    'a STRUCT("x y" DOUBLE, v VARCHAR)[], m MAP(VARCHAR, DOUBLE), f FLOAT[3]'
)
ROW = (
    "(1, {{'n': 2, 's': {}}}, [1.0, {}], [{{'x y': {}, 'v': 'a'}}], MAP {{'k': {}}}, "
    "[1.0, 2.0, {}]::FLOAT[3])"
)
EMPTY = "(2, NULL, NULL, [], MAP {}, NULL)"
STORED = ("1.5999999999999999", "0.30000000000000004", "0.1", "2.0", "3.0")


def query(*values: str, second: str = EMPTY) -> str:
    return f"SELECT * FROM (VALUES {ROW.format(*values)}, {second}) AS v(n, s, l, a, m, f)"


@pytest.fixture
def con():
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t ({COLUMNS})")
    con.execute(f"INSERT INTO t {query(*STORED)}")
    yield con
    con.close()


def test_floats_inside_nested_values_are_paired_within_the_tolerance(con) -> None:
    """A sum maintained over many runs may differ from its recomputation in its last bits,
    also as a field of a STRUCT or an element of a LIST, ARRAY or MAP."""
    assert differences(con, "t", query("1.6", "0.3", "0.1", "2.0", "3.0")) == []


@pytest.mark.parametrize("position", range(len(STORED)))
def test_a_nested_float_beyond_the_tolerance_is_a_difference(con, position) -> None:
    values = list(STORED)
    values[position] = str(float(values[position]) + 0.5)
    assert len(differences(con, "t", query(*values))) == 2


def test_a_null_nested_value_is_not_one_of_nulls(con) -> None:
    second = "(2, {'n': NULL, 's': NULL}, [], [], MAP {}, NULL)"
    assert len(differences(con, "t", query(*STORED, second=second))) == 2
