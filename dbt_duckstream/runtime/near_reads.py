"""What a semi, anti or mark join reads when its change is judged: the rows of its inputs
that the change's keys can meet, priced for the cost estimate.

A change of the subquery side finds the outer rows it touches by reading the outer input
narrowed to the change's keys (``Operator.state_near``: pushed through filters, projections
and joins down to the scans), then judges them over the subquery side narrowed to the touched
rows' keys; a change of the outer side judges its rows over the subquery side narrowed the same
way. Where a narrowed key passes unchanged from a changed source's column (``origin``), a scan
read by it costs the rows of its files whose key range meets that column's values in the
window's delta (``key_ranges``), as a join term's narrowed read does; a group column of an
aggregate reads its state table by key, not its input.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

from ..compiler.operators import Aggregate, Filter, Join, Operator, Project, Scan
from ..compiler.operators.membership import MembershipJoin
from ..compiler.operators.stored_input import StoredInput
from .key_ranges import NarrowedRead

#: per column whose values narrow a read, the changed source column they pass from
Origins = dict[str, tuple[str, str]]
Keys = tuple[tuple[str, str], ...]
#: a membership join, one of its inputs read narrowed, the keys and their origins, and how
#: many times the read is taken
NearRead = tuple[MembershipJoin, Operator, Keys, Origins, int]


def origin(node: Operator, column: str) -> tuple[Scan, str] | None:
    """The scan column that ``column`` of ``node`` passes through unchanged, if any.

    >>> from dbt_duckstream.compiler.operators import Scan
    >>> from dbt_duckstream.sql import TableRef
    >>> scan = Scan(TableRef("lake", "main", "t"), ("k", "v"))
    >>> origin(scan, "k")[1], origin(scan, "x")
    ('k', None)
    """
    if isinstance(node, Scan):
        return (node, column) if column in node.read else None
    if isinstance(node, Filter):
        return origin(node.child, column)
    if isinstance(node, Project):
        passed = node.passed_keys(((column, column),))
        return origin(node.child, passed[0][0]) if passed else None
    if isinstance(node, Join):
        for joined in node.inputs:
            for own in joined.node.columns:
                if joined.output(own) == column:
                    return origin(joined.node, own)
        return None
    if isinstance(node, Aggregate) and column in node.key_columns:
        key = node.keys[node.key_columns.index(column)]
        if isinstance(key, exp.Column) and not key.table and key.name in node.child.columns:
            return origin(node.child, key.name)
    return None


def near_reads(root: Operator, changed: frozenset[str]) -> Iterator[NearRead]:
    """The narrowed reads of every membership join that a change in ``changed`` (source
    keys) makes its run take."""
    for node in root.walk():
        if not isinstance(node, MembershipJoin):
            continue
        left, right = node.left.node, node.right.node
        keys = node.membership.touching_keys(node.inputs, node.verdict)
        swapped = tuple((theirs, mine) for mine, theirs in keys)
        if reads_changed(right, changed):
            by_right = _origins(right, [theirs for _, theirs in keys], changed)
            by_left = {mine: by_right[theirs] for mine, theirs in keys if theirs in by_right}
            yield node, left, keys, by_right, 1
            yield node, right, swapped, by_left, 2
        if reads_changed(left, changed):
            yield node, right, swapped, _origins(left, [mine for mine, _ in keys], changed), 1


def near_rows(
    node: Operator,
    keys: Keys,
    origins: Origins,
    rows: dict[str, int],
    narrowed: dict[NarrowedRead, int],
    wanted: set[NarrowedRead],
    above: exp.Expr | None = None,
) -> int:
    """Rows that ``node``'s state narrowed by ``keys`` reads; the key-range reads it would
    price by are added to ``wanted``, and priced from ``narrowed`` where known."""
    if not keys:
        return rows_read(node, rows)
    if isinstance(node, Scan):
        reads = [
            NarrowedRead(node.table.key, mine, *origins[theirs])
            for mine, theirs in keys
            if theirs in origins
        ]
        wanted.update(reads)
        bounded = [narrowed[r] for r in reads if r in narrowed]
        return min(bounded) if bounded else rows_read(node, rows)
    if isinstance(node, Filter):
        predicate = node.predicate if above is None else exp.and_(node.predicate, above)
        return near_rows(node.child, keys, origins, rows, narrowed, wanted, predicate)
    if isinstance(node, Project) and (inner := node.passed_keys(keys)):
        return near_rows(node.child, inner, origins, rows, narrowed, wanted)
    if isinstance(node, Join):
        per_input = node.keys_per_input(keys, above)
        return sum(
            near_rows(j.node, per_input.get(i, ()), origins, rows, narrowed, wanted)
            for i, j in enumerate(node.inputs)
        )
    if isinstance(node, Aggregate) and node.narrows_state(keys):
        return 0
    return rows_read(node, rows)


def _origins(node: Operator, columns: list[str], changed: frozenset[str]) -> Origins:
    """Per column of ``node`` that passes from a changed source's column, that column."""
    found: Origins = {}
    for column in columns:
        source = origin(node, column)
        if source is not None and source[0].table.key in changed:
            found[column] = (source[0].table.key, source[1])
    return found


def reads_changed(node: Operator, changed: frozenset[str]) -> bool:
    """Whether ``node`` reads a source of ``changed`` (keys)."""
    return any(s.key in changed for s in node.sources())


def rows_read(node: Operator, rows: dict[str, int]) -> int:
    """The rows of the sources ``node`` reads, from ``rows`` (by source key); a stored
    input's, the rows of its state table, when ``rows`` holds them."""
    sources: set[str] = set()
    stored = 0

    def visit(n: Operator) -> None:
        nonlocal stored
        kept = n.state_table.key if isinstance(n, StoredInput) and n.state_table else None
        if kept is not None and kept in rows:
            stored += rows[kept]
            return
        sources.update(s.key for s in n.own_sources())
        for child in n.children:
            visit(child)

    visit(node)
    return stored + sum(rows.get(key, 0) for key in sources)
