"""One module per relational operator, each with its differentiation rule."""

from .aggregate import Aggregate
from .anti_join import AntiJoin
from .asof_join import AsofJoin
from .base import Operator
from .constant import Constant
from .expand import Expand
from .filter import Filter
from .join import Join, JoinInput
from .mark_join import MarkJoin
from .outer_join import OuterJoin
from .project import Project
from .recursive import RecursiveCTE
from .scalar_subquery import ScalarSubquery
from .scan import Scan
from .semi_join import SemiJoin
from .setops import SET_OPERATIONS, CountedSetOperation, UnionAll
from .stored_input import StoredInput
from .topn import TopN
from .window import Window

__all__ = [
    "SET_OPERATIONS",
    "Aggregate",
    "AntiJoin",
    "AsofJoin",
    "Constant",
    "CountedSetOperation",
    "Expand",
    "Filter",
    "Join",
    "JoinInput",
    "MarkJoin",
    "Operator",
    "OuterJoin",
    "Project",
    "RecursiveCTE",
    "ScalarSubquery",
    "Scan",
    "SemiJoin",
    "StoredInput",
    "TopN",
    "UnionAll",
    "Window",
]
