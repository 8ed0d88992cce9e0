"""The oracle when rebuilds chosen for cost interleave with maintenance.

Such a rebuild refills the model from its sources alone and drops its state, and the next run
that maintains builds the state first; or, when the model usually maintains, builds the model
and its state whole. Over random histories, for a view drawn from every
property family, the first window is rebuilt (as a cost choice would), the second maintained,
and each later one either; the model must equal its recomputation after each run.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .budget import SLOW_EXAMPLES
from .harness import Model, fresh_lake, maintained
from .scenarios import Scenario, create_tables, operations, scenarios
from .test_properties import FAMILIES as CORE
from .test_properties_outer import FAMILIES as OUTER
from .test_properties_select import FAMILIES as SELECT
from .test_properties_setops import FAMILIES as SETOPS
from .test_properties_windows import FAMILIES as WINDOWS

pytestmark = [pytest.mark.slow]

VIEWS = {
    name: sql
    for families in (CORE, OUTER, SELECT, SETOPS, WINDOWS)
    for views in families.values()
    for name, sql in views.items()
}
#: a share every estimate exceeds: the run rebuilds whenever a source changed
ALWAYS = -1.0


@settings(max_examples=SLOW_EXAMPLES)  # a cross-check of every family's views (``budget``)
@given(scenario=scenarios(), data=st.data())
def test_rebuilds_chosen_for_cost_interleave_with_maintenance(scenario: Scenario, data) -> None:
    name = data.draw(st.sampled_from(sorted(VIEWS)), label="view")
    windows = (
        *scenario.windows,
        tuple(data.draw(st.lists(operations(("r", "s", "t")), min_size=1, max_size=4))),
    )
    later = len(windows) - 2
    choices = [
        True,
        False,
        *data.draw(st.lists(st.booleans(), min_size=later, max_size=later), label="rebuilds"),
    ]
    with fresh_lake(":memory:") as con:
        if scenario.file_backed:
            con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        create_tables(con)
        for operation in scenario.initial:
            operation.apply(con)
        model = Model(con, name, VIEWS[name])
        assert model.refresh().strategy == "initial"
        model.assert_consistent()
        state_dropped = False
        for window, rebuild in zip(windows, choices, strict=True):
            for operation in window:
                operation.apply(con)
            result = model.refresh(rebuild_above=ALWAYS if rebuild else None)
            if result.strategy == "initial":
                assert state_dropped and not rebuild, result.summary()
                assert result.reason == "its state tables are missing"
                state_dropped = False
            elif rebuild and result.strategy == "rebuild":
                state_dropped = bool(model.plan.state_tables) or state_dropped
            else:
                assert maintained(result), result.summary()
            model.assert_consistent()
