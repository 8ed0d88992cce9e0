"""The oracle on random scenarios for window functions: ranking, offsets, values, frames of
every kind, several windows in one SELECT, windows over aggregates, joins and other windows,
QUALIFY, with and without PARTITION BY; rows move between partitions by updates, and NULLs
sit in partition and order keys.

Ties: where a window's ORDER BY leaves rows tied, SQL lets it number them either way, and the
maintained table is one valid result of the SQL (see ``operators/window.py``). These views
order by every column the window reads, so tied rows are identical and every valid result is
the same bag, compared exactly; ``rank``-style functions, which give ties equal values, keep
their ties. Windows whose keys do tie are ``test_properties_ties.py``'s.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .budget import SLOW_EXAMPLES
from .scenarios import Scenario, scenarios
from .test_properties import run_scenario

pytestmark = [pytest.mark.slow]

#: every column of r, to break ties in a window's ORDER BY
ALL_R = "id, k, g, v, x"

FAMILIES: dict[str, dict[str, str]] = {
    "windows": {
        "w_ranks": "SELECT id, g, v, rank() OVER (PARTITION BY g ORDER BY v) AS rk, "
        "dense_rank() OVER (PARTITION BY g ORDER BY v DESC) AS dr, "
        "percent_rank() OVER (PARTITION BY g ORDER BY v) AS pr, "
        "cume_dist() OVER (PARTITION BY g ORDER BY v NULLS FIRST) AS cd, "
        "count(*) OVER (PARTITION BY g) AS n FROM r",
        "w_row_number": "SELECT id, k, g, v, "
        f"row_number() OVER (PARTITION BY k ORDER BY v, {ALL_R}) AS rn FROM r",
        "w_running": "SELECT id, k, x, "
        f"sum(x) OVER (PARTITION BY k ORDER BY {ALL_R} ROWS BETWEEN UNBOUNDED PRECEDING "
        "AND CURRENT ROW) AS running, "
        f"avg(v) OVER (PARTITION BY k ORDER BY {ALL_R} ROWS BETWEEN 1 PRECEDING AND 1 "
        "FOLLOWING) AS moving FROM r",
        "w_offsets": "SELECT id, g, v, lag(v) OVER w AS prev, lead(v, 2, -1) OVER w AS next2, "
        "first_value(x) OVER w AS fx, "
        "last_value(x) OVER (w ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS lx, "
        "nth_value(v, 2) OVER w AS second, ntile(2) OVER w AS half FROM r "
        "WINDOW w AS (PARTITION BY g ORDER BY v, id, k, x)",
        "w_global": f"SELECT id, v, row_number() OVER (ORDER BY {ALL_R}) AS pos, "
        "sum(v) OVER () AS total, lag(x, 1, 0) OVER (ORDER BY id, k, g, v, x) AS px FROM r",
        "w_frames": "SELECT id, k, v, "
        "sum(v) OVER (PARTITION BY k ORDER BY v GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING "
        "EXCLUDE CURRENT ROW) AS sg, "
        "count(x) OVER (PARTITION BY k ORDER BY v RANGE BETWEEN UNBOUNDED PRECEDING AND "
        "CURRENT ROW EXCLUDE TIES) AS ct, "
        "max(g) OVER (PARTITION BY k ORDER BY id RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING) "
        "AS mg, "
        "string_agg(g, ',' ORDER BY g) OVER (PARTITION BY k ORDER BY id, v, g, x ROWS 2 "
        "PRECEDING) AS sa FROM r",
        "w_aggregates": "SELECT id, g, min(x) OVER (PARTITION BY g) AS mn, "
        "stddev_pop(v) OVER (PARTITION BY g) AS sd, "
        "count(DISTINCT k) OVER (PARTITION BY g) AS dk, "
        "sum(v) FILTER (WHERE v > 0) OVER (PARTITION BY g ORDER BY id RANGE UNBOUNDED "
        "PRECEDING) AS pos, "
        "bool_or(v > 2) OVER (PARTITION BY g) AS any_big, "
        "median(x) OVER (PARTITION BY g) AS med FROM r",
        "w_ignore_nulls": "SELECT id, g, lag(x IGNORE NULLS) OVER w AS prev_x, "
        "last_value(v IGNORE NULLS) OVER w AS last_v FROM r "
        "WINDOW w AS (PARTITION BY g ORDER BY id, k, v, x)",
        "wc_several": "SELECT id, k, g, sum(v) OVER (PARTITION BY k) AS sk, "
        "count(*) OVER (PARTITION BY g) AS cg, "
        f"row_number() OVER (PARTITION BY k, g ORDER BY {ALL_R}) AS rn, "
        f"sum(v) OVER (ORDER BY {ALL_R}) AS running FROM r",
        "wc_over_aggregate": "SELECT g, sum(v) AS sv, "
        "rank() OVER (ORDER BY sum(v) DESC NULLS LAST) AS rk, "
        "sum(sum(v)) OVER () AS total, "
        "lag(count(*)) OVER (ORDER BY g NULLS FIRST) AS prev_n FROM r GROUP BY g",
        "wc_over_join": "SELECT r.id, s.name, r.v, row_number() OVER (PARTITION BY s.name "
        "ORDER BY r.v, r.id, s.w, r.k, r.g, r.x, s.k) AS rn, "
        "sum(s.w) OVER (PARTITION BY r.k ORDER BY r.id RANGE BETWEEN UNBOUNDED PRECEDING "
        "AND CURRENT ROW) AS acc FROM r JOIN s ON r.k = s.k",
        "wc_over_window": "SELECT id, g, rn, sum(rn) OVER (PARTITION BY g ORDER BY id, rn, v) "
        "AS acc FROM (SELECT id, g, v, "
        f"row_number() OVER (PARTITION BY g ORDER BY v, {ALL_R}) AS rn FROM r) AS q",
        "wc_aggregate_of_window": "SELECT g, max(rn) AS most, count(*) AS n FROM "
        f"(SELECT g, row_number() OVER (PARTITION BY k ORDER BY {ALL_R}) AS rn FROM r) "
        "GROUP BY g",
        "wc_distinct": "SELECT DISTINCT g, count(*) OVER (PARTITION BY g) AS n FROM r",
        "wc_in_case": "SELECT id, CASE WHEN row_number() OVER "
        "(PARTITION BY g ORDER BY id, k, v, x) = 1 THEN 'first' ELSE 'other' END AS pos FROM r",
        "wc_over_union": "SELECT k, lag(k) OVER (ORDER BY k NULLS FIRST) AS pk FROM "
        "(SELECT k FROM r UNION SELECT k FROM s) AS q",
        "wc_moves": "SELECT s.k, s.name, dense_rank() OVER (PARTITION BY s.name ORDER BY s.w) "
        "AS dr, lead(s.k) OVER (PARTITION BY s.name ORDER BY s.w, s.k) AS nk FROM s",
    },
    "qualify": {
        "q_dedup": "SELECT id, k, g, v FROM r "
        "QUALIFY row_number() OVER (PARTITION BY id ORDER BY v DESC NULLS LAST, k, g, x) = 1",
        "q_top_per_group": "SELECT k, id, v FROM r "
        "QUALIFY rank() OVER (PARTITION BY k ORDER BY v DESC) <= 2",
        "q_top_rows_per_group": "SELECT k, id, v, "
        "row_number() OVER (PARTITION BY k ORDER BY v DESC, id, g, x) AS rn FROM r "
        "QUALIFY rn <= 2",
        "q_no_partition": f"SELECT id, v FROM r QUALIFY row_number() OVER (ORDER BY {ALL_R}) <= 3",
        "q_two_windows": "SELECT id, k, g FROM r QUALIFY count(*) OVER (PARTITION BY k) > 1 "
        f"AND row_number() OVER (PARTITION BY g ORDER BY {ALL_R}) = 1",
        "q_over_having": "SELECT g, sum(v) AS s, rank() OVER (ORDER BY sum(v) NULLS FIRST, "
        "g NULLS FIRST) AS rk FROM r GROUP BY g HAVING count(*) > 1 QUALIFY rk <= 2",
        "q_grouping_sets": "SELECT k, g, count(*) AS n, grouping(k) AS gk FROM r "
        "GROUP BY GROUPING SETS ((k), (g)) "
        "QUALIFY row_number() OVER (PARTITION BY grouping(k) ORDER BY n DESC, k, g) <= 2",
        "q_staging": "WITH latest AS (SELECT * FROM s QUALIFY row_number() OVER "
        "(PARTITION BY k ORDER BY w DESC NULLS LAST, name) = 1) "
        "SELECT latest.k, latest.name, t.z FROM latest JOIN t ON latest.k = t.k",
    },
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=SLOW_EXAMPLES)
@given(scenario=scenarios(), data=st.data())
def test_maintained_equals_recomputed(family: str, scenario: Scenario, data) -> None:
    name = data.draw(st.sampled_from(sorted(FAMILIES[family])), label="view")
    run_scenario(scenario, {name: FAMILIES[family][name]})
