"""The classic jaffle_shop dbt project, every model ``incremental_ivm``, through dbt's CLI.

Its marts are LEFT JOINs of aggregated CTEs (``customers``) and a LEFT JOIN of a
payment-method pivot (``orders``), which numbers each customer's orders by day as dbt-labs'
current jaffle-shop does (``row_number()``): half the new orders fall on a day their customer
already ordered on, so numbers tie, and ``ivm_consistent`` and the comparison with the
``table`` materialization must accept either numbering of a tie. Every round changes its raw
tables the way its upstream system would (new orders with their payments, status changes,
refunds, cancelled orders, new and departed customers, several commits per window, some rows
touched twice in one transaction), then runs ``dbt run`` and ``dbt test`` (the project's own
schema tests: unique, not_null, accepted_values, relationships; and ``ivm_consistent``), and
compares every model with the same SQL built by dbt's ``table`` materialization.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import duckdb
import pytest

from .dbt_project import JAFFLE_SHOP, Project
from .lake_project import assert_equals_reference, seed

pytestmark = pytest.mark.xdist_group("jaffle_shop")

#: rounds of raw-table changes; each costs three dbt commands (run, test, reference run)
ROUNDS = int(os.environ.get("DUCKSTREAM_JAFFLE_ROUNDS", "2"))
STATUSES = ["placed", "shipped", "completed", "return_pending", "returned"]
METHODS = ["credit_card", "coupon", "bank_transfer", "gift_card"]
RAW = "lake.raw"


@pytest.fixture(scope="module")
def as_shipped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    """jaffle_shop with its staging models views, as dbt ships it: the marts read them."""
    project = Project(tmp_path_factory.mktemp("jaffle_shop_views"), JAFFLE_SHOP)
    config = project.directory / "dbt_project.yml"
    config.write_text(config.read_text() + "    staging:\n      +materialized: view\n")
    tests = project.directory / "models" / "staging" / "schema.yml"  # ivm_consistent: marts
    consistent = "    data_tests: [dbt_duckstream.ivm_consistent]\n"
    tests.write_text(tests.read_text().replace(consistent, ""))
    project.dbt("deps")
    seed(project)
    project.first_run = project.dbt("run")
    yield project


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    project = Project(tmp_path_factory.mktemp("jaffle_shop"), JAFFLE_SHOP)
    project.dbt("deps")
    seed(project)
    project.first_run = project.dbt("run")
    yield project


def _max_id(con: duckdb.DuckDBPyConnection, table: str) -> int:
    row = con.execute(f"SELECT coalesce(max(id), 0) FROM {RAW}.{table}").fetchone()
    assert row is not None
    return int(row[0])


def change_raw_tables(con: duckdb.DuckDBPyConnection, rng: random.Random) -> None:
    """Several commits of changes that keep the data valid for the project's tests: every
    order has a payment and a customer, ids stay unique, statuses and methods are known."""
    order_id, payment_id = _max_id(con, "raw_orders"), _max_id(con, "raw_payments")
    customer_id = _max_id(con, "raw_customers")
    for _ in range(rng.randint(2, 4)):
        transactional = rng.random() < 0.5
        if transactional:
            con.execute("BEGIN")
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(
                ["orders", "orders", "status", "cancel", "refund", "payment", "customers", "twice"]
            )
            if kind == "orders":  # new orders of existing customers, each with its payments
                customers = [
                    r[0] for r in con.execute(f"SELECT id FROM {RAW}.raw_customers").fetchall()
                ]
                for _ in range(rng.randint(1, 4)):
                    order_id += 1
                    customer = rng.choice(customers)
                    day = f"DATE '2018-04-10' + {rng.randint(0, 40)}"
                    if rng.random() < 0.5:  # the day of another of its orders: a tie
                        day = (
                            f"coalesce((SELECT max(order_date) FROM {RAW}.raw_orders "
                            f"WHERE user_id = {int(customer)}), {day})"
                        )
                    con.execute(
                        f"INSERT INTO {RAW}.raw_orders VALUES (?, ?, {day}, ?)",
                        [order_id, customer, rng.choice(STATUSES)],
                    )
                    for _ in range(rng.randint(1, 3)):
                        payment_id += 1
                        con.execute(
                            f"INSERT INTO {RAW}.raw_payments VALUES (?, ?, ?, ?)",
                            [payment_id, order_id, rng.choice(METHODS), rng.randint(0, 30) * 100],
                        )
            elif kind == "status":
                modulus = rng.randint(3, 17)
                con.execute(
                    f"UPDATE {RAW}.raw_orders SET status = ? WHERE id % {modulus} = ?",
                    [rng.choice(STATUSES), rng.randint(0, modulus - 1)],
                )
            elif kind == "cancel":  # an order goes, with its payments
                modulus = rng.randint(15, 40)
                where = f"id % {modulus} = {rng.randint(0, modulus - 1)}"
                con.execute(
                    f"DELETE FROM {RAW}.raw_payments WHERE order_id IN "
                    f"(SELECT id FROM {RAW}.raw_orders WHERE {where})"
                )
                con.execute(f"DELETE FROM {RAW}.raw_orders WHERE {where}")
            elif kind == "refund":  # a second payment of an order is dropped, another changes
                con.execute(
                    f"DELETE FROM {RAW}.raw_payments WHERE id IN (SELECT max(id) "
                    f"FROM {RAW}.raw_payments GROUP BY order_id HAVING count(*) > 1 "
                    f"AND max(id) % 3 = {rng.randint(0, 2)})"
                )
                modulus = rng.randint(5, 20)
                con.execute(
                    f"UPDATE {RAW}.raw_payments SET amount = amount + 100, payment_method = ? "
                    f"WHERE id % {modulus} = ?",
                    [rng.choice(METHODS), rng.randint(0, modulus - 1)],
                )
            elif kind == "payment":  # a further payment of an existing order
                payment_id += 1
                con.execute(
                    f"INSERT INTO {RAW}.raw_payments SELECT ?, id, ?, ? FROM {RAW}.raw_orders "
                    "ORDER BY hash(id + ?) LIMIT 1",
                    [payment_id, rng.choice(METHODS), rng.randint(1, 30) * 100, payment_id],
                )
            elif kind == "customers":  # new customers, renamed ones, and some without orders go
                for _ in range(rng.randint(1, 3)):
                    customer_id += 1
                    last = rng.choice(["Q.", "Z.", None])
                    con.execute(
                        f"INSERT INTO {RAW}.raw_customers VALUES (?, ?, ?)",
                        [customer_id, rng.choice(["Ann", "Bo", "Cy"]), last],
                    )
                con.execute(
                    f"UPDATE {RAW}.raw_customers SET last_name = ? WHERE id % 11 = ?",
                    [rng.choice(["X.", "Y."]), rng.randint(0, 10)],
                )
                con.execute(
                    f"DELETE FROM {RAW}.raw_customers WHERE id % 9 = {rng.randint(0, 8)} AND id "
                    f"NOT IN (SELECT user_id FROM {RAW}.raw_orders WHERE user_id IS NOT NULL)"
                )
            else:  # one transaction touching the same rows twice
                if not transactional:
                    con.execute("BEGIN")
                modulus = rng.randint(4, 9)
                where = f"order_id % {modulus} = {rng.randint(0, modulus - 1)}"
                con.execute(f"UPDATE {RAW}.raw_payments SET amount = amount + 1 WHERE {where}")
                con.execute(
                    f"UPDATE {RAW}.raw_payments SET payment_method = ? WHERE {where}",
                    [rng.choice(METHODS)],
                )
                if not transactional:
                    con.execute("COMMIT")
        if transactional:
            con.execute("COMMIT")


def test_jaffle_shop_is_maintained_with_its_tests_passing(project: Project) -> None:
    assert project.first_run is not None
    assert set(project.first_run.strategies().values()) == {"initial"}
    tested = project.dbt("test")
    assert {r["status"] for r in tested.results.values()} == {"pass"}
    assert_equals_reference(project)

    rng = random.Random(20261122)
    for _ in range(ROUNDS):
        with project.connect() as con:
            change_raw_tables(con, rng)
        run = project.dbt("run")
        strategies = run.strategies()
        assert set(strategies.values()) <= {"incremental", "unchanged"}, strategies
        assert strategies["customers"] == strategies["orders"] == "incremental"
        tested = project.dbt("test")
        failed = {n: r["status"] for n, r in tested.results.items() if r["status"] != "pass"}
        assert not failed, failed
        assert_equals_reference(project)


def test_marts_over_staging_views_are_maintained(as_shipped: Project) -> None:
    """The marts read the tables below the views (``compiler/rewrites/inline_views.py``)."""
    assert as_shipped.first_run is not None
    marts = ("customers", "orders")
    assert [as_shipped.first_run.strategies()[m] for m in marts] == ["initial", "initial"]
    rng = random.Random(20261127)
    for _ in range(ROUNDS):
        with as_shipped.connect() as con:
            change_raw_tables(con, rng)
        run = as_shipped.dbt("run")
        assert [run.strategies()[m] for m in marts] == ["incremental", "incremental"]
        tested = as_shipped.dbt("test")
        failed = {n: r["status"] for n, r in tested.results.items() if r["status"] != "pass"}
        assert not failed, failed
        assert_equals_reference(as_shipped)
