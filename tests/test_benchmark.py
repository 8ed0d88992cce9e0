"""The TPC-H benchmark in a reduced form: a small scale, two change ratios, one repetition.

Every maintenance run inside it is checked against a recomputation, so this is also the
oracle on TPC-H's queries; the figures themselves come from ``make bench``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import tpch
from benchmarks.queries import VIEWS

pytest.importorskip("duckdb_extension_tpch")


def test_benchmark_runs_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "report"
    tpch.main(
        [
            "--scale", "0.01",
            "--ratios", "0.001,0.1",
            "--repetitions", "1",
            "--out", str(out),
            "--workdir", str(tmp_path),
        ]
    )  # fmt: skip
    report = (out / "tpch.md").read_text()
    for view in VIEWS:
        assert f"| {view} | 0.10% |" in report
        assert f"| {view} | 10.00% |" in report
    assert "geometric mean" in report
    assert "the cost choice was right in" in report
    assert (out / "tpch.png").stat().st_size > 10_000
