"""The triggers that decide a run, tried in order (``TRIGGERS``); the first that applies
decides, and ``maintain`` ends the list."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import ConfigurationError
from ..lake import read_columns
from .decision import REBUILD_ABOVE, Decision, Strategy
from .situation import Situation

Trigger = Callable[[Situation], "Decision | None"]


def first_run(s: Situation) -> Decision | None:
    if not s.cursors or s.ids[s.plan.target.key] is None:
        return s.rebuild("first run", Strategy.INITIAL)
    return None


def state_missing(s: Situation) -> Decision | None:
    """Maintenance needs the model's state, which a rebuild chosen for cost drops: tried
    after ``cheaper_to_rebuild``, so that such rebuilds in a row never build it."""
    if any(s.ids.get(t.key) is None for t in s.plan.state_tables):
        return s.rebuild("its state tables are missing", Strategy.INITIAL)
    return None


def full_refresh(s: Situation) -> Decision | None:
    return s.rebuild("full refresh requested") if s.full_refresh else None


def sql_changed(s: Situation) -> Decision | None:
    sources = {source.key for source in s.plan.sources}
    assert s.last is not None
    if set(s.cursors) != sources or s.last.sql_hash != s.plan.sql_hash:
        return s.rebuild("model SQL changed")
    return None


def feed_broken(s: Situation) -> Decision | None:
    broken = s.changes.broken
    return s.rebuild(broken) if broken is not None else None


def columns_changed(s: Situation) -> Decision | None:
    """A source's columns changed: only those the model reads matter (their DuckLake ids,
    names and types)."""
    for key in sorted(s.changes.altered):
        source = next(t for t in s.plan.sources if t.key == key)
        tid = s.ids[key]
        assert tid is not None
        now = read_columns(s.con, source.catalog, tid, s.plan.source_reads[key])
        if now != s.cursors[key].columns:
            return s.rebuild(f"the columns read from source {key} changed")
    return None


def foreign_writes(s: Situation) -> Decision | None:
    foreign = s.changes.foreign
    return s.rebuild(foreign) if foreign is not None else None


def nothing_changed(s: Situation) -> Decision | None:
    if s.changes.changed:
        return None
    if s.changes.expired:
        reason = "no source changed; the cursor moves past expired snapshots"
        return Decision(Strategy.UNCHANGED, reason, s.window, advance=True)
    return Decision(Strategy.UNCHANGED, "no source changed", s.window)


def cheaper_to_rebuild(s: Situation) -> Decision | None:
    if s.rebuild_above is None:
        return None
    changed = s.changes.changed
    if not s.costs.rebuild_is_cheaper(s.rebuild_above):
        return None
    reason = f"cheaper than maintenance: {s.costs.describe()} (rebuild above {s.rebuild_above:.0%})"
    # a refill drops the state, and the next small batch of a model that usually maintains
    # would build it whole: such a model is built with its state instead
    keeps_state = s.usually_maintains
    if keeps_state:
        reason += "; its state is built too, as the model usually maintains"
    return Decision(
        Strategy.REBUILD, reason, s.build_window, changed, s.costs, refill=not keeps_state
    )


def changes_misdated(s: Situation) -> Decision | None:
    _, misdated = s.verified_spans
    return s.rebuild(misdated) if misdated is not None else None


def maintain(s: Situation) -> Decision:
    changed = s.changes.changed
    reason = f"{len(changed)} of {len(s.plan.sources)} sources changed"
    whole = s.plan.recomputed_in_full(changed)
    if whole:
        reason += f"; recomputed in full: {', '.join(whole)}"
    found = s.costs if s.rebuild_above is not None else None
    if found is not None:
        reason += f"; {found.describe()}"
    return Decision(
        Strategy.INCREMENTAL,
        reason,
        s.window,
        changed,
        found,
        spans=s.verified_spans[0],
        reorganized=s.changes.reorganized,
        appended=s.changes.appended,
        large_tables=s.large_tables,
    )


#: the triggers, in the order they are tried; ``maintain`` ends every list
TRIGGERS: tuple[Trigger, ...] = (
    first_run,
    full_refresh,
    sql_changed,
    feed_broken,
    columns_changed,
    foreign_writes,
    nothing_changed,
    cheaper_to_rebuild,
    state_missing,
    changes_misdated,
)


def decide(situation: Situation) -> Decision:
    for trigger in TRIGGERS:
        decision = trigger(situation)
        if decision is not None:
            return decision
    return maintain(situation)


def rebuild_above(value: Any) -> float | None:
    """``ivm_rebuild_above``: a share of a rebuild's cost, ``never``, or unset (the default)."""
    if value is None:
        return REBUILD_ABOVE
    if value == "never":
        return None
    try:
        share = float(value)
    except (TypeError, ValueError):
        share = -1.0
    if share < 0:
        raise ConfigurationError(
            f"ivm_rebuild_above={value!r}: give a share of a rebuild's cost (e.g. 1.0, the "
            "default; 0 always rebuilds), or 'never' to always maintain"
        )
    return share
