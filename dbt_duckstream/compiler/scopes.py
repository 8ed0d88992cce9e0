"""Scopes of a parsed query: which SELECT defines a name, which columns reach outside a
subquery, which nodes are a block's own (not a subquery's, not a window's function). Shared
by the rewrites and the lowering to operators."""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp


def parenthesized(item: exp.Expr) -> exp.Expr | None:
    """The first item of a parenthesized join, ``(b JOIN c ON ...)``, which holds the joins
    (a table, or a derived table: ``((SELECT ...) AS b JOIN c ON ...)``); None for any other
    item (``((SELECT ...)) AS b`` is a derived table)."""
    if not isinstance(item, exp.Subquery) or item.alias:
        return None
    inner = item.this
    if not isinstance(inner, exp.Query) or (isinstance(inner, exp.Subquery) and inner.alias):
        return inner
    return None


def sources(select: exp.Select) -> set[str]:
    """The aliases a SELECT's FROM clause defines, parenthesized joins included."""
    from_ = select.args.get("from_") or select.args.get("from")
    items = [from_.this] if from_ is not None else []
    items += [j.this for j in select.args.get("joins") or []]
    names: set[str] = set()
    while items:
        item = items.pop()
        first = parenthesized(item)
        if first is not None:
            items.append(first)
        else:
            names.add(item.alias_or_name)
        items += [j.this for j in item.args.get("joins") or []]
    return names


def owner(column: exp.Column) -> exp.Select | None:
    """The SELECT block whose FROM clause defines the column's table alias."""
    node = column.parent
    while node is not None:
        if isinstance(node, exp.Select) and column.table in sources(node):
            return node
        node = node.parent
    return None


def within(node: exp.Expr | None, ancestor: exp.Expr | None) -> bool:
    """Whether ``node`` is ``ancestor`` or below it."""
    while node is not None:
        if node is ancestor:
            return True
        node = node.parent
    return False


def outer_columns(query: exp.Expr) -> list[exp.Column]:
    """The columns inside ``query`` that belong to an enclosing query."""
    return [c for c in query.find_all(exp.Column) if c.table and not within(owner(c), query)]


def outside_subqueries(expression: exp.Expr) -> Iterator[exp.Expr]:
    """Every node of ``expression`` except those inside subqueries."""
    stack = [expression]
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, exp.Query):
            stack.extend(reversed(list(node.iter_expressions())))


def has_subquery(expression: exp.Expr) -> bool:
    return expression.find(exp.Query) is not None


def column_key(column: exp.Column) -> str:
    """``table.name``, as errors and keys name a qualified column."""
    return f"{column.table}.{column.name}"


def selects_inside_out(node: exp.Expr) -> list[exp.Select]:
    """The SELECTs under ``node``, each after those it contains and those before it: a query
    reads the columns of the queries below it as written out."""
    found: list[exp.Select] = []
    pending: list[tuple[exp.Expr, bool]] = [(node, False)]
    while pending:
        current, below_done = pending.pop()
        if below_done:
            if isinstance(current, exp.Select):
                found.append(current)
            continue
        pending.append((current, True))
        pending.extend((child, False) for child in reversed(list(current.iter_expressions())))
    return found


def _visible_ctes(select: exp.Select) -> list[exp.CTE]:
    """The CTEs that the ``FROM`` of ``select`` may name, innermost first."""
    found: dict[str, exp.CTE] = {}
    node: exp.Expr | None = select
    while node is not None:
        with_ = node.args.get("with_") if isinstance(node, exp.Query) else None
        if isinstance(with_, exp.With):
            for cte in with_.expressions:
                if cte.alias_or_name not in found and not cte.find(exp.Columns):
                    found[cte.alias_or_name] = cte
        node = node.parent
    return list(found.values())


def from_items(select: exp.Select) -> set[str]:
    """The names of the items of the ``FROM`` of ``select`` (tables, subqueries, CTEs read)."""
    from_ = select.args.get("from_")
    items = [
        *([from_.this] if from_ is not None else []),
        *(j.this for j in select.args.get("joins") or []),
    ]
    return {i.alias_or_name for i in items}


def star_probe(select: exp.Select) -> exp.Select | None:
    """``SELECT *`` over the ``FROM`` of ``select``, with the CTEs it may name: qualified, its
    projections are the columns the ``FROM`` offers, in order (None: no ``FROM``)."""
    from_ = select.args.get("from_")
    if from_ is None:
        return None
    probe = exp.Select(expressions=[exp.Star()], from_=from_.copy())
    probe.set("joins", [j.copy() for j in select.args.get("joins") or []])
    ctes = _visible_ctes(select)
    if ctes:
        probe.set("with_", exp.With(expressions=[c.copy() for c in ctes]))
    return probe


#: nodes between a window's OVER and its function (``sum(x) FILTER (...) OVER``,
#: ``lag(x IGNORE NULLS) OVER``)
_WRAPPERS = (exp.Filter, exp.IgnoreNulls, exp.RespectNulls)


def is_window_function(node: exp.Expr) -> bool:
    """Whether ``node`` is the function a window applies (``sum`` in ``sum(x) OVER (...)``),
    not an aggregate of the SELECT."""
    child, parent = node, node.parent
    while isinstance(parent, _WRAPPERS) and child.arg_key == "this":
        child, parent = parent, parent.parent
    return isinstance(parent, exp.Window) and child.arg_key == "this"
