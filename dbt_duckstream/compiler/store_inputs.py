"""Which join inputs keep their rows in a state table (``operators.stored_input``).

A model's configuration names sources (``ivm_stored_inputs``), or ``*`` for all of them;
each inner join input that reads one of them, and that the join's condition or the filter
above it restricts by conjuncts of its own, is read from a state table of the rows those
conjuncts keep. A name that matches no such input is a configuration error, saying which
inputs could be stored.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

from ..errors import ConfigurationError
from ..sql import TableRef
from .operators import Filter, Join, JoinInput, Operator, Scan
from .operators.base import number
from .operators.stored_input import StoredInput

#: the name that stands for every source: each input that can be stored is
EVERY = "*"


def normalized(names: Iterable[str]) -> tuple[str, ...]:
    """The configured names as a plan holds them: lower case, each once, sorted.

    >>> normalized(["Lineitem", "orders", "lineitem"])
    ('lineitem', 'orders')
    """
    return tuple(sorted({name.lower() for name in names}))


def identity(names: Iterable[str]) -> str:
    """The stored inputs as they enter a model's fingerprints (its plan's digest, its SQL's
    fingerprint): nothing without any, so that the fingerprints of models that store none
    stay as they were, and a model that starts or stops storing one rebuilds."""
    stored = normalized(names)
    return f"\n{','.join(stored)}" if stored else ""


def store_inputs(root: Operator, names: Iterable[str]) -> None:
    """Wrap the join inputs of ``root`` that read a source of ``names`` (a table's name, or
    its ``schema.name``, or its full key) in a ``StoredInput``, and number the tree again."""
    wanted = set(normalized(names))
    if not wanted:
        return
    found: set[str] = set()
    eligible: set[str] = set()
    above = {id(n.child): n.predicate for n in root.walk() if isinstance(n, Filter)}
    for node in list(root.walk()):
        if not isinstance(node, Join):
            continue
        local = node.local_conditions(above.get(id(node)))
        inputs = list(node.inputs)
        for position, given in enumerate(inputs):
            scan = given.node
            if not isinstance(scan, Scan) or position not in local:
                continue
            eligible.add(scan.table.key)
            matched = wanted & (spellings(scan.table) | {EVERY})
            if not matched:
                continue
            found |= matched
            inputs[position] = JoinInput(given.alias, StoredInput(scan, unbound(local[position])))
        node.inputs = tuple(inputs)
    if missing := wanted - found:
        choices = (
            ", ".join(sorted(eligible)) or "none: no inner join input has conditions of its own"
        )
        raise ConfigurationError(
            f"ivm_stored_inputs names {', '.join(sorted(missing))}, which no inner join of the "
            f"model reads under conditions of its own (inputs that can be stored: {choices})"
        )
    number(root)


def spellings(table: TableRef) -> set[str]:
    """The names by which a configuration may give ``table``."""
    return {n.lower() for n in (table.name, f"{table.schema}.{table.name}", table.key)}


def unbound(predicate: exp.Expr) -> exp.Expr:
    """A join's conjuncts over one input (``"_ivm_in1"."k"``) over that input's own columns."""

    def bare(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table:
            return exp.column(exp.to_identifier(node.name, quoted=True))
        return node

    return predicate.copy().transform(bare)
