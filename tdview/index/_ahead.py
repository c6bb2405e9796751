"""Reading ``meta.json`` files ahead, in parallel, where the file system is slow.

On a network or shared file system (NFS, Lustre, a FUSE mount) every open and ``stat``
is a round trip to a server: walking a tree of 10,000 folders one file after the other
waits for 10,000 of them in a row. Once a folder's ``meta.json`` is parsed, the names of
its sub-folders are known, so their ``meta.json`` (and the probes of its leaf files)
can be asked for at once, by a few threads, while the walk goes on.

It is switched on per checkpoint when reading the root's ``meta.json`` took longer than
:data:`SLOW_READ_S` (a local file system answers in microseconds: there, threads would
only add work). The reads are the store's own (:meth:`~tdview.storage.Store.read_bytes`,
``is_file``): same checks, same bounds, same errors, raised where the walk asks for the
file. The queue is last in, first out, as a depth-first walk needs its files: the
sub-folders of the folder just read come before its older siblings'. A file the walk
asks for that no thread has started is read by the walk itself (its queued read is
dropped), so nothing waits behind the queue.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

from ..errors import TDViewError
from ..format import (
    MAX_META_BYTES,
    CollectionRecord,
    NodeMeta,
    TensorclassNode,
    TensorDictNode,
    parse_meta_json,
    parse_node,
)
from ..storage import Store
from ._children import PROBED_LEAVES, TENSORCLASS_INNER, collection_names, leaf_names
from ._paths import join_key

__all__ = ["SLOW_READ_S", "ReadAhead", "read_ahead_wanted"]

#: A root ``meta.json`` read slower than this (seconds) switches reading ahead on.
SLOW_READ_S = 150e-6
#: Threads that read ahead (shared by every checkpoint open), and reads queued at most
#: per checkpoint (past it, nothing more is queued until the walk catches up).
WORKERS = 8
MAX_QUEUED = 1024
#: ``TDVIEW_READ_AHEAD``: ``1`` always, ``0`` never, unset: when the file system is slow.
ENV = "TDVIEW_READ_AHEAD"


def read_ahead_wanted(seconds: float) -> bool:
    """Whether a checkpoint whose root ``meta.json`` took ``seconds`` to read reads ahead."""
    forced = os.environ.get(ENV, "")
    if forced in ("0", "1"):
        return forced == "1"
    return seconds > SLOW_READ_S


class _Pool:
    """Daemon threads taking the newest task first (a stack), started on first use."""

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._tasks: deque[tuple[Future, Callable[[], object]]] = deque()
        self._ready = threading.Condition()
        self._started = 0

    def submit(self, call: Callable[[], object]) -> Future:
        future: Future = Future()
        with self._ready:
            self._tasks.append((future, call))
            if self._started < self._workers:
                self._started += 1
                threading.Thread(target=self._work, name="tdview-read-ahead", daemon=True).start()
            self._ready.notify()
        return future

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._tasks:
                    self._ready.wait()
                future, call = self._tasks.pop()  # the newest
            if not future.set_running_or_notify_cancel():
                continue  # cancelled: the walk read it itself
            try:
                future.set_result(call())
            except BaseException as error:  # noqa: BLE001 - the walk raises it where it asks
                future.set_exception(error)


_POOL = _Pool(WORKERS)


class ReadAhead:
    """The reads queued ahead for one checkpoint's store, by ``meta.json`` key.

    A folder's read parses its ``meta.json`` too, and queues what is below it: its
    sub-folders' reads (by the name tried first) and the probes of its leaf files. So
    the threads keep ahead of a depth-first walk, at most :data:`MAX_QUEUED` folders.

    Parameters
    ----------
    store : Store
        The store the reads go to (its reads are safe from several threads: each opens
        its own descriptor; the caches they fill are plain dicts).
    robust : bool
        The checkpoint's ``robust_key`` (which folder name is tried first).
    """

    def __init__(self, store: Store, robust: bool) -> None:
        self.store = store
        self.robust = robust
        self._pending: dict[str, Future] = {}  # the meta.json reads not taken yet
        self._probes: list[Future] = []  # the probe tasks (nobody takes them)
        self._seen: set[str] = set()  # keys queued once (a taken one is not queued again)
        self._lock = threading.Lock()
        self._closed = False

    def below(self, dirkey: str, meta: NodeMeta, *, probes: bool = True) -> None:
        """Queue the reads a walk of folder ``dirkey`` (its parsed ``meta``) is about to
        make: its sub-folders' (each read queues what is below it in turn), then the
        probes of its leaf files, which the walk needs first (the newest run first).
        ``probes``: False for a walk that never looks at a leaf's file (a search); the
        reads it queues below skip them too."""
        if type(meta) is TensorclassNode:
            self._folder(join_key(dirkey, TENSORCLASS_INNER), probes)
            return
        if type(meta) is not TensorDictNode or meta.legacy_no_collection_records:
            return
        prefix = dirkey + "/" if dirkey else ""
        folders, leaves = [], []
        for record in meta.load_order:
            if type(record) is CollectionRecord:
                names = collection_names(record.key, robust=self.robust)
                if names:
                    folders.append(prefix + names[0])
            elif not record.is_nested:
                names = leaf_names(record.key, robust=self.robust)
                if names:
                    leaves.append(prefix + names[0])
        for folder in reversed(folders):  # the first sub-folder ends up newest
            self._folder(folder, probes)
        if probes and leaves and len(meta.entries) <= PROBED_LEAVES:  # more: listed
            is_file = self.store.is_file
            with self._lock:
                if self._closed:
                    return
                tasks = self._probes
                if len(tasks) >= MAX_QUEUED:
                    tasks[:] = [f for f in tasks if not f.done()]
                if len(tasks) < MAX_QUEUED:
                    tasks.append(_POOL.submit(lambda: [_probe(is_file, k) for k in leaves]))

    def _folder(self, dirkey: str, probes: bool) -> None:
        key = join_key(dirkey, "meta.json")
        self._queue(key, lambda: self._read(dirkey, key, probes))

    def _read(self, dirkey: str, key: str, probes: bool) -> tuple[bytes, NodeMeta | TDViewError]:
        """A folder's ``meta.json``, read and parsed (a parse error is returned, to be
        raised where the walk reads it), and what is below it queued."""
        data = self.store.read_bytes(key, MAX_META_BYTES)
        where = self.store.display(key)
        try:
            meta = parse_node(parse_meta_json(data, where), where)
        except TDViewError as error:
            return data, error
        self.below(dirkey, meta, probes=probes)
        return data, meta

    def _queue(self, key: str, call: Callable[[], object]) -> None:
        with self._lock:
            if self._closed or key in self._seen or len(self._pending) >= MAX_QUEUED:
                return
            self._seen.add(key)
            self._pending[key] = _POOL.submit(call)

    def take(self, key: str) -> Future | None:
        """The read of ``key`` queued ahead, when a thread has started it (None: read it
        now; a queued read not started is dropped)."""
        with self._lock:
            future = self._pending.pop(key, None)
        if future is None or future.cancel():
            return None
        return future

    def close(self) -> None:
        """Drop what is queued and wait for the reads running (the store closes next)."""
        with self._lock:
            self._closed = True
            pending = [*self._pending.values(), *self._probes]
            self._pending, self._probes = {}, []
        for future in pending:
            if not future.cancel():
                try:
                    future.exception()  # waits; its error is nobody's now
                except BaseException:  # noqa: BLE001, S110 - cancelled meanwhile
                    pass


def _probe(is_file: Callable[[str], bool], key: str) -> bool:
    try:
        return is_file(key)
    except Exception:  # noqa: BLE001 - the walk probes it again and reports what it finds
        return False
