"""Join inputs kept beside the model (``ivm_stored_inputs``, ``operators.stored_input``): what
the property families do not show. A run checks the stored rows as it checks the model's: a
stored row that a retraction does not find makes it rebuild, saying so."""

from __future__ import annotations

from .harness import Model, record_writes


def test_a_stored_row_a_retraction_does_not_find_makes_the_run_rebuild(lake):
    """A limit set on the lake inlines the stored rows, which DuckDB then reads back one bit
    off (``inlining``): ``10 / 11`` is not the value a retraction matches. The model's own
    rows hold no float, so only the stored input misses it."""
    lake.execute("CREATE TABLE r (id INTEGER, k INTEGER)")
    lake.execute("CREATE TABLE s (k INTEGER, name VARCHAR, w DOUBLE)")
    lake.execute("INSERT INTO r SELECT i, i % 12 FROM range(48) t(i)")
    lake.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
    lake.execute("INSERT INTO s SELECT i, 'n' || i, i / 11 FROM range(12) t(i)")
    lake.execute("CALL lake.set_option('data_inlining_row_limit', 100)")
    sql = "SELECT r.id, s.name FROM r JOIN s ON r.k = s.k WHERE s.w > 0.5"
    model = Model(lake, "m", sql, ("s",))
    model.refresh()
    (state,) = model.plan.state_tables
    stored = lake.execute(f"SELECT w FROM {state.sql()} WHERE k = 10").fetchone()
    assert stored == (0.9090909090909092,)  # 10 / 11 is 0.9090909090909091
    lake.execute("DELETE FROM s WHERE k = 10")
    result = model.refresh()
    assert result.strategy == "rebuild"
    assert "the stored input" in result.reason
    assert "lacks rows its maintenance retracts" in result.reason
    model.assert_consistent()
    lake.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
    model.refresh(full_refresh=True)
    lake.execute("DELETE FROM s WHERE k = 9")
    lake.execute("UPDATE s SET w = 0.75 WHERE k = 3")
    assert model.refresh().strategy == "incremental"
    model.assert_consistent()
    assert lake.execute(f"SELECT count(*) FROM {state.sql()}").fetchone() == (5,)


def test_state_a_change_leaves_as_it_was_is_not_written(lake, monkeypatch):
    """A source change that no stored row and no group sees (a row the conditions drop)
    leaves the state tables unwritten: a DuckLake write of no row still costs catalog round
    trips. A change they see writes them."""
    lake.execute("CREATE TABLE r (id INTEGER, k INTEGER)")
    lake.execute("CREATE TABLE s (k INTEGER, name VARCHAR, w DOUBLE)")
    lake.execute("INSERT INTO r SELECT i, i % 12 FROM range(48) t(i)")
    lake.execute("INSERT INTO s SELECT i, 'n' || (i % 3), i / 8 FROM range(12) t(i)")
    sql = (
        "SELECT s.name, count(*) AS n, sum(r.id) AS ids FROM r JOIN s ON r.k = s.k "
        "WHERE s.w > 0.5 GROUP BY s.name"
    )
    model = Model(lake, "m", sql, ("s",))
    model.refresh()
    tables = [table.sql() for table in model.plan.state_tables]
    assert len(tables) == 2  # the stored input's and the aggregate's
    executed = record_writes(monkeypatch)

    def state_writes() -> list[str]:
        return [s for s in executed if any(table in s for table in tables)]

    lake.execute("INSERT INTO s VALUES (20, 'n9', 0.25)")  # under the condition
    assert model.refresh().strategy == "incremental"
    assert state_writes() == []
    model.assert_consistent()
    lake.execute("UPDATE s SET w = 0.75 WHERE k = 20")  # now above it
    assert model.refresh().strategy == "incremental"
    written = state_writes()
    assert any(s.startswith("INSERT INTO") and tables[0] in s for s in written), written
    assert any(s.startswith("DELETE FROM") for s in written), written
    model.assert_consistent()
