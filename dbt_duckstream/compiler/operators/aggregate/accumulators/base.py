"""What every accumulator provides: its state columns, how a batch of signed rows folds into
them, and the aggregate's value read back from them.

An aggregate call keeps its state in the aggregate's state table, one row per group, beside the
group's row count ``_ivm_count``. A maintenance run aggregates the input delta per group
(``fold``), combines it with the stored state (``merge``, where ``s`` is the stored row and
``d`` the folded one, either possibly missing), and asks for a recomputation of the group from
the input at the new snapshot where the delta alone cannot tell the new state (``rescan``).
An accumulator without a fold is recomputed for every touched group.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from sqlglot import exp

from .....sql import expr_sql, quote
from ....render import MULT

#: the state column counting each group's input rows; a group lives while it is positive
ROW_COUNT = "_ivm_count"


@dataclass(frozen=True)
class Accumulator(ABC):
    """The state of aggregate call number ``index``, whose argument is ``value``.

    ``value`` is None when every row counts (``COUNT(*)``); a ``FILTER (WHERE p)`` is folded
    into it as ``CASE WHEN p THEN value END``.
    """

    index: int
    value: exp.Expr | None
    #: the call as written, for accumulators that recompute it
    call: exp.Expr

    def column(self, part: str) -> str:
        return f"_ivm_a{self.index}_{part}"

    def value_sql(self) -> str:
        return "1" if self.value is None else f"({expr_sql(self.value)})"

    @property
    def folds(self) -> bool:
        """Whether a delta folds into the state (else every touched group is recomputed)."""
        return True

    @property
    @abstractmethod
    def columns(self) -> tuple[str, ...]:
        """State columns."""

    @abstractmethod
    def initial(self) -> list[str]:
        """Aggregate expressions computing the state columns from input rows (aliased)."""

    def fold(self) -> list[str]:
        """Aggregate expressions over delta rows (with ``_ivm_m``), aliased."""
        return []

    def merge(self, s: str, d: str) -> list[str]:
        """The new state columns from the stored row ``s`` and the folded delta ``d``."""
        return []

    def rescan(self, s: str, d: str) -> str | None:
        """A predicate: this group's state must be recomputed from the new input."""
        return None

    @abstractmethod
    def final(self) -> str:
        """The aggregate's value, from the state columns of one row."""

    def signed_count(self) -> str:
        """Rows of the delta whose value is not NULL, with their multiplicities."""
        return f"SUM(CASE WHEN {self.value_sql()} IS NOT NULL THEN {MULT} ELSE 0 END)"

    def named(self, sql: str, part: str) -> str:
        return f"{sql} AS {quote(self.column(part))}"

    def ref(self, relation: str | None, part: str) -> str:
        """A state column, of ``relation`` when given."""
        name = quote(self.column(part))
        return f"{relation}.{name}" if relation else name
