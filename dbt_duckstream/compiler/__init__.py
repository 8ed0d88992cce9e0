"""The compiler: model SQL to an operator tree, and the tree to the SQL of builds and
maintenance runs. Pure: it writes SQL text and never touches a database; what it needs of the
catalog a model lives in comes through ``Catalog``."""

from .apply import Maintenance
from .context import Catalog, MappingCatalog, Schema
from .parse import parse_table
from .pipeline import parse_sql, qualify_sql
from .plan import PLAN_FORMAT, STATE_PREFIX, IVMPlan, compile_ivm

__all__ = [
    "PLAN_FORMAT",
    "STATE_PREFIX",
    "Catalog",
    "IVMPlan",
    "Maintenance",
    "MappingCatalog",
    "Schema",
    "compile_ivm",
    "parse_sql",
    "parse_table",
    "qualify_sql",
]
