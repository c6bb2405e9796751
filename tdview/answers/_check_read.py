"""The payload passes of ``tdview check``: archive CRC-32s, and values.

**CRC-32s.** Every entry of an archive below the node checked is read whole and its
CRC-32 computed, on the diff's pool (:func:`~tdview.diff.run_jobs`: 1 MiB chunks per
thread, a large stored entry split among threads, a compressed one inflated as a
stream; memory stays bounded whatever the sizes). A mismatch is told apart as far as
the bytes allow:

* ``corrupt``: a compressed entry that does not inflate, or not to its CRC-32 and size.
  ``mode="r+"`` never writes one (tensordict maps only stored entries), so it is damage.
* ``stale_crc``: a stored leaf file whose local header and central directory agree on
  the CRC-32 the bytes no longer have: what writes with ``mode="r+"`` leave
  (``tensordict.refresh_archive_checksums`` rewrites both). A flipped bit on disk looks
  the same, and the message says so.
* ``crc``: a stored entry that ``mode="r+"`` cannot have written (a ``meta.json``, a
  pickle) or whose local header disagrees with the central directory: damage.

**Values.** Each leaf's bytes (of a torchrl replay buffer, the rows written only) are
read in chunks through the diff's sources (:func:`~tdview.diff.open_source`) and counted
(:mod:`._check_values`), a leaf per task on a few threads.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING

from ..errors import TDViewError
from ..index import Node, Tree, cancel_point, join_key, rows_of_leaf
from ..storage import Store
from ._check_report import CheckReport
from ._check_values import ValueCounts, count_chunk

if TYPE_CHECKING:
    from ..diff import Job

Progress = Callable[[int, int, str], object]
#: Bytes read per chunk when values are counted.
CHUNK = 1 << 20
#: Leaves queued per thread when values are counted.
WINDOW = 4


def entry_keys(store: Store, start: Node) -> Iterator[str]:
    """The archive entries below ``start`` (its file, for a leaf), depth-first."""
    if start.is_leaf:
        yield from (key for key in (start.file, start.sizes_file) if key is not None)
        return
    folders = [start.dirkey or ""] if start.dirkey is not None else []
    while folders:
        cancel_point()
        folder = folders.pop()
        for name in sorted(store.list_dir(folder), reverse=True):
            key = join_key(folder, name)
            if store.is_dir(key):
                folders.append(key)
            else:
                yield key


def check_entries(
    store: Store,
    start: Node,
    owners: dict[str, Node],
    report: CheckReport,
    progress: Progress | None,
    threads: int,
) -> set[str]:
    """Compute the CRC-32 of every archive entry below ``start`` (nothing for a store
    whose files are their own: :attr:`Store.packed`); returns the keys found damaged.
    ``owners``: the node each key belongs to (a leaf's file, a folder's ``meta.json``)."""
    if not store.packed:
        return set()
    return check_keys(store, entry_keys(store, start), owners, report, progress, threads)


def check_keys(
    store: Store,
    keys: Iterable[str],
    owners: dict[str, Node],
    report: CheckReport,
    progress: Progress | None,
    threads: int,
) -> set[str]:
    """Compute the CRC-32 of each archive entry of ``keys`` (a folder of checkpoints'
    side files: its JSON files and pickles in a zip); returns the keys found damaged."""
    if not store.packed:
        return set()
    from ..diff import CRC, Job, Span, run_jobs  # torch: only where entries are read

    bad: set[str] = set()
    jobs = []
    for key in keys:
        entry = store.entry(key)
        if entry.encrypted:
            report.add(_path(owners, key), "unreadable", f"{entry.display} is encrypted")
            bad.add(key)
            continue
        if entry.crc32 is None:  # none recorded (safetensors): nothing to check it against
            continue

        def done(job: Job, key: str = key) -> None:
            if not _judge(store, key, job, owners, report):
                bad.add(key)

        jobs.append(Job(CRC, Span(store, key, entry.size), None, done))
    report.checked["entries"] += len(jobs)
    run_jobs(jobs, threads, progress, "CRC-32")
    report.checked["bytes"] += sum(job.nbytes for job in jobs)
    return bad


def _judge(store: Store, key: str, job: Job, owners: dict[str, Node], report: CheckReport) -> bool:
    """Record the problem of one entry's CRC job, if any; True when its bytes can be read
    on (whole, or only its CRC-32 stale)."""
    entry = store.entry(key)
    path = _path(owners, key)
    error = job.error
    if error is not None:
        kind = "corrupt" if entry.compression != "stored" else "unreadable"
        report.add(path, kind, str(error))
        return False
    computed, recorded = job.crc, entry.crc32
    if entry.compression != "stored" or computed == recorded:
        return True  # a compressed entry's CRC-32 was checked as it was inflated
    local = store.local_crc32(key)
    owner = owners.get(key)
    is_leaf_file = owner is not None and owner.is_leaf and owner.file == key
    found = (
        f"{entry.display}: CRC-32 {computed:#010x} of its bytes, but the archive records "
        f"{recorded:#010x}"
    )
    if is_leaf_file and local in (None, recorded):
        header = "its local header too" if local is not None else "its local header unread"
        report.add(
            path,
            "stale_crc",
            f"{found} ({header}): as after writes with mode='r+', which leave "
            f"the CRC-32s stale; tensordict.refresh_archive_checksums({store.root!r}) "
            "records the new ones. If it was not written so, the entry is damaged.",
        )
        return True  # its values are read as they are (as a load with r+ wrote them)
    if local not in (None, recorded):
        report.add(path, "crc", f"{found}, and its local header {local:#010x}: damaged")
    else:
        report.add(path, "crc", f"{found}: damaged (mode='r+' writes only leaf payloads)")
    return False


def _path(owners: dict[str, Node], key: str) -> tuple[str, ...]:
    """The node path of a store key: its owner's, else its nearest folder's."""
    found = owners.get(key)
    folder = key
    while found is None and folder:
        folder = folder.rpartition("/")[0]
        found = owners.get(join_key(folder, "meta.json"))
    return found.path if found is not None else ()


def check_values(
    ckpt: Tree,
    leaves: list[Node],
    report: CheckReport,
    progress: Progress | None,
    threads: int,
) -> None:
    """Count NaN, ±Inf and all-zero leaves among ``leaves`` (files known whole), a leaf
    per task on ``threads`` threads (numpy releases the GIL), each reading its leaf in
    1 MiB chunks into its own buffer, at most :data:`WINDOW` tasks per thread queued:
    memory bounded by the threads, not the leaves. Results are taken in the walk's order;
    this thread reports progress and asks the cancel check (a context variable the pool's
    threads do not see) while it waits."""
    plan = [(leaf, _value_bytes(ckpt, leaf)) for leaf in leaves]
    total = sum(size for _, size in plan)
    read = _Read(ckpt.store, progress, total)
    queued: deque[tuple[Future[ValueCounts | BaseException], Node, int]] = deque()
    with ThreadPoolExecutor(max(1, threads), thread_name_prefix="tdview-check") as pool:
        try:
            for leaf, size in plan:
                queued.append((pool.submit(read.count, leaf, size), leaf, size))
                if len(queued) >= max(1, threads) * WINDOW:
                    _take(read, *queued.popleft(), report)
            while queued:
                _take(read, *queued.popleft(), report)
        finally:
            read.stop.set()  # a cancel: the tasks running stop at their next chunk
            for future, _, _ in queued:
                future.cancel()


def _take(
    read: _Read,
    future: Future[ValueCounts | BaseException],
    leaf: Node,
    size: int,
    report: CheckReport,
) -> None:
    """Wait for one leaf's counts (reporting progress, asking the cancel check), then
    record its problems."""
    while True:
        cancel_point()
        read.report()
        try:
            found = future.result(timeout=0.1)
            break
        except FutureTimeout:
            continue
    if isinstance(found, BaseException):
        report.add(leaf.path, "unreadable", str(found))
        return
    report.checked["values"] += 1
    report.checked["bytes"] += size
    _value_problems(leaf, found, report)


class _Read:
    """The values pass's shared state: bytes counted so far, and the stop flag."""

    def __init__(self, store: Store, progress: Progress | None, total: int) -> None:
        self.store, self.progress, self.total = store, progress, total
        self.done = 0
        self.stop = threading.Event()
        self._lock = threading.Lock()

    def count(self, leaf: Node, size: int) -> ValueCounts | BaseException:
        """The counts of the first ``size`` bytes of ``leaf`` (or what reading raised)."""
        from ..diff import open_source

        record = leaf.record
        assert record is not None and leaf.file is not None
        counts = ValueCounts()
        buffer = memoryview(bytearray(min(CHUNK, size)))
        try:
            source = open_source(self.store, leaf.file, size)
            try:
                for at in range(0, size, CHUNK):
                    if self.stop.is_set():
                        return counts
                    chunk = buffer[: min(CHUNK, size - at)]
                    source.readinto(at, chunk)
                    count_chunk(counts, chunk, record.dtype)
                    with self._lock:
                        self.done += len(chunk)
            finally:
                source.close()
        except (TDViewError, OSError, ValueError) as error:
            return error
        return counts

    def report(self) -> None:
        if self.progress is not None:
            self.progress(self.done, self.total, "values")


def _value_bytes(ckpt: Tree, leaf: Node) -> int:
    """The bytes of ``leaf`` whose values count: its whole payload, or of a torchrl
    storage the rows written."""
    record = leaf.record
    assert record is not None and leaf.file is not None
    if record.nbytes is None:  # a nested leaf: its data file holds every element
        return ckpt.store.locate(leaf.file).size // record.dtype.itemsize * record.dtype.itemsize
    rows = rows_of_leaf(ckpt, leaf.path)
    if rows is None or not record.shape or not record.shape[0]:
        return record.nbytes
    return record.nbytes // record.shape[0] * rows.written


def _value_problems(leaf: Node, counts: ValueCounts, report: CheckReport) -> None:
    n = counts.elements
    if counts.nan:
        report.add(leaf.path, "nan", f"{counts.nan} of {n} values are NaN")
    if counts.inf:
        report.add(leaf.path, "inf", f"{counts.inf} of {n} values are infinite")
    if n and not counts.nonzero:
        report.add(leaf.path, "zeros", f"all {n} values are zero")
