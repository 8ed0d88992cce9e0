"""Compiled plans kept across processes: a model's SQL is bound and compiled once per version.

An orchestrator starts ``dbt run`` in a new process every few minutes, and each maintained
model used to bind its SQL again: a ``DESCRIBE`` per source and one of the query (a DuckLake
transaction each, 2-3 ms apiece) and the compile itself (15-130 ms in Python, more for the
first model of a process). The plan depends only on the model's SQL, where it lands, the
sources' schemas and this package's code, so it is kept in a file, and a later process uses
it when its lake's metadata proves that none of that changed:

- the key holds the SQL's fingerprint (text, model, default schema, plan format), the lake's
  identity (``lake.lake_identity``), and the versions of this package's code, DuckDB and
  sqlglot;
- the entry holds the snapshot at which the sources' schemas were known (``described``) and
  their table ids; it serves while every snapshot since is still there and none altered,
  dropped or recreated a source, created a view that could shadow a name the SQL gives
  without its catalog, or changed a view otherwise, a macro or a schema (one metadata
  query). Each use moves ``described`` up to the snapshot it checked, so the next check
  reads only the snapshots since.
- dbt builds a ``view`` model (its default materialization) by creating it under three
  names and dropping one, on every run, so most projects change views on every run. A view
  that shadowed a name the plan binds would have been inlined (``inline_views``): dropping
  a view, or creating one under a name the plan does not give a table without its catalog
  (``"lake"."raw"."orders"``, as dbt's ``ref`` and ``source`` give them, cannot be
  shadowed), changes nothing the plan binds to. A plan that inlined views (a mart over
  staging views, as dbt's own example project is) keeps their definitions, and serves
  after views were created or dropped only while each definition is still the one it
  inlined (one more query). Before, a project with views in the lake compiled every
  maintained model on every run (70-90 ms each, 85-220 ms for jaffle_shop's marts).

Plans of models that read sources or views in another catalog are not kept (changes there
leave no snapshot in the model's lake). ``--full-refresh`` compiles afresh.
The directory is ``DUCKSTREAM_PLAN_CACHE`` (``off`` turns it off), by default
``$XDG_CACHE_HOME/dbt-duckstream/plans`` (``~/.cache/...``); entries are pickles, read only
from there, so it must be writable by the user running dbt alone.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import tempfile
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import duckdb
import sqlglot
from sqlglot import exp

from ..compiler import IVMPlan
from ..sql import BUILTIN, TableRef, bare_statement, inlined
from .history import History
from .lake import lake_identity, latest_snapshot, metadata_catalog, table_ids
from .unchanged import fingerprint

#: the environment variable naming the directory (``off``: no cache)
DIRECTORY = "DUCKSTREAM_PLAN_CACHE"
#: snapshot change kinds that may change what a model's SQL binds to, whatever they touch
_CATALOG_KINDS = re.compile(r"view|macro|schema")
#: kinds that change a source's columns, or end it
_SOURCE_KINDS = frozenset({"altered_table", "dropped_table"})
_CHANGE = re.compile(r"(?:^|,)([a-z_]+):([^,]*)")
#: changes that create or drop a view (dbt's ``view`` materialization does both every run)
_VIEWS_BUILT = re.compile(r"(?:^|,)(?:created|dropped)_view:")
#: the name of a view created (``"schema"."name"``, as DuckLake records it)
_CREATED_VIEW = re.compile(r'^"(?:[^"]|"")*"\."((?:[^"]|"")*)"$')


@dataclass(frozen=True)
class Entry:
    plan: IVMPlan
    #: the snapshot of the model's catalog at which the sources' schemas were as the plan has
    described: int
    #: the sources' table ids
    sources: tuple[int, ...]
    #: the names (lower case) the SQL, or a view it inlined, gives a table without its
    #: catalog, which a view created later could shadow
    shadowable: frozenset[str] = frozenset()
    #: the views the plan inlined, each with its definition (``_view_texts``), by key
    views: tuple[tuple[str, str], ...] = ()


def directory() -> Path | None:
    chosen = os.environ.get(DIRECTORY)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off", "0", "false") else Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dbt-duckstream" / "plans"


def cached_plan(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    target: TableRef,
    history: History | None = None,
    stored_inputs: tuple[str, ...] = (),
) -> IVMPlan | None:
    """The model's plan as a process compiled it before, when it still holds; else None.
    ``history``: the lake's snapshots as the run read them, asked first; ``stored_inputs``:
    as the model configures them (``compile_ivm``)."""
    path = _path(con, sql, target, history, stored_inputs)
    if path is None or not path.exists():
        return None
    try:
        entry = pickle.loads(path.read_bytes())
    except Exception:  # written by other code, or cut short: compile again
        return None
    if not isinstance(entry, Entry):
        return None
    if history is not None and history.covers(entry.described, history.now):
        since = _changes_in(history, entry)
    else:
        since = _changes_until(con, target.catalog, entry)
    if since is None:
        return None
    now, changes = since
    if any(_rebinds(made, entry) for made in changes):
        return None
    views_built = any(_VIEWS_BUILT.search(made or "") for made in changes)
    if (
        entry.views
        and views_built
        and _view_definitions(con, target.catalog, entry) != dict(entry.views)
    ):
        return None
    if now != entry.described:
        _write(path, replace(entry, described=now))
    return replace(entry.plan, described_at=now)


def keep(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    target: TableRef,
    plan: IVMPlan,
    history: History | None = None,
) -> None:
    """Keep a freshly compiled plan for later processes, when nothing committed since it
    read its sources' schemas (then the sources' ids now are those it read)."""
    views = [_view_ref(key) for key in plan.views]
    if (
        plan.described_at is None
        or not plan.sources
        or any(s.catalog != target.catalog for s in plan.sources)
        or any(v is None or v.catalog.lower() != target.catalog.lower() for v in views)
        or latest_snapshot(con, target.catalog) != plan.described_at
    ):
        return
    path = _path(con, sql, target, history, plan.stored_inputs)
    ids = table_ids(con, list(plan.sources))
    definitions = _view_texts(con, target.catalog, [v for v in views if v is not None])
    if (
        path is not None
        and all(tid is not None for tid in ids.values())
        and len(definitions) == len(views)
    ):
        sources = tuple(sorted(int(t) for t in ids.values() if t is not None))
        try:
            shadowable = shadowable_names(sql).union(
                *map(_shadowable_in_view, definitions.values())
            )
        except sqlglot.errors.SqlglotError:  # names not told: nothing proves the plan later
            return
        kept = Entry(
            plan, plan.described_at, sources, shadowable, tuple(sorted(definitions.items()))
        )
        _write(path, kept)


def _changes_until(
    con: duckdb.DuckDBPyConnection, catalog: str, entry: Entry
) -> tuple[int, list[str | None]] | None:
    """The catalog's latest snapshot and the ``changes_made`` of every snapshot since
    ``entry.described``; None when one of those snapshots expired."""
    meta = metadata_catalog(catalog)
    row = con.execute(
        inlined(
            f"SELECT (SELECT {BUILTIN}.max(snapshot_id) FROM {meta}.ducklake_snapshot), "
            f"(SELECT count(*) FROM {meta}.ducklake_snapshot WHERE snapshot_id > ?), "
            f"(SELECT list(changes_made) FROM {meta}.ducklake_snapshot_changes "
            "WHERE snapshot_id > ?)",
            [entry.described, entry.described],
        )
    ).fetchone()
    if row is None or row[0] is None:
        return None
    now, present, changes = int(row[0]), int(row[1]), row[2] or []
    if now < entry.described or present != now - entry.described:
        return None
    return now, list(changes)


def _changes_in(history: History, entry: Entry) -> tuple[int, list[str | None]] | None:
    """``_changes_until``, answered from the run's history (which covers the snapshots)."""
    if not history.present(entry.described, history.now):
        return None
    rows = history.between(entry.described, history.now)
    return history.now, [row.changes_made for row in rows]


def _rebinds(made: str | None, entry: Entry) -> bool:
    """Whether a snapshot's ``changes_made`` may change what the entry's plan binds to."""
    sources = {str(t) for t in entry.sources}
    return any(
        _change_rebinds(kind, value, sources, entry.shadowable)
        for kind, value in _CHANGE.findall(made or "")
    )


def shadowable_names(sql: str) -> frozenset[str]:
    """The names (lower case) that ``sql`` (a query, or a view's ``CREATE VIEW``) gives a
    table without its catalog.

    >>> sorted(shadowable_names('SELECT * FROM "lake"."raw"."orders" JOIN raw.Customers USING (k)'))
    ['customers']
    >>> sorted(shadowable_names("CREATE VIEW v AS SELECT k FROM t"))
    ['t']
    """
    tree = sqlglot.parse_one(bare_statement(sql), read="duckdb")
    if isinstance(tree, exp.Create) and tree.expression is not None:
        tree = tree.expression  # a view's own name is not read
    return frozenset(t.name.lower() for t in tree.find_all(exp.Table) if not t.catalog)


def _view_ref(key: str) -> TableRef | None:
    """The view a plan's ``views`` names by ``key`` (None when its parts cannot be told)."""
    parts = key.split(".")
    return TableRef(*parts) if len(parts) == 3 else None


def _view_texts(
    con: duckdb.DuckDBPyConnection, catalog: str, views: list[TableRef]
) -> dict[str, str]:
    """The live definitions of those of ``views`` (all in ``catalog``) that exist, by key, as
    DuckLake's metadata holds them: the query's text, its dialect and column names (one
    query of the metadata catalog: ``duckdb_views()`` took 19 ms inside a ``dbt run``)."""
    wanted: dict[tuple[str, str], list[str]] = {}
    for view in views:
        wanted.setdefault((view.schema.lower(), view.name.lower()), []).append(view.key)
    if not wanted:
        return {}
    meta = metadata_catalog(catalog)
    rows = con.execute(
        f"SELECT lower(s.schema_name), lower(v.view_name), "
        f"{BUILTIN}.concat_ws(chr(0), v.dialect, v.column_aliases, v.sql) "
        f"FROM {meta}.ducklake_view AS v JOIN {meta}.ducklake_schema AS s USING (schema_id) "
        "WHERE v.end_snapshot IS NULL AND s.end_snapshot IS NULL"
    ).fetchall()
    return {key: str(text) for schema, name, text in rows for key in wanted.get((schema, name), [])}


def _view_definitions(con: duckdb.DuckDBPyConnection, catalog: str, entry: Entry) -> dict[str, str]:
    """The live definitions of the views the entry's plan inlined (``_view_texts``)."""
    refs = [_view_ref(key) for key, _ in entry.views]
    return _view_texts(con, catalog, [ref for ref in refs if ref is not None])


def _shadowable_in_view(text: str) -> frozenset[str]:
    """``shadowable_names`` of a view's query, as ``_view_texts`` gives it."""
    query = text.rsplit(chr(0), 1)[-1].replace("{DUCKLAKE_CATALOG}", "_ducklake_catalog")
    return shadowable_names(query)


def _change_rebinds(
    kind: str, value: str, sources: set[str], names: frozenset[str] | set[str]
) -> bool:
    """Whether one change (``kind:value`` of ``changes_made``) may change what a plan binds
    to: the tables of ids ``sources``, the SQL naming some without their catalog by
    ``names`` (lower case, ``shadowable_names``). The views a plan inlined are checked apart,
    by their definitions (``cached_plan``).

    >>> _change_rebinds("created_view", '"stg"."stg_orders"', {"3"}, {"orders"})
    False
    >>> _change_rebinds("created_view", '"main"."ORDERS"', {"3"}, {"orders"})
    True
    >>> _change_rebinds("dropped_view", "12", {"3"}, {"orders"})
    False
    >>> _change_rebinds("dropped_table", "3", {"3"}, {"orders"})
    True
    """
    if kind == "dropped_view":
        return False
    if kind == "created_view":
        named = _CREATED_VIEW.match(value)
        return named is None or named.group(1).replace('""', '"').lower() in names
    return bool(_CATALOG_KINDS.search(kind)) or (kind in _SOURCE_KINDS and value in sources)


def _path(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    target: TableRef,
    history: History | None = None,
    stored_inputs: tuple[str, ...] = (),
) -> Path | None:
    """The entry's file; None without a cache, or outside a DuckLake (``prepare`` says why)."""
    where = directory()
    if where is None:
        return None
    try:
        lake = history.identity if history is not None else lake_identity(con, target.catalog)
    except duckdb.Error:
        return None
    statement = bare_statement(sql)
    key = "\n".join(
        [
            code_version(),
            fingerprint(statement, target, target.catalog, target.schema, stored_inputs),
            lake,
        ]
    )
    return where / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.plan"


@cache
def code_version() -> str:
    """This package's code as installed (its files' sizes and times), DuckDB's and sqlglot's
    versions: a plan compiled by other code is never used. Reading the files' times costs
    the first model of a process 8-22 ms; the reading-ahead thread asks first (``warmup``)."""
    package = Path(__file__).resolve().parent.parent
    stats = sorted(
        (str(p.relative_to(package)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in package.rglob("*.py")
    )
    text = repr((stats, duckdb.__version__, sqlglot.__version__))
    return hashlib.sha256(text.encode()).hexdigest()


def _write(path: Path, entry: Entry) -> None:
    """Write the entry whole or not at all (processes may read it meanwhile)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as f:
            f.write(pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(f.name, path)
    except OSError:  # a read-only or full disk: the next process compiles again
        return
