"""Set operations, one module per rule; ``SET_OPERATIONS`` maps each as SQL names it to its
operator (a new set operation is a module and a line here).

Rows compare as set operations compare them: by every column, NULLs equal to NULLs. Columns
are matched by position and named after the left input's.
"""

from __future__ import annotations

from .counted import CountedSetOperation
from .except_ import Except, ExceptAll
from .intersect import Intersect, IntersectAll
from .union import Union
from .union_all import UnionAll

#: each set operation as SQL names it, and its operator: ``operator(left, right)``
SET_OPERATIONS: dict[str, type[UnionAll] | type[CountedSetOperation]] = {
    "UNION ALL": UnionAll,
    "UNION": Union,
    "INTERSECT ALL": IntersectAll,
    "INTERSECT": Intersect,
    "EXCEPT ALL": ExceptAll,
    "EXCEPT": Except,
}

__all__ = [
    "SET_OPERATIONS",
    "CountedSetOperation",
    "Except",
    "ExceptAll",
    "Intersect",
    "IntersectAll",
    "Union",
    "UnionAll",
]
