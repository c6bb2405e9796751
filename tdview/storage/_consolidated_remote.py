"""A consolidated file on a remote server or object store, read by byte ranges.

Opening reads the file's last bytes (over HTTP one suffix request, which also gives the
object's size; elsewhere an ``info`` call first): the trailing length and, when the JSON
footer is shorter than :data:`TAIL`, the footer with them; a longer footer is one more
read. The folders and files are then known (:mod:`._consolidated_layout`) and browsing
sends no request. A preview reads the byte ranges of the rows it shows
(:meth:`RemoteConsolidatedStore.read_ranges`), a load each leaf's span
(:meth:`RemoteConsolidatedStore.fetch`, concurrent, in pieces of at most ``PIECE``
bytes); every read is checked for its range and length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import NotACheckpointError, TDViewError
from ._base import Mapped, Store
from ._consolidated import ConsolidatedFile
from ._consolidated_layout import FOOTER, Layout, footer_length, looks_consolidated
from ._ranges import Job, Transport, span_jobs

__all__ = ["RemoteConsolidatedStore", "TAIL"]

TAIL = 64 << 10  # the first read: the trailing length, and the footer when it is shorter
PIECE = 8 << 20  # the largest single read of a load


class RemoteConsolidatedStore(ConsolidatedFile):
    """Read a consolidated file through ranged reads (see the module docstring).

    Parameters
    ----------
    url : str
        The URL, used as :attr:`root` and in messages.
    fs : fsspec.AbstractFileSystem
    path : str
        The object's path on ``fs``.
    concurrency : int, optional
        Reads in flight at once.
    size : int, optional
        The object's size, when an ``info`` call told it already.

    Raises
    ------
    NotACheckpointError
        The object does not end with a consolidated footer.

    Examples
    --------
    >>> store = RemoteConsolidatedStore("https://h/t.td", fs, "https://h/t.td")  # doctest: +SKIP
    >>> store.list_dir("")                                                 # doctest: +SKIP
    ['a.memmap', 'b', 'meta.json']
    """

    mappable = False

    def __init__(
        self,
        url: str,
        fs: Any,
        path: str,
        *,
        concurrency: int | None = None,
        size: int | None = None,
    ) -> None:
        self.root = url
        self.path = path
        self.transport = Transport(fs, concurrency=concurrency)
        self.transport.sizes[path] = size
        try:
            self._open()
        except BaseException:
            self.transport.close()
            raise

    def _open(self) -> None:
        size, tail = self.transport.tail(self.path, TAIL)
        self.file_size = size
        if not looks_consolidated(tail, size):
            raise NotACheckpointError(f"{self.root} is not a tensordict consolidated file.")
        n = footer_length(tail, size, self.root)
        payload = size - FOOTER - n
        base = size - len(tail)
        if payload >= base:
            document = tail[payload - base : len(tail) - FOOTER]
        else:  # a footer longer than the first read: the rest of it
            document = self.transport.read_bytes(self.path, payload, base) + tail[:-FOOTER]
        self.layout = Layout(document, payload, self.root)

    def writable(self, key: str | None = None) -> bool:
        return False

    def map(self, key: str, *, write: bool | None = False) -> Mapped:
        return Store.map(self, key, write=write)  # refused: nothing is mapped

    def _read_span(self, start: int, out: memoryview) -> None:
        self.transport.read(span_jobs(self.path, start, [(0, len(out))], out, PIECE))

    def read_ranges(self, key: str, spans: Sequence[tuple[int, int]], dest: memoryview) -> None:
        """The bytes ``[start, end)`` of a leaf for each span, into ``dest`` one after the
        other, read concurrently (a preview's rows)."""
        start, size = self._span(key)
        if start is None or any(not 0 <= a <= b <= size for a, b in spans):
            raise ValueError(f"{self.display(key)}: a byte range outside its {size} bytes.")
        self.transport.read(span_jobs(self.path, start, spans, dest, PIECE))

    def fetch(
        self, wanted: Mapping[str, int | None], *, done: Callable[[str], object] | None = None
    ) -> dict[str, Any]:
        """Each leaf's bytes, whole (``{key: uint8 array}``, or the error to raise when
        it is used), read concurrently; ``done`` is called with each key once its bytes
        are in."""
        out: dict[str, Any] = {}
        jobs: list[Job] = []
        left: dict[str, int] = {}
        for key in wanted:
            try:
                start, size = self._span(key)
                found = out[key] = np.empty(size, dtype=np.uint8)
                if start is None:  # a meta.json: its bytes are known
                    found[:] = np.frombuffer(self.read_bytes(key, size), dtype=np.uint8)
                    continue
            except (OSError, TDViewError) as error:
                out[key] = error
                continue
            pieces = span_jobs(self.path, start, [(0, size)], found.data, PIECE)
            for job in pieces:
                job.tag = key
            left[key] = len(pieces)
            jobs += pieces

        def finished(job: Job) -> None:
            left[job.tag] -= 1
            if not left[job.tag] and done is not None:
                done(job.tag)

        for key in out:
            if key not in left and done is not None and not isinstance(out[key], Exception):
                done(key)
        self.transport.read(jobs, finished)
        return out

    def close(self) -> None:
        self.transport.close()
