"""Pausing Python's cyclic garbage collector while a big tree of objects is built.

Reading a large checkpoint creates tens of thousands of objects that all survive (index
nodes, records, tensors). Each batch of survivors makes the collector scan them again,
and every few batches it scans every object of the process (a full collection, hundreds
of thousands of objects once torch is imported): that can cost more than the reading
itself. What is built here holds few or no reference cycles, so there is little for the
collector to find; it runs as usual once the outermost pause ends.

What was built then survives, as a loaded tree does, and is moved to the oldest
generation at once: left in the youngest, the first allocation after the pause would scan
all of it (tens of milliseconds for a tree of 10,000 folders), and a later pass scan it
again, only to promote it. Any cycle of garbage made meanwhile (or young before the
pause) is collected by the next full collection instead. A process that froze objects
itself (``gc.freeze()``, before forking workers) keeps them frozen: the move is left out
then.
"""

from __future__ import annotations

import gc
import threading

__all__ = ["gc_paused"]


class _Pause:
    """A re-entrant, thread-safe pause: the outermost exit re-enables the collector if it
    was enabled at the outermost entry (a collector the caller disabled stays disabled)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._reenable = False

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._reenable = gc.isenabled()
                gc.disable()
            self._depth += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._reenable:
                if gc.get_freeze_count() == 0:
                    # every generation into the permanent one, and all of it back into the
                    # oldest: what survived is promoted without a scan, the counts reset
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()


#: ``with gc_paused(): ...`` builds without collector passes.
_PAUSE = _Pause()


def gc_paused() -> _Pause:
    """The collector pause, as a context manager (re-entrant and thread-safe).

    Examples
    --------
    >>> import gc
    >>> with gc_paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    return _PAUSE
