"""Does a maintained table equal a fresh recomputation of its SQL?

As bags: a missing or an extra copy of a row is a difference, so row counts agree exactly.
Floating-point values may differ from a recomputation in their last bits (a sum maintained
over many runs adds in another order), so rows left over by ``EXCEPT ALL`` in both directions
are paired: equal in every other column, and floats within a relative 1e-9 (or 1e-12
absolutely), paired in their sorted order; so are the floats inside a STRUCT, LIST, ARRAY or
MAP value (``{'n': count(*), 's': sum(x)}``). Whatever stays unpaired is a difference.
"""

from __future__ import annotations

from contextlib import nullcontext

import duckdb
from sqlglot import exp

from ..compiler.ties import CUT, RANGE, VALUE, Tie, Ties
from ..sql import joins_asof, literal, quote, same_values
from .inlining import is_float_type
from .lake import (
    describe,
    feed_safe_optimizers,
    sound_optimizers,
    without_refused_join_filters,
)

FLOAT_TYPES = frozenset({exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE})
RELATIVE_TOLERANCE = 1e-9
ABSOLUTE_TOLERANCE = 1e-12


def _close(a: str, b: str) -> str:
    """Two floats that a maintained and a recomputed value may be."""
    return (
        f"({a} IS NOT DISTINCT FROM {b} OR abs({a} - {b}) <= "
        f"greatest({RELATIVE_TOLERANCE} * greatest(abs({a}), abs({b})), {ABSOLUTE_TOLERANCE}))"
    )


def _alike(a: str, b: str, kind: exp.DataType, depth: int = 0) -> str:
    """Two values of type ``kind`` that a maintained and a recomputed row may hold: equal,
    but for floats (``_close``), which may sit inside nested values; never NULL."""
    if not is_float_type(kind.sql(dialect="duckdb")):
        return f"({a} IS NOT DISTINCT FROM {b})"
    if kind.this in FLOAT_TYPES:
        return f"coalesce({_close(a, b)}, FALSE)"
    if kind.this == exp.DataType.Type.STRUCT:
        fields = [
            _alike(
                f"struct_extract({a}, {literal(field.name)})",
                f"struct_extract({b}, {literal(field.name)})",
                field.args["kind"],
                depth,
            )
            for field in kind.expressions
        ]
        return f"(({a} IS NULL) = ({b} IS NULL) AND {' AND '.join(fields)})"
    if kind.this == exp.DataType.Type.MAP:
        parts = [
            _alike(f"{part}({a})", f"{part}({b})", _list_of(of), depth)
            for part, of in zip(("map_keys", "map_values"), kind.expressions, strict=True)
        ]
        return f"({' AND '.join(parts)})"
    (element,) = kind.expressions  # a LIST or a fixed-size ARRAY
    i = f"_ivm_i{depth}"
    each = _alike(f"{a}[{i}]", f"{b}[{i}]", element, depth + 1)
    return (
        f"coalesce(({a} IS NULL AND {b} IS NULL) OR (len({a}) = len({b}) AND coalesce("
        f"list_bool_and(list_transform(range(1, len({a}) + 1), lambda {i}: {each})), TRUE)), "
        "FALSE)"
    )


def _list_of(element: exp.DataType) -> exp.DataType:
    return exp.DataType(this=exp.DataType.Type.ARRAY, expressions=[element], nested=True)


def differences_sql(
    table: str, query: str, columns: list[tuple[str, str]], ties: Ties | None = None
) -> str:
    """Rows in one side but not the other, with a ``_side`` column naming where they are.

    With ``ties`` (the model plan's, ``compiler.ties``), a model whose windows may order tied
    rows either way is compared so that the order within ties does not count
    (``tie_aware_sql``); a model without them, or with a tie no invariant covers, exactly."""
    if ties is not None and not ties.exact:
        return tie_aware_sql(table, query, columns, ties)
    select = ", ".join(quote(c) for c, _ in columns)
    return _compared(
        f"SELECT {select} FROM {table}", f"SELECT {select} FROM (\n{query}\n)", columns
    )


def tie_aware_sql(table: str, query: str, columns: list[tuple[str, str]], ties: Ties) -> str:
    """The differences that do not depend on the order within ties, a ``_compared`` column
    saying which comparison found each: ``row`` (every column no tie changes, over every
    row), then per tie what stays fixed whichever order its ties take:

    - ``position``: the bag of (its key columns that are output, its values);
    - ``value``: (keys, values) exactly, in the partitions without a tie on either side,
      when every key is an output column; else the values are not compared;
    - ``cut``: the bag of (keys, values) of the rows kept (with no key output, the number of
      rows); which of the tied rows a cut keeps is open, so there is no ``row`` comparison:
      only the rows of the tie groups a cut of a prefix or range of positions keeps whole
      (every group but its last, or its first and last) are compared exactly, when every
      key is an output column.
    """
    select = ", ".join(quote(c) for c, _ in columns)
    types = dict(columns)
    tied = {c for tie in ties.found for c in tie.columns}
    cut = any(tie.kind == CUT for tie in ties.found)
    parts: list[tuple[str, str, str, list[str]]] = []
    rest = [c for c, _ in columns if c not in tied]
    if not cut:
        # every column tied: the row counts still compare (a bag's size is fixed)
        parts.append(("row" if rest else "rows", "model_rows", "recomputed_rows", rest))
    for tie in ties.found:
        compared = list(dict.fromkeys([*tie.keys, *tie.columns]))
        label = f"{tie.kind} {', '.join(tie.columns) or 'rows'} per ({', '.join(tie.keys)})"
        if tie.kind != VALUE:
            parts.append((label, "model_rows", "recomputed_rows", compared))
        if tie.kind == CUT and tie.span is not None and tie.complete and rest:
            parts.append(
                (
                    f"{label}, rows of the tie groups it keeps whole",
                    _kept_whole("model_rows", tie),
                    _kept_whole("recomputed_rows", tie),
                    rest,
                )
            )
        elif tie.complete:
            parts.append(
                (
                    f"{label}, partitions without ties",
                    _untied("model_rows", tie),
                    _untied("recomputed_rows", tie),
                    compared,
                )
            )
    unions = []
    for label, maintained, expected, names in parts:
        if not names:
            unions.append(_counted(label, maintained, expected, columns))
            continue
        listed = ", ".join(quote(c) for c in names)
        inner = _compared(
            f"SELECT {listed} FROM {maintained}",
            f"SELECT {listed} FROM {expected}",
            [(c, types[c]) for c in names],
        )
        out = ", ".join(quote(c) if c in names else f"NULL AS {quote(c)}" for c, _ in columns)
        unions.append(f"SELECT _side, {literal(label)} AS _compared, {out} FROM (\n{inner}\n)")
    return (
        f"WITH model_rows AS MATERIALIZED (SELECT {select} FROM {table}),\n"
        f"recomputed_rows AS MATERIALIZED (SELECT {select} FROM (\n{query}\n))\n"
        + "\nUNION ALL\n".join(unions)
    )


def _untied(rows: str, tie: Tie) -> str:
    """The rows of ``rows`` in partitions of ``tie`` where no two rows tie."""

    def over(keys: tuple[str, ...]) -> str:
        return f"PARTITION BY {', '.join(quote(c) for c in keys)}" if keys else ""

    return (
        f"(SELECT * FROM (SELECT *, max(_ivm_n) OVER ({over(tie.partition)}) AS _ivm_most FROM "
        f"(SELECT *, count(*) OVER ({over(tie.keys)}) AS _ivm_n FROM {rows})) "
        "WHERE _ivm_most = 1)"
    )


def _kept_whole(rows: str, tie: Tie) -> str:
    """The rows of ``rows`` in the tie groups a cut keeps whole: before the last kept group of
    a partition (``PREFIX``), or between its first and last (``RANGE``)."""
    partition = ", ".join(quote(c) for c in tie.partition)
    by = f"PARTITION BY {partition}" if partition else ""
    inner = "_ivm_g > 1 AND " if tie.span == RANGE else ""
    return (
        f"(SELECT * FROM (SELECT *, max(_ivm_g) OVER ({by}) AS _ivm_last FROM "
        f"(SELECT *, dense_rank() OVER ({by} ORDER BY {', '.join(tie.ordering)}) AS _ivm_g "
        f"FROM {rows})) WHERE {inner}_ivm_g < _ivm_last)"
    )


def _counted(label: str, maintained: str, expected: str, columns: list[tuple[str, str]]) -> str:
    """The row counts of both sides, when they differ."""
    nulls = ", ".join(f"NULL AS {quote(c)}" for c, _ in columns)
    return (
        f"SELECT _side, {literal(label)} || ': ' || n || ' rows' AS _compared, {nulls} FROM ("
        f"SELECT 'only in table' AS _side, (SELECT count(*) FROM {maintained}) AS n "
        f"UNION ALL SELECT 'only in recomputation', (SELECT count(*) FROM {expected})) "
        f"WHERE (SELECT count(*) FROM {maintained}) <> (SELECT count(*) FROM {expected})"
    )


def _compared(maintained: str, expected: str, columns: list[tuple[str, str]]) -> str:
    """Rows of the query ``maintained`` but not of ``expected`` and the other way round, as
    bags, floats paired within the tolerance."""
    names = [c for c, _ in columns]
    floats = [i for i, (_, t) in enumerate(columns) if is_float_type(t)]
    exact = [i for i in range(len(columns)) if i not in floats]
    leftovers = (
        f"WITH maintained AS ({maintained}),\n"
        f"expected AS ({expected}),\n"
        f"only_table AS (SELECT * FROM maintained EXCEPT ALL SELECT * FROM expected),\n"
        f"only_query AS (SELECT * FROM expected EXCEPT ALL SELECT * FROM maintained)"
    )
    if not floats:
        return (
            f"{leftovers}\n"
            f"SELECT 'only in table' AS _side, * FROM only_table\n"
            f"UNION ALL\n"
            f"SELECT 'only in recomputation' AS _side, * FROM only_query"
        )
    partition = ", ".join(quote(names[i]) for i in exact)
    order = ", ".join(quote(names[i]) for i in floats)
    numbered = (
        f"row_number() OVER ({f'PARTITION BY {partition} ' if partition else ''}ORDER BY {order})"
    )

    def side(prefix: str) -> str:
        return ", ".join(f"{quote(c)} AS {quote(f'{prefix}{i}')}" for i, c in enumerate(names))

    paired = same_values(
        [(f"t.{quote(f't{i}')}", f"q.{quote(f'q{i}')}") for i in exact]
        + [("t._ivm_tn", "q._ivm_qn")]
    )
    close = " AND ".join(
        _alike(
            f"t.{quote(f't{i}')}",
            f"q.{quote(f'q{i}')}",
            exp.DataType.build(columns[i][1], dialect="duckdb"),
        )
        for i in floats
    )

    def out(prefix: str) -> str:
        return ", ".join(f"{quote(f'{prefix}{i}')} AS {quote(c)}" for i, c in enumerate(names))

    return (
        f"{leftovers},\n"
        f"t AS (SELECT {side('t')}, {numbered} AS _ivm_tn FROM only_table),\n"
        f"q AS (SELECT {side('q')}, {numbered} AS _ivm_qn FROM only_query),\n"
        f"pairs AS (SELECT t.*, q.*, _ivm_tn IS NOT NULL AS _in_t, _ivm_qn IS NOT NULL AS _in_q,"
        f" coalesce(_ivm_tn IS NOT NULL AND _ivm_qn IS NOT NULL AND {close}, FALSE) AS _close"
        f" FROM t FULL JOIN q ON {paired})\n"
        f"SELECT 'only in table' AS _side, {out('t')} FROM pairs WHERE _in_t AND NOT _close\n"
        f"UNION ALL\n"
        f"SELECT 'only in recomputation' AS _side, {out('q')} FROM pairs WHERE _in_q AND NOT _close"
    )


def differences(
    con: duckdb.DuckDBPyConnection,
    table: str,
    query: str,
    limit: int = 20,
    ties: Ties | None = None,
) -> list[tuple]:
    """The first ``limit`` rows of ``differences_sql``: none when the table is consistent."""
    columns = describe(con, table)
    # the recomputation must not trust DuckLake's table statistics, which a rewrite can leave
    # wrong (see ``lake.STATISTICS_OPTIMIZERS``), nor push join filters below a LIMIT; an ASOF
    # join keeps them, as a ``table`` materialization does (``sql.joins_asof``)
    statistics = nullcontext() if joins_asof(query) else feed_safe_optimizers(con)
    found = differences_sql(table, query, columns, ties)
    with statistics, sound_optimizers(con, query):
        statement = f"SELECT * FROM (\n{found}\n) LIMIT {limit}"
        return without_refused_join_filters(con, lambda: con.execute(statement).fetchall())
