"""ASOF joins whose keys and times hold NULLs, against an oracle that has no ASOF join.

DuckDB 1.5.5's own ASOF join sometimes matches a left row whose time is NULL (to the last
right row of its key, or to a right row whose time is NULL), depending on how the rows are
stored, so it cannot be the oracle for such rows. A maintained ASOF join follows SQL's
comparisons: a NULL key or time matches nothing. The oracle here says the same without an
ASOF join: each left row joined to every right row it may match, the greatest (or least)
right time kept.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbt_duckstream.runtime.consistency import differences

from .harness import Model, fresh_lake

#: (model, oracle): the oracle keeps, per left row, the match an ASOF join takes
MODELS = {
    "inner_at_or_before": (
        "SELECT l.id, l.k, l.t, r.t AS rt FROM l ASOF JOIN r ON l.k = r.k AND l.t >= r.t",
        "SELECT l.id, l.k, l.t, r.t AS rt FROM l JOIN r ON l.k = r.k AND l.t >= r.t "
        "QUALIFY row_number() OVER (PARTITION BY l.rowid ORDER BY r.t DESC) = 1",
    ),
    "left_at_or_before": (
        "SELECT l.id, l.t, r.t AS rt FROM l ASOF LEFT JOIN r ON l.k = r.k AND l.t >= r.t",
        "SELECT l.id, l.t, r.t AS rt FROM l LEFT JOIN r ON l.k = r.k AND l.t >= r.t "
        "QUALIFY row_number() OVER (PARTITION BY l.rowid ORDER BY r.t DESC NULLS LAST) = 1",
    ),
    "left_after": (
        "SELECT l.id, r.t AS rt FROM l ASOF LEFT JOIN r ON l.k = r.k AND l.t < r.t",
        "SELECT l.id, r.t AS rt FROM l LEFT JOIN r ON l.k = r.k AND l.t < r.t "
        "QUALIFY row_number() OVER (PARTITION BY l.rowid ORDER BY r.t NULLS LAST) = 1",
    ),
    "counted_without_key": (
        "SELECT r.t AS rt, count(*) AS n FROM l ASOF JOIN r ON l.t > r.t GROUP BY r.t",
        "SELECT rt, count(*) AS n FROM (SELECT r.t AS rt FROM l JOIN r ON l.t > r.t "
        "QUALIFY row_number() OVER (PARTITION BY l.rowid ORDER BY r.t DESC) = 1) GROUP BY rt",
    ),
}

keys = st.one_of(st.none(), st.integers(0, 2))
times = st.one_of(st.none(), st.integers(0, 9))
left_rows = st.lists(st.tuples(st.integers(0, 30), keys, times), max_size=12)
right_rows = st.lists(st.tuples(keys, times), max_size=6)
#: a round: rows inserted into each table, and the share of each table deleted and updated
rounds = st.lists(
    st.tuples(left_rows, right_rows, st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=4
)


def _insert(con, left: list, right: list) -> None:
    for row in left:
        con.execute("INSERT INTO l VALUES (?, ?, ?)", list(row))
    for k, t in right:
        # no two right rows share a key and a time: an ASOF join may take either of such rows
        con.execute(
            "INSERT INTO r SELECT ?, ?, 1 WHERE NOT EXISTS (SELECT 1 FROM r "
            "WHERE k IS NOT DISTINCT FROM ? AND t IS NOT DISTINCT FROM ?)",
            [k, t, k, t],
        )


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(sorted(MODELS)), first=st.tuples(left_rows, right_rows), later=rounds)
def test_null_keys_and_times_never_match(name: str, first, later) -> None:
    model_sql, oracle = MODELS[name]
    with fresh_lake() as con:
        con.execute("USE lake.main")
        con.execute("CREATE TABLE l (id INTEGER, k INTEGER, t INTEGER)")
        con.execute("CREATE TABLE r (k INTEGER, t INTEGER, v INTEGER)")
        _insert(con, *first)
        model = Model(con, name, model_sql)
        model.refresh()
        assert differences(con, f"lake.main.{name}", oracle) == []
        for left, right, deleted, moved in later:
            _insert(con, left, right)
            con.execute(f"DELETE FROM l WHERE id % 5 = {deleted}")
            con.execute(f"DELETE FROM r WHERE coalesce(t, 0) % 5 = {deleted} AND k = 1")
            con.execute(f"UPDATE l SET t = t + 3 WHERE id % 5 = {moved}")
            con.execute(
                f"UPDATE r SET t = t + 1 WHERE coalesce(t, 0) % 5 = {moved} AND k = 2 "
                "AND NOT EXISTS (SELECT 1 FROM r AS o WHERE o.k = 2 AND o.t = r.t + 1)"
            )
            model.refresh()
            assert differences(con, f"lake.main.{name}", oracle) == []
