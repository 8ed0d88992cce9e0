"""One module per relational operator, each with its differentiation rule."""

from .aggregate import Aggregate
from .base import Operator
from .constant import Constant
from .expand import Expand
from .filter import Filter
from .join import Join, JoinInput
from .project import Project
from .recursive import RecursiveCTE
from .scan import Scan
from .setops import SET_OPERATIONS, CountedSetOperation, UnionAll
from .topn import TopN
from .window import Window

__all__ = [
    "SET_OPERATIONS",
    "Aggregate",
    "Constant",
    "CountedSetOperation",
    "Expand",
    "Filter",
    "Join",
    "JoinInput",
    "Operator",
    "Project",
    "RecursiveCTE",
    "Scan",
    "TopN",
    "UnionAll",
    "Window",
]
