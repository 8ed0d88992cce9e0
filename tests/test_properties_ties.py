"""The oracle on windows whose ORDER BY ties: rows tied on the keys are common (the keys are
drawn from a few values), so a maintained partition may number or pick its tied rows in
another order than a recomputation; the check compares what stays fixed whichever order ties
take (``compiler/ties.py``, ``runtime/consistency.py``), and every other column exactly.

A family of wrong tables proves the check still fails where it must: a number taken from
another tie group, numbers swapped across partitions, a row missing or doubled, a row in the
wrong partition or with a wrong order key, a wrong value in a tie group a cut keeps whole.
"""

from __future__ import annotations

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from dbt_duckstream.runtime.consistency import differences

from .budget import SLOW_EXAMPLES
from .harness import Model, assert_consistent, fresh_lake, maintained
from .scenarios import Scenario, create_tables, scenarios

pytestmark = [pytest.mark.slow]

#: views whose windows order by keys that tie (``{tb}``: where a tiebreaker goes); each kind
#: of window, and a cut inside a tie
TIED: dict[str, str] = {
    "row_number": "SELECT id, k, g, v, row_number() OVER (PARTITION BY k ORDER BY v{tb}) AS rn "
    "FROM r",
    "row_number_keys_hidden": "SELECT id, x, "
    "row_number() OVER (PARTITION BY k ORDER BY v DESC NULLS FIRST{tb}) AS rn FROM r",
    "row_number_global": "SELECT id, g, v, row_number() OVER (ORDER BY v{tb}) AS pos FROM r",
    "ntile": "SELECT id, k, v, ntile(3) OVER (PARTITION BY k ORDER BY v{tb}) AS third, "
    "CASE WHEN ntile(2) OVER (PARTITION BY k ORDER BY v{tb}) = 1 THEN 'low' END AS half FROM r",
    "lag_lead": "SELECT id, k, v, lag(id) OVER w AS prev, lead(x, 1, 0) OVER w AS next "
    "FROM r WINDOW w AS (PARTITION BY k ORDER BY v{tb})",
    "values": "SELECT id, k, v, first_value(id) OVER w AS fid, "
    "last_value(x) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS lx, "
    "nth_value(g, 2) OVER w AS second FROM r WINDOW w AS (PARTITION BY k ORDER BY v{tb})",
    "rows_frame": "SELECT id, k, v, sum(x) OVER (PARTITION BY k ORDER BY v{tb} ROWS BETWEEN "
    "1 PRECEDING AND CURRENT ROW) AS pair, count(g) OVER (PARTITION BY k ORDER BY v{tb} "
    "ROWS 2 PRECEDING) AS three FROM r",
    "ordered_aggregates": "SELECT id, k, v, string_agg(g, ',') OVER (PARTITION BY k "
    "ORDER BY v{tb}) AS gs, list(id ORDER BY v{tb}) OVER (PARTITION BY k) AS ids FROM r",
    "ties_with_rank": "SELECT id, k, v, rank() OVER (PARTITION BY k ORDER BY v) AS rk, "
    "row_number() OVER w AS rn, lag(v) OVER w AS pv FROM r "
    "WINDOW w AS (PARTITION BY k ORDER BY v{tb})",
    "over_join": "SELECT r.id, s.name, r.v, row_number() OVER (PARTITION BY s.name "
    "ORDER BY r.v{tb}) AS n FROM r JOIN s ON r.k = s.k",
    "qualify_first": "SELECT k, v, id FROM r "
    "QUALIFY row_number() OVER (PARTITION BY k ORDER BY v{tb}) = 1",
    "qualify_top_two": "SELECT k, v, g, row_number() OVER (PARTITION BY k ORDER BY v DESC{tb}) "
    "AS rn FROM r QUALIFY rn <= 2",
    "qualify_keys_hidden": "SELECT id, g FROM r "
    "QUALIFY row_number() OVER (PARTITION BY k ORDER BY v{tb}) <= 2",
    "limit": "SELECT id, v, g FROM r ORDER BY v NULLS LAST{tb} LIMIT 3",
    "limit_offset": "SELECT id, k FROM r ORDER BY k{tb} LIMIT 2 OFFSET 1",
}

#: tiebreakers: each orders the rows a view's ORDER BY ties one way, so the view with it
#: is one valid result of the view without it
TIEBREAKERS = (
    ", id, g, x",
    ", id DESC NULLS FIRST, g DESC NULLS FIRST, x DESC NULLS FIRST",
)
#: ``over_join`` reads r under its name
QUALIFIED_TIEBREAKERS = tuple(tb.replace(", ", ", r.") for tb in TIEBREAKERS)


def views(name: str) -> tuple[str, list[str]]:
    """A view, and the same view with each tiebreaker."""
    sql = TIED[name]
    breakers = QUALIFIED_TIEBREAKERS if name == "over_join" else TIEBREAKERS
    return sql.format(tb=""), [sql.format(tb=tb) for tb in breakers]


@settings(max_examples=SLOW_EXAMPLES)
@given(scenario=scenarios(), name=st.sampled_from(sorted(TIED)))
def test_tied_windows_equal_any_valid_recomputation(scenario: Scenario, name: str) -> None:
    """After every run the table equals the view recomputed, and the view recomputed with
    each tiebreaker (another valid result), whatever order ties take in each."""
    view, refined = views(name)
    with fresh_lake(":memory:") as con:
        if scenario.file_backed:
            con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        create_tables(con)
        for operation in scenario.initial:
            operation.apply(con)
        model = Model(con, "m", view)
        assert model.refresh().strategy == "initial"
        for window in ((), *scenario.windows):
            for operation in window:
                operation.apply(con)
            if window:
                result = model.refresh()
                assert maintained(result), result.summary()
            model.assert_consistent()
            for other in refined:
                assert_consistent(con, "lake.main.m", other, types=False, ties=model.plan.ties)
                if differences(con, "lake.main.m", other):
                    event("ties ordered otherwise than the table's")


_FIRST = "(SELECT min(rowid) FROM m)"
#: a row of another partition than the first row's, with another number
_OTHER = (
    f"(SELECT min(b.rowid) FROM m b, m a WHERE a.rowid = {_FIRST} "
    "AND b.k IS DISTINCT FROM a.k AND b.rn IS DISTINCT FROM a.rn)"
)

#: wrong tables: each statement changes the maintained table ``m`` in a way no order of ties
#: explains (when it finds a row to change)
WRONG: dict[str, str] = {
    "a number from another tie group": "UPDATE m SET rn = (SELECT b.rn FROM m b "
    "WHERE b.k IS NOT DISTINCT FROM m.k AND b.v IS DISTINCT FROM m.v ORDER BY b.rn LIMIT 1) "
    "WHERE rowid = (SELECT min(a.rowid) FROM m a WHERE EXISTS (SELECT 1 FROM m b WHERE "
    "b.k IS NOT DISTINCT FROM a.k AND b.v IS DISTINCT FROM a.v AND b.rn <> a.rn))",
    "numbers swapped across partitions": f"UPDATE m SET rn = CASE WHEN rowid = {_FIRST} "
    f"THEN (SELECT rn FROM m WHERE rowid = {_OTHER}) ELSE (SELECT rn FROM m WHERE rowid = "
    f"{_FIRST}) END WHERE rowid IN ({_FIRST}, {_OTHER}) AND {_OTHER} IS NOT NULL",
    "a row missing": f"DELETE FROM m WHERE rowid = {_FIRST}",
    "a row doubled": "INSERT INTO m SELECT * FROM m ORDER BY rowid LIMIT 1",
    "a row in another partition": f"UPDATE m SET k = coalesce(k, 0) + 100 WHERE rowid = {_FIRST}",
    "a wrong order key": f"UPDATE m SET v = coalesce(v, 0) + 100 WHERE rowid = {_FIRST}",
    # a row some later row of its partition follows (by v DESC, the cut's order): a cut of
    # the first positions keeps its tie group whole
    "a wrong value in a tie group kept whole": "UPDATE m SET g = 'wrong' WHERE rowid = "
    "(SELECT min(a.rowid) FROM m a WHERE EXISTS (SELECT 1 FROM m b "
    "WHERE b.k IS NOT DISTINCT FROM a.k AND b.v < a.v))",
}

#: views with the columns the wrong tables change (k, v, g; rn where a number is changed)
CHECKED: dict[str, str] = {
    "row_number": TIED["row_number"].format(tb=""),
    "qualify_top_two": TIED["qualify_top_two"].format(tb=""),
    "lag_lead": TIED["lag_lead"].format(tb="").replace("id, k, v,", "id, k, v, 0 AS rn, 'g' AS g,"),
}


#: rows tied in partitions and across them, under the scenario's own; each partition's
#: greatest v is one row's (a group a cut of the first positions keeps whole)
TIED_ROWS = (
    "INSERT INTO r SELECT i, i % 3, 'g' || (i % 4), CASE WHEN i < 3 THEN 5 ELSE i % 2 END, "
    "i / 4 FROM range(12) t(i)"
)


@settings(max_examples=SLOW_EXAMPLES)
@given(scenario=scenarios(), view=st.sampled_from(sorted(CHECKED)))
def test_a_table_no_order_of_ties_explains_is_a_difference(scenario: Scenario, view: str) -> None:
    """Each wrong table in turn, from the maintained one."""
    with fresh_lake(":memory:") as con:
        create_tables(con)
        con.execute(TIED_ROWS)
        for operation in scenario.initial:
            operation.apply(con)
        model = Model(con, "m", CHECKED[view])
        model.refresh()
        for window in scenario.windows:
            for operation in window:
                operation.apply(con)
            model.refresh()
        model.assert_consistent()
        con.execute("CREATE TEMP TABLE maintained AS SELECT * FROM m")
        for wrong, statement in WRONG.items():
            con.execute(statement)
            changed = con.execute(
                "SELECT count(*) FROM ((SELECT * FROM m EXCEPT ALL SELECT * FROM maintained) "
                "UNION ALL (SELECT * FROM maintained EXCEPT ALL SELECT * FROM m))"
            ).fetchone()
            if changed and changed[0]:  # else nothing to change (an empty table, ...)
                event(f"{view}: {wrong}")
                assert differences(con, "lake.main.m", CHECKED[view], ties=model.plan.ties), wrong
            con.execute("DELETE FROM m")
            con.execute("INSERT INTO m SELECT * FROM maintained")
