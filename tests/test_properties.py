"""The oracle on random scenarios: every maintained model equals its recomputation after every
maintenance run, for each feature family.

Each example draws one view of its family and one scenario, so a family's examples
(``budget``) spread over its views while each stays a full initial build plus several
maintenance windows."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from unittest import mock

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbt_duckstream.runtime import first_windows, invocation, warmup
from dbt_duckstream.runtime.decide import costs

from .budget import SLOW_EXAMPLES
from .harness import fresh_lake, maintain_through
from .scenarios import Scenario, create_tables, scenarios

FAMILIES: dict[str, dict[str, str]] = {
    "project_filter": {
        "p_all": "SELECT * FROM r",
        "p_expr": "SELECT id, v * 2 + 1 AS v2, upper(g) AS ug, x / 2 AS half, "
        "CASE WHEN v > 2 THEN 'hi' WHEN v IS NULL THEN 'none' ELSE 'lo' END AS band, "
        "CAST(k AS VARCHAR) || '-' || coalesce(g, '?') AS label, "
        "date_trunc('month', DATE '2024-01-31' + v * 20) AS month, "
        "strftime(DATE '2024-02-29' + k, '%Y/%m/%d') AS day, length(g) AS len FROM r",
        "p_filter": "SELECT k, g, x FROM r WHERE v BETWEEN 0 AND 4 AND g IN ('a', 'b')",
        "p_nulls": "SELECT k, v FROM r WHERE g IS NULL OR x IS NOT NULL",
        "p_like": "SELECT g, v FROM r WHERE g LIKE 'i%' OR NOT (v < 2)",
        # quotients whose shortest decimal DuckDB read back one bit off from DuckLake's
        # inlined rows (``runtime/inlining.py``): 1 / 11, 1.25 / 11, ...
        "p_ratio": "SELECT id, v / 11 AS v11, x / 11 AS x11 FROM r",
    },
    "joins": {
        "j_two": "SELECT r.id, r.v, s.name FROM r JOIN s ON r.k = s.k",
        "j_three": "SELECT r.g, s.name, t.z FROM r JOIN s ON r.k = s.k JOIN t ON s.w = t.k",
        "j_nonequi": "SELECT r.id, t.z FROM r JOIN t ON r.v < t.z AND r.k = t.k",
        "j_self": "SELECT a.id AS a_id, b.id AS b_id FROM r a JOIN r b ON a.k = b.k AND a.g = b.g",
        "j_comma": "SELECT s.name, t.z FROM s, t WHERE s.k = t.k AND t.z > 0",
        "j_using": "SELECT k, name, z FROM s JOIN t USING (k)",
        "j_ratio": "SELECT r.id, s.name, r.v / 11 AS v11 FROM r JOIN s ON r.k = s.k",
        "j_six": "SELECT r.id, s.name, t.z, s2.w, t2.z AS z2, r2.g FROM r "
        "JOIN s ON r.k = s.k JOIN t ON t.k = r.k JOIN s AS s2 ON s2.k = t.z "
        "JOIN t AS t2 ON t2.k = s2.w JOIN r AS r2 ON r2.k = t2.z",
    },
    "aggregates": {
        "a_group": "SELECT g, count(*) AS n, count(v) AS nv, sum(v) AS sv, avg(v) AS av, "
        "min(v) AS mn, max(g) AS mx FROM r GROUP BY g",
        "a_global": "SELECT count(*) AS n, sum(v) AS s, min(x) AS mn, max(x) AS mx, "
        "avg(x) AS ax FROM r",
        "a_expr": "SELECT k, sum(CASE WHEN g = 'a' THEN v ELSE 0 END) AS sa, "
        "100.0 * sum(v) / nullif(sum(abs(v)), 0) AS pct, count(DISTINCT g) AS dg "
        "FROM r GROUP BY k HAVING count(*) > 1",
        "a_two_keys": "SELECT k, g, sum(x) AS sx, count(*) FILTER (WHERE v > 0) AS pos "
        "FROM r GROUP BY k, g",
        "a_hidden_key": "SELECT sum(v) AS sv, count(*) AS n FROM r GROUP BY g",
        "a_expr_key": "SELECT v % 2 AS parity, count(*) AS n FROM r GROUP BY ALL",
    },
    "join_aggregates": {
        "ja_region": "SELECT s.name, sum(r.v) AS total, count(*) AS n, max(r.x) AS mx "
        "FROM r JOIN s ON r.k = s.k GROUP BY s.name",
        "ja_three": "SELECT t.z, count(*) AS n, min(s.w) AS mw FROM r JOIN s ON r.k = s.k "
        "JOIN t ON t.k = s.w WHERE r.v IS NOT NULL GROUP BY t.z",
        "ja_global": "SELECT sum(r.v * s.w) AS dot FROM r JOIN s ON r.k = s.k",
    },
    "nesting": {
        "n_cte_join": "WITH a AS (SELECT k, sum(v) AS sv FROM r GROUP BY k), "
        "b AS (SELECT k, count(*) AS n FROM s GROUP BY k) "
        "SELECT a.k, a.sv, b.n FROM a JOIN b ON a.k = b.k",
        "n_subquery": "SELECT q.g, q.total * 2 AS doubled FROM "
        "(SELECT g, sum(v) AS total FROM r WHERE v > 0 GROUP BY g) AS q WHERE q.total > 1",
        "n_agg_of_agg": "SELECT n, count(*) AS groups FROM "
        "(SELECT k, count(*) AS n FROM r GROUP BY k) GROUP BY n",
        "n_cte_twice": "WITH f AS (SELECT k, v FROM r WHERE v IS NOT NULL) "
        "SELECT f1.k, f1.v AS v1, f2.v AS v2 FROM f AS f1 JOIN f AS f2 ON f1.k = f2.k",
        "n_join_agg_table": "WITH m AS (SELECT k, max(z) AS mz FROM t GROUP BY k) "
        "SELECT r.id, r.v, m.mz FROM r JOIN m ON r.k = m.k",
        "n_in": "SELECT r.id, r.v FROM r WHERE r.k IN (SELECT k FROM s WHERE w > 0) AND v > 0",
        "n_in_agg": "SELECT s.name, count(*) AS n, sum(s.w) AS sw FROM s "
        "WHERE s.k IN (SELECT k FROM r GROUP BY k HAVING sum(v) > 2) GROUP BY s.name",
        "n_distinct": "SELECT DISTINCT g, k % 2 AS parity FROM r",
        "n_distinct_join": "SELECT DISTINCT s.name, t.z FROM s JOIN t ON s.k = t.k",
    },
}


#: joins whose inputs are restricted by conditions of their own, each such input kept in a
#: state table (``ivm_stored_inputs='*'``, ``operators.stored_input``): on either side, on
#: both, in ON or in WHERE, an input read at the new snapshot by a later one's term (first, in
#: the middle), one source stored twice, under an aggregate; with the tables each reads
STORED_INPUTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "si_right": ("SELECT r.id, s.name FROM r JOIN s ON r.k = s.k WHERE s.w > 0", ("r", "s")),
    "si_left": (
        "SELECT r.id, r.x, s.name FROM r JOIN s ON r.k = s.k WHERE r.v IS NOT NULL AND r.g <> 'b'",
        ("r", "s"),
    ),
    "si_both": (
        "SELECT r.g, t.z, r.x FROM r, t WHERE r.k = t.k AND (r.v > 1 OR r.g IS NULL) AND t.z <> 2",
        ("r", "t"),
    ),
    "si_on": ("SELECT r.id, t.z FROM r JOIN t ON r.k = t.k AND t.z > 0", ("r", "t")),
    "si_first": (
        "SELECT s.name, r.v FROM s JOIN r ON s.k = r.k WHERE s.w IS NOT NULL",
        ("s", "r"),
    ),
    "si_middle": (
        "SELECT r.id, s.name, t.z FROM r JOIN s ON r.k = s.k JOIN t ON s.w = t.k "
        "WHERE (s.name LIKE '%a%' OR s.name IS NULL)",
        ("r", "s", "t"),
    ),
    "si_self": (
        "SELECT a.id, b.id AS b_id, b.x FROM r AS a JOIN r AS b ON a.k = b.k "
        "WHERE a.v > 0 AND b.x IS NOT NULL",
        ("r",),
    ),
    "si_aggregate": (
        "SELECT s.name, sum(r.v) AS total, count(*) AS n, max(r.x) AS mx "
        "FROM r JOIN s ON r.k = s.k WHERE r.v <> 0 GROUP BY s.name",
        ("r", "s"),
    ),
}


def run_scenario(
    scenario: Scenario,
    views: dict[str, str],
    catalog: str = ":memory:",
    before_runs: Callable[[duckdb.DuckDBPyConnection], object] | None = None,
    stored_inputs: tuple[str, ...] = (),
) -> None:
    with fresh_lake(catalog) as con:
        if scenario.file_backed:
            con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        create_tables(con)
        for operation in scenario.initial:
            operation.apply(con)
        maintain_through(con, views, scenario.windows, before_runs, stored_inputs)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@given(scenario=scenarios(), data=st.data())
def test_maintained_equals_recomputed(family: str, scenario: Scenario, data) -> None:
    name = data.draw(st.sampled_from(sorted(FAMILIES[family])), label="view")
    run_scenario(scenario, {name: FAMILIES[family][name]})


@pytest.mark.parametrize(
    "family", ["aggregates", "join_aggregates", "joins", "nesting", "project_filter"]
)
@settings(max_examples=SLOW_EXAMPLES)  # a variant of the core families (``budget``)
@given(scenario=scenarios(), data=st.data())
def test_large_state_tables_read_by_key_range(family: str, scenario: Scenario, data) -> None:
    """Every table taken as large: a state table read by key range (``sql.keyed_join``),
    its NULL group keys matched by the second join; the model's retracted rows found the same
    way (``apply.delete_sql``); a source narrowed through the inputs a join term narrows."""
    name = data.draw(st.sampled_from(sorted(FAMILIES[family])), label="view")
    with mock.patch.object(costs, "LARGE_TABLE_ROWS", 0):
        run_scenario(scenario, {name: FAMILIES[family][name]})


@pytest.mark.parametrize("family", ["join_aggregates", "project_filter"])
@settings(max_examples=SLOW_EXAMPLES)  # a variant of the core families (``budget``)
@given(scenario=scenarios())
def test_the_views_of_one_invocation_share_each_window_read(family: str, scenario: Scenario):
    """A family's views maintained together as the models of one dbt invocation: the first
    read of each source's window takes every column the others read from it, ended rows
    included (``runtime.invocation``), and each view nets its own projection of that read."""
    views = FAMILIES[family]
    with invocation.within(frozenset(views)):
        run_scenario(scenario, views)


@pytest.mark.parametrize("name", sorted(STORED_INPUTS))
@settings(max_examples=SLOW_EXAMPLES)  # a family of its own, one view each (``budget``)
@given(data=st.data())
def test_stored_join_inputs_equal_their_recomputation(name: str, data) -> None:
    """Every join input under conditions of its own stored (``ivm_stored_inputs='*'``): the
    terms read its rows from the state table, at the old snapshot as stored, at the new one
    with the window's change applied, and each run brings the stored rows forward. Changes
    fall on the view's own tables only, so that most windows change several of its inputs."""
    sql, tables = STORED_INPUTS[name]
    scenario = data.draw(scenarios(tables), label="scenario")
    large = mock.patch.object(costs, "LARGE_TABLE_ROWS", 0)
    # every table taken as large in some examples: the stored rows narrowed by key range
    with large if data.draw(st.booleans(), label="large") else nullcontext():
        run_scenario(scenario, {name: sql}, stored_inputs=("*",))


#: commits of the lake that a window's runs may follow, each given a number of its own: tables
#: and views created, written and dropped beside the sources, and a comment on a source, which
#: touches the source without changing its rows
_COMMITS_BETWEEN: dict[str, Callable[[duckdb.DuckDBPyConnection, int], object]] = {
    "table created": lambda con, n: con.execute(f"CREATE TABLE other_{n} AS SELECT {n} AS x"),
    "table written": lambda con, n: con.execute(
        f"CREATE TABLE IF NOT EXISTS written (x INTEGER); INSERT INTO written VALUES ({n})"
    ),
    "view created": lambda con, n: con.execute(f"CREATE VIEW v_{n} AS SELECT k FROM r"),
    "table dropped": lambda con, n: con.execute(f"DROP TABLE IF EXISTS other_{n - 1}"),
    "source commented": lambda con, n: con.execute(f"COMMENT ON TABLE r IS 'note {n}'"),
}


@pytest.mark.parametrize("family", ["join_aggregates", "joins", "project_filter"])
@settings(max_examples=SLOW_EXAMPLES)  # a variant of the core families (``budget``)
@given(scenario=scenarios(), data=st.data())
def test_windows_followed_by_other_commits_are_read_at_the_pin(family: str, scenario, data):
    """Other commits of the lake between each window's last change and its runs, the family's
    views maintained as the models of one invocation: a source that no commit touched after
    its window is read at the run's pinned snapshot (``FeedRequest.read_at``), one that a
    comment touched at its window's end; a later view of the invocation reads a window its
    first reader shared (``runtime.invocation``)."""
    views = FAMILIES[family]
    numbers = iter(range(1, 1_000))

    def commits_between(con: duckdb.DuckDBPyConnection) -> None:
        drawn = st.lists(st.sampled_from(sorted(_COMMITS_BETWEEN)), max_size=3)
        for commit in data.draw(drawn, label="commits between"):
            _COMMITS_BETWEEN[commit](con, next(numbers))

    with invocation.within(frozenset(views)):
        run_scenario(scenario, views, before_runs=commits_between)


@pytest.mark.parametrize("family", ["join_aggregates"])
@settings(max_examples=SLOW_EXAMPLES)  # a variant of the core families (``budget``)
@given(scenario=scenarios())
def test_the_changes_read_ahead_serve_the_views_of_one_invocation(family: str, scenario: Scenario):
    """Before each window's runs, what dbt's connection reads ahead (``runtime.warmup``): the
    run log, each changed source's change as the views' first runs will read it, whatever
    its size (``first_windows``), and the catalog versions. The runs take those entries where
    their own decision spans the source alike, and read their own elsewhere."""
    views = frozenset(FAMILIES[family])
    with mock.patch.object(first_windows, "AHEAD_SHARE", float("inf")), invocation.within(views):
        run_scenario(
            scenario,
            FAMILIES[family],
            before_runs=lambda con: warmup.read_ahead(con, "lake", views),
        )
