"""The order of the rewrites, declared once, in phases: what a model's SQL goes through
before it is lowered to operators (``tree``).

A rewrite is ``rule(expression, context) -> expression`` (``rewrites/``): it may change the
expression in place and returns the statement (a new root when it replaced it), or raises an
``UnsupportedSQLError`` that names the construct it refuses. Adding one: write the module with
its example and a fixture file (``tests/fixtures/rewrites/<rule>.sql``), and place it in a
phase below with the reason it stands there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp

from .context import Catalog, Context, MappingCatalog, Schema
from .parse import parse_statement
from .rewrites.bind_order_names import bind_order_names
from .rewrites.check_column_lists import check_column_lists
from .rewrites.check_deterministic import check_deterministic
from .rewrites.decorrelate_laterals import decorrelate_laterals
from .rewrites.drop_idle_limits import drop_idle_limits
from .rewrites.drop_idle_parentheses import drop_idle_parentheses
from .rewrites.drop_unordered_order import drop_unordered_order
from .rewrites.expand_column_lists import expand_column_lists
from .rewrites.expand_order_by_all import expand_order_by_all
from .rewrites.expand_pivots import expand_pivots
from .rewrites.expand_struct_stars import expand_struct_stars
from .rewrites.factor_subquery_conditions import factor_subquery_conditions
from .rewrites.inline_views import inline_views
from .rewrites.key_grouped_subqueries import key_grouped_subqueries
from .rewrites.mark_asof_using import mark_asof_using
from .rewrites.mark_implicit_laterals import mark_implicit_laterals
from .rewrites.name_function_columns import name_function_columns
from .rewrites.qualify import qualify
from .rewrites.restore_asof_times import restore_asof_times
from .rewrites.row_in_as_exists import row_in_as_exists
from .rewrites.type_aggregate_calls import type_aggregate_calls
from .rewrites.unwrap_lateral_functions import unwrap_lateral_functions
from .rewrites.within_group_as_calls import within_group_as_calls

Rewrite = Callable[[exp.Expr, Context], exp.Expr]

#: Phase 1, the SQL as written: rules that need no source's columns. Its output is also the
#: SQL the model stands for (``IVMPlan.sql``: what a refill and a consistency check run).
WRITTEN: tuple[Rewrite, ...] = (
    # 1. First: a PIVOT statement is no SELECT, and every rule below reads SELECT blocks (the
    #    aggregates of its USING among them).
    expand_pivots,
    # 2. Before typing aggregates: a call it cannot write as DuckDB's is read back from
    #    DuckDB's text, as an unknown call that typing then recognizes.
    within_group_as_calls,
    # 3. Before the rules that copy parts of the SQL: the refusal names what was written.
    check_deterministic,
    # 4. Before dropping LIMITs: ``SELECT product(v) FROM t`` is one row only once
    #    ``product`` is known to aggregate.
    type_aggregate_calls,
    # 5. Before dropping ORDER BY: a dropped LIMIT leaves an ORDER BY that picks no row
    #    (TPC-DS q16, q61: one-row aggregates under ``ORDER BY ... LIMIT 100``).
    drop_idle_limits,
    # 6.-7. Subqueries the subquery rules decorrelate only when correlated by equalities:
    #    before qualification, which must resolve the derived table ``row_in_as_exists``
    #    writes, and before ``key_grouped_subqueries``, which keys a body by equalities.
    row_in_as_exists,
    factor_subquery_conditions,
    # 8. Before qualification: ``SELECT DISTINCT(k)`` must name its output ``k``, not a
    #    generated name.
    drop_idle_parentheses,
    # 9. After dropping LIMITs (5).
    drop_unordered_order,
    # 10. Before naming function columns: the unwrapped call is then the table function whose
    #     column DuckDB names.
    unwrap_lateral_functions,
    # 11. Before qualification: a column of VALUES or of a table function resolves by the
    #     name DuckDB gives it.
    name_function_columns,
    # 12. Last of the phase: a view's body is read through the rules above, as the model's
    #     SQL was; the tables the model reads are known once its views are inlined.
    inline_views,
)

#: Phase 2, the sources' columns known (``Context.schema``): qualification and the rules
#: around it.
RESOLVED: tuple[Rewrite, ...] = (
    # 13.-15. Before qualification, which expands ``*`` and would fail on a ``COLUMNS(...)``
    #     or read ``s.*`` of a STRUCT column as a table's: written out from the columns, and
    #     what is left of ``COLUMNS`` refused, naming it.
    expand_column_lists,
    check_column_lists,
    expand_struct_stars,
    # 16.-17. Marks qualification needs or loses: a derived table naming an earlier FROM
    #     item is LATERAL (the qualifier resolves ``o.id`` inside it only so), and which
    #     ``ASOF ... USING`` column is the time (qualification writes ``=`` for every one, and
    #     the join then has no inequality).
    mark_implicit_laterals,
    mark_asof_using,
    # 18. Every column names its table, every ``*`` written out: the rules below and the
    #     lowering read only qualified SQL.
    qualify,
    # 19. Right after qualification: the equality it wrote for the marked time column.
    restore_asof_times,
    # 20.-21. ORDER BY read as DuckDB reads it, over the qualified select list and scopes.
    expand_order_by_all,
    bind_order_names,
    # 22. Needs qualified columns to find the correlation; before keying grouped
    #     subqueries, which would take a LATERAL body that groups for a correlated subquery.
    decorrelate_laterals,
    # 23. Last: a correlated subquery that groups, keyed by its correlation, then lowered
    #     like any other (``lowering.subquery_joins``).
    key_grouped_subqueries,
)

#: every phase, in order
PHASES: tuple[tuple[Rewrite, ...], ...] = (WRITTEN, RESOLVED)

#: the rules by name (the fixtures name them)
RULES: dict[str, Rewrite] = {rule.__name__: rule for phase in PHASES for rule in phase}


def run(phase: tuple[Rewrite, ...], expression: exp.Expr, context: Context) -> exp.Expr:
    """The expression through each rule of ``phase``, in order."""
    for rule in phase:
        expression = rule(expression, context)
    return expression


def new_context(catalog: str, db: str, lookup: Catalog) -> Context:
    """A model's context: unqualified names resolve to ``catalog``.``db``, and the views'
    definitions are read as the model's SQL is."""
    return Context(catalog, db, lookup, read=parse_sql)


def parse_sql(sql: str) -> exp.Expr:
    """A model's SQL parsed and through the first phase, without a catalog (no view is
    inlined, an UNPIVOT names a table's columns as its ``ON`` list writes them)."""
    return run(WRITTEN, parse_statement(sql), Context())


def qualify_sql(sql: str, *, schema: Schema, catalog: str, db: str) -> exp.Expr:
    """A model's SQL through every phase, against the sources' columns in ``schema``."""
    context = new_context(catalog, db, MappingCatalog(schema))
    statement = run(WRITTEN, parse_statement(sql), context)
    return run(RESOLVED, statement, context.with_schema(schema))


def show(
    rule: Rewrite,
    sql: str,
    *,
    tables: Mapping[str, Mapping[str, str]] | None = None,
    views: Mapping[str, str] | None = None,
    first: tuple[str, ...] = (),
    catalog: str = "",
    db: str = "",
) -> str:
    """``sql`` after ``rule`` (after the rules named ``first``), over ``tables`` (name ->
    column -> type) and ``views`` (key -> ``CREATE VIEW``) of ``catalog``.``db`` (unnamed:
    tables stay unqualified): a rule's example, for its docstring and its fixture file."""
    columns = {table: dict(types) for table, types in (tables or {}).items()}
    lookup = MappingCatalog({catalog: {db: columns}}, dict(views or {}))
    context = new_context(catalog, db, lookup).with_schema(
        {catalog: {db: columns}} if catalog and columns else columns
    )
    expression = parse_statement(sql)
    for name in first:
        expression = RULES[name](expression, context)
    return rule(expression, context).sql(dialect="duckdb")
