"""`dbt run` beside a writer that does not use dbt-duckstream, on a shared catalog.

    python -m benchmarks.foreign_writers --catalog sqlite --rates 5 --threads 4 --seconds 600

A plain DuckDB process (``tests.foreign_writer``) commits to the integration project's sources
at each rate (commits per second) while `dbt run` maintains the project over and over, with
each number of threads, for ``--seconds`` per pair. Every run must succeed; afterwards, with
the writer stopped, a final run and the project's consistency tests (``ivm_consistent``) and
a comparison with dbt's ``table`` materialization of every model prove that nothing was lost
or applied twice. The report gives, per pair: the runs, their failures and retries, their
lengths, the writer's commits, retries and the rate it reached, and the p50/p99 length of the
maintained models' write transactions (``transaction`` in the run breakdown).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dbt_duckstream.bridge.dbt_process import Invocation
from dbt_duckstream.runtime.breakdown import Breakdown
from tests.lake_project import CatalogProject, assert_equals_reference, seed, writer_process
from tests.postgres import create_database, postgres_server

#: what a run's output says for each retried commit
RETRIED = "lost a commit race"


@dataclass
class Load:
    """One rate and thread count: what the runs and the writer did."""

    catalog: str
    rate: float
    threads: int
    runs: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)
    retries: int = 0
    run_seconds: list[float] = field(default_factory=list)
    transaction_ms: list[float] = field(default_factory=list)
    writer: dict = field(default_factory=dict)

    def percentile(self, q: float) -> float:
        found = sorted(self.transaction_ms)
        return found[min(len(found) - 1, int(q * len(found)))] if found else 0.0

    def line(self) -> str:
        runs = self.run_seconds
        w = self.writer
        return (
            f"{self.catalog} {self.rate:g}/s threads {self.threads}: {self.runs} dbt runs, "
            f"{self.failed} failed, {self.retries} retried commits; run "
            f"{statistics.median(runs) if runs else 0:.1f}s median, {max(runs, default=0):.1f}s "
            f"max; write transaction p50 {self.percentile(0.5):.0f} ms, p99 "
            f"{self.percentile(0.99):.0f} ms ({len(self.transaction_ms)} maintained models); "
            f"writer {w.get('commits')} commits at {w.get('rate')}/s, {w.get('retries')} "
            f"retries, {w.get('failures')} failed, {w.get('late')}s behind at worst"
        )


def foreign_writer(project: CatalogProject, rate: float, seed: int) -> AbstractContextManager[dict]:
    """Run ``tests.foreign_writer`` at ``rate`` for the block; yields its report, filled in
    once the block has ended."""
    name = f"foreign-{uuid.uuid4().hex[:8]}"
    options = ("--rate", str(rate), "--seed", str(seed))
    return writer_process("tests.foreign_writer", project, name, *options, timeout=300)


def measured(load: Load, run: Invocation) -> None:
    """Add one `dbt run` to ``load``."""
    load.runs += 1
    load.retries += run.output.count(RETRIED)
    for name, result in run.models().items():
        if result["status"] != "success":
            load.failed += 1
            load.failures.append(f"{name}: {result.get('message')}"[:600])
            continue
        response = result.get("adapter_response") or {}
        if response.get("code") == "incremental":
            found = Breakdown.parse(str(response.get("_message", "")))
            if "transaction" in found:
                load.transaction_ms.append(found["transaction"])
    if run.returncode != 0 and not load.failures:
        load.failed += 1
        load.failures.append(run.output[-1500:])


def under_writer(
    project: CatalogProject, catalog: str, rate: float, threads: int, seconds: float, seed: int
) -> Load:
    """`dbt run` over and over for ``seconds`` while the writer commits at ``rate``."""
    load = Load(catalog, rate, threads)
    with foreign_writer(project, rate, seed) as writer:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline or load.runs == 0:
            started = time.monotonic()
            run = project.dbt("run", "--threads", str(threads), check=False)
            load.run_seconds.append(round(time.monotonic() - started, 2))
            measured(load, run)
    load.writer = writer
    return load


@contextmanager
def catalog_location(kind: str, directory: Path) -> Iterator[str]:
    """A new, empty catalog of the given kind (a private PostgreSQL server for postgres)."""
    if kind == "sqlite":
        yield f"sqlite:{directory / 'lake.sqlite'}"
        return
    with postgres_server() as dsn:
        yield f"postgres:{create_database(dsn, f'lake_{uuid.uuid4().hex[:12]}')}"


def session(
    directory: Path,
    kind: str,
    loads: list[tuple[float, int]],
    seconds: float,
    *,
    catalog: str | None = None,
) -> list[Load]:
    """Build the integration project on a new ``kind`` catalog, maintain it under each
    (rate, threads) in turn, then check it converged: a final run, its consistency tests
    and dbt's ``table`` materialization of every model (``AssertionError`` otherwise)."""
    with ExitStack() as stack:
        if catalog is None:
            catalog = stack.enter_context(catalog_location(kind, directory))
        project = CatalogProject(directory / "project", catalog)
        project.dbt("deps")
        seed(project)
        project.dbt("run")
        found = []
        for i, (rate, threads) in enumerate(loads):
            found.append(under_writer(project, kind, rate, threads, seconds, seed=i + 1))
            print(found[-1].line(), flush=True)
        built = project.dbt("build", "--exclude-resource-type", "seed")
        statuses = {r["status"] for r in built.results.values()}
        assert statuses <= {"success", "pass"}, built.output[-3000:]
        assert_equals_reference(project)
        return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--catalog", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--rates", default="1,5,20", help="commits per second, comma-separated")
    parser.add_argument("--threads", default="1,4", help="dbt threads, comma-separated")
    parser.add_argument("--seconds", type=float, default=60.0, help="per rate and thread count")
    parser.add_argument("--directory", type=Path, default=Path("foreign-writers"))
    parser.add_argument("--out", type=Path, help="write the report as JSON here")
    args = parser.parse_args()
    loads = [
        (float(rate), int(threads))
        for rate in args.rates.split(",")
        for threads in args.threads.split(",")
    ]
    args.directory.mkdir(parents=True, exist_ok=True)
    work = args.directory.resolve() / f"{args.catalog}-{uuid.uuid4().hex[:6]}"
    work.mkdir()
    found = session(work, args.catalog, loads, args.seconds)
    failed = sum(load.failed for load in found)
    print(f"converged: the final run equals the recomputation; {failed} failed model runs")
    if args.out:
        args.out.write_text(json.dumps([asdict(load) for load in found], indent=2))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
