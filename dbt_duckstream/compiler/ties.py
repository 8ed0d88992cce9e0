"""Which outputs of a model depend on the order of rows tied in a window's ORDER BY, and
which of its output columns hold that window's PARTITION BY and ORDER BY values.

SQL lets a window number, or pick from, rows that tie in its ORDER BY in either order, and
a ``LIMIT`` keep either of two rows tied at its cut: a maintained table holds one valid
result, a recomputation may hold another. A consistency check must not count that as a
difference, and must still count any other (``runtime.consistency``). Each such window is
one ``Tie`` of a kind that says what stays fixed whichever order the ties take:

- ``position`` (``row_number``, ``ntile``): a value is a function of the row's position, and
  the positions a tie group covers are fixed, so each tie group holds the same bag of
  values: the bag of (key columns, values) is fixed, for any subset of the keys.
- ``value`` (``lag``, ``lead``, ``first_value``, ``last_value``, ``nth_value``, a ROWS frame,
  an aggregate whose result depends on the order it reads rows in: ``string_agg``, ``list``,
  ``arg_max``, ...): a value may come from another row of the partition, so only partitions
  without ties fix it; known when every key is an output column.
- ``cut`` (``QUALIFY`` on a ``position`` window, ``ORDER BY ... LIMIT``): which of the tied
  rows at the cut are kept is open, so only the bag of (key columns, values) is fixed.

A window is tied only if its PARTITION BY and ORDER BY leave some column of its input out
(rows tied on every column are identical, and any order gives the same rows). A tie whose
values reach the output through anything but projections (a filter, a join, an aggregate,
another window reading them) is ``unresolved``: no invariant is claimed for it, and the
model is compared exactly.

>>> from dbt_duckstream.examples import show_ties
>>> show_ties("SELECT id, g, v, row_number() OVER (PARTITION BY g ORDER BY v) AS rn FROM t",
...           {"t": "id INTEGER, g VARCHAR, v INTEGER"})
position: rn, ties on (g, v)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ..sql import expr_sql, quote
from .operators import Join, Operator, Project
from .operators.topn import TopN
from .operators.window import Window

POSITION, VALUE, CUT = "position", "value", "cut"
PREFIX, RANGE = "prefix", "range"

#: window functions whose value is the same for every row of a tie group
_TIE_FREE = (exp.Rank, exp.DenseRank, exp.PercentRank, exp.CumeDist)
#: window functions whose value is a function of the row's position in its partition
_POSITIONAL = (exp.RowNumber, exp.Ntile)
#: functions whose value depends on which rows come first, or on the order they are read
_ORDERED = (
    exp.Lag,
    exp.Lead,
    exp.FirstValue,
    exp.LastValue,
    exp.NthValue,
    exp.GroupConcat,
    exp.ArrayAgg,
    exp.First,
    exp.Last,
    exp.AnyValue,
    exp.ArgMax,
    exp.ArgMin,
    exp.Mode,
)


@dataclass(frozen=True)
class Tie:
    """A window (or a ``LIMIT``) whose result the order within its ties may change."""

    kind: str
    #: the call as the model's plan holds it, for messages
    call: str
    #: output columns whose values depend on the order within ties
    columns: tuple[str, ...]
    #: output columns holding the PARTITION BY values, then the ORDER BY values (those that
    #: are output columns)
    keys: tuple[str, ...]
    #: whether every PARTITION BY and ORDER BY expression is among ``keys``
    complete: bool
    #: how many of ``keys`` are PARTITION BY values
    partitioned: int = 0
    #: the ORDER BY terms over output columns, when ``complete``
    ordering: tuple[str, ...] = ()
    #: for a cut: which positions it keeps (``PREFIX``: the first n; ``RANGE``: n after the
    #: first m; None: any), so that the tie groups before its last kept one (``PREFIX``) or
    #: between its first and last (``RANGE``) are kept whole
    span: str | None = None

    @property
    def partition(self) -> tuple[str, ...]:
        return self.keys[: self.partitioned]

    def describe(self) -> str:
        on = ", ".join(self.keys) if self.keys else "no output column"
        missing = "" if self.complete else "; not all of its keys are output columns"
        columns = ", ".join(self.columns) if self.columns else "the rows kept"
        return f"{self.kind}: {columns}, ties on ({on}){missing}"


@dataclass(frozen=True)
class Ties:
    """The model's ties: those with an invariant, and those without one."""

    found: tuple[Tie, ...] = ()
    #: calls whose tie order reaches the output in a way no invariant here covers
    unresolved: tuple[str, ...] = ()

    @property
    def exact(self) -> bool:
        """Whether the model is compared exactly (no ties, or one without an invariant)."""
        return not self.found or bool(self.unresolved)

    def notes(self) -> list[str]:
        """What each tie means for the table and for ``ivm_consistent``, a line each (for
        ``explain``)."""
        if self.exact:
            return [
                f"-- ties: {call}: rows it ties may come in either order, and its values reach "
                "the model through more than projections: ivm_consistent compares the model "
                "exactly and may report a difference within ties; a unique column ending its "
                "ORDER BY makes one result the only one"
                for call in dict.fromkeys([*(t.call for t in self.found), *self.unresolved])
            ]
        return [
            f"-- ties: {tie.call}: rows that share ({', '.join(tie.keys) or '...'}"
            f"{'' if tie.complete else ', ...'}) may come in either order; the table keeps one "
            "valid order, stable for partitions no change touches; ivm_consistent compares "
            f"{_compared(tie)}; where rows may share them, a unique column ending its ORDER BY "
            "makes one result the only one"
            for tie in self.found
        ]


def _compared(tie: Tie) -> str:
    """How the consistency check treats a tie's columns (``runtime.consistency``)."""
    values = ", ".join(tie.columns)
    keys = f"({', '.join(tie.keys)})" if tie.keys else "the row count"
    if tie.kind == CUT:
        whole = {PREFIX: "before the last kept one", RANGE: "between the first and last kept"}
        rows = (
            f", and the other columns exactly in the tie groups {whole[tie.span]}"
            if tie.span is not None and tie.complete
            else ""
        )
        return f"the bag of {keys}{f' with {values}' if values else ''}{rows}"
    if tie.kind == POSITION:
        return f"{values} as a bag per {keys}, the other columns exactly"
    if tie.complete:
        return f"{values} exactly in partitions without ties, the other columns exactly"
    return f"the columns other than {values} exactly ({values}: not compared)"


def _function(call: exp.Expr) -> exp.Expr:
    function = call.this
    while isinstance(function, exp.Filter | exp.IgnoreNulls | exp.RespectNulls):
        function = function.this
    return function


def call_kind(call: exp.Expr) -> str | None:
    """``position``, ``value`` or None (the same values whichever order ties take)."""
    function = _function(call)
    if isinstance(function, _TIE_FREE):
        return None
    if isinstance(function, _POSITIONAL):
        return POSITION
    spec = call.args.get("spec")
    rows = spec is not None and str(spec.args.get("kind") or "").upper() == "ROWS"
    ordered = isinstance(function, _ORDERED) or function.find(exp.Order) is not None
    if rows or ordered or not isinstance(function, exp.AggFunc):
        return VALUE
    return None


def _term(ordered: exp.Expr) -> exp.Expr:
    """An ORDER BY term's expression (a term may come without its ``Ordered``)."""
    return ordered.this if isinstance(ordered, exp.Ordered) else ordered


def _names(expressions: list[exp.Expr]) -> list[str | None]:
    """Each expression's column name when it is a bare column, else None."""
    return [e.name if isinstance(e, exp.Column) and not e.table else None for e in expressions]


def _covers(terms: list[exp.Expr], columns: tuple[str, ...]) -> bool:
    """Whether ``terms`` name every one of ``columns`` (tied rows are then identical)."""
    named = {n for n in _names(terms) if n is not None}
    return set(columns) <= named


def _shown(call: exp.Expr) -> str:
    """``call`` as the model wrote it: its columns without the compiler's table prefix."""

    def bare(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table:
            return exp.column(node.name.rsplit(".", 1)[-1])
        return node

    return expr_sql(call.copy().transform(bare))


def _row_columns(node: Operator) -> tuple[str, ...]:
    """The columns of ``node`` that can tell two of its rows apart: not those of windows
    directly below whose values are the same for rows equal in every other column."""
    below = node
    same: set[str] = set()
    while isinstance(below, Window) and below.qualify is None:
        same |= {name for name, call in below.functions if call_kind(call) is None}
        below = below.child
    return tuple(c for c in node.columns if c not in same)


def _refs(expression: exp.Expr) -> set[str]:
    return {c.name for c in expression.find_all(exp.Column) if not c.table}


@dataclass
class _Draft:
    """A tie followed up the tree: its columns and keys under the current operator's names."""

    kind: str
    call: str
    columns: set[str]
    keys: list[list[str]]  # the names each key has here (none: not passed on)
    partitioned: int
    #: each ORDER BY key's direction (`` DESC NULLS FIRST``)
    directions: list[str]
    span: str | None = None


def _drafts(node: Operator) -> tuple[list[_Draft], list[str]]:
    """The ties ``node`` itself introduces, and calls it ties with no invariant."""
    if isinstance(node, TopN):
        terms = [_term(o) for o in node.order]
        if _covers(terms, node.child.columns):
            return [], []
        keys = [[n] if n else [] for n in _names(terms)]
        call = "ORDER BY " + ", ".join(expr_sql(o) for o in node.order) + " LIMIT"
        span = RANGE if node.offset else PREFIX
        return [_Draft(CUT, call, set(), keys, 0, _directions(node.order), span)], []
    if not isinstance(node, Window):
        return [], []
    drafts: list[_Draft] = []
    for name, call in node.functions:
        kind = call_kind(call)
        partition = list(call.args.get("partition_by") or [])
        order_node = call.args.get("order")
        order = [_term(o) for o in order_node.expressions] if order_node else []
        if kind is None or _covers(partition + order, _row_columns(node.child)):
            continue
        keys = [[n] if n else [] for n in _names(partition + order)]
        directions = _directions(order_node.expressions if order_node else [])
        drafts.append(_Draft(kind, _shown(call), {name}, keys, len(partition), directions))
    if node.qualify is None or not drafts:
        return drafts, []
    # a cut keeps fixed positions only when its predicate reads nothing but their numbers
    cutting = [d for d in drafts if _refs(node.qualify) <= d.columns]
    if len(drafts) == 1 and cutting and cutting[0].kind == POSITION:
        cutting[0].kind = CUT
        cutting[0].span = _span(node.qualify)
        return drafts, []
    return [], [d.call for d in drafts]


def _directions(terms: Sequence[exp.Expr]) -> list[str]:
    """Each ORDER BY term's direction and NULLs' place, written out (DuckDB puts NULLs last
    unless told)."""
    return [
        f" {'DESC' if t.args.get('desc') else 'ASC'} "
        f"NULLS {'FIRST' if t.args.get('nulls_first') else 'LAST'}"
        if isinstance(t, exp.Ordered)
        else " ASC NULLS LAST"
        for t in terms
    ]


def _span(predicate: exp.Expr) -> str | None:
    """Which positions a predicate on a position number keeps: ``n <= 3``, ``n < 3`` or
    ``n = 1`` the first ones, ``n = 3`` or ``n BETWEEN 2 AND 4`` a range (positions and
    ``ntile`` grow with the order)."""
    while isinstance(predicate, exp.Paren):
        predicate = predicate.this
    if isinstance(predicate, exp.Between):
        return RANGE if isinstance(predicate.this, exp.Column) else None
    flipped = {exp.GTE: exp.LTE, exp.GT: exp.LT, exp.LTE: exp.GTE, exp.LT: exp.GT, exp.EQ: exp.EQ}
    kind = type(predicate)
    if kind not in flipped:
        return None
    left, right = predicate.this, predicate.expression
    if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
        left, right, kind = right, left, flipped[kind]
    if not isinstance(left, exp.Column) or not isinstance(right, exp.Literal):
        return None
    if kind in (exp.LTE, exp.LT) or (kind is exp.EQ and right.name == "1"):
        return PREFIX
    return RANGE if kind is exp.EQ else None


def _above(draft: _Draft, node: Operator) -> bool:
    """Follow ``draft`` through ``node`` (the operator above it); False: no invariant."""
    if isinstance(node, Project):
        derived: set[str] = set()
        for out, expression in node.outputs:
            refs = _refs(expression)
            if refs & draft.columns:
                keys = {n for names in draft.keys for n in names}
                if draft.kind != VALUE and not refs <= draft.columns | keys:
                    return False
                derived.add(out)
        passed: dict[str, list[str]] = {}
        for out, expression in node.outputs:
            if isinstance(expression, exp.Column) and not expression.table:
                passed.setdefault(expression.name, []).append(out)
        draft.columns = derived
        draft.keys = [[o for n in names for o in passed.get(n, [])] for names in draft.keys]
        return True
    if isinstance(node, Join) and len(node.inputs) == 1 and node.condition is None:
        (only,) = node.inputs  # a FROM item's name: its columns under a prefix
        draft.columns = {only.output(c) for c in draft.columns}
        draft.keys = [[only.output(n) for n in names] for names in draft.keys]
        return True
    if isinstance(node, Window) and node.qualify is None:
        read = [call for _, call in node.functions] + list(node.partition)
        return not any(_refs(e) & draft.columns for e in read)
    return False


def find_ties(root: Operator, columns: tuple[str, ...]) -> Ties:
    """The ties of the tree under ``root``, whose output columns the model names
    ``columns``."""
    parents: dict[int, Operator] = {}
    for node in root.walk():
        for child in node.children:
            parents[id(child)] = node
    found: list[Tie] = []
    unresolved: list[str] = []
    renamed = dict(zip(root.columns, columns, strict=True))
    for node in root.walk():
        drafts, without = _drafts(node)
        unresolved += without
        for draft in drafts:
            above = parents.get(id(node))
            while above is not None and _above(draft, above):
                above = parents.get(id(above))
            if above is not None:
                unresolved.append(draft.call)
                continue
            if draft.kind != CUT and not draft.columns:
                continue  # its values are not output
            keys = list(dict.fromkeys(renamed[names[0]] for names in draft.keys if names))
            complete = all(draft.keys)
            ordering = (
                tuple(
                    quote(renamed[names[0]]) + direction
                    for names, direction in zip(
                        draft.keys[draft.partitioned :], draft.directions, strict=True
                    )
                )
                if complete
                else ()
            )
            found.append(
                Tie(
                    kind=draft.kind,
                    call=draft.call,
                    columns=tuple(c for c in columns if c in {renamed[d] for d in draft.columns}),
                    keys=tuple(keys),
                    complete=complete,
                    partitioned=len(
                        {renamed[names[0]] for names in draft.keys[: draft.partitioned] if names}
                    ),
                    ordering=ordering,
                    span=draft.span,
                )
            )
    cuts = [t for t in found if t.kind == CUT]
    if cuts and len(found) > 1:  # a cut changes which rows the other ties number
        unresolved += [t.call for t in found]
    shared = [c for c, n in Counter(c for t in found for c in t.columns).items() if n > 1]
    if shared:  # a value computed from two ties' (``lag(x) + row_number()``): neither fixes it
        unresolved += [t.call for t in found if set(t.columns) & set(shared)]
    return Ties(tuple(found), tuple(dict.fromkeys(unresolved)))
