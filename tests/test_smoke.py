"""One hand-written scenario per feature, with the expected rows spelled out."""

from __future__ import annotations

from .harness import Model


def rows(con, table: str) -> list[tuple]:
    return sorted(con.execute(f"SELECT * FROM {table}").fetchall(), key=repr)


def setup_shop(con) -> None:
    con.execute("CREATE TABLE orders (id INTEGER, store_id INTEGER, amount DECIMAL(10, 2))")
    con.execute("CREATE TABLE stores (id INTEGER, region VARCHAR)")
    con.execute("INSERT INTO stores VALUES (1, 'eu'), (2, 'us'), (3, NULL)")
    con.execute(
        "INSERT INTO orders VALUES (1, 1, 10), (2, 1, 20), (3, 2, 5), (4, 3, 1), (5, NULL, 3)"
    )


def test_projection_and_filter_follow_updates_and_deletes(lake):
    setup_shop(lake)
    model = Model(lake, "big", "SELECT id, amount * 2 AS doubled FROM orders WHERE amount >= 5")
    model.refresh()
    lake.execute("UPDATE orders SET amount = 50 WHERE id = 4")  # enters the filter
    lake.execute("UPDATE orders SET amount = 1 WHERE id = 1")  # leaves it
    lake.execute("DELETE FROM orders WHERE id = 2")
    assert model.refresh().strategy == "incremental"
    assert rows(lake, "big") == rows(lake, "(VALUES (3, 10.00), (4, 100.00))")
    model.assert_consistent()


def test_duplicate_rows_lose_exactly_one_copy(lake):
    lake.execute("CREATE TABLE t (a INTEGER)")
    lake.execute("INSERT INTO t VALUES (1), (1), (1), (NULL), (NULL)")
    model = Model(lake, "copy", "SELECT a FROM t")
    model.refresh()
    lake.execute("DELETE FROM t WHERE rowid IN (SELECT min(rowid) FROM t GROUP BY a)")
    result = model.refresh()
    assert (result.rows_inserted, result.rows_deleted) == (0, 2)
    assert rows(lake, "copy") == [(1,), (1,), (None,)]


def test_join_with_both_sides_deleting(lake):
    setup_shop(lake)
    model = Model(
        lake,
        "joined",
        "SELECT o.id, s.region FROM orders o JOIN stores s ON o.store_id = s.id",
    )
    model.refresh()
    lake.execute("DELETE FROM orders WHERE store_id = 1")
    lake.execute("DELETE FROM stores WHERE id = 1")
    lake.execute("INSERT INTO stores VALUES (1, 'apac')")
    lake.execute("INSERT INTO orders VALUES (6, 1, 7)")
    model.refresh()
    assert rows(lake, "joined") == [(3, "us"), (4, None), (6, "apac")]


def test_aggregates_with_min_after_delete_and_all_null_sums(lake):
    setup_shop(lake)
    sql = (
        "SELECT s.region, sum(o.amount) AS revenue, count(*) AS n, min(o.amount) AS smallest "
        "FROM orders o JOIN stores s ON o.store_id = s.id GROUP BY s.region"
    )
    model = Model(lake, "revenue", sql)
    model.refresh()
    lake.execute("DELETE FROM orders WHERE id = 1")  # the minimum of 'eu'
    lake.execute("UPDATE orders SET amount = NULL WHERE id = 3")  # 'us' sums only NULLs
    model.refresh()
    assert rows(lake, "revenue") == [("eu", 20, 1, 20), ("us", None, 1, None), (None, 1, 1, 1)]
    model.assert_consistent()


def test_global_aggregate_of_an_emptied_table(lake):
    setup_shop(lake)
    model = Model(lake, "totals", "SELECT count(*) AS n, sum(amount) AS total FROM orders")
    model.refresh()
    lake.execute("DELETE FROM orders")
    model.refresh()
    assert rows(lake, "totals") == [(0, None)]


def test_join_of_two_aggregated_ctes(lake):
    setup_shop(lake)
    sql = """
        WITH per_store AS (SELECT store_id, sum(amount) AS revenue FROM orders GROUP BY 1),
             per_region AS (SELECT region, count(*) AS stores FROM stores GROUP BY region)
        SELECT s.region, p.revenue, r.stores
        FROM per_store p JOIN stores s ON p.store_id = s.id
        JOIN per_region r ON r.region = s.region
    """
    model = Model(lake, "regional", sql)
    model.refresh()
    lake.execute("INSERT INTO stores VALUES (4, 'eu')")
    lake.execute("INSERT INTO orders VALUES (7, 4, 2), (8, 1, 1)")
    model.refresh()
    assert rows(lake, "regional") == [("eu", 2, 2), ("eu", 31, 2), ("us", 5, 1)]
    model.assert_consistent()


def test_row_inserted_and_deleted_in_one_window_leaves_no_trace(lake):
    setup_shop(lake)
    model = Model(lake, "ids", "SELECT id FROM orders")
    model.refresh()
    lake.execute("INSERT INTO orders VALUES (99, 1, 1)")
    lake.execute("UPDATE orders SET amount = 2 WHERE id = 99")
    lake.execute("DELETE FROM orders WHERE id = 99")
    result = model.refresh()
    assert result.strategy == "incremental"
    assert (result.rows_inserted, result.rows_deleted) == (0, 0)
    model.assert_consistent()
