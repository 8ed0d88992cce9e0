"""dbt-duckstream: incremental view maintenance for dbt on DuckDB and DuckLake."""

from .compiler import IVMPlan, compile_ivm
from .errors import ConfigurationError, DuckstreamError, UnsupportedSQLError
from .runtime import RunResult, load_ducklake, prepare, refresh, run_model

__all__ = [
    "ConfigurationError",
    "DuckstreamError",
    "IVMPlan",
    "RunResult",
    "UnsupportedSQLError",
    "compile_ivm",
    "load_ducklake",
    "prepare",
    "refresh",
    "run_model",
]
