"""What the dispatcher needs besides a message: a :class:`Session` (the open checkpoint
or compare view, where loads bind, and the cancel marks)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import Cancelled
from ..index import Tree

if TYPE_CHECKING:
    from ._compare import Comparison

_MAX_MARKS = 4096


@dataclass
class Session:
    """What the dispatcher needs besides the message: the open checkpoint (None when it
    could not be opened, with ``error`` saying why), the source path as the user spelled
    it, the namespace loads bind into, and the cancel marks.

    Examples
    --------
    >>> session = Session(Checkpoint("demo_ckpt"), "demo_ckpt", namespace={})  # doctest: +SKIP
    """

    ckpt: Tree | None
    source: str
    namespace: MutableMapping[str, Any] | None = None
    error: str = ""
    on_load: Callable[[Any], None] | None = None
    #: The compare view (``TDView(a, compare=b)``): the ``diff_*`` methods answer from it.
    diff: Comparison | None = None
    _marks: OrderedDict[int, None] = field(default_factory=OrderedDict, repr=False)
    _pending: dict[int, int] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def expect(self, request_id: int) -> None:
        """Note a request received and not answered yet: only such a request can be
        cancelled (a cancel of another id must not stop a later request that reuses it)."""
        with self._lock:
            self._pending[request_id] = self._pending.get(request_id, 0) + 1

    def cancel(self, request_id: int) -> None:
        """Mark ``request_id`` cancelled if it is pending (the oldest marks are dropped
        past 4096)."""
        with self._lock:
            if request_id not in self._pending:
                return
            self._marks[request_id] = None
            while len(self._marks) > _MAX_MARKS:
                self._marks.popitem(last=False)

    def is_cancelled(self, request_id: int) -> bool:
        with self._lock:
            return request_id in self._marks

    def check(self, request_id: int) -> None:
        """Raise :class:`Cancelled` when the request was cancelled."""
        if self.is_cancelled(request_id):
            raise Cancelled(f"request {request_id} was cancelled")

    def forget(self, request_id: int) -> None:
        """A request answered: its mark goes with the last pending request of its id."""
        with self._lock:
            left = self._pending.get(request_id, 1) - 1
            if left > 0:
                self._pending[request_id] = left
                return
            self._pending.pop(request_id, None)
            self._marks.pop(request_id, None)
