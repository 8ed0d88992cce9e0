"""Model SQL in: parsed, checked for determinism, qualified against the sources' columns."""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope
from sqlglot.schema import MappingSchema

from ..errors import ConfigurationError, DuckstreamError, UnsupportedSQLError
from ..sql import TableRef
from .aggregates import rewrite_within_group, type_aggregate_calls
from .asof_using import mark_asof_using, restore_asof_times
from .column_lists import expand_column_lists
from .factoring import factor_subquery_conditions
from .grouped_subqueries import rewrite_grouped_subqueries
from .laterals import mark_implicit_laterals, rewrite_laterals, unwrap_lateral_functions
from .limits import drop_idle_limits
from .pivots import rewrite_pivots
from .row_membership import rewrite_row_membership
from .struct_stars import expand_struct_stars
from .tree import Schema
from .validate import check_column_lists, check_deterministic


def parse_sql(sql: str) -> exp.Expr:
    try:
        parsed = sqlglot.parse(sql, read="duckdb")
    except ParseError as error:
        raise DuckstreamError(f"cannot parse the model SQL: {error}") from error
    statements = [p for p in parsed if p is not None]
    if len(statements) != 1:
        raise UnsupportedSQLError(f"{len(statements)} statements", "a model is one SELECT")
    statement = rewrite_within_group(rewrite_pivots(statements[0]))
    check_deterministic(statement)
    type_aggregate_calls(statement)
    drop_idle_limits(statement)
    rewrite_row_membership(statement)
    factor_subquery_conditions(statement)
    drop_idle_parentheses(statement)
    if isinstance(statement, exp.Query) and not _ordered_rows_matter(statement):
        # A table has no order; ORDER BY at the top changes nothing that is stored.
        statement.set("order", None)
    unwrap_lateral_functions(statement)
    name_function_columns(statement)
    return statement


#: where parentheses around a whole expression change nothing
_WHOLE = (exp.Select, exp.Alias, exp.Group, exp.Ordered, exp.Distinct)


def drop_idle_parentheses(statement: exp.Expr) -> None:
    """Drop, in place, the parentheses around a column or a literal, a second pair, and those
    around a whole selected, grouped or ordered expression: ``SELECT DISTINCT(k) ... ORDER BY
    k`` and ``GROUP BY (k)`` name the column ``k`` itself.

    >>> statement = sqlglot.parse_one(
    ...     "SELECT DISTINCT(k), ((a + b)) * 2 AS c FROM t WHERE (k > 1) AND ((v < 3) OR (w))"
    ... )
    >>> drop_idle_parentheses(statement)
    >>> statement.sql()
    'SELECT DISTINCT k, (a + b) * 2 AS c FROM t WHERE (k > 1) AND ((v < 3) OR w)'
    """
    for paren in list(statement.find_all(exp.Paren)):
        inner = paren.this
        if isinstance(inner, exp.Column | exp.Literal | exp.Paren) or isinstance(
            paren.parent, _WHOLE
        ):
            paren.replace(inner)


def source_tables(sql: str, catalog: str, db: str) -> list[TableRef]:
    """The base tables a model reads (CTE names excluded), fully qualified."""
    found: dict[str, TableRef] = {}
    for _, ref in base_tables(tables_qualified(sql, catalog, db), catalog):
        found.setdefault(ref.key, ref)
    return list(found.values())


def pinned_sql(sql: str, catalog: str, db: str, versions: dict[str, int]) -> str:
    """The model's SQL with each source in ``versions`` (by key) read at its snapshot there:
    the query as written, so that DuckDB plans it as it plans the model."""
    statement = tables_qualified(sql, catalog, db).copy()
    for table, ref in base_tables(statement, catalog):
        if ref.key in versions:
            table.set(
                "when",
                exp.HistoricalData(
                    this="AT", kind="VERSION", expression=exp.Literal.number(versions[ref.key])
                ),
            )
    return statement.sql(dialect="duckdb")


@lru_cache(maxsize=256)
def tables_qualified(sql: str, catalog: str, db: str) -> exp.Expr:
    """Shared by every caller with the same arguments (parsing and qualifying take a few ms,
    and a run rebuilding for cost pins the SQL its plan was compiled from): copy to change."""
    return qualify(
        parse_sql(sql),
        catalog=catalog,
        db=db,
        dialect="duckdb",
        qualify_columns=False,
        validate_qualify_columns=False,
        quote_identifiers=False,
        expand_stars=False,
    )


def base_tables(statement: exp.Expr, catalog: str) -> Iterator[tuple[exp.Table, TableRef]]:
    """The tables of a statement that ``tables_qualified`` qualified, and what they name."""
    for table in statement.find_all(exp.Table):
        if table.db and isinstance(table.this, exp.Identifier):
            yield table, TableRef(table.catalog or catalog, table.db, table.name)


def qualify_sql(sql: str, *, schema: Schema, catalog: str, db: str) -> exp.Expr:
    mapping = MappingSchema(cast("dict[str, object]", schema), dialect="duckdb")
    statement = parse_sql(sql)
    expand_column_lists(statement, mapping, catalog, db)
    check_column_lists(statement)
    expand_struct_stars(statement, mapping, catalog, db)
    mark_implicit_laterals(statement)
    mark_asof_using(statement)
    try:
        qualified = qualify(
            statement,
            schema=mapping,
            catalog=catalog,
            db=db,
            dialect="duckdb",
            validate_qualify_columns=True,
            quote_identifiers=True,
        )
    except OptimizeError as error:
        raise ConfigurationError(f"cannot resolve the model SQL: {error}") from error
    restore_asof_times(qualified)
    _expand_order_by_all(qualified)
    _bind_order_names_to_inputs(qualified, mapping)
    rewrite_laterals(qualified)
    rewrite_grouped_subqueries(qualified)
    return qualified


def _expand_order_by_all(qualified: exp.Expr) -> None:
    """Replace, in place, ``ORDER BY ALL`` by the select list's outputs, left to right, each
    in the direction given (DuckDB's meaning); an output whose name repeats is ordered by its
    expression."""
    for select in qualified.find_all(exp.Select):
        order = select.args.get("order")
        terms = order.expressions if order is not None else []
        if order is None or not (len(terms) == 1 and _is_all(terms[0].this)):
            continue
        names = [e.alias_or_name.lower() for e in select.expressions]
        ordered = []
        for output, name in zip(select.expressions, names, strict=True):
            term = terms[0].copy()
            term.set(
                "this",
                exp.column(output.alias_or_name, quoted=True)
                if name and names.count(name) == 1
                else output.unalias().copy(),
            )
            ordered.append(term)
        order.set("expressions", ordered)


def _is_all(term: exp.Expr) -> bool:
    return isinstance(term, exp.Var) and term.name.upper() == "ALL"


def _bind_order_names_to_inputs(qualified: exp.Expr, schema: MappingSchema) -> None:
    """Qualify, in place, the names inside an ORDER BY or DISTINCT ON expression that the
    qualifier took for the select list's but that name an input column of one FROM item:
    DuckDB binds a name inside an expression to the input first (``SELECT v AS k FROM r
    ORDER BY -k`` orders by ``r.k``); a bare ``ORDER BY k`` stays the output."""
    for scope in traverse_scope(qualified):
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        order = select.args.get("order")
        distinct = select.args.get("distinct")
        on = distinct.args.get("on") if isinstance(distinct, exp.Distinct) else None
        terms = [
            *(o.this for o in (order.expressions if order is not None else [])),
            *(on.expressions if on is not None else []),
        ]
        columns: dict[str, set[str]] = {}
        for alias, source in scope.sources.items():
            if isinstance(source, exp.Table):
                names = schema.column_names(source)
            else:
                query = source.expression
                names = query.named_selects if isinstance(query, exp.Query) else []
            columns[alias] = {n.lower() for n in names}
        for term in terms:
            if isinstance(term, exp.Column):
                continue
            for column in term.find_all(exp.Column):
                if column.table:
                    continue
                owners = [a for a, names in columns.items() if column.name.lower() in names]
                if len(owners) == 1:
                    column.set("table", exp.to_identifier(owners[0], quoted=True))


def parse_table(name: str, catalog: str, db: str) -> TableRef:
    table = exp.to_table(name, dialect="duckdb")
    return TableRef(table.catalog or catalog, table.db or db, table.name)


def _ordered_rows_matter(query: exp.Query) -> bool:
    """Whether the ORDER BY picks rows: with LIMIT/OFFSET (a top-N) or DISTINCT ON."""
    distinct = query.args.get("distinct")
    on = distinct.args.get("on") if isinstance(distinct, exp.Distinct) else None
    return any(query.args.get(k) is not None for k in ("limit", "offset")) or on is not None


#: the column DuckDB names the output of a table function called without column names
_FUNCTION_COLUMNS = {"RANGE": "range", "GENERATE_SERIES": "generate_series", "UNNEST": "unnest"}


def name_function_columns(statement: exp.Expr) -> None:
    """Give VALUES lists and table functions in FROM the column names DuckDB gives them
    (``col0``, ``col1``, ...; ``range``, ``generate_series``, ``unnest``), so that columns
    resolve as they do in DuckDB."""
    for clause in list(statement.find_all(exp.From, exp.Join)):
        item = clause.this
        if isinstance(item, exp.Values):
            first = item.expressions[0] if item.expressions else None
            width = len(first.expressions) if isinstance(first, exp.Tuple) else 1
            names, default = [f"col{i}" for i in range(width)], "valueslist"
        elif isinstance(item, exp.Unnest) or (
            isinstance(item, exp.Table) and isinstance(item.this, exp.GenerateSeries | exp.Unnest)
        ):
            call = item if isinstance(item, exp.Unnest) else item.this
            key = call.sql(dialect="duckdb").split("(")[0].upper()
            names = [_FUNCTION_COLUMNS.get(key, key.lower())]
            default = names[0]
        else:
            continue
        alias = item.args.get("alias")
        if isinstance(alias, exp.TableAlias) and alias.columns:
            continue
        if not isinstance(alias, exp.TableAlias):
            alias = exp.TableAlias(this=exp.to_identifier(default))
        alias.set("columns", [exp.to_identifier(n) for n in names])
        item.set("alias", alias)
