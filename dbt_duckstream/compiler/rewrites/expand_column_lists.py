"""DuckDB's ``COLUMNS(...)``, written out as the columns it stands for.

``COLUMNS(*)``, ``COLUMNS('regex')``, ``COLUMNS(['a', 'b'])`` and ``COLUMNS(c -> ...)`` choose
among the columns of a ``SELECT``'s ``FROM`` (what its ``*`` would give) when DuckDB binds the
query: the staging idioms ``SELECT trim(COLUMNS(*))``, ``max(COLUMNS('amount_.*'))``. The
compiler must know every column an expression reads, so each is written out here, once the
sources' columns are known, as DuckDB reads it:

* an expression of the select list holding a ``COLUMNS`` stands for one copy per chosen column,
  named after the column (``min(COLUMNS(*))`` gives ``min(a) AS a, min(b) AS b``); an alias
  names every copy, a regex's groups in it (``AS '\\1_total'``) taken from each name;
* ``*COLUMNS(...)`` among a function's arguments stands for the chosen columns as arguments;
* a ``WHERE`` holding one is the ``AND`` of one copy of the whole condition per column.

Which names a regex or a lambda chooses, and what a regex alias makes of them, is asked of
DuckDB itself (a regex matches anywhere in a name, case-sensitively). A ``COLUMNS`` elsewhere
(``GROUP BY``, ``HAVING``, ``ORDER BY``), two different ones in one expression, ``REPLACE`` or
``RENAME`` inside it, or one that matches no column stays refused
(``validate.check_column_lists``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import duckdb
from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from ...errors import UnsupportedSQLError
from ...sql import literal
from ..context import Context
from ..scopes import from_items, selects_inside_out, star_probe

#: stands for an unpacked ``*COLUMNS(...)`` while the call around it is written out
_UNPACKED = "__duckstream_unpacked"


def expand_column_lists(expression: exp.Expr, context: Context) -> exp.Expr:
    """Write out, in place, every ``COLUMNS(...)`` of a select list or a ``WHERE``, the
    tables it reads resolved in the sources' columns as ``qualify`` resolves them.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> tables = {"t": {"id": "INT", "amount_a": "DOUBLE", "amount_b": "DOUBLE"}}
    >>> print(show(expand_column_lists,
    ...     "SELECT id, sum(COLUMNS('amount_.*')) FROM t GROUP BY id", tables=tables))
    SELECT id, SUM("amount_a") AS "amount_a", SUM("amount_b") AS "amount_b" FROM t GROUP BY id
    """
    schema, catalog, db = context.schema, context.catalog or None, context.db or None
    for select in selects_inside_out(expression):
        if next(_column_lists(select), None) is None:
            continue
        available = _available_columns(select, schema, catalog, db)
        if available is None:
            continue
        for column_list in [c for c in _column_lists(select) if c.args.get("unpack")]:
            _unpack(column_list, available)
        select.set(
            "expressions", [copy for p in select.expressions for copy in _copies(p, available)]
        )
        where = select.args.get("where")
        if where is not None and _own(where.this):
            copies = [c.unalias() for c in _copies(where.this, available)]
            where.set("this", exp.and_(*copies))
    return expression


def _column_lists(select: exp.Select) -> Iterator[exp.Columns]:
    """The ``COLUMNS`` of the select list and ``WHERE`` of ``select`` itself."""
    where = select.args.get("where")
    for part in [*select.expressions, *([where.this] if where is not None else [])]:
        yield from _own(part)


def _own(expression: exp.Expr) -> list[exp.Columns]:
    """The ``COLUMNS`` in ``expression`` outside the queries it holds (``expression`` too)."""
    found: list[exp.Columns] = []
    pending = [expression]
    while pending:
        node = pending.pop()
        if isinstance(node, exp.Columns):
            found.append(node)
        pending.extend(c for c in node.iter_expressions() if not isinstance(c, exp.Query))
    return found


def _available_columns(
    select: exp.Select, schema: MappingSchema, catalog: str | None, db: str | None
) -> list[exp.Expr] | None:
    """What ``SELECT *`` would give over the ``FROM`` of ``select``, each as a column to read
    it by (named after the column), in order; None when it cannot be resolved (the refusal
    then names the ``COLUMNS``)."""
    probe = star_probe(select)
    if probe is None:
        return None
    try:
        qualified = qualify(
            probe, schema=schema, catalog=catalog, db=db, dialect="duckdb", quote_identifiers=False
        )
    except (OptimizeError, ValueError):
        return None
    if not isinstance(qualified, exp.Select) or any(
        isinstance(p, exp.Star) for p in qualified.selects
    ):
        return None
    names = [p.alias_or_name for p in qualified.selects]
    items = from_items(select)
    found: list[exp.Expr] = []
    for projection, name in zip(qualified.selects, names, strict=True):
        read = projection.unalias()
        qualifier = read.table if names.count(name) > 1 and isinstance(read, exp.Column) else None
        if qualifier is not None and qualifier not in items:
            return None  # a name two unnamed items share
        found.append(exp.column(exp.to_identifier(name, quoted=True), qualifier))
    return found


def _chosen(column_list: exp.Columns, available: list[exp.Expr]) -> list[exp.Expr]:
    """The columns ``column_list`` chooses, in the ``FROM``'s order."""
    argument = column_list.this
    names = [c.name for c in available]
    if isinstance(argument, exp.Star):
        if argument.args.get("replace") or argument.args.get("rename"):
            return []
        excluded = {e.name for e in argument.args.get("except_") or []}
        return [c for c in available if c.name not in excluded]
    if isinstance(argument, exp.Array | exp.Literal | exp.Lambda):
        test = {
            exp.Array: f"lambda c: list_contains({argument.sql('duckdb')}, c)",
            exp.Literal: f"lambda c: regexp_matches(c, {argument.sql('duckdb')})",
            exp.Lambda: argument.sql("duckdb"),
        }[type(argument)]
        picked = _ask(f"SELECT list_filter(?::VARCHAR[], {test})", names)
        return [c for c in available if c.name in set(picked)]
    return []


def _copies(expression: exp.Expr, available: list[exp.Expr]) -> list[exp.Expr]:
    """``expression`` (a projection, or a condition) once per column its ``COLUMNS`` choose,
    each named as DuckDB names it; as it is when it holds none."""
    held = [c for c in _own(expression) if not c.args.get("unpack")]
    if not held:
        return [expression]
    if len({c.sql("duckdb") for c in held}) > 1:
        raise UnsupportedSQLError(
            f"several COLUMNS in {expression.sql(dialect='duckdb')}",
            "DuckDB takes one COLUMNS(...) an expression; write the expressions out",
        )
    chosen = _chosen(held[0], available)
    if not chosen:
        return [expression]
    alias = expression.alias if isinstance(expression, exp.Alias) else ""
    names = [c.name for c in chosen]
    if alias and isinstance(held[0].this, exp.Literal):
        names = _ask(
            f"SELECT list_transform(?::VARCHAR[], lambda c: regexp_replace(c, "
            f"{held[0].this.sql('duckdb')}, {literal(alias)}))",
            names,
        )
    elif alias:
        names = [alias] * len(names)
    copies = []
    for column, name in zip(chosen, names, strict=True):
        copy = expression.unalias().copy()
        if isinstance(copy, exp.Columns):
            copy = column.copy()
        for node in _own(copy):
            if not node.args.get("unpack"):
                node.replace(column.copy())
        copies.append(exp.alias_(copy, exp.to_identifier(name, quoted=True)))
    return copies


def _unpack(column_list: exp.Columns, available: list[exp.Expr]) -> None:
    """Replace the call holding ``*COLUMNS(...)`` by the same call with the chosen columns as
    its arguments there (DuckDB's unpacking)."""
    call = column_list.parent
    chosen = _chosen(column_list, available)
    if not isinstance(call, exp.Func) or not chosen:
        return
    column_list.replace(exp.Anonymous(this=_UNPACKED))
    arguments = ", ".join(c.sql("duckdb") for c in chosen)
    written = re.sub(rf"{_UNPACKED}\(\)", arguments, call.sql("duckdb"), flags=re.IGNORECASE)
    call.replace(exp.maybe_parse(written, dialect="duckdb"))


def _ask(query: str, names: list[str]) -> list[str]:
    """A list of names computed by DuckDB (its regex and lambda semantics), without a lake."""
    with duckdb.connect() as con:
        try:
            row = con.execute(query, [names]).fetchone()
        except duckdb.Error as error:
            raise UnsupportedSQLError(f"COLUMNS(...): {error}") from error
    return list(row[0]) if row and row[0] is not None else []
