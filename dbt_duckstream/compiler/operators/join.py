"""Inner join of N inputs: the telescoping sum over time-travelled states.

    view:  SELECT ... FROM r JOIN s ON p
    delta: SELECT ..., dr._ivm_m FROM delta(r) AS r, s@old AS s WHERE p
           UNION ALL
           SELECT ..., ds._ivm_m FROM r@new AS r, delta(s) AS s WHERE p

For N inputs term i joins inputs before i at the new snapshot, the delta of input i, and inputs
after i at the old snapshot; inputs whose delta is empty contribute no term. This is exact for
any mix of inserts and deletes on every side (unlike the "subtract the cross-delta" formula),
and works for equi, non-equi and self joins alike, since ``p`` is applied unchanged.

Each term first narrows the inputs that ``p`` equates with the delta's columns to the rows that
can match it (``s.k IN (SELECT k FROM delta(r))``, implied by ``p``): a small delta then reads
only the matching rows of a large input, its zone maps skipping the rest, whatever join order
the planner picks. The equalities of a WHERE clause over the join narrow it too (``under``).
A large source that several terms narrow at one snapshot by one column is read once, for the
union of their keys, and each term keeps its own rows of that read.

Output columns are named ``"alias.column"`` so that inputs never collide; an input that is
itself a join (``alias`` None) already names its columns that way.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT r.id, s.name FROM r JOIN s ON r.k = s.k",
...     {"r": ("id INTEGER, k INTEGER", "(1, 1), (2, 2)"),
...      "s": ("k INTEGER, name VARCHAR", "(1, 'a'), (2, 'b')")},
...     "DELETE FROM r WHERE id = 1; DELETE FROM s WHERE k = 1; INSERT INTO s VALUES (2, 'c')",
... )
-1 (1, 'a')
+1 (2, 'c')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ...sql import conjuncts, expr_sql, indent, quote
from ..render import MULT, RenderContext, Side
from .base import Operator, narrowed


@dataclass(frozen=True)
class JoinInput:
    """One input of a join: ``alias`` prefixes its columns; None when they carry prefixes."""

    alias: str | None
    node: Operator

    def output(self, column: str) -> str:
        return column if self.alias is None else f"{self.alias}.{column}"

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.output(c) for c in self.node.columns)


class TwoInputs:
    """A join of a left and a right input whose rows carry both inputs' columns."""

    left: JoinInput
    right: JoinInput

    @property
    def inputs(self) -> tuple[JoinInput, JoinInput]:
        return (self.left, self.right)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.left.columns + self.right.columns

    @property
    def children(self) -> tuple[Operator, ...]:
        return (self.left.node, self.right.node)


@dataclass(eq=False)
class Join(Operator):
    inputs: tuple[JoinInput, ...]
    condition: exp.Expr | None
    kind = "join"

    def materializes_delta(self, ctx: RenderContext) -> bool:
        """Statements downstream then plan with its exact row count: DuckDB estimates a union
        of join terms poorly, and TPC-H Q18 at SF10 hashed a 15M-row state table (0.5 s) to
        match a 58k-row delta read as a CTE. A join of one input (a lone ``FROM`` item)
        renames its input's delta, read in place: one term gives no union to estimate (TPC-H
        Q1 copied 60k appended lineitems for it, 12 of 116 ms at SF10)."""
        return len(self.inputs) > 1

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(c for i in self.inputs for c in i.columns)

    @property
    def children(self) -> tuple[Operator, ...]:
        return tuple(i.node for i in self.inputs)

    def _query(self, relations: list[str], multiplicity: int | None) -> str:
        select = join_select_list(self.inputs)
        if multiplicity is not None:
            select += f", {input_name(multiplicity)}.{MULT} AS {MULT}"
        froms = ", ".join(f"{r} AS {input_name(i)}" for i, r in enumerate(relations))
        condition = bind_columns(self.condition, self.inputs)
        where = f" WHERE {expr_sql(condition)}" if condition is not None else ""
        return f"SELECT {select} FROM {froms}{where}"

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        return self._query([i.node.state(ctx, side) for i in self.inputs], None)

    def render_delta(self, ctx: RenderContext) -> str | None:
        return self._terms(ctx, None)

    def delta_under(self, ctx: RenderContext, predicate: exp.Expr) -> str | None:
        terms = self._terms(ctx, predicate)
        return f"(\n{terms}\n)" if terms is not None else None

    def state_near(
        self,
        ctx: RenderContext,
        side: Side,
        keys: tuple[tuple[str, str], ...],
        relation: str,
        above: exp.Expr | None = None,
    ) -> str:
        """Each input narrowed by the keys among its columns, and by the columns that the
        join's condition (or ``above``) equates with those."""
        per_input = self.keys_per_input(keys, above)
        relations = [
            j.node.state_near(ctx, side, per_input[i], relation)
            if i in per_input
            else j.node.state(ctx, side)
            for i, j in enumerate(self.inputs)
        ]
        self._narrow_through(
            ctx, relations, tuple(per_input), self.equalities(above), self.local_conditions(above)
        )
        return f"({self._query(relations, None)})"

    def keys_per_input(
        self, keys: tuple[tuple[str, str], ...], above: exp.Expr | None = None
    ) -> dict[int, tuple[tuple[str, str], ...]]:
        """Per input position, the keys (its column, theirs) that narrow it: the keys among
        its columns, and its columns that the condition (or ``above``) equates with those."""
        equalities = self.equalities(above)
        local = {j.output(c): (i, c) for i, j in enumerate(self.inputs) for c in j.node.columns}
        per_input: dict[int, list[tuple[str, str]]] = {}

        def narrow(position: int, key: tuple[str, str]) -> None:
            if key not in per_input.setdefault(position, []):
                per_input[position].append(key)

        for mine, theirs in keys:
            owner, column = local[mine]
            narrow(owner, (column, theirs))
            for other in range(len(self.inputs)):
                for equal, keyed in equalities.get((other, owner), ()):
                    if keyed == column:
                        narrow(other, (equal, theirs))
        return {i: tuple(k) for i, k in per_input.items()}

    def local_conditions(self, above: exp.Expr | None = None) -> dict[int, exp.Expr]:
        """Per input position, the conjuncts of the join's condition and ``above`` that read
        that input alone (bound to it)."""
        return own_conjuncts(self._bound_condition(above))

    def equalities(self, above: exp.Expr | None = None) -> Equalities:
        """Per ordered pair of inputs (narrowed, changing), the columns of each that the
        join's condition, and ``above`` (the predicate of a filter over the join), equate."""
        return equated_columns(self._bound_condition(above))

    def _bound_condition(self, above: exp.Expr | None) -> exp.Expr | None:
        implied = [c for c in (self.condition, above) if c is not None]
        return bind_columns(exp.and_(*implied) if implied else None, self.inputs)

    def _narrow_through(
        self,
        ctx: RenderContext,
        relations: list[str],
        direct: tuple[int, ...],
        equalities: Equalities,
        local: dict[int, exp.Expr],
        changing: int | None = None,
        narrowings: dict[int, Narrowing] | None = None,
        suffix: str = "",
    ) -> None:
        """Narrow each large source that only inputs narrowed ``direct``ly are equated with
        by their rows (TPC-H Q18 at SF10: customer, equated with orders, was hashed whole,
        1.5M rows, to meet the orders of a few changed lineitems). ``narrowings`` collects
        how (``Narrowing``). In a delta's term (``changing``), an input whose rows narrow
        another is read once, materialized, for the term and for those it narrows: TPC-H Q5
        at SF10 read orders three times (for the term, for its customers, and for the read of
        customer that the terms share), 1.1 s of a 2.9 s delta's work."""
        materialized: set[int] = set()
        for j, other in enumerate(self.inputs):
            if j == changing or j in direct or other.node.source_table not in ctx.large:
                continue
            through = [h for h in direct if equalities.get((j, h))]
            if through:
                h = through[0]
                if changing is not None and h not in materialized:
                    at = "new" if h < changing else "old"
                    relations[h] = ctx.cte(
                        f"{self.name}_in{h}_{at}_for{changing}{suffix}",
                        f"SELECT * FROM {relations[h]}",
                        materialized=True,
                    )
                    materialized.add(h)
                keys = restricted(relations[h], h, local)
                if narrowings is not None and changing is not None:
                    side: Side = "new" if j < changing else "old"
                    narrowings[j] = Narrowing(relations[j], side, equalities[(j, h)], keys)
                relations[j] = narrowed(relations[j], equalities[(j, h)], keys)

    def _terms(self, ctx: RenderContext, above: exp.Expr | None) -> str | None:
        """The telescoping terms, each input narrowed to the rows matching the delta by the
        equalities of the join's condition and of ``above``, and large sources through
        those (``_narrow_through``). The keys come from the delta rows that pass the
        conjuncts reading the delta's input alone: TPC-H Q10's customer, read for the new
        orders of one quarter in 28 rather than for all of them. A large source that several
        terms narrow at one snapshot is read once for all of them (``_share_reads``)."""
        equalities, local = self.equalities(above), self.local_conditions(above)
        suffix = "_under" if above is not None else ""
        terms: list[tuple[int, list[str], dict[int, Narrowing]]] = []
        for i, changing in enumerate(self.inputs):
            changed = changing.node.delta(ctx)
            if changed is None:
                continue
            keys = restricted(changed, i, local)
            relations: list[str] = []
            narrowings: dict[int, Narrowing] = {}
            for j, other in enumerate(self.inputs):
                if j == i:
                    relations.append(changed)
                    continue
                side: Side = "new" if j < i else "old"
                state = other.node.state(ctx, side)
                if equalities.get((j, i)):
                    narrowings[j] = Narrowing(state, side, equalities[(j, i)], keys)
                relations.append(narrowed(state, equalities.get((j, i), ()), keys))
            direct = tuple(h for h in range(len(self.inputs)) if h != i and equalities.get((h, i)))
            self._narrow_through(ctx, relations, direct, equalities, local, i, narrowings, suffix)
            terms.append((i, relations, narrowings))
        if not terms:
            return None
        self._share_reads(ctx, terms, local, suffix)
        self._share_whole_reads(ctx, terms, equalities, local, suffix)
        return "\nUNION ALL\n".join(self._query(relations, i) for i, relations, _ in terms)

    def _share_reads(
        self,
        ctx: RenderContext,
        terms: list[tuple[int, list[str], dict[int, Narrowing]]],
        local: dict[int, exp.Expr],
        suffix: str,
    ) -> None:
        """Read a large source once where several terms narrow it at the same snapshot by
        the same column: its rows matching any term's keys, materialized, which each term
        narrows again by its own. TPC-H Q10 at SF10 with appends read customer's seven wide
        columns whole twice (the keys of a quarter's new orders are spread over every row
        group), once for the new orders and once through the orders of the new lineitems:
        its join delta took 298 ms of a 550 ms run, 208 ms reading customer once. Where the
        terms' keys fall in narrow ranges far apart, the union's range spans what lies
        between (zone maps prune by a range of keys), and the one read can cost more than
        the two it replaces."""
        groups: dict[tuple[int, Side, str], list[tuple[list[str], Narrowing]]] = {}
        for _, relations, narrowings in terms:
            for j, narrowing in narrowings.items():
                if self.inputs[j].node.source_table in ctx.large and len(narrowing.keys) == 1:
                    ((mine, _),) = narrowing.keys
                    group = groups.setdefault((j, narrowing.side, mine), [])
                    group.append((relations, narrowing))
        for (j, side, mine), uses in groups.items():
            if len(uses) < 2:
                continue
            wanted = "\nUNION ALL\n".join(
                f"SELECT {quote(theirs)} FROM {n.other}" for _, n in uses for _, theirs in n.keys
            )
            rows = restricted(uses[0][1].state, j, local)
            shared = ctx.cte(
                f"{self.name}_in{j}_{side}{suffix}",
                f"SELECT * FROM {rows} WHERE {quote(mine)} IN (\n{indent(wanted)}\n)",
                materialized=True,
            )
            for relations, narrowing in uses:
                relations[j] = narrowed(shared, narrowing.keys, narrowing.other)

    def whole_reads(
        self,
        terms: Sequence[int],
        changed: frozenset[str],
        large: frozenset[str],
        equalities: Equalities,
    ) -> dict[tuple[int, str], tuple[int, ...]]:
        """Per input j and snapshot (``old``, ``new``, or ``either`` for an input that did
        not change), the terms (their changing inputs' positions) that take j from one
        materialized read: a source that is not large, read whole by one of them (no
        equality ties it to the term's delta) and read by another too. TPC-H Q10 at SF1
        read customer's seven wide columns twice (150k rows, about 30 ms a read), narrowed
        by the new orders' customers and whole for the orders of the new lineitems; reading
        it once made the join's delta 25-30 ms cheaper with appends and with mixed batches
        alike. A narrowed read costs a whole one when the keys of a small delta lie in every
        row group. The cost estimate counts such a read once (``decide``)."""
        groups: dict[tuple[int, str], list[int]] = {}
        for i in terms:
            for j, other in enumerate(self.inputs):
                table = other.node.source_table
                if j == i or table is None or table in large:
                    continue
                side = "new" if j < i else "old"
                # a source that did not change reads the same rows at either side
                groups.setdefault((j, side if table in changed else "either"), []).append(i)
        return {
            (j, at): tuple(users)
            for (j, at), users in groups.items()
            if len(users) > 1 and any(not equalities.get((j, i)) for i in users)
        }

    def _share_whole_reads(
        self,
        ctx: RenderContext,
        terms: list[tuple[int, list[str], dict[int, Narrowing]]],
        equalities: Equalities,
        local: dict[int, exp.Expr],
        suffix: str,
    ) -> None:
        """Take each input that ``whole_reads`` names from one read, materialized with the
        conditions on it alone, which each term then narrows as it did."""
        by_position = {i: (relations, narrowings) for i, relations, narrowings in terms}
        shared_reads = self.whole_reads(list(by_position), ctx.changed, ctx.large, equalities)
        for (j, at), users in shared_reads.items():
            side: Side = "old" if at == "old" else "new"
            rows = restricted(self.inputs[j].node.state(ctx, side), j, local)
            shared = ctx.cte(
                f"{self.name}_in{j}_{at}_whole{suffix}",
                f"SELECT * FROM {rows}",
                materialized=True,
            )
            for i in users:
                relations, narrowings = by_position[i]
                narrowing = narrowings.get(j)
                relations[j] = (
                    shared
                    if narrowing is None
                    else narrowed(shared, narrowing.keys, narrowing.other)
                )


@dataclass(frozen=True)
class Narrowing:
    """How a term narrows an input: its ``state`` at the term's snapshot (``side``), keeping
    the rows whose ``keys`` (its column, theirs) occur in ``other``."""

    state: str
    side: Side
    keys: tuple[tuple[str, str], ...]
    other: str


#: per ordered pair of input positions, pairs of their columns
Equalities = dict[tuple[int, int], tuple[tuple[str, str], ...]]


def equated_columns(condition: exp.Expr | None) -> Equalities:
    """Per ordered pair of inputs (a, b), the columns (of a, of b) that a conjunct ``a.x = b.y``
    of the bound condition equates."""
    found: dict[tuple[int, int], list[tuple[str, str]]] = {}
    if condition is None:
        return {}
    for conjunct in conjuncts(condition):
        if not isinstance(conjunct, exp.EQ):
            continue
        left, right = conjunct.this, conjunct.expression
        if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
            continue
        a, b = _position(left), _position(right)
        if a is None or b is None or a == b:
            continue
        for pair, columns in (((a, b), (left.name, right.name)), ((b, a), (right.name, left.name))):
            if columns not in found.setdefault(pair, []):
                found[pair].append(columns)
    return {pair: tuple(columns) for pair, columns in found.items()}


def own_conjuncts(condition: exp.Expr | None) -> dict[int, exp.Expr]:
    """Per input position, the conjuncts of the bound condition whose columns are all that
    input's (without subqueries), ANDed."""
    found: dict[int, list[exp.Expr]] = {}
    for conjunct in conjuncts(condition) if condition is not None else ():
        owners = {_position(c) for c in conjunct.find_all(exp.Column)}
        if len(owners) != 1 or None in owners or conjunct.find(exp.Query) is not None:
            continue
        (owner,) = owners
        assert owner is not None
        found.setdefault(owner, []).append(conjunct)
    return {position: exp.and_(*terms) for position, terms in found.items()}


def restricted(relation: str, position: int, local: dict[int, exp.Expr]) -> str:
    """``relation`` (an input at ``position``, or its delta) keeping the rows that pass the
    conjuncts reading it alone: a narrower set of keys to narrow the other inputs by."""
    if position not in local:
        return relation
    return f"(SELECT * FROM {relation} AS {input_name(position)} WHERE {expr_sql(local[position])})"


def _position(column: exp.Column) -> int | None:
    prefix = input_alias(0)[:-1]
    number = column.table.removeprefix(prefix)
    return int(number) if column.table.startswith(prefix) and number.isdigit() else None


def input_alias(position: int) -> str:
    """The FROM alias of a join's input."""
    return f"_ivm_in{position}"


def input_name(position: int) -> str:
    return quote(input_alias(position))


def join_select_list(inputs: tuple[JoinInput, ...]) -> str:
    """Every input column under its output name (``"alias.column"``)."""
    return ", ".join(
        f"{input_name(i)}.{quote(c)} AS {quote(j.output(c))}"
        for i, j in enumerate(inputs)
        for c in j.node.columns
    )


def bind_columns(expression: exp.Expr | None, inputs: tuple[JoinInput, ...]) -> exp.Expr | None:
    """Point the join's output names in ``expression`` (``"alias.column"``) at the input
    that provides each, so a condition reads the inputs themselves."""
    if expression is None:
        return None
    owners = {j.output(c): (i, c) for i, j in enumerate(inputs) for c in j.node.columns}

    def bind(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name in owners:
            position, column = owners[node.name]
            return exp.column(
                exp.to_identifier(column, quoted=True),
                exp.to_identifier(input_alias(position), quoted=True),
            )
        return node

    return expression.copy().transform(bind)
