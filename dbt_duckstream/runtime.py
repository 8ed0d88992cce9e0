"""Execute a plan against a DuckDB connection: first run, maintenance, or rebuild.

Each run is one transaction, so it lands as one DuckLake snapshot or not at all: the model's
rows and its cursors always move together, and a crash leaves the model as it was.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass, field

import duckdb

from . import cursors, decide, registry
from .accumulate import state_table_for
from .compiler import IVMPlan, Schema, compile_ivm, parse_table, source_tables
from .errors import ConfigurationError
from .lake import (
    current_snapshot,
    feed_safe_optimizers,
    feed_status,
    is_ducklake,
    snapshot_exists,
    table_id,
    table_ids,
    transaction,
)
from .operators.base import TableRef, literal, quote
from .retry import retrying


@dataclass
class RunResult:
    """What one run did, for logs and run results."""

    model: str
    strategy: str  # "initial", "incremental", "rebuild" or "unchanged"
    reason: str
    snapshots: dict[str, tuple[int, int]]
    rows_inserted: int = 0
    rows_deleted: int = 0
    seconds: float = 0.0
    statements: list[str] = field(default_factory=list)

    def summary(self) -> str:
        window = ", ".join(f"{c} {a}->{b}" for c, (a, b) in sorted(self.snapshots.items()))
        return (
            f"{self.strategy} ({self.reason}): +{self.rows_inserted} -{self.rows_deleted} rows, "
            f"snapshots {window or 'none'}"
        )

    def to_dict(self) -> dict:
        """The result as plain data (for dbt's run results and logs)."""
        return {
            "model": self.model,
            "strategy": self.strategy,
            "reason": self.reason,
            "rows_inserted": self.rows_inserted,
            "rows_deleted": self.rows_deleted,
            "snapshots": {c: list(window) for c, window in sorted(self.snapshots.items())},
            "seconds": round(self.seconds, 6),
            "summary": self.summary(),
        }


def prepare(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    target: str | TableRef,
    *,
    catalog: str,
    db: str = "main",
) -> IVMPlan:
    """Compile model SQL against the live catalog: source schemas and exact output types."""
    target_ref = parse_table(target, catalog, db) if isinstance(target, str) else target
    if not is_ducklake(con, target_ref.catalog):
        raise ConfigurationError(
            f"model {target_ref.key} must live in a DuckLake catalog, so that its rows and its "
            "cursors commit as one snapshot: materialize it in the attached DuckLake "
            "(dbt: set the profile's database, or the model's database, to the DuckLake alias)"
        )
    schema: Schema = {}
    for source in source_tables(sql, catalog, db):
        if not is_ducklake(con, source.catalog):
            raise ConfigurationError(
                f"source {source.key} is not in a DuckLake catalog: incremental maintenance "
                "reads DuckLake's change feed, so attach the source's catalog with ducklake:"
            )
        if table_id(con, source) is None:
            raise ConfigurationError(f"source table {source.key} does not exist")
        rows = con.execute(f"DESCRIBE {source.sql()}").fetchall()
        schema.setdefault(source.catalog, {}).setdefault(source.schema, {})[source.name] = {
            r[0]: r[1] for r in rows
        }
    return compile_ivm(
        sql,
        target=target_ref,
        schema=schema,
        catalog=catalog,
        db=db,
        output_columns=describe(con, sql, catalog, db),
    )


def describe(con: duckdb.DuckDBPyConnection, sql: str, catalog: str, db: str):
    """Column names and types of the model exactly as DuckDB would materialize them."""
    with using(con, catalog, db):
        return [(r[0], r[1]) for r in con.execute(f"DESCRIBE {sql}").fetchall()]


@contextmanager
def using(con: duckdb.DuckDBPyConnection, catalog: str, db: str) -> Generator[None]:
    """Resolve unqualified names in ``catalog``.``db`` for a while, as the model's SQL expects."""
    row = con.execute("SELECT current_database(), current_schema()").fetchone()
    assert row is not None
    con.execute(f"USE {quote(catalog)}.{quote(db)}")
    try:
        yield
    finally:
        con.execute(f"USE {quote(row[0])}.{quote(row[1])}")


def refresh(
    con: duckdb.DuckDBPyConnection,
    plan: IVMPlan,
    *,
    full_refresh: bool = False,
    rebuild_above: float | None = decide.REBUILD_ABOVE,
) -> RunResult:
    """Bring the model up to date in one transaction; see ``RunResult`` for what happened.

    A run whose estimated maintenance work exceeds ``rebuild_above`` of a rebuild's rebuilds
    instead (see ``decide``); None always maintains.
    """
    started = time.perf_counter()
    # a run that loses a commit race to another writer reruns whole: new pin, new decision
    result = retrying(
        lambda: _transaction(con, plan, full_refresh, rebuild_above),
        f"incremental_ivm {plan.target.key}",
    )
    result.seconds = time.perf_counter() - started
    return result


def _transaction(
    con: duckdb.DuckDBPyConnection, plan: IVMPlan, full_refresh: bool, rebuild_above: float | None
) -> RunResult:
    with transaction(con):
        result = _run(con, plan, full_refresh, rebuild_above)
        if result.strategy != "unchanged":
            _label(con, plan.target, result)
    return result


def _label(con: duckdb.DuckDBPyConnection, target: TableRef, result: RunResult) -> None:
    """Name the model and what the run did in the snapshot's commit message."""
    message = f"incremental_ivm {target.key}: {result.strategy} ({result.reason})"
    con.execute(
        f"CALL {quote(target.catalog)}.set_commit_message('dbt-duckstream', {literal(message)})"
    )


def rebuild_unmaintainable(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    target: TableRef,
    *,
    catalog: str,
    db: str = "main",
    reason: str,
) -> RunResult:
    """Rebuild a model whose SQL cannot be maintained (``ivm_fallback='rebuild'``).

    One transaction, like a maintenance run: the table is replaced, and any cursors and state
    of an earlier maintainable version are dropped, so a later maintainable version starts over.
    """
    started = time.perf_counter()
    if not is_ducklake(con, target.catalog):
        raise ConfigurationError(f"model {target.key} must live in a DuckLake catalog")
    result = RunResult(target.key, "rebuild", reason, {})
    with transaction(con):
        _drop_view_in_the_way(con, target)
        con.execute(f"DROP TABLE IF EXISTS {target.sql()}")
        with using(con, catalog, db):
            con.execute(f"CREATE TABLE {target.sql()} AS {sql}")
        con.execute(f"DROP TABLE IF EXISTS {state_table_for(target).sql()}")
        cursors.drop(con, target)
        registry.record(con, target, registry.RegisteredModel(sql, catalog, db, "rebuild"), "")
        row = con.execute(f"SELECT count(*) FROM {target.sql()}").fetchone()
        result.rows_inserted = int(row[0]) if row else 0
        _label(con, target, result)
    result.seconds = time.perf_counter() - started
    return result


def _run(
    con: duckdb.DuckDBPyConnection, plan: IVMPlan, full_refresh: bool, rebuild_above: float | None
) -> RunResult:
    pinned = {catalog: current_snapshot(con, catalog) for catalog in plan.catalogs}
    ids = table_ids(con, [*plan.sources, plan.target])
    previous = {c.source: c for c in cursors.read(con, plan.target)}
    strategy, reason, changed = _decide(con, plan, pinned, ids, previous, full_refresh)
    old = {c.catalog: c.snapshot_id for c in previous.values()}
    snapshots = {cat: (old.get(cat, pinned[cat]), pinned[cat]) for cat in plan.catalogs}
    if strategy == "incremental" and rebuild_above is not None:
        strategy, reason = _maintain_or_rebuild(
            con, plan, snapshots, ids, changed, reason, rebuild_above
        )
    result = RunResult(plan.target.key, strategy, reason, snapshots)
    if strategy == "unchanged":
        return result
    if strategy == "incremental":
        _maintain(con, plan, snapshots, changed, result)
    else:
        result.snapshots = {cat: (snap, snap) for cat, snap in pinned.items()}
        # a rebuild chosen for cost changes nothing structural: the tables are refilled and
        # the registry already holds this SQL
        by_cost = strategy == "rebuild" and bool(changed)
        _rebuild(con, plan, result.snapshots, result, refill=by_cost)
        if not by_cost:
            catalog, db = plan.default_schema
            registry.record(
                con,
                plan.target,
                registry.RegisteredModel(plan.sql, catalog, db, "incremental"),
                plan.sql_hash,
            )
    cursors.write(
        con,
        plan.target,
        [
            cursors.Cursor(s.key, s.catalog, ids[s.key], pinned[s.catalog], plan.sql_hash)
            for s in plan.sources
        ],
    )
    return result


def _decide(
    con: duckdb.DuckDBPyConnection,
    plan: IVMPlan,
    pinned: dict[str, int],
    ids: dict[str, int | None],
    previous: dict[str, cursors.Cursor],
    full_refresh: bool,
) -> tuple[str, str, frozenset[str]]:
    nothing: frozenset[str] = frozenset()
    if not previous or ids[plan.target.key] is None:
        return "initial", "first run", nothing
    if full_refresh:
        return "rebuild", "full refresh requested", nothing
    if set(previous) != {s.key for s in plan.sources} or any(
        c.sql_hash != plan.sql_hash for c in previous.values()
    ):
        return "rebuild", "model SQL changed", nothing
    changed: set[str] = set()
    for catalog in plan.catalogs:
        sources = [s for s in plan.sources if s.catalog == catalog]
        old = previous[sources[0].key].snapshot_id
        if old == pinned[catalog]:
            continue
        for source in sources:
            if ids[source.key] != previous[source.key].table_id:
                return "rebuild", f"source {source.key} was dropped or recreated", nothing
        if not snapshot_exists(con, catalog, old):
            return "rebuild", f"snapshot {old} of {catalog} expired behind the cursor", nothing
        by_id = {tid: s for s in sources if (tid := ids[s.key]) is not None}
        status = feed_status(con, catalog, old, pinned[catalog], set(by_id))
        for tid, what in status.broken.items():
            return "rebuild", f"source {by_id[tid].key} {what}", nothing
        changed |= {by_id[tid].key for tid in status.changed}
    if not changed:
        return "unchanged", "no source changed", nothing
    return (
        "incremental",
        f"{len(changed)} of {len(plan.sources)} sources changed",
        frozenset(changed),
    )


def _maintain_or_rebuild(
    con: duckdb.DuckDBPyConnection,
    plan: IVMPlan,
    snapshots: dict[str, tuple[int, int]],
    ids: dict[str, int | None],
    changed: frozenset[str],
    reason: str,
    rebuild_above: float,
) -> tuple[str, str]:
    """Rebuild when maintaining this window would cost more than rebuilding (``decide``)."""
    found = decide.estimate(con, plan, snapshots, changed, ids)
    if found.rebuild_is_cheaper(rebuild_above):
        return "rebuild", (
            f"cheaper than maintenance: {found.describe()} (rebuild above {rebuild_above:.0%})"
        )
    return "incremental", f"{reason}; {found.describe()}"


def _maintain(con, plan: IVMPlan, snapshots, changed, result: RunResult) -> None:
    maintenance = plan.maintenance(snapshots, changed)
    if maintenance is None:
        return
    with feed_safe_optimizers(con):  # only feed reads need them off; rebuilds keep them
        for statement in maintenance.build:
            con.execute(statement)
    row = con.execute(
        "SELECT coalesce(sum(_ivm_m) FILTER (WHERE _ivm_m > 0), 0), "
        f"coalesce(-sum(_ivm_m) FILTER (WHERE _ivm_m < 0), 0) FROM {plan.delta_table}"
    ).fetchone()
    assert row is not None
    result.rows_inserted, result.rows_deleted = int(row[0]), int(row[1])
    for statement in maintenance.apply if (result.rows_inserted or result.rows_deleted) else []:
        apply_statement(con, statement)
    for statement in [*maintenance.always, *maintenance.cleanup]:
        apply_statement(con, statement)
    result.statements = maintenance.all()


def apply_statement(con: duckdb.DuckDBPyConnection, statement: str) -> None:
    """Execute one statement that writes the model (a seam for crash tests)."""
    con.execute(statement)


def _drop_view_in_the_way(con: duckdb.DuckDBPyConnection, target: TableRef) -> None:
    """A model switched from ``view`` to ``incremental_ivm`` replaces its view."""
    row = con.execute(
        "SELECT count(*) FROM duckdb_views() "
        "WHERE database_name = ? AND schema_name = ? AND view_name = ?",
        [target.catalog, target.schema, target.name],
    ).fetchone()
    if row and row[0]:
        con.execute(f"DROP VIEW {target.sql()}")


def _rebuild(con, plan: IVMPlan, snapshots, result: RunResult, *, refill: bool) -> None:
    if not refill:
        _drop_view_in_the_way(con, plan.target)
    result.statements = plan.build_sql(snapshots, refill=refill)
    for statement in result.statements:
        con.execute(statement)
    row = con.execute(f"SELECT count(*) FROM {plan.target.sql()}").fetchone()
    result.rows_inserted = int(row[0]) if row else 0
