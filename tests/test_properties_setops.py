"""The oracle on random scenarios for set operations: UNION [ALL], INTERSECT [ALL] and
EXCEPT [ALL], alone, nested and mixed, under aggregates, joins and a top-N, over rows with
duplicates and NULLs (which set operations compare as equal)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .budget import SLOW_EXAMPLES
from .scenarios import Scenario, scenarios
from .test_properties import run_scenario

pytestmark = [pytest.mark.slow]

FAMILIES: dict[str, dict[str, str]] = {
    "set_operations": {
        "so_union_all": "SELECT k, g AS label FROM r UNION ALL SELECT k, name FROM s",
        "so_union": "SELECT k FROM r UNION SELECT k FROM s UNION SELECT k FROM t",
        "so_except_all": "SELECT k, v FROM r EXCEPT ALL SELECT k, w FROM s",
        "so_except": "SELECT k FROM s EXCEPT SELECT k FROM t",
        "so_intersect_all": "SELECT k FROM r INTERSECT ALL SELECT k FROM s",
        "so_intersect": "SELECT k, v FROM r INTERSECT SELECT k, z FROM t",
        "so_by_name": "SELECT k, v FROM r UNION ALL BY NAME SELECT name, k FROM s",
        "sn_mixed": "(SELECT k FROM r UNION ALL SELECT k FROM s) "
        "EXCEPT ALL (SELECT k FROM t INTERSECT ALL SELECT k FROM s)",
        "sn_precedence": "SELECT k FROM r EXCEPT SELECT k FROM s INTERSECT SELECT k FROM t "
        "UNION ALL SELECT z FROM t",
        "sn_under_aggregate": "SELECT k, count(*) AS n FROM "
        "(SELECT k FROM r UNION ALL SELECT k FROM t) GROUP BY k",
        "sn_cte_join": "WITH u AS (SELECT k, v FROM r WHERE v > 0 UNION SELECT k, w FROM s) "
        "SELECT u.k, u.v, t.z FROM u JOIN t ON u.k = t.k",
        "sn_of_aggregates": "SELECT g, sum(v) AS total FROM r GROUP BY g "
        "EXCEPT SELECT name, sum(w) FROM s GROUP BY name",
        "sn_top": "SELECT k FROM r UNION ALL SELECT k FROM t ORDER BY k NULLS FIRST LIMIT 3",
        "sn_of_tops": "(SELECT k, z FROM t ORDER BY z, k LIMIT 2) "
        "UNION ALL (SELECT k, w FROM s ORDER BY w DESC, k, name LIMIT 1)",
        "sn_groups_and_total": "SELECT g, count(*) AS n FROM r GROUP BY g "
        "UNION ALL SELECT 'all', count(*) FROM r",
        "sn_intersect_join": "SELECT r.g, s.name FROM r JOIN s ON r.k = s.k "
        "INTERSECT ALL SELECT g, g FROM r",
    },
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=SLOW_EXAMPLES)
@given(scenario=scenarios(), data=st.data())
def test_maintained_equals_recomputed(family: str, scenario: Scenario, data) -> None:
    name = data.draw(st.sampled_from(sorted(FAMILIES[family])), label="view")
    run_scenario(scenario, {name: FAMILIES[family][name]})
