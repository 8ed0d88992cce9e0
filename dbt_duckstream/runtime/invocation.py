"""The models of the dbt invocation a run belongs to, as dbt selected them (its
``selected_resources``; ``bridge.functions.invocation_models``).

A source's change over a window is read once per invocation and shared (``feeds``). When the
window ended rows, their old values are read where they lie, a read of every row group
holding one, so the first model reads more than its own columns only for models that will ask
for them: those of its invocation. Without that knowledge (the Python API) a first read takes
its own columns, and a later model that needs others reads the window again. Models are known
by name, as the run log knows them by their table's: a model whose alias differs from its name
is not read ahead for, and reads the window again if it needs more.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from contextlib import contextmanager
from contextvars import ContextVar

_models: ContextVar[frozenset[str] | None] = ContextVar("duckstream_invocation", default=None)


def model_names(selected: Iterable[str] | None) -> frozenset[str] | None:
    """The names of the models among dbt's selected unique ids (``model.<package>.<name>``,
    with ``.v<N>`` for a versioned one); None when dbt has none.

    >>> sorted(model_names(["model.shop.orders", "test.shop.not_null_x", "model.shop.m.v2"]))
    ['m', 'orders']
    """
    if selected is None:
        return None
    return frozenset(
        parts[2]
        for uid in selected
        if len(parts := str(uid).split(".")) >= 3 and parts[0] == "model"
    )


@contextmanager
def within(models: frozenset[str] | None) -> Generator[None]:
    """Runs inside belong to an invocation of these models (None: unknown)."""
    token = _models.set(models)
    try:
        yield
    finally:
        _models.reset(token)


def models() -> frozenset[str] | None:
    """The names of the current invocation's models, or None when they are not known."""
    return _models.get()
