"""The dbt-duckdb plugin: ``plugins: [{module: dbt_duckstream.plugin}]`` in a profile.

dbt-duckdb calls ``configure_connection`` before it attaches the profile's databases, so
DuckLake is loaded from its wheel first and a ``ducklake:`` attachment never downloads anything.
"""

from __future__ import annotations

from dbt.adapters.duckdb.plugins import BasePlugin
from duckdb import DuckDBPyConnection

from ..runtime.lake import load_ducklake
from .functions import register


class Plugin(BasePlugin):
    def configure_connection(self, conn: DuckDBPyConnection) -> None:
        load_ducklake(conn)
        register(conn)
