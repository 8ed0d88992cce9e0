"""The dbt-duckdb plugin, under the name profiles give it:
``plugins: [{module: dbt_duckstream.plugin}]`` (see ``bridge.plugin``)."""

from .bridge.plugin import Plugin

__all__ = ["Plugin"]
