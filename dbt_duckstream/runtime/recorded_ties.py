"""The ties of a model as it was last built, for checks that compare its table with a
recomputation of its SQL (``ivm_consistent``, a reference built by ``table``)."""

from __future__ import annotations

import duckdb

from ..compiler.ties import Ties
from ..errors import ConfigurationError, UnsupportedSQLError
from ..sql import TableRef
from . import runlog
from .run import prepare


def recorded_ties(con: duckdb.DuckDBPyConnection, target: TableRef) -> Ties | None:
    """The windows of the model's recorded SQL whose ties may order rows either way; None
    for a relation incremental_ivm never built (a view) and for a model rebuilt on every run
    (its SQL may not compile: it is compared exactly)."""
    try:
        recorded = runlog.registered(con, target)
    except ConfigurationError:
        return None
    if recorded.mode == "rebuild":
        return None
    try:
        plan = prepare(con, recorded.sql, target, catalog=recorded.catalog, db=recorded.schema)
    except UnsupportedSQLError:
        return None
    return plan.ties
