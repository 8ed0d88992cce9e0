"""The soak (``benchmarks.soak``, ``make soak``) in its short form: 200 maintenance runs of a
chain, an aggregate, a join and a window over small random changes on one lake, with
DuckLake's maintenance every 50 runs, each model checked against its recomputation every 50.

Run times on a shared machine are noisy: the bound here is loose (the end within twice the
start); the README reports the full soak's figures.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.soak import MODELS, REWRITE_THRESHOLD, soak

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("soak")]

RUNS = int(os.environ.get("DUCKSTREAM_SOAK_RUNS", "200"))


def test_maintenance_stays_exact_and_flat_over_many_runs(tmp_path: Path) -> None:
    report = soak(tmp_path / "lake", RUNS, maintain_every=50, check_every=50)
    print(report.summary())
    assert report.runs == RUNS
    assert report.checks >= RUNS // 50  # each one compared every model with its recomputation
    # maintained every run: never rebuilt, though snapshots were expired and files merged
    assert report.strategies == {"incremental": RUNS * len(MODELS)}
    tenth = max(1, len(report.warm) // 10)
    start, end = sorted(report.warm[1 : tenth + 1]), sorted(report.warm[-tenth:])
    assert end[len(end) // 2] < 2 * start[len(start) // 2], report.summary()
    snapshots = [kept for *_, kept in report.size]
    assert max(snapshots[1:]) <= 2 * snapshots[1], "expired snapshots keep the catalog bounded"
    # what scans read past stays bounded: maintenance rewrites files with many deleted rows
    assert all(share <= REWRITE_THRESHOLD for *_, share in report.files), report.summary()
