"""The dbt-duckdb plugin: ``plugins: [{module: dbt_duckstream.plugin}]`` in a profile.

dbt-duckdb calls ``configure_connection`` before it attaches the profile's databases, so
DuckLake is loaded from its wheel first and a ``ducklake:`` attachment never downloads anything.
So are the extensions the attachments need: ``sqlite_scanner`` or ``postgres_scanner`` for a
``ducklake:sqlite:`` or ``ducklake:postgres:`` catalog, and ``httpfs`` for a data path in S3.
A ``ducklake:sqlite:`` attachment without ``meta_journal_mode`` in its options gets ``WAL``
(``lake.catalog_defaults`` says why).

DuckDB cannot create an S3 secret before ``httpfs`` is loaded, and dbt-duckdb creates the
profile's ``secrets`` before any plugin runs: give them to the plugin instead,
``plugins: [{module: dbt_duckstream.plugin, config: {secrets: [{type: s3, ...}]}}]`` (the same
fields as dbt-duckdb's ``secrets``), and it creates them once ``httpfs`` is loaded.
"""

from __future__ import annotations

from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin
from dbt.adapters.duckdb.secrets import Secret
from duckdb import DuckDBPyConnection

from ..runtime.lake import CATALOG_EXTENSIONS, catalog_defaults, load_ducklake, load_extension
from .functions import register

#: data paths that DuckDB reads through httpfs
REMOTE_SCHEMES = ("s3://", "s3a://", "s3n://", "gcs://", "gs://", "r2://", "http://", "https://")


class Plugin(BasePlugin):
    def initialize(self, plugin_config: dict[str, Any]) -> None:
        secrets = plugin_config.get("secrets") or []
        self.secrets = [
            Secret.create(
                secret_type=s["type"], name=s.get("name") or f"duckstream_secret_{i}", **_fields(s)
            )
            for i, s in enumerate(secrets)
        ]

    def configure_connection(self, conn: DuckDBPyConnection) -> None:
        self._complete_attachments()
        load_ducklake(conn)
        for extension in sorted(self._extensions()):
            load_extension(conn, extension)
        for secret in self.secrets:
            conn.execute(secret.to_sql())
        register(conn)

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


def _fields(secret: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in secret.items() if k not in ("type", "name")}
