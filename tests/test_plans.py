"""What plans say about the operators without a row-by-row rule: how each is maintained, what
keeps state, and what the cost estimate counts for it."""

from __future__ import annotations

from dbt_duckstream import compile_ivm
from dbt_duckstream.compiler.operators import RecursiveCTE, TopN, Window
from dbt_duckstream.runtime.decide import OUTPUT_WEIGHT, full_reads

SCHEMA = {
    "lake": {
        "main": {
            "t": {"a": "INTEGER", "b": "VARCHAR", "x": "DOUBLE"},
            "u": {"a": "INTEGER", "c": "INTEGER"},
        }
    }
}
CHANGED = frozenset({"lake.main.t"})
ROWS = {"lake.main.t": 1000, "lake.main.u": 10}


def plan(sql: str):
    return compile_ivm(sql, target="m", schema=SCHEMA, catalog="lake")


def test_a_window_without_partition_by_is_one_partition() -> None:
    whole = plan("SELECT a, row_number() OVER (ORDER BY a, b, x) AS n FROM t")
    parts = plan("SELECT a, row_number() OVER (PARTITION BY b ORDER BY a, x) AS n FROM t")
    (strategy,) = whole.strategies().values()
    assert strategy.startswith("one partition (no PARTITION BY): recomputed in full")
    assert "one partition" in whole.explain().splitlines()[0]
    assert whole.recomputed_in_full(CHANGED) == ["window3 (window without PARTITION BY)"]
    assert parts.recomputed_in_full(CHANGED) == []
    # the estimate counts the state a whole-table window writes again
    assert full_reads(whole.root, CHANGED, ROWS) >= OUTPUT_WEIGHT * 1000
    assert full_reads(parts.root, CHANGED, ROWS) == 1000


def test_order_free_windows_keep_no_state_and_the_others_do() -> None:
    free = plan(
        "SELECT a, rank() OVER (PARTITION BY b ORDER BY a) AS r, count(*) OVER () AS n FROM t"
    )
    assert not any(n.stored for n in free.root.walk() if isinstance(n, Window))
    assert free.state_tables == ()
    stored = plan("SELECT a, sum(x) OVER (PARTITION BY b ORDER BY a, x) AS s FROM t")
    (window,) = [n for n in stored.root.walk() if isinstance(n, Window)]
    assert window.stored and stored.state_tables == (window.state_table,)
    assert "old rows stored" in stored.strategies()[window.name]


def test_windows_with_different_partitions_stack_and_qualify_goes_last() -> None:
    stacked = plan(
        "SELECT a, sum(a) OVER (PARTITION BY b) AS s, row_number() OVER (PARTITION BY a "
        "ORDER BY b, x) AS n, rank() OVER (PARTITION BY b ORDER BY a) AS r FROM t "
        "QUALIFY n = 1"
    )
    windows = [n for n in stacked.root.walk() if isinstance(n, Window)]
    assert [len(w.functions) for w in windows] == [2, 1]
    assert [w.qualify is not None for w in windows] == [False, True]


def test_top_n_distinct_on_and_recursive_ctes_keep_their_rows() -> None:
    top = plan("SELECT a, b FROM t ORDER BY a DESC, b LIMIT 5 OFFSET 2")
    (node,) = [n for n in top.root.walk() if isinstance(n, TopN)]
    assert (node.limit, node.offset, node.stored) == (5, 2, True)
    first = plan("SELECT DISTINCT ON (b) b, a FROM t ORDER BY b, a DESC")
    (window,) = [n for n in first.root.walk() if isinstance(n, Window)]
    assert window.qualify is not None and "ROW_NUMBER()" in window.functions[0][1].sql()
    recursive = plan(
        "WITH RECURSIVE r(n) AS (SELECT a FROM t UNION SELECT n + 1 FROM r WHERE n < 5) "
        "SELECT n FROM r"
    )
    (node,) = [n for n in recursive.root.walk() if isinstance(n, RecursiveCTE)]
    assert node.stored and node.sources() == {node.tables[0]}
    assert recursive.recomputed_in_full(CHANGED) == [f"{node.name} (recursive CTE r)"]
    assert recursive.recomputed_in_full(frozenset({"lake.main.u"})) == []


def test_set_operations_count_touched_rows() -> None:
    counted = plan("SELECT a FROM t EXCEPT ALL SELECT a FROM u")
    assert list(counted.strategies().values()) == ["copies counted per touched row"]
    assert full_reads(counted.root, CHANGED, ROWS) == 1010
    added = plan("SELECT a FROM t UNION ALL SELECT c FROM u")
    assert added.strategies() == {}
    assert full_reads(added.root, CHANGED, ROWS) == 0


def _join_delta(sql: str) -> str:
    maintenance = plan(sql).maintenance({"lake": (1, 2)}, CHANGED)
    assert maintenance is not None
    return "\n".join(maintenance.build)


def test_a_join_reads_only_the_rows_its_delta_can_match() -> None:
    # the other input narrowed to the delta's keys, by the ON condition or the WHERE clause
    narrowed = '(SELECT * FROM "scan2_old" WHERE "a" IN (SELECT "a" FROM "_ivm_m_scan1_delta"))'
    assert narrowed in _join_delta("SELECT t.b, u.c FROM t JOIN u ON t.a = u.a")
    assert narrowed in _join_delta("SELECT t.b, u.c FROM t, u WHERE u.a = t.a AND u.c > 1")
    # inside parentheses, and from a WHERE over a join that has its own condition
    assert narrowed in _join_delta("SELECT t.b, u.c FROM t JOIN u ON (t.a = u.a)")
    # the keys come from the delta rows that pass the conditions on the delta's input alone
    filtered = (
        '(SELECT * FROM "scan2_old" WHERE "a" IN (SELECT "a" FROM '
        '(SELECT * FROM "_ivm_m_scan1_delta" AS "_ivm_in0" WHERE "_ivm_in0"."x" > 1)))'
    )
    assert filtered in _join_delta(
        "SELECT t.b, u.c FROM t JOIN u ON u.c > 0 WHERE (u.a = t.a) AND t.x > 1"
    )
    # no equality between them: nothing to narrow by
    assert "IN (SELECT" not in _join_delta("SELECT t.b, u.c FROM t JOIN u ON t.a < u.a")
    assert "IN (SELECT" not in _join_delta("SELECT t.b, u.c FROM t, u WHERE t.a + 1 = u.a")


def test_a_large_input_that_several_terms_narrow_is_read_once() -> None:
    """TPC-H Q10's shape: customer, narrowed by the new orders' keys in one term and through
    the orders of the new lineitems in the other, is read once for both; each term then
    narrows that read by its own keys. Those orders are read once too."""
    schema = {
        "lake": {
            "main": {
                "c": {"ck": "INTEGER", "name": "VARCHAR"},
                "o": {"ok": "INTEGER", "ck": "INTEGER"},
                "l": {"ok": "INTEGER", "q": "INTEGER"},
            }
        }
    }
    sql = "SELECT c.name, l.q FROM c JOIN o ON c.ck = o.ck JOIN l ON l.ok = o.ok WHERE l.q > 1"
    compiled = compile_ivm(sql, target="m", schema=schema, catalog="lake")
    changed = frozenset({"lake.main.o", "lake.main.l"})

    def delta(large: frozenset[str]) -> str:
        maintenance = compiled.maintenance({"lake": (1, 2)}, changed, large=large)
        assert maintenance is not None
        (terms,) = [s for s in maintenance.build if "_filter" in s.split(" AS", 1)[0]]
        return terms

    shared = delta(frozenset({"lake.main.c"}))
    assert shared.count('"c" AT (VERSION') == 1
    assert shared.count('AS MATERIALIZED (\n  SELECT * FROM "scan1_new" WHERE "ck" IN') == 1
    # read by both terms, each keeping its own keys
    assert shared.count('(SELECT * FROM "join') == 2
    # the orders of the new lineitems, which narrow customer, are read once: defined, and
    # read by the one materialized CTE that the term and both customer reads take them from
    assert shared.count('"scan2_new"') == 2
    assert shared.count('"join4_in1_new_for2_under"') == 4
    # a small input, read whole by the other term, is read once whole for both (below)
    assert 'AS MATERIALIZED (\n  SELECT * FROM "scan1_new" WHERE' not in delta(frozenset())


def test_a_small_input_that_a_term_reads_whole_is_read_once() -> None:
    """TPC-H Q10's shape at SF1: customer, narrowed by the new orders' keys in one term and
    read whole in the other (no equality ties it to the lineitems), is read once for both,
    with the conditions on it alone, and the cost estimate counts that read once; where every
    term narrows it, each reads its own rows."""
    schema = {
        "lake": {
            "main": {
                "c": {"ck": "INTEGER", "name": "VARCHAR", "seg": "VARCHAR"},
                "o": {"ok": "INTEGER", "ck": "INTEGER"},
                "l": {"ok": "INTEGER", "ck": "INTEGER", "q": "INTEGER"},
            }
        }
    }
    changed = frozenset({"lake.main.o", "lake.main.l"})

    def compiled(sql: str):
        return compile_ivm(sql, target="m", schema=schema, catalog="lake")

    def delta(sql: str) -> str:
        maintenance = compiled(sql).maintenance({"lake": (1, 2)}, changed)
        assert maintenance is not None
        name = ("_filter", "_join")
        (terms,) = [s for s in maintenance.build if any(n in s.split(" AS", 1)[0] for n in name)]
        return terms

    joined = "FROM c JOIN o ON c.ck = o.ck JOIN l ON l.ok = o.ok WHERE l.q > 1 AND c.seg = 'x'"
    shared = delta(f"SELECT c.name, l.q {joined}")
    # c's read is defined once and referenced once, by the materialized CTE
    assert shared.count('"scan1_new"') == 2
    whole = 'AS MATERIALIZED (\n  SELECT * FROM (SELECT * FROM "scan1_new" AS "_ivm_in0" WHERE '
    assert shared.count(whole) == 1 and '"_ivm_in0"."seg" = \'x\'' in shared
    # the term of o narrows that read by its keys, the term of l reads it whole
    assert shared.count('(SELECT * FROM "join') == 1
    assert shared.count('"join4_in0_either_whole_under" AS "_ivm_in0"') == 1
    # narrowed by both terms: no whole read
    both = delta("SELECT c.name, l.q FROM c JOIN o ON c.ck = o.ck JOIN l ON l.ck = c.ck")
    assert " AS MATERIALIZED (" not in both and both.count('"scan1_new"') == 3
    # the estimate counts c once where the terms share its read, and per term where c is
    # large (each reads it; no key ranges given here, so narrowed reads count in full)
    root = compiled(f"SELECT c.name, l.q {joined}").root
    o_and_l = {"lake.main.o": 10, "lake.main.l": 1}
    assert full_reads(root, changed, {"lake.main.c": 100} | o_and_l) == 100 + 10 + 1
    assert full_reads(root, changed, {"lake.main.c": 10**6} | o_and_l) == 2 * 10**6 + 10 + 1


def test_a_folding_aggregate_reads_its_state_once_a_run() -> None:
    """The merge's read of the stored groups is the only one: the retraction comes from the
    touched rows, and the stored rows go by row id."""
    sql = "SELECT b, sum(x) AS s FROM t JOIN u ON t.a = u.a GROUP BY b"
    maintenance = plan(sql).maintenance({"lake": (1, 2)}, CHANGED)
    assert maintenance is not None
    statements = maintenance.all()
    writes = [s for s in statements if s.startswith(("DELETE FROM", "INSERT INTO"))]
    (delete,) = [s for s in writes if s.startswith("DELETE FROM") and "_duckstream_state" in s]
    assert "WHERE rowid IN (SELECT _ivm_stored FROM" in delete
    reads = [s for s in statements if "_duckstream_state" in s and s not in writes]
    assert len(reads) == 1 and "LEFT JOIN" in reads[0], "the state was read more than once"
    # the join's delta is a table of its own, which DuckDB plans the aggregate's reads by
    assert any(s.startswith('CREATE OR REPLACE TEMP TABLE "_ivm_m_join') for s in statements)
