# The two commands a newcomer runs: `make demo` and `make test`.
# Both set everything up themselves (uv from PyPI if missing, then the locked environment).

UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := python3 -m uv
endif

.PHONY: setup postgres-server demo demo-core bench bench-floor bench-python soak foreign-writers test lint

# bytecode compiled at install: a process that may not write it (PYTHONDONTWRITEBYTECODE, as
# containers often set) would otherwise compile dbt's 1,400 modules again on every `dbt run`
setup:
	@command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen --all-extras --all-groups --compile-bytecode
	@$(UV) run --frozen python -m compileall -q dbt_duckstream

# PostgreSQL's server binaries: the catalog tests start a private server with them
postgres-server:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }

# Spark lands 1M orders in DuckLake, dbt maintains the integration project's models
demo: setup
	$(UV) run --frozen python -m dbt_duckstream.spark.demo

# the compiler alone, from Python: one join+aggregate model on 1M rows
demo-core: setup
	$(UV) run --frozen python -m dbt_duckstream.demo

# TPC-H at SCALE (1 by default, 10 for SF10) through dbt: each view an incremental_ivm model and
# a table model of the same SQL, each side a fresh `dbt run` after every batch (one order, 0.1%
# and 10% of lineitem; appends and mixed); report and plot in docs/benchmark/dbt (SF1) or
# docs/benchmark/dbt/sf<SCALE>. BENCH_ARGS narrows it (`--batches one,0.001 --mixes append`), or
# adds the mixed batches Spark lands through the writer (`--mixes append,mixed,spark`).
SCALE ?= 1
BENCH_SUFFIX := $(if $(filter-out 1,$(SCALE)),/sf$(SCALE))
bench: setup
	$(UV) run --frozen python -m benchmarks.dbt_tpch --scale $(SCALE) --out docs/benchmark/dbt$(BENCH_SUFFIX) $(BENCH_ARGS)

# what dbt itself costs per model in a DuckLake (a `select 1`, a view, a table, dbt's own
# incremental, and two tiny maintained models), with the plugin and without: the floor under
# the figures of `make bench`; report in docs/benchmark/dbt/floor (a minute)
bench-floor: setup
	$(UV) run --frozen python -m benchmarks.dbt_floor --out docs/benchmark/dbt/floor $(BENCH_ARGS)

# the same views maintained from one Python process, against CREATE OR REPLACE TABLE AS, at
# change ratios (mixed, then appends): docs/benchmark[/sf<SCALE>]
bench-python: setup
	$(UV) run --frozen python -m benchmarks.tpch --scale $(SCALE) --out docs/benchmark$(BENCH_SUFFIX) $(BENCH_ARGS)
	$(UV) run --frozen python -m benchmarks.tpch --scale $(SCALE) --mix append --out docs/benchmark$(BENCH_SUFFIX)/append $(BENCH_ARGS)

# RUNS maintenance runs (5000) of a chain, an aggregate, a join and a window over small random
# changes on one lake, DuckLake's maintenance every 100 runs, every model checked against its
# recomputation every 100: run time, catalog and data size over time (docs/soak/report.json)
RUNS ?= 5000
soak: setup
	rm -rf .soak-lake
	$(UV) run --frozen python -m benchmarks.soak --runs $(RUNS) --directory .soak-lake --out docs/soak/report.json

# `dbt run` beside a plain DuckDB process committing to the sources at RATES commits/s, with
# THREADS dbt threads, SECONDS per pair, on a CATALOG (sqlite or postgres) catalog. The full
# size: make foreign-writers CATALOG=sqlite RATES=5 THREADS=4 SECONDS=600
CATALOG ?= sqlite
RATES ?= 1,5,20
THREADS ?= 1,4
SECONDS ?= 60
foreign-writers: setup postgres-server
	$(UV) run --frozen python -m benchmarks.foreign_writers --catalog $(CATALOG) --rates $(RATES) --threads $(THREADS) --seconds $(SECONDS) --directory .foreign-writers

lint: setup
	$(UV) run --frozen ruff check .
	$(UV) run --frozen ruff format --check .
	$(UV) run --frozen ty check dbt_duckstream/

# a worker that dies is reported as a failure, not replaced: pytest-xdist 3.8 hangs when it
# replaces a crashed worker under --dist loadgroup (pytest-dev/pytest-xdist#1323); its last
# words and the native backtrace of its core file are printed at the end (tests/crash_report.py)
test: lint postgres-server
	rm -rf .test-output core core.[0-9]*
	ulimit -c unlimited 2>/dev/null || true; \
	$(UV) run --frozen pytest -n 2 --dist loadgroup --max-worker-restart=0 -p no:cacheprovider --durations=30 \
	|| { $(UV) run --frozen python -m tests.crash_report; exit 1; }
