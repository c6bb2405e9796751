"""Ranged reads of remote objects through fsspec: checked, concurrent, counted.

A :class:`Transport` reads byte ranges of the objects of one fsspec filesystem. Every
read is checked: exactly the bytes asked for, or a :class:`~tdview.errors.RemoteReadError`
that names the object, the range and what came back. Over HTTP the requests are made
here (on fsspec's own aiohttp session, so its ``client_kwargs``, headers and auth apply),
because fsspec's ranged ``cat`` reads whatever body the server sends: a server that
ignores ``Range`` (``200`` and the whole file) is refused from its status line, before a
byte of its body is read, and one that sends another range, a short body or a longer
one is refused too. Other asynchronous filesystems (s3fs, gcsfs) are read with their
``_cat_file``, synchronous ones (local, memory, fsspec's caches) on a thread pool.

Reads run concurrently (``concurrency`` at a time); :meth:`Transport.read` reports each
finished range to a callback in the calling thread, and an exception raised by the
callback cancels the reads still in flight, which is how a load is cancelled.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass
from typing import Any

from ..errors import RemoteReadError

__all__ = ["Job", "Transport", "cached_size", "span_jobs"]

# Reads in flight at once, unless the caller says otherwise.
CONCURRENCY = 16
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_STREAM_CHUNK = 1 << 20


@dataclass
class Job:
    """One ranged read: bytes ``[start, end)`` of ``path`` into ``dest`` (``end - start``
    bytes long), or into a fresh ``bytes`` (:attr:`data`) when ``dest`` is None."""

    path: str
    start: int
    end: int
    dest: memoryview | None = None
    data: bytes | None = None
    tag: Any = None


class Transport:
    """Checked ranged reads of the objects of one fsspec filesystem.

    Parameters
    ----------
    fs : fsspec.AbstractFileSystem
    concurrency : int, optional
        Reads in flight at once (16 by default).

    Attributes
    ----------
    requests : int
        Requests sent so far (reads, listings and ``info`` calls).
    bytes_read : int
        Payload bytes received so far.
    batches : int
        Batches of requests sent so far: each waits for the one before it, and its
        requests are in flight together (so, round trips when a batch's requests do
        not outnumber ``concurrency``).

    Examples
    --------
    >>> import fsspec
    >>> fs = fsspec.filesystem("memory")
    >>> fs.pipe("/x.bin", b"0123456789")
    >>> t = Transport(fs)
    >>> t.read_bytes("/x.bin", 2, 5), t.tail("/x.bin", 4)
    (b'234', (10, b'6789'))
    """

    def __init__(self, fs: Any, *, concurrency: int | None = None) -> None:
        self.fs = fs
        self.concurrency = max(1, concurrency or CONCURRENCY)
        self.requests = 0
        self.bytes_read = 0
        self.batches = 0
        self._lock = threading.Lock()
        self._http = _is_http(fs)
        self._async = bool(getattr(fs, "async_impl", False)) and not _is_cache(fs)
        self._pool: ThreadPoolExecutor | None = None
        #: object sizes known already (from a listing or an ``info`` made elsewhere)
        self.sizes: dict[str, int | None] = {}

    # -- counting ------------------------------------------------------------------

    def count(self, requests: int = 1, nbytes: int = 0) -> None:
        with self._lock:
            self.requests += requests
            self.bytes_read += nbytes

    # -- one-off calls ---------------------------------------------------------------

    def info(self, path: str) -> dict[str, Any]:
        """``fs.info(path)``, counted as one request."""
        self.count()
        self.batches += 1
        if _is_cache(self.fs):  # the caches' info lists the parent: ask the target
            return self.fs.fs.info(path)
        return self.fs.info(path)

    def read_bytes(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of ``path``, exactly."""
        job = Job(path, start, end)
        self.read([job])
        assert job.data is not None
        return job.data

    def tail(self, path: str, n: int) -> tuple[int, bytes]:
        """``(size of the object, its last min(n, size) bytes)``: over HTTP one suffix
        range request (``Range: bytes=-n``), elsewhere ``info`` then a ranged read."""
        if self._http:
            self.batches += 1
            return self._run_one(self._http_tail(path, n))
        size = self.sizes.get(path)
        if size is None and _is_cache(self.fs):
            if getattr(self.fs, "check_files", False):
                self.count()  # the cache validates the object with an info call
            size = cached_size(self.fs, path)
        if size is None:
            size = int(self.info(path)["size"])
        start = max(0, size - n)
        return size, self.read_bytes(path, start, size) if size else b""

    # -- many reads ------------------------------------------------------------------

    def read(
        self,
        jobs: Sequence[Job],
        done: Callable[[Job], object] | None = None,
        *,
        concurrency: int | None = None,
    ) -> None:
        """Run every job, ``concurrency`` (the transport's by default) at a time;
        ``done(job)`` is called in this thread as each one finishes. An error of a read,
        or one raised by ``done``, cancels the reads not finished and is raised once they
        have stopped."""
        if not jobs:
            return
        self.batches += 1
        if self._async:
            futures = self._submit_async(jobs, concurrency or self.concurrency)
        else:
            pool = self._threads()
            futures = [pool.submit(self._sync_get, job) for job in jobs]
        by_future = dict(zip(futures, jobs, strict=True))
        try:
            for future in as_completed(futures):
                future.result()
                if done is not None:
                    done(by_future[future])
        except BaseException:
            for future in futures:
                future.cancel()
            wait(futures)  # nothing may still write into a job's buffer
            raise

    def call_many(self, calls: Sequence[tuple[str, tuple[Any, ...]]]) -> list[Any]:
        """Call filesystem methods concurrently (``("ls", (path, True))``...): their
        results in order, an exception in the place of a call that raised one. Each
        call counts as one request, and the bytes of a ``bytes`` result as read."""
        self.batches += 1

        def counted(result: Any) -> Any:
            self.count(1, len(result) if isinstance(result, bytes) else 0)
            return result

        if self._async:
            gate = asyncio.Semaphore(self.concurrency)
            fs = self.fs

            async def one(name: str, args: tuple[Any, ...]) -> Any:
                async with gate:
                    try:
                        return counted(await getattr(fs, "_" + name)(*args))
                    except Exception as error:  # noqa: BLE001 - handed to the caller
                        self.count()
                        return error

            futures = [
                asyncio.run_coroutine_threadsafe(one(name, args), fs.loop) for name, args in calls
            ]
            return [future.result() for future in futures]

        def call(name: str, args: tuple[Any, ...]) -> Any:
            try:
                return counted(getattr(self.fs, name)(*args))
            except Exception as error:  # noqa: BLE001 - handed to the caller
                self.count()
                return error

        pool = self._threads()
        return [
            future.result() for future in [pool.submit(call, name, args) for name, args in calls]
        ]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    # -- synchronous filesystems ----------------------------------------------------------

    def _threads(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="tdview-read")
        return self._pool

    def _sync_get(self, job: Job) -> None:
        data = self.fs.cat_file(job.path, start=job.start, end=job.end)
        self.count(1, len(data))
        _deliver(job, data)

    # -- asynchronous filesystems ---------------------------------------------------------

    def _submit_async(self, jobs: Sequence[Job], concurrency: int) -> list[Future[None]]:
        loop = self.fs.loop
        gate = asyncio.Semaphore(concurrency)

        async def one(job: Job) -> None:
            async with gate:
                if self._http:
                    await self._http_get(job)
                else:
                    data = await self.fs._cat_file(job.path, start=job.start, end=job.end)
                    self.count(1, len(data))
                    _deliver(job, data)

        return [asyncio.run_coroutine_threadsafe(one(job), loop) for job in jobs]

    def _run_one(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.fs.loop).result()

    async def _http_request(self, url: str, range_header: str) -> Any:
        """The response context of a GET of ``url`` with ``range_header``."""
        fs = self.fs
        session = await fs.set_session()
        kwargs = dict(fs.kwargs)
        headers = dict(kwargs.pop("headers", None) or {})
        headers["Range"] = range_header
        headers["Accept-Encoding"] = "identity"
        self.count()
        return session.get(fs.encode_url(url), headers=headers, **kwargs)

    async def _http_get(self, job: Job) -> None:
        want = job.end - job.start
        if want <= 0:
            _deliver(job, b"")
            return
        asked = f"bytes {job.start}-{job.end - 1}"
        async with await self._http_request(job.path, f"bytes={job.start}-{job.end - 1}") as r:
            _check_status(r, job.path, asked)
            got = _content_range(r, job.path, asked)
            if got is not None and got[2] is not None and self.sizes.get(job.path) is None:
                self.sizes[job.path] = got[2]  # the object's size, told for free
            if got is not None and (got[0], got[1]) != (job.start, job.end - 1):
                raise RemoteReadError(
                    f"{job.path}: asked for {asked}, the server sent bytes {got[0]}-{got[1]} "
                    "(Content-Range): refusing bytes other than those asked for."
                )
            length = r.content_length
            if length is not None and length != want:
                raise RemoteReadError(
                    f"{job.path}: asked for {asked} ({want} bytes), the server announced "
                    f"{length} bytes (Content-Length)."
                )
            dest = job.dest if job.dest is not None else memoryview(bytearray(want))
            n = await _stream_into(r, dest, job.path, asked)
        if n != want:
            raise RemoteReadError(
                f"{job.path}: asked for {asked} ({want} bytes), the server sent {n} bytes "
                "and closed the response (a short read)."
            )
        self.count(0, n)
        if job.dest is None:
            job.data = bytes(dest)

    async def _http_tail(self, url: str, n: int) -> tuple[int, bytes]:
        asked = f"the last {n} bytes"
        async with await self._http_request(url, f"bytes=-{n}") as r:
            if r.status == 200:  # a whole body: fine for a small file, refused otherwise
                length = r.content_length
                if length is not None and length > n:
                    _ignored_range(url, asked, r.status, length, r)
                dest = memoryview(bytearray(n + 1))
                got = await _stream_into(r, dest, url, asked, refuse_more=False)
                if got > n:
                    _ignored_range(url, asked, r.status, None, r)
                self.count(0, got)
                return got, bytes(dest[:got])
            _check_status(r, url, asked)
            found = _content_range(r, url, asked)
            if found is None or found[2] is None:
                raise RemoteReadError(
                    f"{url}: asked for {asked}, the server answered 206 without the "
                    "object's size (Content-Range); tdview needs it to find the archive's "
                    "central directory."
                )
            first, last, size = found[0], found[1], found[2]
            want = last - first + 1
            if last != size - 1 or want > n or (want < n and first != 0):
                raise RemoteReadError(
                    f"{url}: asked for {asked}, the server sent bytes {first}-{last} of {size}."
                )
            dest = memoryview(bytearray(want))
            got = await _stream_into(r, dest, url, asked)
        if got != want:
            raise RemoteReadError(
                f"{url}: asked for {asked} ({want} bytes), the server sent {got} bytes "
                "and closed the response (a short read)."
            )
        self.count(0, got)
        return size, bytes(dest)


def cached_size(fs: Any, path: str) -> int | None:
    """The size of ``path`` as the fsspec cache ``fs`` holds it, when it holds it and its
    own policy says that it is fresh; else None (and None when ``fs`` is no cache).

    tdview's caches (:func:`~._remote.remote`) never expire and never check an object: a
    cached object then costs no request. A cache made with ``check_files=True`` checks
    it with one ``info`` call of its target, one with an ``expiry_time`` forgets it once
    expired."""
    if not _is_cache(fs):
        return None
    found = fs._check_file(path)
    if not found:
        return None
    if isinstance(found, str):  # simplecache: the local copy's name
        return os.path.getsize(found)
    detail, local = found
    if detail.get("blocks") is True:  # the whole object is on disk
        return os.path.getsize(local)
    size = detail.get("size")
    return int(size) if size is not None else None


def span_jobs(
    path: str, base: int, spans: Sequence[tuple[int, int]], dest: memoryview, piece: int
) -> list[Job]:
    """The reads of bytes ``[base + start, base + end)`` of ``path`` for each span, into
    ``dest`` one span after the other, each cut into pieces of at most ``piece`` bytes
    (read concurrently)."""
    jobs, at = [], 0
    for start, end in spans:
        for cut in range(start, end, piece):
            stop = min(end, cut + piece)
            jobs.append(
                Job(path, base + cut, base + stop, dest[at + cut - start : at + stop - start])
            )
        at += end - start
    return jobs


def _deliver(job: Job, data: bytes) -> None:
    """Check that a read gave exactly the bytes asked for, and hand them to the job."""
    want = job.end - job.start
    if len(data) != want:
        raise RemoteReadError(
            f"{job.path}: asked for bytes {job.start}-{job.end - 1} ({want} bytes), got "
            f"{len(data)} bytes ({'a short read' if len(data) < want else 'more than asked'}"
            "): the object is shorter than its listing says, or changed since it was "
            "opened."
        )
    if job.dest is not None:
        job.dest[:] = data
    else:
        job.data = data


def _ignored_range(url: str, asked: str, status: int, length: int | None, r: Any = None) -> None:
    if r is not None:
        r.close()  # hang up now: the rest of the body is never read
    size = f"{length:,} bytes" if length is not None else "a body of unknown length"
    raise RemoteReadError(
        f"{url}: the server ignored the Range header (asked for {asked}, it answered "
        f"{status} with {size}). tdview reads remote checkpoints by byte ranges and does "
        "not download whole files: serve it from a server that honours Range requests "
        "(object stores and common web servers do), or copy it to a local disk."
    )


def _check_status(r: Any, url: str, asked: str) -> None:
    if r.status == 404:
        raise FileNotFoundError(2, "No such file or directory", url)
    if r.status == 200:
        _ignored_range(url, asked, r.status, r.content_length, r)
    if r.status == 416:
        raise RemoteReadError(
            f"{url}: {asked} lie past the end of the object (416): it "
            "is shorter than its central directory or listing says."
        )
    if r.status != 206:
        r.raise_for_status()
        raise RemoteReadError(f"{url}: asked for {asked}, the server answered {r.status}.")
    encoding = r.headers.get("Content-Encoding", "identity")
    if encoding not in ("identity", ""):
        raise RemoteReadError(
            f"{url}: the server sent {asked} {encoding}-encoded; tdview "
            "asked for them as they are (Accept-Encoding: identity)."
        )


def _content_range(r: Any, url: str, asked: str) -> tuple[int, int, int | None] | None:
    """``(first, last, size or None)`` of the response's Content-Range, if it has one."""
    header = r.headers.get("Content-Range")
    if header is None:
        return None
    match = _CONTENT_RANGE.fullmatch(header.strip())
    if match is None:
        raise RemoteReadError(
            f"{url}: asked for {asked}, the server sent an unreadable Content-Range {header!r}."
        )
    size = None if match.group(3) == "*" else int(match.group(3))
    return int(match.group(1)), int(match.group(2)), size


async def _stream_into(
    r: Any, dest: memoryview, url: str, asked: str, *, refuse_more: bool = True
) -> int:
    """Copy the body into ``dest``; more bytes than it holds is an error (or, with
    ``refuse_more`` False, stops the copy: the caller sees a count past its size)."""
    import aiohttp

    n, room = 0, len(dest)
    try:
        async for chunk in r.content.iter_chunked(_STREAM_CHUNK):
            end = n + len(chunk)
            if end > room:
                if not refuse_more:
                    return end
                raise RemoteReadError(
                    f"{url}: asked for {asked} ({room} bytes), the server sent more."
                )
            dest[n:end] = chunk
            n = end
    except aiohttp.ClientPayloadError:
        pass  # the body ended before its Content-Length: the caller reports the short read
    return n


def _is_http(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "http" in protocol or "https" in protocol


def _is_cache(fs: Any) -> bool:
    from fsspec.implementations.cached import CachingFileSystem

    return isinstance(fs, CachingFileSystem)
