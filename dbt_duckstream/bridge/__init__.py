"""The dbt bridge: the functions dbt's macros call (JSON in, JSON out), the dbt-duckdb plugin
that registers them, and dbt's CLI run as a subprocess."""

from .functions import FUNCTIONS, register

__all__ = ["FUNCTIONS", "register"]
