"""One module per relational operator, each with its differentiation rule."""

from .aggregate import Aggregate
from .anti_join import AntiJoin
from .base import Operator
from .filter import Filter
from .join import Join, JoinInput
from .mark_join import MarkJoin
from .outer_join import OuterJoin
from .project import Project
from .scalar_subquery import ScalarSubquery
from .scan import Scan
from .semi_join import SemiJoin

__all__ = [
    "Aggregate",
    "AntiJoin",
    "Filter",
    "Join",
    "JoinInput",
    "MarkJoin",
    "Operator",
    "OuterJoin",
    "Project",
    "ScalarSubquery",
    "Scan",
    "SemiJoin",
]
