"""The runtime: DuckLake access, the per-run decision, and runs carried out in one
transaction each."""

from .decide import Decision, Strategy
from .lake import attach_lake, load_ducklake
from .model_run import run_model
from .run import RunResult, prepare, rebuild_unmaintainable, refresh, using

__all__ = [
    "Decision",
    "RunResult",
    "Strategy",
    "attach_lake",
    "load_ducklake",
    "prepare",
    "rebuild_unmaintainable",
    "refresh",
    "run_model",
    "using",
]
