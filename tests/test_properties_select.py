"""The oracle on random scenarios for the rest of SELECT: top-N and DISTINCT ON, GROUPING
SETS/ROLLUP/CUBE with grouping(), order-dependent aggregates given an ORDER BY, PIVOT and
UNPIVOT, LATERAL joins, VALUES and table functions in FROM, WITH RECURSIVE, output columns
under repeated names, and floating-point aggregates inside STRUCT and LIST values.

Every ORDER BY here orders rows fully (ties only between identical rows), so the one valid
result is the recomputation's.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .budget import SLOW_EXAMPLES
from .scenarios import Scenario, scenarios
from .test_properties import run_scenario

pytestmark = [pytest.mark.slow]

FAMILIES: dict[str, dict[str, str]] = {
    "top_n": {
        "t_limit": "SELECT id, v, g FROM r ORDER BY v DESC NULLS LAST, id, g, k, x LIMIT 3",
        "t_offset": "SELECT k, z FROM t ORDER BY z, k LIMIT 2 OFFSET 1",
        "t_offset_only": "SELECT k, z FROM t ORDER BY z NULLS FIRST, k OFFSET 2",
        "t_hidden_order": "SELECT id FROM r ORDER BY v + k, id, g, x, k, v LIMIT 2",
        "t_of_aggregate": "SELECT g, count(*) AS n FROM r GROUP BY g ORDER BY n DESC, g LIMIT 2",
        "t_distinct_on": "SELECT DISTINCT ON (k) k, id, v FROM r ORDER BY k, v DESC, id, g, x",
        "t_distinct_on_expr": "SELECT DISTINCT ON (s.k % 2) s.k % 2 AS parity, s.name, t.z "
        "FROM s JOIN t ON s.k = t.k ORDER BY s.k % 2, t.z DESC, s.name, s.w, s.k",
        "t_top_of_join": "SELECT s.name, t.z FROM s JOIN t ON s.k = t.k "
        "ORDER BY t.z, s.name, s.k, s.w LIMIT 4",
        "t_distinct_on_limit": "SELECT DISTINCT ON (k) k, v FROM r "
        "ORDER BY k, v DESC NULLS LAST, id, g, x LIMIT 2",
        "t_cte_join": "WITH top AS (SELECT id, v FROM r ORDER BY v DESC NULLS LAST, id, k, g, x "
        "LIMIT 3) SELECT top.id, s.name FROM top JOIN s ON top.id = s.k",
        "t_by_window": "SELECT k, v FROM r ORDER BY row_number() OVER (ORDER BY id, k, g, v, x) "
        "LIMIT 2",
        "t_one_row": "SELECT count(*) AS n, sum(v) AS s FROM r WHERE k > 0 LIMIT 5",
        "t_one_row_joined": "SELECT * FROM (SELECT max(v) AS m, count(DISTINCT g) AS d FROM r) "
        "AS a, (SELECT count(*) AS n FROM t HAVING count(*) > 1) AS b LIMIT 100",
        "t_order_by_expression": "SELECT k, g, sum(v) AS s FROM r GROUP BY k, g "
        "ORDER BY CASE WHEN k > 1 THEN k END NULLS FIRST, s DESC NULLS LAST, k, g LIMIT 3",
        "t_order_by_grouping": "SELECT k, g, sum(v) AS s FROM r GROUP BY ROLLUP (k, g) "
        "ORDER BY grouping(k) + grouping(g), CASE WHEN grouping(g) = 0 THEN k END NULLS FIRST, "
        "s, k, g LIMIT 4",
        "t_shadowed_name": "SELECT v AS k, id FROM r ORDER BY -k NULLS FIRST, id, g, x, v LIMIT 2",
        "t_order_by_all": "SELECT id, k, g, v, x FROM r ORDER BY ALL DESC LIMIT 3",
        "t_order_by_all_grouped": "SELECT g, count(*) AS n FROM r GROUP BY ALL "
        "ORDER BY ALL LIMIT 2",
        "t_order_by_all_repeated": "SELECT s.k, t.k, t.z, s.name, s.w FROM s JOIN t ON s.k = t.k "
        "ORDER BY ALL NULLS FIRST LIMIT 3",
        "t_in_subquery": "SELECT q.id, q.v * 2 AS v2 FROM "
        "(SELECT id, v FROM r WHERE v IS NOT NULL ORDER BY v DESC, id, k, g, x LIMIT 3) AS q",
    },
    "grouped": {
        "g_rollup": "SELECT k, g, count(*) AS n, sum(v) AS s, grouping(k, g) AS gid "
        "FROM r GROUP BY ROLLUP (k, g)",
        "g_cube": "SELECT k, g, max(x) AS mx, grouping(g) AS gg FROM r "
        "GROUP BY CUBE (k, g) HAVING count(*) > 1",
        "g_sets": "SELECT s.name, t.z, count(*) AS n FROM s JOIN t ON s.k = t.k "
        "GROUP BY GROUPING SETS ((s.name), (t.z), ())",
        "g_mixed": "SELECT k, g, v % 2 AS p, count(*) AS n FROM r GROUP BY k, ROLLUP (g, v % 2)",
        "g_grouping_plain": "SELECT k, grouping(k) AS gk, avg(v) AS av FROM r GROUP BY k",
        "o_lists": "SELECT k, string_agg(g, ',' ORDER BY g, id) AS gs, "
        "list(v ORDER BY v NULLS FIRST, id) AS vs FROM r GROUP BY k",
        "o_first": "SELECT g, first(v ORDER BY id, v) AS fv, "
        "arg_max(x, (v, id, x)) AS am, arg_min(id, (x, id)) AS an FROM r GROUP BY g",
        "o_mode": "SELECT k, mode(g ORDER BY id, g) AS mg, mode(v ORDER BY x DESC, id, v) AS mv "
        "FROM r GROUP BY k",
        "o_nested_floats": "SELECT k, {'n': count(*), 's': sum(x), 'a': avg(x)} AS st, "
        "[sum(x), max(x)] AS l FROM r GROUP BY k",
        "o_duckdb_only": "SELECT g, product(v) AS p, histogram(k) AS h, mad(x) AS md, "
        "geomean(v + 3) AS gm, mean(x) AS mx, max(v, 2) AS top2, count_star() AS n "
        "FROM r GROUP BY g",
        "o_duckdb_only_global": "SELECT product(x) AS p, entropy(g) AS e, kurtosis_pop(v) AS ku "
        "FROM r WHERE k IS NOT NULL",
        "o_sorted_lists": "SELECT k, list_sort(list(DISTINCT g)) AS gs, "
        "array_sort(array_agg(v)) AS vs, list_reverse_sort(list(x) FILTER (WHERE v > 0)) AS xs "
        "FROM r GROUP BY k",
        "o_within_group": "SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY x) AS med, "
        "percentile_disc([0.25, 0.75]) WITHIN GROUP (ORDER BY v DESC) AS q, "
        "mode() WITHIN GROUP (ORDER BY k) AS mk FROM r GROUP BY g",
        "o_global": "SELECT string_agg(DISTINCT g, '|' ORDER BY g) AS gs, "
        "list(z ORDER BY z DESC) AS zs FROM r, t WHERE r.k = t.k",
    },
    "pivots": {
        "p_pivot": "PIVOT r ON g IN ('a', 'b', 'it''s', NULL) USING sum(v) AS s, count(*) AS n "
        "GROUP BY k",
        "p_implicit_group": "PIVOT (SELECT k, g, v FROM r) ON g IN ('a', 'c') USING max(v)",
        "p_cte_join": "WITH p AS (PIVOT r ON k IN (0, 1) USING count(*) GROUP BY g) "
        "SELECT p.*, s.w FROM p JOIN s ON s.name = p.g",
        "p_unpivot": "UNPIVOT r ON v, k INTO NAME col VALUE val",
        "p_unpivot_spelled": 'UNPIVOT (SELECT id, v AS "V", x FROM r) ON v, x',
        "p_standard_pivot": "SELECT * FROM s PIVOT (max(w) AS m, count(*) AS n "
        "FOR name IN ('a', 'b') GROUP BY k)",
        "p_standard_unpivot": "SELECT u.* FROM t UNPIVOT INCLUDE NULLS (val FOR col IN (k, z)) "
        "AS u",
    },
    "laterals": {
        "l_expressions": "SELECT r.id, x.v2, x.tag FROM r, "
        "LATERAL (SELECT r.v * 2 AS v2, coalesce(r.g, '?') || '!' AS tag) AS x",
        "l_top1_left": "SELECT s.k, s.name, lp.id, lp.v FROM s LEFT JOIN LATERAL "
        "(SELECT r.id, r.v FROM r WHERE r.k = s.k "
        "ORDER BY r.v DESC NULLS LAST, r.id, r.g, r.x LIMIT 1) AS lp ON TRUE",
        "l_top2_offset": "SELECT t.z, q.v FROM t, LATERAL (SELECT r.v FROM r WHERE r.k = t.k "
        "AND r.v > 0 ORDER BY r.v, r.id, r.g, r.x LIMIT 2 OFFSET 1) AS q",
        "l_aggregates": "SELECT s.name, a.n, a.total FROM s CROSS JOIN LATERAL "
        "(SELECT count(*) AS n, sum(r.v) AS total FROM r WHERE r.k = s.k) AS a",
        "l_grouped": "SELECT s.k, gs.g, gs.n FROM s, LATERAL "
        "(SELECT r.g, count(*) AS n FROM r WHERE r.k = s.k GROUP BY r.g) AS gs",
        "l_implicit": "SELECT t.k, x.m FROM t, (SELECT max(r.v) AS m FROM r WHERE r.k = t.k) AS x",
        "l_unnest": "SELECT r.id, u.e FROM r, LATERAL unnest([r.v, r.k]) AS u(e)",
        "l_series": "SELECT s.name, d.n, d.n * s.k AS nk FROM s CROSS JOIN LATERAL "
        "generate_series(1, s.w) AS d(n)",
        "l_range_unnamed": "SELECT r.id, x.* FROM r, LATERAL range(r.k) AS x WHERE r.v > 0",
        "l_order_by_alias": "SELECT s.k, lp.vv FROM s JOIN LATERAL (SELECT r.v * 10 AS vv, r.id "
        "FROM r WHERE r.k = s.k ORDER BY vv DESC NULLS FIRST, r.id, r.g, r.x, r.v LIMIT 1) lp "
        "ON lp.vv > 0",
    },
    "names": {
        "n_star_join": "SELECT * FROM s JOIN t ON s.k = t.k",
        "n_repeated": "SELECT k, K, v AS k_1, g AS k, k FROM r",
        "n_grouped": "SELECT s.k, t.k, count(*) AS n, sum(s.w) AS n FROM s JOIN t ON s.w = t.z "
        "GROUP BY s.k, t.k",
        "n_union": "SELECT k, k FROM t UNION ALL SELECT k, w FROM s",
        "n_columns_star": "SELECT min(COLUMNS(*)), count(COLUMNS(* EXCLUDE (id))) FROM r",
        "n_columns_regex": "SELECT k, sum(COLUMNS('^[vx]$')) AS 'total_\\0', "
        "max(COLUMNS('^(g|v)')) FROM r GROUP BY k",
        "n_columns_join": "SELECT COLUMNS(c -> c LIKE '%k%' OR c = 'name') FROM s JOIN t "
        "ON s.k = t.k",
        "n_columns_where": "SELECT id, coalesce(*COLUMNS(['x', 'v'])) AS first_set FROM r "
        "WHERE COLUMNS(['k', 'v']) IS NOT NULL",
        "n_struct_star": "SELECT p.* EXCLUDE (g) FROM (SELECT {'k': k, 'v': v, 'g': g} AS p "
        "FROM r WHERE x IS NOT NULL)",
        "n_struct_unnest": "SELECT k, unnest(p) FROM (SELECT s.k, "
        "{'name': s.name, 'z': t.z, 'sum': s.w + t.z} AS p FROM s JOIN t ON s.k = t.k)",
        "n_columns_nested": "WITH w AS (SELECT COLUMNS(* EXCLUDE (g)) FROM r WHERE k > 0) "
        "SELECT w.k, COLUMNS('^[vx]$') * 2 FROM w JOIN t ON w.k = t.k",
    },
    "sources": {
        "f_values_join": "SELECT r.id, v.label FROM r JOIN "
        "(VALUES (1, 'one'), (2, 'two'), (NULL, 'none')) AS v(k, label) ON r.k = v.k",
        "f_range": "SELECT t.k, f.i FROM t JOIN range(3) AS f(i) ON t.z = f.i",
        "f_unnest": "SELECT r.id, u.e FROM r, unnest([r.v, r.k, r.v]) AS u(e)",
        "f_series_of_rows": "SELECT s.name, n FROM s, generate_series(1, s.w) AS g(n)",
        "f_select_unnest": "SELECT id, unnest([k, v]) AS e FROM r",
        "f_values_union": "SELECT k FROM t UNION SELECT * FROM (VALUES (1), (7)) AS c(k)",
        "f_unnest_grouped": "SELECT x, count(*) AS n FROM "
        "(SELECT unnest([k, v, NULL]) AS x FROM r) GROUP BY x",
        "rc_reach": "WITH RECURSIVE reach(k, depth) AS (SELECT k, 0 FROM t WHERE z = 0 "
        "UNION SELECT s.w, reach.depth + 1 FROM reach JOIN s ON s.k = reach.k "
        "WHERE reach.depth < 3) SELECT k, depth FROM reach",
        "rc_joined": "WITH RECURSIVE p(k) AS (SELECT k FROM s UNION SELECT t.z FROM p "
        "JOIN t ON t.k = p.k) SELECT p.k, count(*) AS n FROM p JOIN r ON r.k = p.k GROUP BY p.k",
        "rc_cte_input": "WITH RECURSIVE base AS (SELECT k, z FROM t WHERE z IS NOT NULL), "
        "walk(k, steps) AS (SELECT k, 0 FROM base UNION ALL "
        "SELECT base.z, walk.steps + 1 FROM walk JOIN base ON base.k = walk.k "
        "WHERE walk.steps < 2) SELECT k, steps FROM walk",
        "rc_window": "WITH RECURSIVE chain(k, hop, rn) AS (SELECT k, 0, 1 FROM t "
        "WHERE z IS NOT NULL UNION ALL SELECT t.z, chain.hop + 1, row_number() OVER "
        "(PARTITION BY chain.k ORDER BY t.z, t.k) FROM chain JOIN t ON t.k = chain.k "
        "WHERE chain.hop < 2) SELECT k, hop, rn FROM chain",
        "rc_ordered_limit": "WITH RECURSIVE walk(k, steps) AS (SELECT k, 0 FROM s "
        "WHERE k IS NOT NULL UNION ALL (SELECT t.z, walk.steps + 1 FROM walk JOIN t "
        "ON t.k = walk.k WHERE walk.steps < 3 ORDER BY t.z NULLS FIRST, walk.k, walk.steps "
        "LIMIT 2)) SELECT k, steps FROM walk",
    },
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=SLOW_EXAMPLES)
@given(scenario=scenarios(), data=st.data())
def test_maintained_equals_recomputed(family: str, scenario: Scenario, data) -> None:
    name = data.draw(st.sampled_from(sorted(FAMILIES[family])), label="view")
    run_scenario(scenario, {name: FAMILIES[family][name]})
