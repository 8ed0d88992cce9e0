"""ASOF join: recompute the left rows whose match a change can move, and diff against the
stored rows.

    view:     SELECT ... FROM l ASOF [LEFT] JOIN r ON l.k = r.k AND l.t >= r.t
    touched:  SELECT DISTINCT l.k, l.t, 'point' FROM delta(l)
              UNION ALL
              SELECT r.k, min(r.t), 'from' FROM delta(r) GROUP BY r.k
    delta:    the stored rows of the touched left rows                           with -1
              UNION ALL
              (l@new touched rows) ASOF [LEFT] JOIN (r@new rows of their keys)    with +1

Each left row takes, among the right rows of its key, the one with the greatest ``r.t`` at or
before its own ``l.t`` (with ``<=``, the least one at or after it). A changed left row moves
its own match only: the left rows at its key and time are touched. A right row at time ``t``
added or removed can move the match of every left row of its key at or after ``t`` (before
it, for ``<=``): per key, the rows from the earliest such time on are touched. The touched
rows are recomputed by DuckDB's own ASOF join and replace their stored copies. A left row
whose key or time is NULL never matches (the inner join drops it, a LEFT join pads it); only
its own change touches it.

Rows are stored: when right rows tie on the key and the time, an ASOF join takes either, and a
second evaluation may take the other, so the old rows are read from the state table, never
recomputed. Cost: the touched left rows and the right rows of their keys, at the new
snapshot. An ASOF join without an equality is one key: a right row's change touches every
left row on its side of its time.

>>> from dbt_duckstream.examples import show_delta
>>> show_delta(
...     "SELECT o.id, r.rate FROM o ASOF JOIN r ON o.cur = r.cur AND o.ts >= r.ts",
...     {"o": ("id INTEGER, cur VARCHAR, ts INTEGER", "(1, 'eur', 5), (2, 'eur', 9)"),
...      "r": ("cur VARCHAR, ts INTEGER, rate DOUBLE", "('eur', 0, 1.5), ('usd', 0, 1.0)")},
...     "INSERT INTO r VALUES ('eur', 7, 1.25)",
... )
-1 (2, 1.5)
+1 (2, 1.25)
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ...errors import UnsupportedSQLError
from ...sql import column_list, conjuncts, expr_sql, quote, same_values
from ..render import Mode, RenderContext, Side
from .base import DeltaReads, Operator, RowsOf
from .join import JoinInput, TwoInputs, bind_columns, input_name, join_select_list
from .stored import build_state, consolidated, replace_stored, retract_assert
from .touched import key_name

#: the columns of the touched relation besides the keys: a time, and whether it is a changed
#: left row's own (a point) or the bound of the times a changed right row reaches (a range)
_TIME, _POINT = "_ivm_time", "_ivm_point"
#: the end of a range: the first right time past the last changed one (NULL: none)
_UNTIL, _LAST = "_ivm_until", "_ivm_last"
#: a stored row's rowid, kept beside it until the run replaces it
_ROWID = "_ivm_rowid"
#: comparisons of the left time with the right one, and the same read the other way round
_COMPARISONS = {exp.GTE: ">=", exp.GT: ">", exp.LTE: "<=", exp.LT: "<"}
_MIRRORED = {">=": "<=", ">": "<", "<=": ">=", "<": ">"}


@dataclass(eq=False)
class AsofJoin(TwoInputs, Operator):
    left: JoinInput
    right: JoinInput
    #: the ON condition, over the join's output names
    condition: exp.Expr
    #: (left expression, right expression) of each equality, over the output names
    equalities: tuple[tuple[exp.Expr, exp.Expr], ...]
    #: the left and right times, over the output names, and how the left compares (``>=``)
    times: tuple[exp.Expr, exp.Expr]
    comparison: str
    keep_left: bool
    kind = "asof_join"

    @property
    def stored(self) -> bool:
        return True

    @property
    def strategy(self) -> str:
        scope = "the touched keys' rows" if self.equalities else "every row (no equality)"
        return f"{scope} from the earliest touched time recomputed; rows stored"

    def delta_reads(self, changed: frozenset[str], rows: RowsOf) -> DeltaReads:
        """The touched keys' rows are recomputed from both inputs at the new snapshot."""
        return DeltaReads(sum(rows(c) for c in self.children))

    def _join(self, left: str, right: str) -> str:
        """DuckDB's ASOF join of two FROM items, over the rows whose keys and time are all
        present; a LEFT join pads the others itself. DuckDB 1.5.5's own join sometimes matched
        a left row whose time is NULL (README: known upstream limits)."""
        on = bind_columns(self.condition, self.inputs)
        assert on is not None
        present = [
            " AND ".join(f"({self._read(e)}) IS NOT NULL" for e in self._matched_on(position))
            for position in (0, 1)
        ]
        select = join_select_list(self.inputs)
        join = "ASOF LEFT JOIN" if self.keep_left else "ASOF JOIN"
        matched = (
            f"SELECT {select} FROM (SELECT * FROM {left} AS {input_name(0)} WHERE {present[0]}) "
            f"AS {input_name(0)} {join} (SELECT * FROM {right} AS {input_name(1)} "
            f"WHERE {present[1]}) AS {input_name(1)} ON {expr_sql(on)}"
        )
        if not self.keep_left:
            return matched
        return (
            f"{matched}\nUNION ALL\nSELECT {select} FROM (SELECT * FROM {left} AS "
            f"{input_name(0)} WHERE NOT ({present[0]})) AS {input_name(0)} "
            f"LEFT JOIN {right} AS {input_name(1)} ON FALSE"
        )

    def _changed(self, ctx: RenderContext) -> bool:
        return any(child.delta(ctx) is not None for child in self.children)

    def render_state(self, ctx: RenderContext, side: Side) -> str:
        if ctx.mode in (Mode.RECOMPUTE, Mode.BUILD):
            rows = self._join(self.left.node.state(ctx, side), self.right.node.state(ctx, side))
            if ctx.mode is Mode.RECOMPUTE:
                return rows
            return f"SELECT * FROM {build_state(ctx, self, rows)}"
        if side == "old" or not self._changed(ctx):
            return f"SELECT * FROM {self.state_table_sql()}"
        touched, recomputed, _ = self._touched(ctx)
        kept = self._rows(self.state_table_sql(), touched, stored=True, kept=True)
        return f"{kept}\nUNION ALL\nSELECT * FROM {recomputed}"

    def render_delta(self, ctx: RenderContext) -> str | None:
        if not self._changed(ctx):
            return None
        _, recomputed, stale = self._touched(ctx)
        old = f"SELECT {column_list(self.columns)} FROM {stale}"
        return consolidated(retract_assert(old, f"SELECT * FROM {recomputed}"), self.columns)

    def _read(self, expression: exp.Expr, stored_as: str | None = None) -> str:
        """``expression`` (over the output names) read from the inputs (``_ivm_in0`` and
        ``_ivm_in1``), or from stored rows named ``stored_as``, which carry the output names."""
        if stored_as is not None:
            return expr_sql(
                expression.copy().transform(
                    lambda n: (
                        exp.column(exp.to_identifier(n.name, quoted=True), stored_as)
                        if isinstance(n, exp.Column) and not n.table
                        else n
                    )
                )
            )
        bound = bind_columns(expression.copy(), self.inputs)
        assert bound is not None
        return expr_sql(bound)

    def _matched_on(self, position: int) -> list[exp.Expr]:
        """The keys and the time the join compares on one side (0: left, 1: right)."""
        return [*(pair[position] for pair in self.equalities), self.times[position]]

    @property
    def _forward(self) -> bool:
        """Whether a left row matches the greatest right time at or before its own (``>=``,
        ``>``), rather than the least at or after it."""
        return self.comparison in (">=", ">")

    def _same_key(self, alias: str) -> str:
        """A right row's keys (of the right input) equal to those of the row ``alias``."""
        return _keys_match([self._read(right) for _, right in self.equalities], alias)

    def _rows(
        self, relation: str, touched: str, *, stored: bool, kept: bool = False, select: str = ""
    ) -> str:
        """The left rows of ``relation`` (the stored rows, named ``s``, or the left input)
        whose match a change may move, or with ``kept`` the others: those at a changed left
        row's key and time, and those of a changed right row's key within its range of
        times. Each is a hash join on the key (and the time, for points), at most one match
        a row: a predicate of EXISTS over both took 27 times as long over 3M rows."""
        alias = "s" if stored else input_name(0)
        stored_as = alias if stored else None
        keys = [self._read(left, stored_as) for left, _ in self.equalities]
        time = f"({self._read(self.times[0], stored_as)})"
        since, until = (">=", "<=") if self._forward else ("<=", ">=")
        found = (
            f"p.{_POINT} IS NULL AND r.{_POINT} IS NULL"
            if kept
            else f"(p.{_POINT} IS NOT NULL OR r.{_POINT} IS NOT NULL)"
        )
        return (
            f"SELECT {select or alias + '.*'} FROM {relation} AS {alias} "
            f"LEFT JOIN (SELECT * FROM {touched} WHERE {_POINT}) AS p ON {_keys_match(keys, 'p')} "
            f"AND {time} IS NOT DISTINCT FROM p.{_TIME} "
            f"LEFT JOIN (SELECT * FROM {touched} WHERE NOT {_POINT}) AS r "
            f"ON {_keys_match(keys, 'r')} AND {time} {since} r.{_TIME} "
            f"AND ({time} {until} r.{_UNTIL} OR r.{_UNTIL} IS NULL) WHERE {found}"
        )

    def _touched(self, ctx: RenderContext) -> tuple[str, str, str]:
        """Temporary tables of what a change touches, of those left rows recomputed at the new
        snapshot, and of their stored rows, which the second replace at the end of the run.

        A changed left row moves its own match only: its key and time are a point. Changed
        right rows may move the matches of the left rows of their key from the earliest
        changed time on, up to the first right row after the latest changed one (which no
        change touched, so the rows at or after it match it or a later row, as before); for
        ``<=``, the mirror image."""

        def compute() -> str:
            names = [quote(key_name(i)) for i in range(len(self.equalities))]
            keys = ", ".join(names)
            parts = []
            for position, child in enumerate(self.children):
                delta = child.delta(ctx)
                if delta is not None:
                    select = ", ".join(
                        f"{self._read(e)} AS {n}"
                        for e, n in zip(self._matched_on(position), [*names, _TIME], strict=True)
                    )
                    parts.append(
                        f"SELECT DISTINCT {select}, {position == 0} AS {_POINT} "
                        f"FROM {delta} AS {input_name(position)}"
                    )
            changes = ctx.temp(f"{self.name}_changes", "\nUNION ALL\n".join(parts))
            # both inputs are copied, then joined without their NULL keys and times
            # (``_join``): DuckDB's own join read some DuckLake layouts' NULLs wrong
            right = ctx.temp(
                f"{self.name}_right",
                f"SELECT * FROM {self.right.node.state(ctx, 'new')} AS {input_name(1)}"
                + (f" SEMI JOIN {changes} AS b ON {self._same_key('b')}" if keys else ""),
            )
            first, last, beyond, nearest = (
                ("min", "max", ">", "min") if self._forward else ("max", "min", "<", "max")
            )
            right_time = self._read(self.times[1])
            key_group, key_list = (f" GROUP BY {keys}", f"{keys}, ") if keys else ("", "")
            touched = ctx.temp(
                f"{self.name}_touched",
                f"SELECT {key_list}{_TIME}, TRUE AS {_POINT}, "
                f"NULL AS {_UNTIL} FROM {changes} WHERE {_POINT}\nUNION ALL\n"
                f"SELECT {key_list}c.{_TIME}, FALSE, (SELECT {nearest}"
                f"({right_time}) FROM {right} AS {input_name(1)} WHERE {self._same_key('c')} "
                f"AND {right_time} {beyond} c.{_LAST}) FROM (SELECT "
                f"{key_list}{first}({_TIME}) AS {_TIME}, {last}({_TIME}) "
                f"AS {_LAST} FROM {changes} WHERE NOT {_POINT}{key_group}) AS c",
            )
            left = ctx.temp(
                f"{self.name}_left",
                self._rows(self.left.node.state(ctx, "new"), touched, stored=False),
            )
            recomputed = ctx.temp(f"{self.name}_recomputed", self._join(left, right))
            # the stored rows they replace, read once for the delta and the DELETE
            stale = ctx.temp(
                f"{self.name}_stale",
                self._rows(
                    self.state_table_sql(), touched, stored=True, select=f"s.rowid AS {_ROWID}, s.*"
                ),
            )
            replace_stored(ctx, self, f"SELECT {_ROWID} FROM {stale}", recomputed, touched=stale)
            return f"{touched}\t{recomputed}\t{stale}"

        found = ctx.once(self.node_id, "touched", compute)
        assert found is not None
        touched, recomputed, stale = found.split("\t")
        return touched, recomputed, stale


def _keys_match(keys: list[str], other: str) -> str:
    """The row's ``keys`` (SQL expressions) equal to the key columns of the row ``other``."""
    return same_values((f"({k})", f"{other}.{quote(key_name(i))}") for i, k in enumerate(keys))


def asof_join(left: JoinInput, right: JoinInput, on: exp.Expr | None) -> AsofJoin:
    return _asof(left, right, on, keep_left=False)


def asof_left_join(left: JoinInput, right: JoinInput, on: exp.Expr | None) -> AsofJoin:
    return _asof(left, right, on, keep_left=True)


def _asof(left: JoinInput, right: JoinInput, on: exp.Expr | None, *, keep_left: bool) -> AsofJoin:
    """Read the ON condition as DuckDB does: equalities, and one comparison of times."""
    if on is None:
        raise UnsupportedSQLError("ASOF JOIN without ON", "give it one comparison of times")
    names = (set(left.columns), set(right.columns))

    def side(expression: exp.Expr) -> int | None:
        read = {c.name for c in expression.find_all(exp.Column) if not c.table}
        return next((i for i, n in enumerate(names) if read and read <= n), None)

    equalities: list[tuple[exp.Expr, exp.Expr]] = []
    times: list[tuple[exp.Expr, exp.Expr, str]] = []
    for term in conjuncts(on):
        sides = (side(term.this), side(term.expression)) if isinstance(term, exp.Binary) else ()
        comparison = "=" if isinstance(term, exp.EQ) else _COMPARISONS.get(type(term))
        if comparison is None or sides not in ((0, 1), (1, 0)):
            raise UnsupportedSQLError(
                f"ASOF JOIN condition {expr_sql(term)}",
                "an ASOF join compares each side's columns by equalities and one inequality",
            )
        ordered = (term.this, term.expression) if sides == (0, 1) else (term.expression, term.this)
        if comparison == "=":
            equalities.append(ordered)
        else:
            times.append((*ordered, comparison if sides == (0, 1) else _MIRRORED[comparison]))
    if len(times) != 1:
        raise UnsupportedSQLError(
            f"ASOF JOIN with {len(times)} inequalities", "an ASOF join takes exactly one"
        )
    left_time, right_time, comparison = times[0]
    return AsofJoin(
        left,
        right,
        on,
        tuple(equalities),
        (left_time, right_time),
        comparison,
        keep_left=keep_left,
    )
