"""SQL text: identifiers, literals, table names and key matches, shared by every layer.

Pure string building, no database: the compiler, the runtime, the dbt bridge and the Spark
data source all write DuckDB SQL through these, so quoting is done one way everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.tokens import TokenType

#: where DuckDB's built-in functions live: a statement outside a transaction that names one
#: unqualified, with a DuckLake as the default database, searches the DuckLake first (a
#: snapshot read: ``duckdb_databases()`` 3.2 ms, ``system.main.duckdb_databases()`` 0.7 ms)
BUILTIN = "system.main"


@dataclass(frozen=True)
class TableRef:
    """A table in an attached catalog (a DuckLake for sources and models)."""

    catalog: str
    schema: str
    name: str

    @property
    def key(self) -> str:
        """A readable identity, used in messages and as the cursor's source name."""
        return f"{self.catalog}.{self.schema}.{self.name}"

    def sql(self) -> str:
        return ".".join(quote(part) for part in (self.catalog, self.schema, self.name))

    def sibling(self, name: str) -> TableRef:
        """Another table in the same schema (the model's bookkeeping lives beside it)."""
        return TableRef(self.catalog, self.schema, name)


def quote(name: str) -> str:
    """Quote an identifier for DuckDB.

    >>> quote('a"b')
    '"a""b"'
    """
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """A SQL string literal.

    >>> literal("it's")
    "'it''s'"
    """
    return "'" + text.replace("'", "''") + "'"


def inlined(sql: str, params: Sequence[object] | Mapping[str, object]) -> str:
    """``sql`` with its placeholders (outside quotes) replaced by literals of their values:
    ``?`` by the values of a sequence in turn, ``$name`` by those of a mapping.

    DuckDB binds a statement with parameters twice, when preparing it and when executing it,
    and with a DuckLake attached a bind costs 0.5-3 ms (measured: a metadata query 0.6 ms
    with literals, 2.1 ms with parameters; the run log's insert 2.9 ms against 6.5 ms).
    Floats go through text, which DuckDB parses exactly (a decimal literal is not).

    >>> inlined("SELECT * FROM t WHERE a = ? AND b <> '?' AND c IN (?, ?)", ["it's", 2, 0.1])
    "SELECT * FROM t WHERE a = 'it''s' AND b <> '?' AND c IN (2, '0.1'::DOUBLE)"
    >>> inlined("SELECT $a, '$a', $ab", {"a": None, "ab": True})
    "SELECT NULL, '$a', TRUE"
    >>> inlined("SELECT ?", [1, 2])
    Traceback (most recent call last):
    ...
    ValueError: 2 values for 1 placeholders
    """
    named = params if isinstance(params, Mapping) else None
    values = [] if named is not None else list(params)
    parts: list[str] = []
    quote_char, found, at = "", 0, 0
    while at < len(sql):
        char = sql[at]
        at += 1
        if quote_char:
            quote_char = "" if char == quote_char else quote_char
        elif char in "'\"":
            quote_char = char
        elif char == "?" and named is None:
            char = _literal_of(values[found]) if found < len(values) else char
            found += 1
        elif char == "$" and named is not None:
            end = at
            while end < len(sql) and (sql[end].isalnum() or sql[end] == "_"):
                end += 1
            if sql[at:end] in named:
                char, at = _literal_of(named[sql[at:end]]), end
        parts.append(char)
    if named is None and found != len(values):
        raise ValueError(f"{len(values)} values for {found} placeholders")
    return "".join(parts)


def _literal_of(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{literal(repr(value))}::DOUBLE"
    if isinstance(value, str):
        return literal(value)
    raise TypeError(f"no SQL literal for {type(value).__name__}")


def column_list(columns: Iterable[str], prefix: str = "") -> str:
    """``"a", "b"``, or ``t."a", t."b"`` with a prefix."""
    return ", ".join(f"{prefix}{quote(c)}" for c in columns)


def same_key(left: str, right: str, columns: Iterable[str], *, empty: str = "TRUE") -> str:
    """Rows of ``left`` and ``right`` with equal ``columns``, NULLs equal to NULLs (as GROUP BY
    and set operations group them).

    >>> same_key("t", "d", ["k", "g"])
    't."k" IS NOT DISTINCT FROM d."k" AND t."g" IS NOT DISTINCT FROM d."g"'
    """
    pairs = [(f"{left}.{quote(c)}", f"{right}.{quote(c)}") for c in columns]
    return same_values(pairs, empty=empty)


def same_values(pairs: Iterable[tuple[str, str]], *, empty: str = "TRUE") -> str:
    """``a IS NOT DISTINCT FROM b AND ...`` over SQL expression pairs; ``empty`` when none."""
    matches = [f"{a} IS NOT DISTINCT FROM {b}" for a, b in pairs]
    return " AND ".join(matches) or empty


def keyed_join(
    select: str,
    left: str,
    join: str,
    right: str,
    columns: Sequence[str],
    *,
    aliases: tuple[str, str] = ("s", "t"),
    split: str = "right",
) -> str:
    """``SELECT select FROM left AS s <join> JOIN right AS t ON <columns equal, NULL matching
    NULL>``, as two joins: the rows of the ``split`` side whose columns are all set join by
    ``=``, the others by ``IS NOT DISTINCT FROM``. DuckDB hash-joins both, but only ``=``
    gives the other side's scan a key range to skip row groups by: a table of 15M rows sorted
    by key is read whole to match 1,500 keys by ``IS NOT DISTINCT FROM`` (25 ms), skipped by
    ``=`` (0.3 ms). Each row of the split side is in one branch and matches the same rows
    there, so the union is the join; without a NULL key the second branch joins an empty side.
    The price is a second scan of the other side, which DuckLake binds at a few ms: worth it
    for large tables only.

    >>> print(keyed_join("s.*", "a", "SEMI", "b", ["k"]))  # doctest: +NORMALIZE_WHITESPACE
    SELECT s.* FROM a AS s SEMI JOIN (SELECT * FROM b WHERE "k" IS NOT NULL) AS t
      ON s."k" = t."k"
    UNION ALL
    SELECT s.* FROM a AS s SEMI JOIN (SELECT * FROM b WHERE NOT ("k" IS NOT NULL)) AS t
      ON s."k" IS NOT DISTINCT FROM t."k"
    """
    a, b = aliases
    pairs = [(f"{a}.{quote(c)}", f"{b}.{quote(c)}") for c in columns]
    equal = " AND ".join(f"{x} = {y}" for x, y in pairs)
    keyed = " AND ".join(f"{quote(c)} IS NOT NULL" for c in columns)
    branches = []
    for rows, on in ((keyed, equal), (f"NOT ({keyed})", same_values(pairs))):
        kept = f"(SELECT * FROM {right if split == 'right' else left} WHERE {rows})"
        first, second = (left, kept) if split == "right" else (kept, right)
        branches.append(f"SELECT {select} FROM {first} AS {a} {join} JOIN {second} AS {b} ON {on}")
    return "\nUNION ALL\n".join(branches)


def unique_names(names: Iterable[str]) -> list[str]:
    """Column names made unique as DuckDB makes a query's output names unique when it stores
    them (``CREATE TABLE AS``, a view, a subquery): a repeated name, compared without case,
    takes ``_1``, ``_2``, ... (the first such name not taken), so a model keeps the columns
    that dbt's ``table`` materialization of the same SQL would have.

    >>> unique_names(["id", "amount", "amount_1", "ID", "amount", "amount"])
    ['id', 'amount', 'amount_1', 'ID_1', 'amount_2', 'amount_3']
    """
    seen: dict[str, int] = {}
    unique = []
    for given in names:
        name, base = given, given.lower()
        if base in seen:
            name = f"{given}_{seen[base]}"
            while name.lower() in seen:
                seen[base] += 1
                name = f"{given}_{seen[base]}"
        seen[name.lower()] = seen.get(name.lower(), 0) + 1
        unique.append(name)
    return unique


def bare_statement(sql: str) -> str:
    r"""A model's SQL without trailing semicolons and comments, ready to nest in a query.

    >>> bare_statement("SELECT 1 AS a -- the answer\n; ; -- done\n")
    'SELECT 1 AS a'
    """
    tokens = [t for t in DuckDB().tokenize(sql) if t.token_type != TokenType.SEMICOLON]
    return sql[: tokens[-1].end + 1].strip() if tokens else sql.strip()


def picks_rows(sql: str) -> bool:
    """Whether a query keeps some rows of an input by their order or position (LIMIT, OFFSET,
    FETCH, DISTINCT ON): DuckDB 1.5.5 may filter below such an operator
    (``runtime.lake.JOIN_FILTER_OPTIMIZERS``). SQL that sqlglot cannot parse counts as one.

    >>> picks_rows("WITH top AS (SELECT * FROM t ORDER BY v LIMIT 3) SELECT * FROM top, s")
    True
    >>> picks_rows("SELECT DISTINCT ON (k) k, v FROM t ORDER BY k, v")
    True
    >>> picks_rows("SELECT DISTINCT k, sum(v) FROM t JOIN s USING (k) GROUP BY k")
    False
    """
    return _any_statement(
        sql,
        lambda statement: (
            statement.find(exp.Limit, exp.Offset, exp.Fetch) is not None
            or any(distinct.args.get("on") for distinct in statement.find_all(exp.Distinct))
        ),
    )


def joins_asof(sql: str) -> bool:
    """Whether a query has an ASOF join, which a recomputation runs with the statistics
    optimizers on (``runtime.lake.STATISTICS_OPTIMIZERS``), as a ``table`` materialization
    does: with them off, DuckDB 1.5.5's ASOF join matched a left row whose time is NULL over
    DuckLake tables it matched no row for with them on (it sometimes does so with them on
    too: README, known upstream limits). SQL that sqlglot cannot parse counts as one.

    >>> joins_asof("SELECT * FROM o ASOF JOIN r ON o.k = r.k AND o.t >= r.t")
    True
    >>> joins_asof("SELECT * FROM o JOIN r ON o.k = r.k")
    False
    """
    return _any_statement(
        sql, lambda statement: any(is_asof(join) for join in statement.find_all(exp.Join))
    )


def is_asof(join: exp.Join) -> bool:
    """Whether a join is an ASOF join (``ASOF [LEFT] JOIN``)."""
    return str(join.args.get("method") or "").upper() == "ASOF"


def compares_unequal(sql: str) -> bool:
    """Whether a query compares values for inequality (``<>``, ``IS DISTINCT FROM``, ``NOT
    a = b``, ``NOT IN (list)``): DuckDB 1.5.5 decorrelates an ``EXISTS`` whose correlation
    holds one such comparison and another comparison wrongly
    (``runtime.lake.DELIMINATOR_OPTIMIZERS``), and the maintenance of a semi, anti or outer
    join renders its condition as such a correlation. SQL that sqlglot cannot parse counts as
    one.

    >>> compares_unequal("SELECT * FROM a SEMI JOIN b ON a.k <> b.k AND a.v <= b.v")
    True
    >>> compares_unequal("SELECT * FROM a WHERE NOT (k = 1)")
    True
    >>> compares_unequal("SELECT * FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE b.k = a.k)")
    False
    """
    return _any_statement(
        sql,
        lambda statement: any(
            _unequal(node) for node in statement.find_all(exp.NEQ, exp.NullSafeNEQ, exp.Not)
        ),
    )


def _any_statement(sql: str, test: Callable[[exp.Expr], bool]) -> bool:
    """Whether ``test`` holds for a statement of ``sql``; SQL sqlglot cannot parse counts."""
    statements = _statements(sql)
    return statements is None or any(test(statement) for statement in statements)


@lru_cache(maxsize=256)
def _statements(sql: str) -> tuple[exp.Expr, ...] | None:
    """The statements of ``sql`` as sqlglot parses them (read, never changed), once for the
    questions a run asks of its model's SQL; None when sqlglot cannot parse it."""
    try:
        parsed = sqlglot.parse(sql, dialect="duckdb")
    except sqlglot.errors.SqlglotError:
        return None
    return tuple(statement for statement in parsed if statement is not None)


def _unequal(node: exp.Expr) -> bool:
    if not isinstance(node, exp.Not):
        return True
    negated = node.this.unnest()
    if isinstance(negated, exp.In):
        return negated.args.get("query") is None
    return isinstance(negated, exp.EQ | exp.NullSafeEQ)


def conjuncts(predicate: exp.Expr) -> list[exp.Expr]:
    """The terms of a conjunction, through nested ANDs and parentheses.

    >>> [c.sql() for c in conjuncts(sqlglot.parse_one("(a = 1 AND (b = 2)) AND c"))]
    ['a = 1', 'b = 2', 'c']
    """
    if isinstance(predicate, exp.And):
        return [*conjuncts(predicate.this), *conjuncts(predicate.expression)]
    if isinstance(predicate, exp.Paren):
        return conjuncts(predicate.this)
    return [predicate]


def disjuncts(predicate: exp.Expr) -> list[exp.Expr]:
    """The terms of a disjunction, through nested ORs and parentheses."""
    if isinstance(predicate, exp.Or):
        return [*disjuncts(predicate.this), *disjuncts(predicate.expression)]
    if isinstance(predicate, exp.Paren):
        return disjuncts(predicate.this)
    return [predicate]


def factored(predicate: exp.Expr) -> exp.Expr:
    """A disjunction whose branches all hold the same conjuncts, with those pulled out:
    ``(a AND b) OR (a AND c)`` is ``a AND (b OR c)``, in SQL's three-valued logic too (and
    ``a OR (a AND b)`` is ``a``). Anything else as it is.

    >>> factored(sqlglot.parse_one("(k = o.k AND b = 1) OR (c = 2 AND k = o.k)")).sql()
    'k = o.k AND (b = 1 OR c = 2)'
    >>> factored(sqlglot.parse_one("(k = o.k AND b = 1) OR c = 2")).sql()
    '(k = o.k AND b = 1) OR c = 2'
    """
    branches = [conjuncts(branch) for branch in disjuncts(predicate)]
    if len(branches) < 2:
        return predicate
    shared = {expr_sql(c) for c in branches[0]}
    for branch in branches[1:]:
        shared &= {expr_sql(c) for c in branch}
    if not shared:
        return predicate
    common = [c.copy() for c in branches[0] if expr_sql(c) in shared]
    rests = [[c.copy() for c in branch if expr_sql(c) not in shared] for branch in branches]
    if any(not rest for rest in rests):
        return exp.and_(*common)
    return exp.and_(*common, exp.paren(exp.or_(*(exp.and_(*rest) for rest in rests))))


def expr_sql(expression: exp.Expr) -> str:
    """A sqlglot expression as DuckDB SQL."""
    return expression.sql(dialect="duckdb")


def indent(sql: str, by: str = "  ") -> str:
    return "\n".join(by + line if line else line for line in sql.splitlines())
