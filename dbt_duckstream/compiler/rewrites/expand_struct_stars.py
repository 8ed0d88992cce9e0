"""A STRUCT's fields selected at once, ``s.*`` or ``unnest(s)``, written out field by field.

A nested source (JSON or Parquet read into STRUCTs) is flattened in staging by selecting a
struct column's fields as columns: ``SELECT id, payload.* FROM events`` or
``SELECT unnest(payload) FROM events``. DuckDB expands both when it binds the query, into one
column per field named after it (a NULL struct gives NULL fields). The compiler must know
every column an expression reads, so each is written out here from the column's type:
``struct_extract(payload, 'field') AS field`` per field, ``EXCLUDE`` applied. A star whose
name is a ``FROM`` item is that item's columns, as DuckDB reads it, and is left alone; so is
a struct whose type is not known here (a refusal then names it), and ``unnest(s, recursive :=
true)``.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from ..context import Context
from ..scopes import from_items, selects_inside_out, star_probe


def expand_struct_stars(expression: exp.Expr, context: Context) -> exp.Expr:
    """Write out, in place, every ``s.*`` and ``unnest(s)`` of a select list whose ``s`` is a
    STRUCT column of the ``FROM``.

    >>> from dbt_duckstream.compiler.pipeline import show
    >>> tables = {"t": {"id": "INT", "s": "STRUCT(a INT, b TEXT)"}}
    >>> print(show(expand_struct_stars, "SELECT id, s.* FROM t", tables=tables))
    SELECT id, STRUCT_EXTRACT(s, 'a') AS "a", STRUCT_EXTRACT(s, 'b') AS "b" FROM t
    """
    schema, catalog, db = context.schema, context.catalog or None, context.db or None
    for select in selects_inside_out(expression):
        named = [_struct_named(p, select) for p in select.expressions]
        if not any(named):
            continue
        fields = _struct_fields(select, schema, catalog, db)
        expressions: list[exp.Expr] = []
        for projection, name in zip(select.expressions, named, strict=True):
            found = fields.get(name) if name else None
            if name is None or found is None:
                expressions.append(projection)
                continue
            excluded = {e.name.lower() for e in _excluded(projection)}
            expressions.extend(
                exp.alias_(
                    exp.func("struct_extract", exp.column(name), exp.Literal.string(field)),
                    exp.to_identifier(field, quoted=True),
                )
                for field in found
                if field.lower() not in excluded
            )
        select.set("expressions", expressions)
    return expression


def _struct_named(projection: exp.Expr, select: exp.Select) -> str | None:
    """The column a projection would expand as a struct: ``name.*`` (not naming a ``FROM``
    item) or ``unnest(name)``."""
    if isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
        if projection.table and projection.table not in from_items(select):
            return projection.table
        return None
    inner = projection.unalias()
    if isinstance(inner, exp.Explode | exp.Unnest) and not inner.expressions:
        argument = inner.this
        if isinstance(argument, exp.Column) and not argument.table:
            return argument.name
    return None


def _excluded(projection: exp.Expr) -> list[exp.Expr]:
    star = projection.this if isinstance(projection, exp.Column) else None
    return list(star.args.get("except_") or []) if isinstance(star, exp.Star) else []


def _struct_fields(
    select: exp.Select, schema: MappingSchema, catalog: str | None, db: str | None
) -> dict[str, list[str]]:
    """The fields of each STRUCT column of the ``FROM`` of ``select``, by column name."""
    probe = star_probe(select)
    if probe is None:
        return {}
    try:
        typed = annotate_types(
            qualify(probe, schema=schema, catalog=catalog, db=db, dialect="duckdb"),
            schema=schema,
            dialect="duckdb",
        )
    except (OptimizeError, ValueError):
        return {}
    found: dict[str, list[str]] = {}
    for projection in typed.selects:
        kind = projection.type
        if kind is not None and kind.is_type(exp.DType.STRUCT) and kind.expressions:
            fields = [f.name for f in kind.expressions if isinstance(f, exp.ColumnDef)]
            if len(fields) == len(kind.expressions):
                found.setdefault(projection.alias_or_name, fields)
    return found
