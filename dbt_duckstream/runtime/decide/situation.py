"""What a run knows when it decides, and what it learns on demand (what changed, what it
would cost), each read once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import duckdb

from ...compiler import IVMPlan
from ..history import History
from ..lake import SnapshotChange, lake_identity, snapshot_changes
from ..runlog import Cursor, Entry
from . import changes, costs
from .changes import WindowChanges
from .costs import Estimate
from .decision import REBUILD_ABOVE, Decision, Strategy

#: the model's recent runs that say whether it usually maintains
RECENT_RUNS = 10


@dataclass
class Situation:
    """What a run knows when it decides: the plan, the pinned snapshots, the table ids of the
    sources, the model and its state tables, and the model's last run."""

    con: duckdb.DuckDBPyConnection
    plan: IVMPlan
    pinned: dict[str, int]
    ids: dict[str, int | None]
    #: lake identities (``lake.lake_identity``) read so far, by catalog: the model's own with
    #: the decision (its known runs need it), the others when the run needs them (``lake``)
    lakes: dict[str, str]
    last: Entry | None
    full_refresh: bool = False
    rebuild_above: float | None = REBUILD_ABOVE
    #: the model's catalog's snapshots as the run read them (``history``), asked first
    history: History | None = None

    def snapshot_changes(
        self, catalog: str, after: int, upto: int, tables: set[int]
    ) -> list[SnapshotChange]:
        """``lake.snapshot_changes``, from the run's history where it covers them."""
        known = self.history
        if known is not None and known.catalog == catalog and known.covers(after, upto):
            return known.changes(after, upto, tables)
        return snapshot_changes(self.con, catalog, after, upto, tables)

    def lake(self, catalog: str) -> str:
        """The catalog's lake identity, read once; an unchanged run reads only the model's."""
        if catalog not in self.lakes:
            self.lakes[catalog] = lake_identity(self.con, catalog)
        return self.lakes[catalog]

    @property
    def cursors(self) -> dict[str, Cursor]:
        return {c.source: c for c in self.last.cursors} if self.last is not None else {}

    @property
    def window(self) -> dict[str, tuple[int, int]]:
        """(cursor, pinned) per catalog; a catalog without a cursor starts at the pin."""
        old = {c.catalog: c.snapshot_id for c in self.cursors.values()}
        return {cat: (old.get(cat, snap), snap) for cat, snap in self.pinned.items()}

    @property
    def build_window(self) -> dict[str, tuple[int, int]]:
        return {cat: (snap, snap) for cat, snap in self.pinned.items()}

    def rebuild(self, reason: str, strategy: Strategy = Strategy.REBUILD) -> Decision:
        return Decision(strategy, reason, self.build_window)

    @cached_property
    def changes(self) -> WindowChanges:
        """What changed in the window for the model's sources and its own tables."""
        return changes.window_changes(self)

    @cached_property
    def verified_spans(self) -> tuple[dict[str, tuple[int, int]], str | None]:
        """The changed sources' spans, checked (``changes.verified_spans``)."""
        return changes.verified_spans(self)

    @cached_property
    def table_rows(self) -> dict[str, int]:
        """Rows of the sources, the model and its state tables (``costs.table_rows``)."""
        return costs.table_rows(self)

    @cached_property
    def large_tables(self) -> frozenset[str]:
        """The sources and state tables of at least ``costs.LARGE_TABLE_ROWS`` rows."""
        return costs.large_tables(self)

    @cached_property
    def usually_maintains(self) -> bool:
        """Whether most of the model's recent runs that did something maintained it: a
        rebuild chosen for cost then builds its state as well, instead of refilling the model
        alone (``triggers.cheaper_to_rebuild``), and is priced so (``costs.estimate_costs``)."""
        past = self.last.past if self.last is not None else ()
        done = [p.strategy for p in past[:RECENT_RUNS] if p.strategy != "unchanged"]
        return sum(p == "incremental" for p in done) * 2 > len(done)

    @cached_property
    def costs(self) -> Estimate:
        """What maintaining this window and rebuilding would cost (``costs.estimate_costs``)."""
        return costs.estimate_costs(self)
