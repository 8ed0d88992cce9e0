"""Each rewrite against its fixture file, ``tests/fixtures/rewrites/<rule>.sql``, as sqlglot
checks its optimizer's rules: statements in pairs, the SQL given and the SQL the rule makes
of it (``ERROR: <message>`` when it refuses), each ending with ``;`` at the end of a line.
``# key: value`` lines before a pair set its options: ``tables`` and ``views`` (JSON),
``first`` (rules run before it), ``catalog`` and ``db``; ``--`` lines are comments.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dbt_duckstream.compiler.pipeline import RULES, show
from dbt_duckstream.errors import DuckstreamError

FIXTURES = Path(__file__).parent / "fixtures" / "rewrites"


def cases(path: Path) -> list[tuple[dict[str, str], str, str]]:
    """The (options, SQL, expected) pairs of a fixture file."""
    statements, lines = [], []
    for line in path.read_text().splitlines():
        if line.startswith("--") or not line.strip():
            continue
        lines.append(line)
        if line.endswith(";"):
            statements.append("\n".join(lines)[:-1])
            lines = []
    assert not lines, f"{path.name}: a statement without its ';'"
    assert len(statements) % 2 == 0, f"{path.name}: a statement without its expected SQL"
    found = []
    for given, expected in zip(statements[::2], statements[1::2], strict=True):
        options, sql = {}, []
        for line in given.splitlines():
            if line.startswith("#") and not sql:
                key, value = line[1:].split(":", 1)
                options[key.strip()] = value.strip()
            else:
                sql.append(line)
        found.append((options, "\n".join(sql), expected))
    return found


def test_every_rule_has_its_fixture_file() -> None:
    assert sorted(p.stem for p in FIXTURES.glob("*.sql")) == sorted(RULES)


@pytest.mark.parametrize(
    ("rule", "options", "sql", "expected"),
    [
        pytest.param(path.stem, *case, id=f"{path.stem}-{i}")
        for path in sorted(FIXTURES.glob("*.sql"))
        for i, case in enumerate(cases(path))
    ],
)
def test_rewrite(rule: str, options: dict[str, str], sql: str, expected: str) -> None:
    arguments = {
        "tables": json.loads(options.get("tables", "{}")),
        "views": json.loads(options.get("views", "{}")),
        "first": tuple(r.strip() for r in options["first"].split(","))
        if "first" in options
        else (),
        "catalog": options.get("catalog", ""),
        "db": options.get("db", ""),
    }
    if expected.startswith("ERROR: "):
        with pytest.raises(DuckstreamError) as raised:
            show(RULES[rule], sql, **arguments)
        assert expected.removeprefix("ERROR: ") in str(raised.value)
    else:
        assert show(RULES[rule], sql, **arguments) == expected
