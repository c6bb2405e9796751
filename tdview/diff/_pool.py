"""Payload jobs run on a pool of threads, in bounded memory.

A :class:`Job` reads one file or entry (a CRC-32), or two (a byte comparison, or an
element-wise comparison). A job over random-access sources is cut into pieces of
:data:`SEGMENT` bytes that threads read at once (one large leaf is read in parallel
too); small pieces are grouped into one task so that thousands of small leaves do not
cost a task each. A thread reads a piece chunk by chunk into its own buffers, so the
memory in flight is bounded by the number of threads times one chunk's buffers
(:data:`CHUNK_BYTES` of bytes per side, and float64 buffers of
:data:`~tdview.diff._stats.CHUNK` elements), whatever the sizes of the leaves; at most
:data:`WINDOW` tasks per thread are queued at a time.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import TDViewError
from ..storage import crc32
from ._jobs import COMPARE, CRC, VALUES, Job, Span
from ._stats import CHUNK, KERNEL_MIN, Acc, as_tensor, compare_chunk, kernel_for, kernel_values
from ._stream import Source, open_source

#: Bytes per side of one piece of a job.
SEGMENT = 32 << 20
#: Bytes read per side per chunk (byte comparisons and CRCs).
CHUNK_BYTES = 1 << 20
#: Tasks queued per thread.
WINDOW = 4
#: Pieces grouped in one task at most (many small leaves still spread over the threads).
GROUP = 64

__all__ = ["COMPARE", "CRC", "VALUES", "Job", "Span", "run_jobs"]


def _open(span: Span) -> Source:
    return open_source(span.store, span.key, span.size)


@dataclass(eq=False)
class Piece:
    job: Job
    start: int  # in the job's units
    stop: int


_local = threading.local()


def _buffers(size: int) -> tuple[memoryview, memoryview, bytearray, bytearray]:
    """This thread's two raw buffers of ``size`` bytes (one pair per size: a full chunk
    is then compared as a whole buffer, by one ``memcmp``)."""
    kept = getattr(_local, "raw", None)
    if kept is None:
        kept = _local.raw = {}
    found = kept.get(size)
    if found is None:
        found = kept[size] = (bytearray(size), bytearray(size))
    first, second = found
    return memoryview(first), memoryview(second), first, second


def _address(raw: bytearray) -> int:
    """Where a buffer of :func:`_buffers` starts (it is never resized: the address holds)."""
    kept = getattr(_local, "addresses", None)
    if kept is None:
        kept = _local.addresses = {}
    found = kept.get(id(raw))
    if found is None or found[0] is not raw:
        found = kept[id(raw)] = (raw, ctypes.addressof((ctypes.c_char * len(raw)).from_buffer(raw)))
    return found[1]


def run_jobs(
    jobs: list[Job], threads: int, progress: Callable[[int, int, str], object] | None, label: str
) -> None:
    """Run every job; each job's ``done`` is called in this thread as it completes."""
    if not jobs:
        return
    total = sum(job.nbytes for job in jobs)
    tasks = _tasks(jobs)
    if progress is not None:
        progress(0, total, label)
    saved = torch.get_num_threads()
    try:
        _run_pool(tasks, threads, progress, label, total)
    finally:
        # the pool threads asked torch for one thread each (see _one_thread), which torch
        # also keeps as the count for threads started later: give it back (this thread's
        # own count never changed)
        torch.set_num_threads(saved)


def _one_thread() -> None:
    """Each pool thread runs torch's ops on itself: the threads are the parallelism. With
    torch's default, every op of a chunk would start an OpenMP team of every core, whose
    threads spin between ops: 5 to 20 times slower on a machine with other work to do."""
    torch.set_num_threads(1)


def _run_pool(
    tasks: Iterator[list[Piece]],
    threads: int,
    progress: Callable[[int, int, str], object] | None,
    label: str,
    total: int,
) -> None:
    done_bytes = 0
    with ThreadPoolExecutor(
        max_workers=max(1, threads), thread_name_prefix="tdview-diff", initializer=_one_thread
    ) as pool:
        queued: set[Future[list[tuple[Piece, Any]]]] = set()
        source = iter(tasks)
        try:
            while True:
                for task in source:
                    queued.add(pool.submit(_run_task, task))
                    if len(queued) >= max(1, threads) * WINDOW:
                        break
                if not queued:
                    break
                finished, queued = wait(queued, return_when=FIRST_COMPLETED)
                for future in finished:
                    done_bytes += _finish(future.result())
                if progress is not None:
                    progress(done_bytes, total, label)
        except BaseException:
            for future in queued:
                future.cancel()
            raise


def _tasks(jobs: Iterable[Job]) -> Iterator[list[Piece]]:
    """Pieces of at most :data:`SEGMENT` bytes, small ones grouped into one task."""
    group: list[Piece] = []
    group_bytes = 0
    for job in jobs:
        unit, length = job.unit(), job.length()
        random = job.a.random_access and (job.b is None or job.b.random_access)
        step = max(1, SEGMENT // unit) if random else max(length, 1)
        starts = range(0, length, step) if length else [0]
        pieces = [Piece(job, start, min(length, start + step)) for start in starts]
        job.pending = len(pieces)
        for piece in pieces:
            size = (piece.stop - piece.start) * unit
            if group and (group_bytes + size > SEGMENT or len(group) >= GROUP):
                yield group
                group, group_bytes = [], 0
            group.append(piece)
            group_bytes += size
    if group:
        yield group


def _finish(results: list[tuple[Piece, Any]]) -> int:
    """Merge a task's results into their jobs; returns the bytes they covered."""
    covered = 0
    for piece, result in results:
        job = piece.job
        covered += (piece.stop - piece.start) * job.unit() * (1 if job.b is None else 2)
        if isinstance(result, BaseException):
            job.error = job.error or result
        elif job.kind == VALUES:
            if job.acc is None:
                job.acc = result
            else:
                job.acc.merge(result)
        elif job.kind == COMPARE:
            job.differs = job.differs or result
        else:
            job.crc_parts.append(result)
        job.pending -= 1
        if job.pending == 0:
            job.done(job)
    return covered


def _run_task(task: list[Piece]) -> list[tuple[Piece, Any]]:
    out: list[tuple[Piece, Any]] = []
    for piece in task:
        try:
            out.append((piece, _run_piece(piece)))
        except (TDViewError, OSError, RuntimeError, ValueError) as error:
            out.append((piece, error))
    return out


def _run_piece(piece: Piece) -> Any:
    job = piece.job
    if job.kind == COMPARE and job.differs:
        return True  # another piece found a difference already
    source_a = _open(job.a)
    try:
        if job.kind == CRC:
            return _crc(piece, source_a)
        assert job.b is not None
        source_b = _open(job.b)
        try:
            if job.kind == COMPARE:
                return _compare(piece, source_a, source_b)
            return _values(piece, source_a, source_b)
        finally:
            source_b.close()
    finally:
        source_a.close()


def _crc(piece: Piece, source: Source) -> tuple[int, int, int]:
    view, _, raw, _ = _buffers(CHUNK_BYTES)
    crc = 0
    position = piece.start
    while position < piece.stop:
        take = min(CHUNK_BYTES, piece.stop - position)
        chunk = view[:take]
        source.readinto(position, chunk)
        crc = crc32(chunk, crc)
        position += take
    return piece.start, crc, piece.stop - piece.start


def _compare(piece: Piece, source_a: Source, source_b: Source) -> bool:
    """Whether the piece's bytes differ (reading stops at the first difference)."""
    view_a, view_b, raw_a, raw_b = _buffers(CHUNK_BYTES)
    position = piece.start
    while position < piece.stop:
        take = min(CHUNK_BYTES, piece.stop - position)
        source_a.readinto(position, view_a[:take])
        source_b.readinto(position, view_b[:take])
        if not _same(raw_a, raw_b, take):
            piece.job.differs = True
            return True
        if piece.job.differs:
            return True
        position += take
    return False


def _same(raw_a: bytearray, raw_b: bytearray, take: int) -> bool:
    if take == len(raw_a):
        return raw_a == raw_b  # memcmp
    return raw_a[:take] == raw_b[:take]


def _values(piece: Piece, source_a: Source, source_b: Source) -> Acc:
    job = piece.job
    dtype_a, dtype_b = job.dtype_a, job.dtype_b
    assert dtype_a is not None and dtype_b is not None
    size_a, size_b = dtype_a.itemsize, dtype_b.itemsize
    same_dtype = dtype_a == dtype_b
    view_a, view_b, raw_a, raw_b = _buffers(CHUNK * max(size_a, size_b))
    found = kernel_for(dtype_a, dtype_b)
    address_a, address_b = (_address(raw_a), _address(raw_b)) if found is not None else (0, 0)
    acc = Acc()
    position = piece.start
    while position < piece.stop:
        k = min(CHUNK, piece.stop - position)
        chunk_a, chunk_b = view_a[: k * size_a], view_b[: k * size_b]
        source_a.readinto(position * size_a, chunk_a)
        source_b.readinto(position * size_b, chunk_b)
        position += k
        # the kernel on the buffers themselves: no tensor, no comparison of the bytes first
        tried = found is not None and k >= KERNEL_MIN
        if found is not None and tried:
            if kernel_values(acc, found, dtype_a, address_a, address_b, k, job.rtol, job.atol):
                continue
        same = same_dtype and _same(raw_a, raw_b, k * size_a)
        compare_chunk(
            acc,
            as_tensor(chunk_a, dtype_a),
            as_tensor(chunk_b, dtype_b),
            same,
            job.rtol,
            job.atol,
            use_kernel=not tried,
        )
    return acc
