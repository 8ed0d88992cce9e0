"""The dbt-duckdb plugin: ``plugins: [{module: dbt_duckstream.plugin}]`` in a profile.

dbt-duckdb calls ``configure_connection`` before it attaches the profile's databases, so
DuckLake is loaded from its wheel first and a ``ducklake:`` attachment never downloads anything.
So are the extensions the attachments need: ``sqlite_scanner`` or ``postgres_scanner`` for a
``ducklake:sqlite:`` or ``ducklake:postgres:`` catalog, and ``httpfs`` for a data path in S3.
A ``ducklake:sqlite:`` attachment without ``meta_journal_mode`` in its options gets ``WAL``
(``lake.catalog_defaults`` says why).

dbt's own statements (tests, introspection, other materializations) run in the process's turns
on the lake (``runtime.turns``): reads together, anything else alone, so that no dbt thread
reads while a model commits, which DuckLake 0.4 does not survive.

DuckDB cannot create an S3 secret before ``httpfs`` is loaded, and dbt-duckdb creates the
profile's ``secrets`` before any plugin runs: give them to the plugin instead,
``plugins: [{module: dbt_duckstream.plugin, config: {secrets: [{type: s3, ...}]}}]`` (the same
fields as dbt-duckdb's ``secrets``), and it creates them once ``httpfs`` is loaded.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable
from typing import Any

import duckdb
from dbt.adapters.duckdb.environments.local import DuckDBCursorWrapper
from dbt.adapters.duckdb.plugins import BasePlugin
from dbt.adapters.duckdb.secrets import Secret
from dbt.adapters.factory import FACTORY
from duckdb import DuckDBPyConnection

from ..runtime.breakdown import enable_profiling
from ..runtime.lake import (
    CATALOG_EXTENSIONS,
    STATISTICS_OPTIMIZERS,
    catalog_defaults,
    disable_for_good,
    load_ducklake,
    load_extension,
    share_instance,
)
from ..runtime.turns import LAKE, PLANNING
from ..runtime.warmup import on_open
from .functions import invocation_models, invocation_schemas, register

#: data paths that DuckDB reads through httpfs
REMOTE_SCHEMES = ("s3://", "s3a://", "s3n://", "gcs://", "gs://", "r2://", "http://", "https://")


#: statements that only read (or only open or end a transaction that reads)
READING = frozenset(
    {"SELECT", "WITH", "FROM", "DESCRIBE", "SHOW", "SUMMARIZE", "PRAGMA", "EXPLAIN", "BEGIN"}
)
#: what a statement's text opens with before its first keyword: blanks and comments (dbt puts
#: its query comment first)
_LEADING = re.compile(r"(\s+|--[^\n]*(\n|$)|/\*.*?\*/)*", re.DOTALL)
#: calls of this package's bridge functions, which take their turns themselves
BRIDGE_CALL = "system.main.duckstream_"


def first_keyword(sql: str) -> str:
    r"""The statement's first keyword, past dbt's query comment and any other.

    >>> first_keyword('/* {"app": "dbt"} */ -- a test\n  select 1')
    'SELECT'
    """
    leading = _LEADING.match(sql)
    rest = sql[leading.end() :] if leading else sql
    return rest.split(None, 1)[0].upper().rstrip(";") if rest.strip() else ""


def take_turns(execute: Callable[..., Any]) -> Callable[..., Any]:
    """dbt-duckdb's ``execute``, in the process's turns on the lake."""

    def in_turn(self: Any, sql: str, bindings: Any = None) -> Any:
        if BRIDGE_CALL in sql:
            with PLANNING.planning() as token:
                return execute(self, with_planning_token(sql, token), bindings)
        with LAKE.reading() if _reads(self, sql) else LAKE.writing():
            return execute(self, sql, bindings)

    _in_turns.add(in_turn)
    return in_turn


#: statements that end a transaction
ENDING = frozenset({"COMMIT", "ROLLBACK", "END", "ABORT"})
#: where a cursor wrapper keeps whether its open transaction wrote (False: only read so far)
_WROTE = "_duckstream_wrote"
#: ``create schema if not exists``'s schema, as one or two identifiers
_CREATE_SCHEMA = re.compile(
    r'create\s+schema\s+if\s+not\s+exists\s+((?:"(?:[^"]|"")*"|[^\s."]+)'
    r'(?:\s*\.\s*(?:"(?:[^"]|"")*"|[^\s."]+))?)\s*;?\s*$',
    re.IGNORECASE | re.DOTALL,
)
_IDENTIFIER = re.compile(r'"((?:[^"]|"")*)"|([^\s."]+)')
#: a call of one of DuckLake's functions
_LAKE_FUNCTION = re.compile(r"\bducklake_\w+\s*\(", re.IGNORECASE)


def _reads(cursor: Any, sql: str) -> bool:
    """Whether a statement dbt runs on ``cursor`` (its cursor wrapper) only reads the lake, so
    that it takes its turn beside other readers: a read that calls none of DuckLake's
    functions; the end of a transaction that only read; ``create schema if not exists`` of a
    schema that exists (DuckLake commits nothing for it, and dbt runs it for every schema of
    an invocation, while what the invocation's runs read first is read ahead:
    ``runtime.warmup``). Anything else writes, and goes alone."""
    keyword = first_keyword(sql)
    state: dict[str, Any] = getattr(cursor, "__dict__", {})  # {}: a cursor keeping nothing
    if keyword == "BEGIN":
        state[_WROTE] = False
    if keyword in ENDING:
        wrote = state.pop(_WROTE, None)
        return wrote is False
    # a query of DuckLake's functions may change the lake, though it opens with SELECT
    # (``SELECT * FROM ducklake_expire_snapshots(...)``): it goes alone, and so does its
    # transaction's end
    reads = (keyword in READING and not _LAKE_FUNCTION.search(sql)) or (
        keyword == "CREATE" and _schema_exists(cursor, sql)
    )
    if not reads and state.get(_WROTE) is False:
        state[_WROTE] = True
    return reads


def _schema_exists(cursor: Any, sql: str) -> bool:
    """Whether ``sql`` is ``create schema if not exists`` of a schema that exists."""
    leading = _LEADING.match(sql)
    found = _CREATE_SCHEMA.match(sql[leading.end() :] if leading else sql)
    if found is None:
        return False
    parts = [
        quoted.replace('""', '"') if quoted else bare
        for quoted, bare in _IDENTIFIER.findall(found.group(1))
    ]
    database, schema = parts if len(parts) == 2 else (None, parts[0])
    raw = getattr(cursor, "_cursor", cursor)  # dbt-duckdb's wrapper holds DuckDB's cursor
    try:
        with LAKE.reading():
            row = raw.execute(
                "SELECT count(*) FROM system.main.duckdb_schemas() "
                "WHERE lower(schema_name) = lower(?) "
                "AND lower(database_name) = lower(coalesce(?, system.main.current_database()))",
                [schema, database],
            ).fetchone()
    except duckdb.Error:  # not known: the statement goes alone, as any other write
        return False
    return bool(row and row[0])


def with_planning_token(sql: str, token: str) -> str:
    r"""A bridge call whose JSON request carries ``token``, which the function gives back when
    it starts (``turns.Planning``).

    >>> print(with_planning_token("select system.main.duckstream_run('{\"a\": 1}')", "t"))
    select system.main.duckstream_run('{"planning": "t", "a": 1}')
    >>> print(with_planning_token("select system.main.duckstream_status('{}')", "t"))
    select system.main.duckstream_status('{"planning": "t"}')
    """
    return _REQUEST.sub(
        lambda m: f'{m.group(1)}{{"planning": "{token}"' + ("}" if m.group(2) else ", "),
        sql,
        count=1,
    )


#: where a bridge call's JSON request opens, and whether it is empty
_REQUEST = re.compile(r"(system\.main\.duckstream_\w+\(')\{(\})?")

#: the ``execute`` methods that take turns already (a profile may load the plugin twice)
_in_turns: set[Callable[..., Any]] = set()


class Plugin(BasePlugin):
    def initialize(self, plugin_config: dict[str, Any]) -> None:
        #: the connection dbt opened last, until its first cursor (``configure_cursor``)
        self._opened: DuckDBPyConnection | None = None
        if DuckDBCursorWrapper.execute not in _in_turns:
            patched = take_turns(DuckDBCursorWrapper.execute)
            DuckDBCursorWrapper.execute = patched  # ty: ignore[invalid-assignment]
        secrets = plugin_config.get("secrets") or []
        self.secrets = [
            Secret.create(
                secret_type=s["type"], name=s.get("name") or f"duckstream_secret_{i}", **_fields(s)
            )
            for i, s in enumerate(secrets)
        ]

    def configure_connection(self, conn: DuckDBPyConnection) -> None:
        settle_garbage_collector()
        self._complete_attachments()
        load_ducklake(conn)
        # the statistics optimizers off for good: every feed read needs them off, and so
        # does any query of a lake whose bounds a rewrite got wrong (dbt's rebuilds and tests)
        disable_for_good(conn, STATISTICS_OPTIMIZERS)
        if dbt_threads() != 1:
            # before dbt's threads start: from now on a change of the instance's optimizers
            # waits until no other thread plans a query (``lake.share_instance``); with one
            # thread nothing else plans
            share_instance(conn)
        enable_profiling(conn)
        for extension in sorted(self._extensions()):
            load_extension(conn, extension)
        for secret in self.secrets:
            conn.execute(secret.to_sql())
        register(conn)
        self._opened = conn

    def configure_cursor(self, cursor: DuckDBPyConnection) -> None:
        """dbt's first cursor comes once the profile's databases are attached: then what the
        invocation's runs read first is read ahead, on a cursor of the connection itself
        (which outlives the invocation's cursors, and closes its own with it)."""
        opened, self._opened = self._opened, None
        if opened is not None and dbt_command() in RUNNING_MODELS:
            on_open(opened.cursor, invocation_models(), invocation_schemas())

    def _complete_attachments(self) -> None:
        """Add the options a catalog needs that the profile leaves out (dbt-duckdb attaches
        the profile's databases from these same objects right after this plugin runs)."""
        for attachment in (self.creds.attach if self.creds else None) or []:
            if not attachment.path.startswith("ducklake:"):
                continue
            given = {key.lower() for key in attachment.options or {}}
            defaults = catalog_defaults(attachment.path.removeprefix("ducklake:"))
            missing = {key: value for key, value in defaults.items() if key not in given}
            if missing:
                attachment.options = {**(attachment.options or {}), **missing}

    def _extensions(self) -> set[str]:
        """The extensions that the profile's attachments and secrets need."""
        needed: set[str] = {"httpfs"} if self.secrets else set()
        for attachment in (self.creds.attach if self.creds else None) or []:
            path = attachment.path.removeprefix("ducklake:")
            needed |= {e for prefix, e in CATALOG_EXTENSIONS.items() if path.startswith(prefix)}
            data_path = str((attachment.options or {}).get("data_path", ""))
            if data_path.lower().startswith(REMOTE_SCHEMES):
                needed.add("httpfs")
        return needed


def settle_garbage_collector() -> None:
    """Python's full collections traverse every live object, and once dbt has parsed the
    project its manifest and modules are most of them: a full collection in the middle of a
    model's run took 113 ms (the TPC-H benchmark's project, nine models). dbt opens its
    connection after parsing, once per invocation, so the objects alive then are moved out of
    the collector's sight (``gc.freeze``), and later collections traverse only what the runs
    allocate. Those frozen before go back to the collector first: a process that runs dbt
    several times frees its earlier invocations' manifests."""
    gc.unfreeze()
    gc.freeze()


#: the dbt commands that run models (others, such as ``test`` or ``docs``, read nothing ahead)
RUNNING_MODELS = frozenset({"run", "build", "retry"})


def dbt_command() -> str | None:
    """The running dbt command (``run``, ``test``, ...); None outside dbt."""
    try:
        from dbt.flags import get_flags
    except ImportError:
        return None
    return getattr(get_flags(), "WHICH", None)


def dbt_threads() -> int | None:
    """The threads of this dbt invocation (the profile's, or ``--threads``); None when no
    dbt adapter is registered (a process that is not dbt's)."""
    try:
        adapter: Any = FACTORY.lookup_adapter("duckdb")
        return int(adapter.config.threads)
    except (KeyError, AttributeError, TypeError, ValueError):
        return None


def _fields(secret: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in secret.items() if k not in ("type", "name")}
