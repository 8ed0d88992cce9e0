"""The 22 TPC-H queries as the models of a dbt project (``integration_tests/tpch``).

    python -m benchmarks.tpch_dbt          # (re)writes integration_tests/tpch/models/qNN.sql

The texts are DuckDB's own (``SELECT query FROM tpch_queries()``, from the tpch extension's
wheel), with their tables read through ``source('tpch', ...)`` and their final ORDER BY and
LIMIT dropped (a table has no order, and a limited result is not maintained).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import duckdb
import sqlglot
from sqlglot import exp

from dbt_duckstream.runtime.lake import load_extension

from .refresh import TABLES

PROJECT = Path(__file__).resolve().parent.parent / "integration_tests" / "tpch"
_ORDER_BY = re.compile(r"\s*\bORDER BY\b[^()]*$")
_LIMIT = re.compile(r"\s*\bLIMIT\s+\d+\s*$")


def queries() -> dict[int, str]:
    """DuckDB's TPC-H query texts, by number."""
    con = duckdb.connect()
    try:
        load_extension(con, "tpch")
        rows = con.execute("SELECT query_nr, query FROM tpch_queries()").fetchall()
    finally:
        con.close()
    return {int(n): str(q) for n, q in rows}


def model_sql(query: str) -> str:
    """A query as a dbt model: sources for tables, no final ORDER BY or LIMIT."""
    body = query.strip().rstrip(";")
    body = _LIMIT.sub("", body)
    body = _ORDER_BY.sub("", body)
    spans = _table_spans(body)
    expected = [
        t for t in sqlglot.parse_one(body, read="duckdb").find_all(exp.Table) if t.name in TABLES
    ]
    assert len(spans) == len(expected), f"found {len(spans)} of {len(expected)} tables"
    for start, end in reversed(spans):
        body = body[:start] + "{{ source('tpch', '" + body[start:end] + "') }}" + body[end:]
    return body + "\n"


#: keywords that end a FROM clause's list of tables at their depth of parentheses
_CLAUSES = {"SELECT", "WHERE", "GROUP BY", "HAVING", "ORDER BY", "LIMIT", "ON", "UNION"}


def _table_spans(sql: str) -> list[tuple[int, int]]:
    """Where TPC-H's tables are named as FROM items (not as columns or aliases)."""
    tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(sql)
    spans: list[tuple[int, int]] = []
    in_from: dict[int, bool] = {}
    depth = 0
    for previous, token in zip([None, *tokens], tokens, strict=False):
        text = token.text.upper()
        if text == "(":
            depth += 1
        elif text == ")":
            in_from[depth] = False
            depth -= 1
        elif text == "FROM" or text == "JOIN":
            in_from[depth] = True
        elif text in _CLAUSES:
            in_from[depth] = False
        elif (
            token.text in TABLES
            and in_from.get(depth)
            and previous is not None
            and previous.text.upper() in ("FROM", "JOIN", ",")
        ):
            spans.append((token.start, token.end + 1))
    return spans


def model_files() -> dict[str, str]:
    """Every model's file, and the schema file that gives each its ``ivm_consistent`` test."""
    files = {f"q{n:02d}.sql": model_sql(q) for n, q in sorted(queries().items())}
    tests = "".join(
        f"  - name: {name.removesuffix('.sql')}\n    data_tests: [dbt_duckstream.ivm_consistent]\n"
        for name in files
    )
    files["schema.yml"] = (
        f"# written by python -m benchmarks.tpch_dbt\nversion: 2\n\nmodels:\n{tests}"
    )
    return files


def main() -> None:
    models = PROJECT / "models"
    for name, sql in model_files().items():
        (models / name).write_text(sql)
    print(f"wrote the models and their tests to {models}", file=sys.stderr)


if __name__ == "__main__":
    main()
