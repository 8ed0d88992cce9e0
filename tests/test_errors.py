"""Unsupported SQL fails before anything is written, naming the construct."""

from __future__ import annotations

import re

import pytest

from dbt_duckstream import ConfigurationError, UnsupportedSQLError, compile_ivm, prepare
from dbt_duckstream.compiler import IVMPlan
from dbt_duckstream.runtime.model_run import stored_input_names

from .harness import fresh_lake

SCHEMA = {"lake": {"main": {"t": {"a": "INTEGER", "b": "VARCHAR"}, "u": {"a": "INTEGER"}}}}


def compiled(sql: str) -> IVMPlan:
    """A model over ``SCHEMA`` compiled without a database."""
    return compile_ivm(sql, target="m", schema=SCHEMA, catalog="lake")


def test_columns_expressions_are_written_out_as_duckdb_reads_them() -> None:
    """``COLUMNS(...)`` stands for the columns of its FROM that it chooses, each copy named
    after its column (or by the alias, a regex's groups taken from the name)."""
    plan = compiled(
        "SELECT COLUMNS('^(a|b)$') AS 'x_\\1', coalesce(*COLUMNS(['a'])) AS c "
        "FROM t WHERE COLUMNS(c -> c = 'a') > 0"
    )
    assert plan.columns == ("x_a", "x_b", "c")
    assert compiled("SELECT max(COLUMNS(*)) FROM t").columns == ("a", "b")
    joined = compiled("SELECT COLUMNS('a') FROM t JOIN u ON t.a = u.a")
    assert joined.columns == ("a", "a_1")


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("SELECT a, random() AS r FROM t", "non-deterministic function random()"),
        ("SELECT a, now() AS ts FROM t", "non-deterministic function"),
        ("SELECT a FROM t WHERE a < current_date", "non-deterministic function"),
        ("SELECT t.a FROM t ASOF JOIN u ON t.a = u.a", "ASOF JOIN with 0 inequalities"),
        (
            "SELECT t.a FROM t ASOF JOIN u ON t.a >= u.a AND t.a <= u.a + 1",
            "ASOF JOIN with 2 inequalities",
        ),
        ("SELECT t.a FROM t ASOF JOIN u ON t.a + u.a >= 1", "ASOF JOIN condition"),
        ("SELECT t.a FROM t POSITIONAL JOIN u", "POSITIONAL JOIN"),
        ("SELECT a FROM t WHERE a IN (SELECT a, a FROM u)", "subquery selecting 2 columns"),
        (
            "SELECT a FROM t WHERE a IN (SELECT u.a FROM u WHERE u.a > t.a GROUP BY u.a)",
            "correlated subquery correlated by u.a > t.a (column t.a)",
        ),
        (
            "SELECT a, (SELECT count(*) FROM u WHERE u.a = t.a HAVING count(*) > 1) AS n FROM t",
            "correlated subquery with HAVING",
        ),
        (
            "SELECT a, (SELECT max(u.a) FROM u WHERE u.a > t.a) AS m FROM t",
            "correlated scalar subquery whose correlation is not an equality",
        ),
        (
            "SELECT a, (SELECT u.a + t.a FROM u WHERE u.a = t.a) AS m FROM t",
            'correlated subquery ("t"."a" refers to the outer query from outside its WHERE',
        ),
        (
            "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a IN (SELECT t.a FROM u AS v))",
            'correlated subquery ("t"."a" refers to the outer query from a nested subquery',
        ),
        (
            "SELECT a FROM t WHERE EXISTS (SELECT count(*) FROM u WHERE u.a = t.a)",
            "correlated subquery with aggregates in a predicate",
        ),
        ("SELECT t.a FROM t JOIN u ON t.a IN (SELECT a FROM u)", "subquery in a JOIN's ON"),
        ("SELECT count(*) AS n FROM t GROUP BY a IN (SELECT a FROM u)", "subquery in GROUP BY"),
        ("SELECT a, ARRAY(SELECT u.a FROM u) AS l FROM t", "subquery in an expression"),
        ("SELECT a FROM t UNION ALL SELECT a, b FROM t", "UNION ALL of 1 and 2 columns"),
        ("SELECT a FROM t UNION SELECT a, b FROM t", "UNION of 1 and 2 columns"),
        ("SELECT a FROM t EXCEPT ALL SELECT a, b FROM t", "EXCEPT ALL of 1 and 2 columns"),
        ("SELECT a FROM u INTERSECT SELECT a, b FROM t", "INTERSECT of 1 and 2 columns"),
        ("SELECT a FROM t GROUP BY a HAVING rank() OVER () > 1", "window function in HAVING"),
        ("SELECT a FROM t LIMIT 3", "LIMIT without ORDER BY"),
        ("SELECT a FROM t ORDER BY a LIMIT 10%", "LIMIT 10 PERCENT"),
        ("SELECT list(a) AS l FROM t", "order-dependent aggregate list() without ORDER BY"),
        ("SELECT b, any_value(a) AS l FROM t GROUP BY b", "order-dependent aggregate any_value()"),
        (
            "WITH RECURSIVE r(n) AS (SELECT a FROM t UNION ALL "
            "(SELECT n + 1 FROM r WHERE n < 3 LIMIT 1)) SELECT n FROM r",
            "LIMIT without ORDER BY inside the recursive CTE r",
        ),
        (
            "WITH RECURSIVE r(n, s) AS (SELECT a, b FROM t UNION ALL "
            "SELECT n + 1, string_agg(s, ',') FROM r WHERE n < 3 GROUP BY n) SELECT n FROM r",
            "string_agg() without ORDER BY",
        ),
        ("SELECT t.a FROM t, read_csv('x.csv') AS f", "table function"),
        ("SELECT * FROM range(3)", "a model that reads no table"),
        ("SELECT string_agg(b, ',') AS s FROM t", "string_agg() without ORDER BY"),
        ("SELECT a, mode(b) AS m FROM t GROUP BY a", "order-dependent aggregate mode() without"),
        ("SELECT * FROM t USING SAMPLE 10%", "a sample of a table"),
        ("SELECT a FROM t TABLESAMPLE RESERVOIR(5 ROWS) REPEATABLE (3)", "a sample of a table"),
        ("SELECT COLUMNS(* REPLACE (a + 1 AS a)) FROM t", "COLUMNS(* REPLACE (a + 1 AS a))"),
        ("SELECT COLUMNS(*) FROM t, (SELECT a FROM u)", "COLUMNS(*) expression"),
        ("SELECT a, count(*) AS n FROM t GROUP BY COLUMNS('a')", "COLUMNS('a') expression"),
        ("SELECT COLUMNS('a') + COLUMNS('b') FROM t", "several COLUMNS in"),
        ("SELECT 1 AS one", "a model that reads no table"),
        ("SELECT b, approx_quantile(a, 0.5) AS q FROM t GROUP BY b", "approx_quantile()"),
        ("SELECT reservoir_quantile(a, 0.5) AS q FROM t", "reservoir_quantile()"),
        ("SELECT b, approx_top_k(a, 2) AS q FROM t GROUP BY b", "approx_top_k()"),
        ("SELECT b, json_group_array(a) AS j FROM t GROUP BY b", "json_group_array()"),
        ("PIVOT t ON b USING sum(a)", "PIVOT without an IN list"),
        (
            "SELECT * FROM t, LATERAL (SELECT u.a FROM u WHERE u.a < t.a) AS x",
            "LATERAL subquery correlated by",
        ),
        (
            "SELECT * FROM t, LATERAL (SELECT u.a + t.a AS s FROM u WHERE u.a = t.a) AS x",
            "LATERAL subquery naming an outer column outside its WHERE equalities (t.a)",
        ),
        ("PIVOT t ON a, b IN ('x') USING count(*)", "PIVOT without an IN list on one column"),
        (
            "SELECT a FROM t WHERE (a, b) NOT IN (SELECT a, a FROM u)",
            "a row of values compared with a subquery",
        ),
        (
            "SELECT a, (a, b) IN (SELECT a, a FROM u) AS m FROM t",
            "other than as a WHERE or HAVING condition of its own",
        ),
    ],
)
def test_unsupported_sql_names_the_construct(sql: str, construct: str) -> None:
    with pytest.raises(UnsupportedSQLError) as raised:
        compiled(sql)
    assert construct in str(raised.value)
    assert construct.split(" (")[0] in raised.value.construct


def test_unknown_column_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="nope"):
        compiled("SELECT nope FROM t")


def test_order_by_at_the_top_is_dropped() -> None:
    plan = compiled("SELECT a FROM t ORDER BY a")
    assert "ORDER BY" not in plan.qualified_sql


def test_explain_shows_each_operator_as_a_named_cte() -> None:
    plan = compiled("SELECT b, count(*) AS n FROM t JOIN u ON t.a = u.a GROUP BY b")
    text = plan.explain()
    for kind in ("scan", "join", "aggregate"):
        assert re.search(rf'"{kind}\d+_delta" AS', text) or re.search(rf"_{kind}\d+_", text)
    assert text.count("ducklake_table_deletions('lake', 'main'") == 2  # one feed per source
    assert plan.key_columns == ("b",)
    assert list(plan.strategies().values()) == ["accumulators"]


def test_aggregates_without_an_algebraic_rule_recompute_touched_groups() -> None:
    plan = compiled("SELECT b, count(DISTINCT a) AS n FROM t GROUP BY b")
    assert list(plan.strategies().values()) == ["key-scoped recomputation"]
    assert "SEMI JOIN" in plan.explain()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT product(a) AS p FROM t",
        "SELECT b, histogram(a) AS h, mad(a) AS m FROM t GROUP BY b",
        "SELECT b, geomean(a) AS g, weighted_avg(a, a) AS w FROM t GROUP BY b",
        "SELECT b, max(a, 2) AS top2 FROM t GROUP BY b",
    ],
)
def test_duckdb_aggregates_unknown_to_sqlglot_recompute_touched_groups(sql: str) -> None:
    """Read as functions of each row, ``product(a)`` alone failed to build, and beside a
    GROUP BY was refused as a column outside it; ``max(a, 2)`` (a list) was folded as max."""
    plan = compiled(sql)
    assert list(plan.strategies().values()) == ["key-scoped recomputation"]


def test_a_row_in_a_subquery_as_a_condition_of_its_own_is_a_semi_join() -> None:
    """``WHERE (a, b) IN (SELECT ...)`` (the latest row per key) was refused as a subquery
    selecting two columns."""
    plan = compiled(
        "SELECT a, b FROM t WHERE a > 0 AND (a, b) IN (SELECT a, max(a)::VARCHAR FROM u GROUP BY a)"
    )
    assert "SEMI JOIN" in plan.explain()


def test_ordered_set_aggregates_are_read_as_duckdb_calls() -> None:
    """``percentile_cont(f) WITHIN GROUP (ORDER BY a)`` was refused as "column a outside GROUP
    BY", and ``mode() WITHIN GROUP (ORDER BY a)`` as a mode() without ORDER BY."""
    plan = compiled(
        "SELECT b, percentile_cont(0.5) WITHIN GROUP (ORDER BY a DESC) AS p, "
        "mode() WITHIN GROUP (ORDER BY a) AS m FROM t GROUP BY b"
    )
    assert list(plan.strategies().values()) == ["key-scoped recomputation"]
    assert 'QUANTILE_CONT("t.a", 0.5 ORDER BY "t.a" DESC)' in plan.explain()
    assert 'MODE("t.a" ORDER BY "t.a")' in plan.explain()


def test_a_list_sorted_at_once_is_not_order_dependent() -> None:
    """``list_sort(list(DISTINCT x))`` was refused as a list() without ORDER BY."""
    plan = compiled("SELECT b, list_sort(list(DISTINCT a)) AS l FROM t GROUP BY b")
    assert list(plan.strategies().values()) == ["key-scoped recomputation"]


def test_mean_and_count_star_fold_as_avg_and_count() -> None:
    plan = compiled("SELECT b, mean(a) AS m, count_star() AS n FROM t GROUP BY b")
    assert list(plan.strategies().values()) == ["accumulators"]


@pytest.mark.parametrize("fields", ["s.*", "unnest(s)", "s.* EXCLUDE (c)"])
def test_struct_fields_selected_at_once_are_written_out_field_by_field(fields: str) -> None:
    """DuckDB expands a STRUCT column's ``s.*`` and ``unnest(s)`` into its fields; so does the
    compiler, from the column's type (they were refused)."""
    with fresh_lake() as con:
        con.execute("CREATE TABLE lake.main.t AS SELECT 1 AS id, {'a': 2, 'B': 'x', 'c': 1} AS s")
        plan = prepare(con, f"SELECT id, {fields} FROM t", "m", catalog="lake")
    assert plan.columns[:3] == ("id", "a", "B")


def test_struct_fields_unnested_recursively_are_named_as_unsupported() -> None:
    """The compiler sees one column where DuckDB expands the fields of nested STRUCTs."""
    with fresh_lake() as con:
        con.execute("CREATE TABLE lake.main.t AS SELECT 1 AS id, {'a': {'x': 2}, 'b': 'x'} AS s")
        with pytest.raises(UnsupportedSQLError, match="several columns") as raised:
            prepare(con, "SELECT id, unnest(s, recursive := true) FROM t", "m", catalog="lake")
    assert "id, x, b" in str(raised.value)
    assert "s.a AS a" in str(raised.value)


def test_a_stored_input_the_model_cannot_store_is_a_configuration_error() -> None:
    schema = {"memory": {"main": {"r": {"id": "INTEGER", "k": "INTEGER"}, "s": {"k": "INTEGER"}}}}
    with pytest.raises(ConfigurationError, match=r"names s, .*can be stored: none"):
        compile_ivm(
            "SELECT r.id FROM r JOIN s ON r.k = s.k",
            target="m",
            schema=schema,
            catalog="memory",
            stored_inputs=("s",),
        )
    with pytest.raises(ConfigurationError, match=r"names t, .*can be stored: memory.main.r"):
        compile_ivm(
            "SELECT r.id FROM r JOIN s ON r.k = s.k WHERE r.id > 0",
            target="m",
            schema=schema,
            catalog="memory",
            stored_inputs=("t",),
        )
    with pytest.raises(ConfigurationError, match="ivm_stored_inputs=5 is not"):
        stored_input_names(5)
