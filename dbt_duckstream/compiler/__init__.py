"""The compiler: model SQL to an operator tree, and the tree to the SQL of builds and
maintenance runs. Pure: it writes SQL text and never touches a database."""

from .apply import Maintenance
from .parse import parse_sql, parse_table, qualify_sql, source_tables
from .pivots import pivots_rewritten
from .plan import PLAN_FORMAT, STATE_PREFIX, IVMPlan, compile_ivm
from .tree import Schema
from .views import inline_views

__all__ = [
    "PLAN_FORMAT",
    "STATE_PREFIX",
    "IVMPlan",
    "Maintenance",
    "Schema",
    "compile_ivm",
    "inline_views",
    "parse_sql",
    "parse_table",
    "pivots_rewritten",
    "qualify_sql",
    "source_tables",
]
