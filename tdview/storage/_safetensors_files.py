"""The files of a safetensors checkpoint: each one's header, read and checked once, and
its bytes read by range (a local file held open, checked to be the file read when it is
opened again to be mapped).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence

from ..errors import ArchiveError, LeafDataError, TDViewError
from ._mapfile import READ_FLAGS
from ._ranges import Job, Transport, span_jobs
from ._safetensors import PREFIX, Header, header_length, parse_header

__all__ = ["LocalShard", "RemoteShard", "Shard", "is_safetensors"]

_PIECE = 8 << 20  # the largest single ranged read

_CHUNK = 64 << 20  # the largest single pread


class Shard:
    """One safetensors file: where it is, its size and header, and how to read it."""

    display: str
    #: how the store names it: its file name in a shard set, ``""`` for a single file
    name: str = ""
    size: int
    header: Header
    #: a local file: (fd, its fstat) opened and checked to be the file read
    open_checked: Callable[[bool], tuple[int, os.stat_result]] | None = None

    def read(self, start: int, dest: memoryview) -> None:
        """Fill ``dest`` with the file's bytes from ``start``."""
        raise NotImplementedError

    def read_many(
        self, spans: Sequence[tuple[int, memoryview, str]], done: Callable[[str], object]
    ) -> None:
        """Fill each ``dest`` with the bytes from its ``start``, calling ``done(key)`` as
        each is in (a remote file reads them concurrently)."""
        for start, dest, key in spans:
            self.read(start, dest)
            done(key)

    def writable(self) -> bool:
        return False

    def check_intact(self) -> None:
        return None

    def close(self) -> None:
        return None


class LocalShard(Shard):
    """A local safetensors file, held open; ``reopen(write)`` opens it again for a map.

    Raises
    ------
    NotACheckpointError, LimitExceededError, UnsafeCheckpointError, CheckpointFormatError
        What :func:`header_length` and :func:`parse_header` raise.
    """

    def __init__(
        self, display: str, fd: int, st: os.stat_result, reopen: Callable[[bool], int]
    ) -> None:
        self.display, self.fd, self.size = display, fd, st.st_size
        self._identity = st.st_dev, st.st_ino
        self._reopen = reopen
        self.open_checked = self._open_checked
        try:
            n = header_length(os.pread(fd, PREFIX, 0), display, self.size)
            self.header = parse_header(_pread(fd, n, PREFIX, display), display, self.size)
        except BaseException:
            os.close(fd)
            raise

    def read(self, start: int, dest: memoryview) -> None:
        at = 0
        while at < len(dest):
            got = os.preadv(self.fd, [dest[at : at + _CHUNK]], start + at)
            if got <= 0:
                raise LeafDataError(
                    f"{self.display} ended at byte {start + at:,} while it was read: it was "
                    "truncated since it was opened."
                )
            at += got

    def _open_checked(self, write: bool) -> tuple[int, os.stat_result]:
        fd = self._reopen(write)
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != self._identity or st.st_size != self.size:
                raise ArchiveError(
                    f"{self.display} changed since it was opened (another file, or "
                    f"{st.st_size:,} bytes where it had {self.size:,}). Open it again."
                )
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    def writable(self) -> bool:
        try:
            os.close(self._open_checked(True)[0])
        except (OSError, TDViewError):
            return False
        return True

    def check_intact(self) -> None:
        size = os.fstat(self.fd).st_size
        if size < self.size:
            raise ArchiveError(
                f"{self.display} changed since it was opened: it is now {size:,} bytes, it "
                f"was {self.size:,} bytes. Open it again."
            )

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _pread(fd: int, n: int, at: int, display: str) -> bytes:
    data = os.pread(fd, n, at)
    if len(data) != n:
        raise LeafDataError(f"{display}: the header ended after {len(data)} of {n} bytes.")
    return data


def is_safetensors(path: str) -> bool:
    """Whether the regular file ``path`` starts as a safetensors file does: a length
    that fits the file, then ``{``.

    Examples
    --------
    >>> is_safetensors("/nonexistent")
    False
    """
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError:
        return False
    try:
        head, size = os.pread(fd, PREFIX + 1, 0), os.fstat(fd).st_size
    finally:
        os.close(fd)
    if len(head) < PREFIX + 1 or head[PREFIX : PREFIX + 1] != b"{":
        return False
    return PREFIX + int.from_bytes(head[:PREFIX], "little") <= size


class RemoteShard(Shard):
    """A safetensors object read by ranges through a :class:`~._ranges.Transport`: its
    header in two reads (the length, then the JSON), its tensors when asked for."""

    def __init__(self, transport: Transport, url: str, path: str) -> None:
        self.display, self.transport, self.path = url, transport, path
        n = header_length(transport.read_bytes(path, 0, PREFIX), url, transport.sizes.get(path))
        size = transport.sizes.get(path)  # known from an info, or the first read's reply
        self.header = parse_header(transport.read_bytes(path, PREFIX, PREFIX + n), url, size)
        self.size = size if size is not None else -1

    def read(self, start: int, dest: memoryview) -> None:
        self.transport.read(span_jobs(self.path, start, [(0, len(dest))], dest, _PIECE))

    def read_many(
        self, spans: Sequence[tuple[int, memoryview, str]], done: Callable[[str], object]
    ) -> None:
        jobs = []
        for start, dest, key in spans:
            for job in span_jobs(self.path, start, [(0, len(dest))], dest, _PIECE):
                job.tag = key
                jobs.append(job)
        left = Counter(job.tag for job in jobs)

        def finished(job: Job) -> None:
            left[job.tag] -= 1
            if not left[job.tag]:
                done(job.tag)

        self.transport.read(jobs, finished)
