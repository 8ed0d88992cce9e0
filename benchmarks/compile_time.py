"""How long compiling takes: ``prepare`` over TPC-H's 22 and TPC-DS's 99 queries, as DuckDB's
extensions write them, against tables of those benchmarks in DuckLake.

    uv run python -m benchmarks.compile_time [--repeat 5]

Each repetition prepares every query once, in one process, after one unmeasured pass; the
figures are medians, in CPU seconds of the process (a busy machine stretches wall time, not
the work) and in wall seconds. The compiler's caches are emptied before each repetition, as a
process meets each model's SQL once.
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import time

from dbt_duckstream import prepare
from tests.generated_lake import generated_lake

BENCHMARKS = {
    "TPC-H": ("tpch", "CALL dbgen(sf=0.001)", "tpch_queries"),
    "TPC-DS": ("tpcds", "CALL dsdgen(sf=0.01)", "tpcds_queries"),
}


def _empty_caches() -> None:
    for cached in gc.get_objects():
        if isinstance(cached, functools._lru_cache_wrapper) and cached.__module__.startswith(
            "dbt_duckstream"
        ):
            cached.cache_clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for name, (extension, generate, queries) in BENCHMARKS.items():
        with generated_lake(extension, generate, queries) as (con, by_number):
            cpu: list[float] = []
            wall: list[float] = []
            for repetition in range(args.repeat + 1):
                _empty_caches()
                started, ticked = time.process_time(), time.perf_counter()
                for number, sql in sorted(by_number.items()):
                    prepare(con, sql, f"lake.models.q{number}", catalog="lake", db="main")
                if repetition:
                    cpu.append(time.process_time() - started)
                    wall.append(time.perf_counter() - ticked)
            print(
                f"{name}: {len(by_number)} queries, {statistics.median(cpu):.2f} s CPU, "
                f"{statistics.median(wall):.2f} s wall (medians of {args.repeat})"
            )


if __name__ == "__main__":
    main()
