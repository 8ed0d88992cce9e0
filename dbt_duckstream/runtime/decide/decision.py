"""What a run will do, and why: the strategy and the window it applies."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .costs import Estimate

#: rebuild when the estimated maintenance work exceeds this share of a rebuild's
REBUILD_ABOVE = 1.0


class Strategy(StrEnum):
    INITIAL = "initial"
    INCREMENTAL = "incremental"
    REBUILD = "rebuild"
    UNCHANGED = "unchanged"
    EMPTY = "empty"  # dbt's --empty: the SQL checked, no rows read or written


@dataclass(frozen=True)
class Decision:
    """What a run will do, why, and over which window."""

    strategy: Strategy
    reason: str
    #: per catalog, the window applied: (cursor, pinned), or (pinned, pinned) for a build
    windows: dict[str, tuple[int, int]]
    #: the sources (keys) that changed in the window
    changed: frozenset[str] = frozenset()
    estimate: Estimate | None = None
    #: an unchanged run that still records new cursors (the old ones expired)
    advance: bool = False
    #: per changed source, the snapshots that changed it (see ``WindowChanges.spans``)
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: the changed sources whose files a rewrite, compaction or flush reorganized in the
    #: window (their scans take the delta per rowid)
    reorganized: frozenset[str] = frozenset()
    #: the changed sources that the window only inserted into (their deltas end no row)
    appended: frozenset[str] = frozenset()
    #: the sources and state tables (keys) of at least ``LARGE_TABLE_ROWS`` rows
    large_tables: frozenset[str] = frozenset()
    #: a rebuild chosen for cost that refills the model alone (``refills``)
    refill: bool = False

    @property
    def refills(self) -> bool:
        """A rebuild chosen for cost: the model's table exists and is refilled in place, from
        its sources alone; its state tables are dropped (``IVMPlan.refill_sql``). A model that
        usually maintains is built whole instead, state and all
        (``Situation.usually_maintains``)."""
        return self.strategy is Strategy.REBUILD and self.refill
