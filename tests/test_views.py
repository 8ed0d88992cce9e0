"""Models that read views (dbt's default materialization, and so a mart's usual staging layer):
each view is inlined with its definition, and the model reads the tables below.

The oracle on random scenarios over views, nested, renaming their columns, in another schema,
with their own CTEs and aggregates; and what a view's life does to the model: a redefinition
rebuilds it, a view over a table outside DuckLake or a view calling ``now()`` is refused as
the same SQL without the view would be.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbt_duckstream import ConfigurationError, UnsupportedSQLError

from .budget import SLOW_EXAMPLES
from .harness import Model, fresh_lake, maintain_through
from .scenarios import Scenario, create_tables, scenarios

VIEWS = (
    "CREATE VIEW stg_r AS SELECT id AS r_id, k, upper(g) AS g, v FROM r WHERE k IS NOT NULL",
    "CREATE SCHEMA staging",
    "CREATE VIEW staging.named (key, label, weight) AS SELECT k, name, w FROM main.s",
    "CREATE VIEW staging.totals AS WITH per AS (SELECT k, sum(v) AS total, count(*) AS n "
    "FROM main.stg_r GROUP BY k) SELECT * FROM per WHERE n > 0",
    "CREATE VIEW joined AS SELECT stg_r.r_id, stg_r.v, n.label FROM stg_r "
    "JOIN staging.named AS n ON n.key = stg_r.k",
)

MODELS = {
    "v_plain": "SELECT * FROM stg_r",
    "v_nested": "SELECT label, count(*) AS n, sum(v) AS s FROM joined GROUP BY label",
    "v_columns": "SELECT key, label FROM lake.staging.named WHERE weight > 1",
    "v_aggregated": "SELECT t.k, t.total, s.name FROM staging.totals AS t LEFT JOIN s ON s.k = t.k",
    "v_aliased_twice": "SELECT a.r_id, b.r_id AS other FROM stg_r AS a "
    "JOIN stg_r AS b ON a.k = b.k AND a.r_id < b.r_id",
    "v_beside_a_table": "SELECT r.id, j.label FROM r JOIN joined AS j ON j.r_id = r.id",
}


@settings(max_examples=SLOW_EXAMPLES)
@given(scenario=scenarios(), data=st.data())
def test_models_over_views_equal_their_recomputation(scenario: Scenario, data) -> None:
    name = data.draw(st.sampled_from(sorted(MODELS)), label="model")
    with fresh_lake() as con:
        if scenario.file_backed:
            con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        create_tables(con)
        for statement in VIEWS:
            con.execute(statement)
        for operation in scenario.initial:
            operation.apply(con)
        maintain_through(con, {name: MODELS[name]}, scenario.windows)


@pytest.fixture
def lake_with_views(lake):
    create_tables(lake)
    for statement in VIEWS:
        lake.execute(statement)
    lake.execute("INSERT INTO r VALUES (1, 1, 'a', 2, 0.5), (2, 1, 'b', 3, NULL)")
    lake.execute("INSERT INTO s VALUES (1, 'one', 2)")
    return lake


def test_the_model_reads_the_tables_below_its_views(lake_with_views) -> None:
    model = Model(lake_with_views, "m", MODELS["v_nested"])
    assert [s.key for s in model.plan.sources] == ["lake.main.r", "lake.main.s"]
    assert model.plan.views == ("lake.main.joined", "lake.main.stg_r", "lake.staging.named")
    assert model.refresh().strategy == "initial"
    lake_with_views.execute("INSERT INTO r VALUES (3, 1, 'c', 5, 1.0)")
    assert model.refresh().strategy == "incremental"
    model.assert_consistent()


def test_a_redefined_view_rebuilds_the_model(lake_with_views) -> None:
    model = Model(lake_with_views, "m", MODELS["v_plain"])
    model.refresh()
    lake_with_views.execute("CREATE OR REPLACE VIEW stg_r AS SELECT id AS r_id, k, g, v FROM r")
    lake_with_views.execute("INSERT INTO r VALUES (3, NULL, 'c', 5, 1.0)")
    again = Model(lake_with_views, "m", MODELS["v_plain"])
    result = again.refresh()
    assert (result.strategy, result.reason) == ("rebuild", "model SQL changed")
    again.assert_consistent()
    # the same definition again (dbt replaces its views on every run): nothing to rebuild
    lake_with_views.execute("CREATE OR REPLACE VIEW stg_r AS SELECT id AS r_id, k, g, v FROM r")
    assert Model(lake_with_views, "m", MODELS["v_plain"]).refresh().strategy == "unchanged"


def test_views_over_what_cannot_be_maintained_are_refused_naming_it(lake_with_views) -> None:
    lake = lake_with_views
    lake.execute("CREATE VIEW recent AS SELECT * FROM r WHERE x < epoch(now())")
    with pytest.raises(UnsupportedSQLError, match="non-deterministic function now"):
        Model(lake, "m", "SELECT * FROM recent")
    lake.execute("CREATE TABLE memory.main.local AS SELECT 1 AS k")
    lake.execute("CREATE VIEW over_local AS SELECT r.id FROM r JOIN memory.main.local USING (k)")
    with pytest.raises(ConfigurationError, match=r"memory\.main\.local is not in a DuckLake"):
        Model(lake, "m", "SELECT * FROM over_local")
