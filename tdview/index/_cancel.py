"""Cancelling a walk from outside: a check that long loops call now and then.

A request of the widget (a search, a subtree's totals, a children page with totals)
may walk a whole tree. The protocol runs it inside :func:`cancellable` with a check that
raises :class:`~tdview.errors.Cancelled` once the client cancelled it; every walk of the
index calls :func:`cancel_point` per node, so a cancelled walk stops at the next node
and its thread is free again. Outside :func:`cancellable` a cancel point costs one
context-variable read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["cancel_point", "cancellable"]

_CHECK: ContextVar[Callable[[], None] | None] = ContextVar("tdview_cancel_check", default=None)


@contextmanager
def cancellable(check: Callable[[], None]) -> Iterator[None]:
    """Run the block with ``check`` called at every cancel point of this thread.

    Examples
    --------
    >>> from tdview.errors import Cancelled
    >>> def stop():
    ...     raise Cancelled("request 3 was cancelled")
    >>> with cancellable(stop):
    ...     cancel_point()
    Traceback (most recent call last):
    ...
    tdview.errors.Cancelled: request 3 was cancelled
    """
    token = _CHECK.set(check)
    try:
        yield
    finally:
        _CHECK.reset(token)


def cancel_point() -> None:
    """Raise what the check of the enclosing :func:`cancellable` raises, if any."""
    check = _CHECK.get()
    if check is not None:
        check()
