"""What a run does, decided before anything is written: one ``Decision`` per run.

The triggers are tried in the order of ``TRIGGERS``; the first that applies decides:

    first run -> full refresh -> model SQL changed -> change feed unusable (a source
    recreated, snapshots expired, deletion vectors, a rewrite then a flush) -> columns the
    model reads changed -> the model's tables written by someone else -> nothing changed ->
    maintenance would cost more than a rebuild -> state missing -> changes dated before the
    cursor -> maintain

Three jobs, a module each: what changed in the window (``changes``), the triggers in order
(``triggers``, over the ``situation`` a run knows), and what maintaining and rebuilding would
cost (``costs``, from what each operator says its delta reads).

Everything is read from DuckLake's catalog metadata, and no data (deleted rows below excepted).
The cost choice weighs what maintenance reads and writes against what a rebuild does
(``estimate``), in rows:

    maintain ~ rows of data files added in the window
             + PRE_IMAGE_WEIGHT * rows of the row groups holding the rows deleted in the
               window (a row group per deleted row, at most the file: ``preimages``
               reads them, only the columns the model reads; ``window_rows``), or the
               rows deleted alone where a writer captured them or an earlier model of
               the process read them (``captured``, ``feeds.cached``)
             + INSERT_WEIGHT * (rows inserted + rows deleted)
             + rows of the inputs a join term, a recomputed aggregate, a window's touched
               partitions, a set operation's counts or a top-N's rescan read in full
             + KEY_PROBE_WEIGHT * rows of an input read narrowed to a delta's keys (in files
               whose key range meets them), + (PRE_IMAGE_WEIGHT - KEY_PROBE_WEIGHT) * rows
               of its row groups holding a key (``probed_rows``)
             + OUTPUT_WEIGHT * rows an operator recomputes whole and stores again (a window
               without PARTITION BY is one partition; a recursive CTE)
    rebuild  ~ rows of every input table + OUTPUT_WEIGHT * rows of the model

The weights are per-row costs relative to scanning a row, measured with the TPC-H benchmark
(``make bench``) on DuckDB 1.5. A run rebuilds when maintenance is estimated to cost more than
``rebuild_above`` of a rebuild, so a large batch never costs much more than rebuilding.
Inserted and deleted rows are counted from the metadata (``window_rows``).
"""

from .changes import ALTERATIONS, COMPACTIONS, INSERTIONS, ROW_CHANGES, WindowChanges
from .costs import (
    INSERT_WEIGHT,
    KEY_PROBE_WEIGHT,
    LARGE_TABLE_ROWS,
    OUTPUT_WEIGHT,
    PRE_IMAGE_WEIGHT,
    Estimate,
    estimate,
    estimated_rows,
    full_reads,
    learned_correction,
    probed_rows,
)
from .decision import REBUILD_ABOVE, Decision, Strategy
from .situation import Situation
from .triggers import TRIGGERS, decide, rebuild_above

__all__ = [
    "ALTERATIONS",
    "COMPACTIONS",
    "INSERTIONS",
    "INSERT_WEIGHT",
    "KEY_PROBE_WEIGHT",
    "LARGE_TABLE_ROWS",
    "OUTPUT_WEIGHT",
    "PRE_IMAGE_WEIGHT",
    "REBUILD_ABOVE",
    "ROW_CHANGES",
    "TRIGGERS",
    "Decision",
    "Estimate",
    "Situation",
    "Strategy",
    "WindowChanges",
    "decide",
    "estimate",
    "estimated_rows",
    "full_reads",
    "learned_correction",
    "probed_rows",
    "rebuild_above",
]
