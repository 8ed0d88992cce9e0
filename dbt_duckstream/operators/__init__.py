"""One module per relational operator, each with its differentiation rule."""

from .aggregate import Aggregate
from .base import MULT, Operator, RenderContext, Side, TableRef
from .filter import Filter
from .join import Join
from .project import Project
from .scan import Scan

__all__ = [
    "MULT",
    "Aggregate",
    "Filter",
    "Join",
    "Operator",
    "Project",
    "RenderContext",
    "Scan",
    "Side",
    "TableRef",
]
