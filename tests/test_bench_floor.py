"""The floor benchmark (``make bench-floor``) in a reduced form: one timed run per target.
dbt's commands are forked from a process that imported dbt ahead (``tests.dbt_launcher``)."""

from __future__ import annotations

import pytest

from benchmarks import dbt_floor

from .dbt_launcher import forked_dbt

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("bench_floor")]


def test_every_model_is_timed_on_each_target_that_can_run_it(tmp_path):
    floor = dbt_floor.run(tmp_path, 1, launch=forked_dbt)
    for target in (dbt_floor.WITH_PLUGIN, dbt_floor.WITHOUT_PLUGIN):
        timed = {name for name, times in floor.models.items() if len(times.get(target, [])) == 1}
        assert timed == set(dbt_floor.selection(target)), target
        assert len(floor.walls[target]) == 1
    assert floor.strategies == {
        "maintained_unchanged": ["unchanged"],
        "maintained_one_row": ["incremental"],
        "maintained_over_view": ["incremental"],
    }
    for name in ("maintained_one_row", "maintained_over_view"):
        assert "+1 -1 rows" in floor.messages[name][0]
    report = dbt_floor.markdown(floor)
    for name, _, _ in dbt_floor.MODELS:
        assert f"| {name} |" in report
