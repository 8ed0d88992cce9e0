"""The dbt series' report: medians per view and batch, each maintained run's breakdown, wall
times per invocation, the targets met or missed, and a plot.

    python -m benchmarks.dbt_report docs/benchmark/dbt    # tpch.md and tpch.png again

Reads what ``benchmarks.dbt_tpch`` keeps in ``samples.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from dbt_duckstream.runtime.breakdown import COUNTS, PHASES

from .report import TICKS, geomean

MAINTAINED = "maintained"
REBUILD = "rebuild"
#: the maintained side run without the profile, after one appended order
UNPROFILED = "unprofiled"
#: the series that measures the profile's cost (one-order appends, maintained side only)
OVERHEAD = "overhead"
ONE = "one"
NONE = "none"
#: mixed batches landed by Spark through the project's writer (``spark_refresh``)
SPARK = "spark"
#: what a maintained run's summary says when its pre-images came from the writer's capture
CAPTURED = "read from captured pre-images"
#: ... and when some came from the data files that held the ended rows
FROM_FILES = "read from data files"
#: execution time outside the run's phases (dbt's materialization around the runtime)
OTHER = "other"
COLUMNS = (*COUNTS, *PHASES, OTHER)

MIX_TITLES = {
    "append": "Appends: new orders with their lineitems, one snapshot",
    "mixed": "Mixed: new orders (RF1), orders deleted (RF2), lineitem discounts and order "
    "statuses updated, three snapshots",
    SPARK: "Spark-written mixed: the same batches landed by Spark through the project's writer "
    "(RF1's orders and lineitems appended, RF2's deletes and the updates merged by key), four "
    "snapshots, pre-images captured by the writer",
}


def batch_label(batch: str) -> str:
    if batch == ONE:
        return "1 order"
    if batch == NONE:
        return "no change"
    return f"{float(batch):.2%}"


def batch_order(batch: str) -> float:
    if batch == ONE:
        return -1.0
    return math.inf if batch == NONE else float(batch)


def rows(samples: list[dict], views: list[str] | None = None) -> list[dict]:
    """Per mix, batch and view (in the order of ``views``): median times of both sides, the
    speed-up, and the median breakdown of the maintained runs."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for s in samples:
        groups.setdefault((s["mix"], s["batch"], s["view"]), []).append(s)
    found = []
    for (mix, batch, view), group in groups.items():
        ours = [s for s in group if s["side"] == MAINTAINED]
        theirs = [s for s in group if s["side"] == REBUILD]
        if not ours or not theirs:
            continue
        maintained = statistics.median(s["execution_ms"] for s in ours)
        rebuilt = statistics.median(s["execution_ms"] for s in theirs)
        found.append(
            {
                "mix": mix,
                "batch": batch,
                "view": view,
                "batch_rows": statistics.median(s["batch_rows"] for s in ours),
                "strategies": sorted({s["strategy"] for s in ours}),
                "maintained_ms": maintained,
                "rebuild_ms": rebuilt,
                "speedup": rebuilt / maintained,
                "breakdown": _breakdown(ours),
                "runs": len(ours),
            }
        )
    place = {view: i for i, view in enumerate(views or [])}
    return sorted(found, key=lambda r: (r["mix"], batch_order(r["batch"]), place.get(r["view"], 0)))


def _breakdown(samples: list[dict]) -> dict[str, float]:
    """Median of each part over the runs that report it; ``other`` is what the phases leave
    of the model's execution time."""
    parts: dict[str, list[float]] = {}
    for s in samples:
        b = s["breakdown"]
        for key, value in b.items():
            parts.setdefault(key, []).append(value)
        if any(p in b for p in PHASES):
            outside = s["execution_ms"] - sum(b.get(p, 0.0) for p in PHASES)
            parts.setdefault(OTHER, []).append(outside)
    return {key: statistics.median(values) for key, values in parts.items()}


def walls(data: dict) -> list[dict]:
    """Per mix, batch and side: the median wall time of a ``dbt run`` invocation."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for w in data["walls"]:
        groups.setdefault((w["mix"], w["batch"], w["side"]), []).append(w["wall_ms"])
    return [
        {"mix": m, "batch": b, "side": s, "wall_ms": statistics.median(v), "runs": len(v)}
        for (m, b, s), v in groups.items()
    ]


@dataclass(frozen=True)
class Target:
    """A speed-up to reach at one scale, mix and batch (``view``: one view's, ``slowest``: every
    view's, else the geometric mean)."""

    scale: float
    mix: str
    batch: str
    at_least: float
    view: str | None = None
    slowest: bool = False

    def describe(self) -> str:
        what = f"view {self.view}" if self.view else "slowest view" if self.slowest else "geomean"
        return f"SF{self.scale:g}, {batch_label(self.batch)} {self.mix}: {what}"


#: issue 44's targets through dbt, and issue 41's for Spark-written batches
SPEEDUPS = (
    Target(1.0, "append", "0.001", 5.0),
    Target(1.0, "append", "0.001", 30.0, view="wide"),
    Target(1.0, "mixed", "0.001", 2.0),
    Target(1.0, "mixed", "0.001", 1.0, slowest=True),
    Target(10.0, "append", "0.001", 20.0),
    Target(1.0, SPARK, "0.001", 4.0),
    Target(1.0, SPARK, "0.001", 1.5, slowest=True),
    Target(10.0, SPARK, "0.001", 10.0),
    Target(10.0, SPARK, "0.001", 1.5, slowest=True),
)
#: a maintained model's execution time at most, after one order (either mix) and with no change
ONE_ORDER_MS = 15.0
UNCHANGED_MS = 5.0


def targets(table: list[dict], scale: float) -> list[str]:
    """Each target this series measured, met or missed."""
    found = []
    for mix in sorted({r["mix"] for r in table if r["batch"] == ONE}):
        at = [r for r in table if r["mix"] == mix and r["batch"] == ONE]
        found.append(_at_most(f"1 order {mix}: slowest maintained model", at, ONE_ORDER_MS))
    none = [r for r in table if r["batch"] == NONE]
    if none:
        found.append(_at_most("no change: slowest maintained model", none, UNCHANGED_MS))
    for target in SPEEDUPS:
        at = [
            r
            for r in table
            if math.isclose(target.scale, scale)
            and r["mix"] == target.mix
            and r["batch"] == target.batch
            and (target.view is None or r["view"] == target.view)
        ]
        if not at:
            continue
        speedups = [r["speedup"] for r in at]
        reached = min(speedups) if target.slowest or target.view else geomean(speedups)
        met = "met" if reached >= target.at_least else "missed"
        found.append(f"- {target.describe()} {reached:.2f}x (target ≥ {target.at_least:g}x: {met})")
    return found


def _at_most(what: str, at: list[dict], limit: float) -> str:
    worst = max(at, key=lambda r: r["maintained_ms"])
    met = "met" if worst["maintained_ms"] <= limit else "missed"
    return (
        f"- {what} {worst['view']} at {worst['maintained_ms']:.1f} ms "
        f"(target ≤ {limit:g} ms: {met})"
    )


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def _parts(breakdown: dict[str, float]) -> str:
    cells = []
    for key in COLUMNS:
        value = breakdown.get(key)
        cells.append("" if value is None else f"{value:.0f}" if key in COUNTS else f"{value:.1f}")
    return " | ".join(cells)


def markdown(data: dict) -> str:
    scale, repetitions = data["scale"], data["repetitions"]
    table = rows(data["samples"], data["views"])
    wall = {(w["mix"], w["batch"], w["side"]): w["wall_ms"] for w in walls(data)}
    header = (
        "| view | batch | lineitem rows touched | strategy | maintained ms | rebuild ms | speed-up "
        f"| {' | '.join(COLUMNS)} |"
    )
    rule = "|" + "---|" * (7 + len(COLUMNS))
    profiled = (
        "Both sides run with `DUCKSTREAM_PROFILE=1` (DuckDB's query log kept in memory, so "
        "that each maintained run counts its statements): both pay its overhead."
        if data["profiled"]
        else "Profiling was off: the breakdowns have no statement counts."
    )
    lines = [
        f"# TPC-H SF{scale:g} through dbt: `incremental_ivm` against `table`",
        "",
        "What a user's `dbt run` costs. The benchmark's views are the models of one dbt "
        "project (DuckDB, DuckLake, `threads: 1`), built as `incremental_ivm` models and as "
        "`table` models of the same SQL. After each batch, each side runs as a fresh `dbt run` "
        "process, the side that goes first alternating per repetition; every maintained model "
        "is then compared with its `table` twin. `maintained ms` and `rebuild ms`: medians of "
        f"{repetitions} repetitions of each model's `execution_time` in dbt's "
        "`run_results.json`; `speed-up` = rebuild / maintained.",
        "",
        "The breakdown is the median of the maintained runs' own (the end of "
        "`adapter_response._message`): `statements` the SQL statements the run issued, "
        "`catalog` those among them that DuckLake sent to its catalog, then milliseconds per "
        "phase (bind, decide, read, delta, write, commit); `other` is the execution time "
        f"outside those phases (dbt's materialization around the run). {profiled}",
        "",
        *_run_order(data["samples"]),
    ]
    for mix in [m for m in MIX_TITLES if any(r["mix"] == m for r in table)]:
        at = [r for r in table if r["mix"] == mix]
        lines += [f"## {MIX_TITLES[mix]}", "", header, rule]
        lines += [_row(r) for r in at]
        lines += [
            "",
            "| batch | geometric mean speed-up | slowest view | its speed-up "
            "| `dbt run` wall ms, maintained | `dbt run` wall ms, rebuild |",
            "|---|---|---|---|---|---|",
        ]
        for batch in sorted({r["batch"] for r in at}, key=batch_order):
            of = [r for r in at if r["batch"] == batch]
            worst = min(of, key=lambda r: r["speedup"])
            lines.append(
                f"| {batch_label(batch)} | {geomean([r['speedup'] for r in of]):.1f}x "
                f"| {worst['view']} | {worst['speedup']:.2f}x "
                f"| {_ms(wall.get((mix, batch, MAINTAINED)))} "
                f"| {_ms(wall.get((mix, batch, REBUILD)))} |"
            )
        lines += ["", *preimage_sources(data["samples"], mix)]
    none = [r for r in table if r["batch"] == NONE]
    if none:
        lines += [
            "## No change since the last run",
            "",
            header,
            rule,
            *(_row(r) for r in none),
            "",
            f"`dbt run` wall ms: maintained {_ms(wall.get((NONE, NONE, MAINTAINED)))}, "
            f"rebuild {_ms(wall.get((NONE, NONE, REBUILD)))}.",
            "",
        ]
    lines += overhead(data)
    setup = data.get("setup_s", {})
    lines += [
        "## Targets",
        "",
        *targets(table, scale),
        "",
        "Wall time of a `dbt run` invocation: from the process's start to its exit, dbt's "
        "start-up and parsing included. " + _setup(setup),
    ]
    return "\n".join(lines) + "\n"


def preimage_sources(samples: list[dict], mix: str) -> list[str]:
    """Where the mix's maintained runs read the rows its batches ended, as their summaries
    say: from the Spark writer's captured pre-images, or from the data files that held them.
    Nothing when no run said either (appends end no rows)."""
    ours = [s for s in samples if s["mix"] == mix and s["side"] == MAINTAINED]
    captured = sum(CAPTURED in s.get("message", "") for s in ours)
    from_files = sum(FROM_FILES in s.get("message", "") for s in ours)
    if not captured and not from_files:
        return []
    return [
        f"Pre-images: {captured} of {len(ours)} maintained runs say ended rows were "
        f"{CAPTURED}, {from_files} that some were {FROM_FILES}.",
        "",
    ]


def overhead(data: dict) -> list[str]:
    """What profiling costs: the maintained runs after one appended order, with the profile
    and without, taking turns."""
    turns = [s for s in data["samples"] if s["mix"] == OVERHEAD]
    if not turns:
        return []
    lines = [
        "## What profiling costs",
        "",
        "Last, the maintained side alone after one appended order each time, with "
        "`DUCKSTREAM_PROFILE=1` and without it, taking turns (after a run that is not kept, in "
        "which a view that last chose to rebuild builds its state again); the rebuild side "
        "runs once after them and every model is checked against it. Medians.",
        "",
        f"| view | profiled ms | unprofiled ms | difference ms | {' | '.join((*PHASES, OTHER))} "
        "(unprofiled) |",
        "|" + "---|" * (4 + len(PHASES) + 1),
    ]
    for view in data["views"]:
        with_log = [
            s["execution_ms"] for s in turns if (s["view"], s["side"]) == (view, MAINTAINED)
        ]
        without = [s for s in turns if (s["view"], s["side"]) == (view, UNPROFILED)]
        if not with_log or not without:
            continue
        a = statistics.median(with_log)
        b = statistics.median(s["execution_ms"] for s in without)
        parts = _breakdown(without)
        cells = " | ".join(_ms(parts.get(p)) for p in (*PHASES, OTHER))
        lines.append(f"| {view} | {a:.1f} | {b:.1f} | {a - b:+.1f} | {cells} |")
    wall = {w["side"]: w["wall_ms"] for w in walls(data) if w["mix"] == OVERHEAD}
    lines += [
        "",
        f"`dbt run` wall ms: profiled {_ms(wall.get(MAINTAINED))}, "
        f"unprofiled {_ms(wall.get(UNPROFILED))}.",
        "",
    ]
    return lines


def _run_order(samples: list[dict]) -> list[str]:
    """The order dbt ran the maintained models in: the first pays for the invocation's start."""
    places: dict[str, list[int]] = {}
    for s in samples:
        if s["side"] == MAINTAINED and "position" in s:
            places.setdefault(s["view"], []).append(s["position"])
    if not places:
        return []
    order = sorted(places, key=lambda view: statistics.median(places[view]))
    return [
        f"dbt runs the models one at a time, in this order: {', '.join(order)}.",
        "",
    ]


def _setup(setup: dict[str, float]) -> str:
    """What came before the batches, and how long the whole series took."""
    said = []
    if "generate" in setup:
        said.append(f"`dbgen` into DuckLake took {setup['generate']:.0f} s")
    if all(f"build {side}" in setup for side in (MAINTAINED, REBUILD)):
        builds = ", ".join(
            f"{side} {setup[f'build {side}']:.0f} s" for side in (MAINTAINED, REBUILD)
        )
        said.append(f"the first `dbt run` of each side (wall): {builds}")
    if "total" in setup:
        said.append(f"the whole series {setup['total'] / 60:.0f} minutes")
    text = "; ".join(said)
    return f"{text[:1].upper()}{text[1:]}." if text else ""


def _row(r: dict) -> str:
    # a one-order batch touches that order's lineitems, 1 to 7
    rows_touched = f"{r['batch_rows']:.0f}" if r["batch"] not in (ONE, NONE) else ""
    return (
        f"| {r['view']} | {batch_label(r['batch'])} | {rows_touched} "
        f"| {', '.join(r['strategies'])} | {r['maintained_ms']:.1f} | {r['rebuild_ms']:.1f} "
        f"| {r['speedup']:.1f}x | {_parts(r['breakdown'])} |"
    )


def plot(data: dict, path: Path) -> None:
    """Speed-up per batch, a line per view, for each mix; and the breakdown of a maintained
    run after one order appended, per view."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    table = rows(data["samples"], data["views"])
    mixes = [m for m in MIX_TITLES if any(r["mix"] == m for r in table)]
    figure, axes = plt.subplots(1, len(mixes) + 1, figsize=(6 * (len(mixes) + 1), 5), dpi=110)
    low = min(r["speedup"] for r in table)
    high = max(r["speedup"] for r in table)
    for axis, mix in zip(axes, mixes, strict=False):
        at = [r for r in table if r["mix"] == mix]
        batches = sorted({r["batch"] for r in at}, key=batch_order)
        for view in data["views"]:
            points = [(batches.index(r["batch"]), r["speedup"]) for r in at if r["view"] == view]
            points.sort()
            axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=view)
        axis.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        axis.set_yscale("log")
        axis.set_yticks([t for t in TICKS if low / 1.5 <= t <= high * 1.5])
        axis.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        axis.yaxis.set_minor_formatter(NullFormatter())
        axis.set_xticks(range(len(batches)), [batch_label(b) for b in batches])
        axis.set_xlabel("batch")
        axis.set_ylabel("speed-up: table rebuild ms / maintained ms")
        axis.set_title(f"SF{data['scale']:g}, {mix}")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(ncol=3, fontsize="small")
    _breakdown_bars(axes[-1], table, data["views"])
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def _breakdown_bars(axis, table: list[dict], views: list[str]) -> None:
    """Stacked phases of the maintained run after the smallest batch measured."""
    smallest = min((r for r in table if r["batch"] != NONE), key=lambda r: batch_order(r["batch"]))
    mix, batch = smallest["mix"], smallest["batch"]
    if any(r["mix"] == "append" and r["batch"] == batch for r in table):
        mix = "append"
    at = {r["view"]: r for r in table if r["mix"] == mix and r["batch"] == batch}
    shown = [v for v in views if v in at]
    bottom = [0.0] * len(shown)
    for part in (*PHASES, OTHER):
        heights = [max(at[v]["breakdown"].get(part, 0.0), 0.0) for v in shown]
        axis.bar(shown, heights, bottom=bottom, label=part, color="0.75" if part == OTHER else None)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    axis.set_ylabel("maintained run, ms (median)")
    axis.set_title(f"where a maintained run's time goes: {batch_label(batch)}, {mix}")
    axis.legend(fontsize="small")
    axis.grid(True, axis="y", alpha=0.3)


def main(argv: list[str] | None = None) -> None:
    """Write the report and the plot again from a series' ``samples.json``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dbt_report", description=__doc__)
    parser.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    data = json.loads((args.directory / "samples.json").read_text())
    (args.directory / "tpch.md").write_text(markdown(data))
    plot(data, args.directory / "tpch.png")


if __name__ == "__main__":
    main()
