"""One module per relational operator, each with its differentiation rule."""

from .aggregate import Aggregate
from .base import Operator
from .filter import Filter
from .join import Join, JoinInput
from .project import Project
from .scan import Scan

__all__ = ["Aggregate", "Filter", "Join", "JoinInput", "Operator", "Project", "Scan"]
