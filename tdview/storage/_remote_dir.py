"""A checkpoint folder on an object store (or any fsspec filesystem that lists).

A folder is listed once (``ls``, one request on an object store: the names and sizes of
its files and its sub-folders) and every question about its files and sub-folders is
answered from that listing. Listings and ``meta.json`` reads are issued concurrently:
opening lists the root and reads its ``meta.json`` at once; the first time a folder's
sub-folders are needed, all of them are listed and their ``meta.json`` read in one
concurrent batch (one round trip for a level of the tree), and a walk (``prepare``)
does so level by level below its folder. A load reads each leaf file's bytes (the bytes
its leaf needs) with ranged reads of at most 8 MiB, concurrently (:meth:`fetch`); a
preview reads only the byte ranges of the rows it shows (:meth:`read_ranges`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import LimitExceededError, UnsafeCheckpointError
from ._base import EntryInfo, Payload, Store
from ._key_safety import check_key, name_problem, not_found
from ._listing_cache import cached_listing, keep_listing
from ._ranges import Job, Transport, span_jobs
from ._remote import display_join

if TYPE_CHECKING:
    from typing_extensions import Buffer  # what read_into fills: any writable buffer

__all__ = ["RemoteDirectoryStore"]

META = "meta.json"
PIECE = 8 << 20  # the largest single read of a load
WARM = 1024  # sub-folders listed (and their meta.json read) in one batch at most
SMALL = 1 << 20  # meta.json files read ahead up to this size


@dataclass
class _Listing:
    files: dict[str, int] = field(default_factory=dict)  # name -> size
    dirs: set[str] = field(default_factory=set)
    missing: bool = False


class RemoteDirectoryStore(Store):
    """Read a checkpoint folder through an fsspec filesystem (see the module docstring).

    Parameters
    ----------
    url : str
        The folder's URL, used as :attr:`root` and in messages.
    fs : fsspec.AbstractFileSystem
    path : str
        The folder's path on ``fs``.
    concurrency : int, optional
        Requests in flight at once.

    Raises
    ------
    FileNotFoundError
        The folder has no ``meta.json`` (folders of checkpoints are not read remotely).

    Examples
    --------
    >>> store = RemoteDirectoryStore("s3://b/ckpt", fs, "b/ckpt")      # doctest: +SKIP
    >>> store.list_dir("")                                             # doctest: +SKIP
    ['a.memmap', 'meta.json', 'nested']
    """

    kind = "directory"
    mappable = False
    lists_folders = True

    def __init__(self, url: str, fs: Any, path: str, *, concurrency: int | None = None) -> None:
        self.root = url
        self.path = path
        self.transport = Transport(fs, concurrency=concurrency)
        self._listings: dict[str, _Listing] = {}
        self._small: dict[str, bytes | Exception] = {}
        self._warmed: set[str] = set()
        self._warm([""])
        if self._listings[""].missing:
            self.transport.close()
            raise not_found(display_join(url, META))

    # -- listings ------------------------------------------------------------------------

    def _fspath(self, key: str) -> str:
        return f"{self.path}/{key}" if key else self.path

    def _warm(self, dirkeys: list[str]) -> None:
        """List the folders ``dirkeys`` and read their ``meta.json``, all at once."""
        todo = [d for d in dict.fromkeys(dirkeys) if d not in self._warmed][:WARM]
        if not todo:
            return
        self._warmed.update(todo)
        fs = self.transport.fs
        calls: list[tuple[str, tuple[Any, ...]]] = []
        kept = {d: cached_listing(fs, self._fspath(d)) for d in todo}  # a cache's: no request
        for dirkey in todo:
            if kept[dirkey] is None:
                calls.append(("ls", (self._fspath(dirkey), True)))
            meta = dirkey + "/" + META if dirkey else META
            if meta not in self._small:
                calls.append(("cat_file", (self._fspath(meta),)))
        results = iter(self.transport.call_many(calls) if calls else [])
        for dirkey in todo:
            listed = kept[dirkey]
            if listed is None:
                listed = next(results)
                keep_listing(fs, self._fspath(dirkey), listed)
            self._listings[dirkey] = _listing(listed)
            meta = dirkey + "/" + META if dirkey else META
            if meta not in self._small:
                data = next(results)
                if isinstance(data, bytes) or not isinstance(data, FileNotFoundError):
                    self._small[meta] = data

    def _listing(self, dirkey: str) -> _Listing:
        found = self._listings.get(dirkey)
        if found is None:
            parent = dirkey.rpartition("/")[0]
            siblings = sorted(self._listings[parent].dirs) if parent in self._listings else []
            prefix = parent + "/" if parent else ""
            self._warm([dirkey, *(prefix + name for name in siblings)])
            found = self._listings.get(dirkey)
            if found is None:  # beyond the batch: on its own
                self._warmed.discard(dirkey)
                self._warm([dirkey])
                found = self._listings[dirkey]
        return found

    def _parent(self, key: str) -> tuple[_Listing, str]:
        parent, _, name = key.rpartition("/")
        return self._listing(parent), name

    # -- the Store interface -----------------------------------------------------------

    def display(self, key: str) -> str:
        return display_join(self.root, key)

    def is_file(self, key: str) -> bool:
        check_key(key, self.root)
        if not key:
            return False
        listing, name = self._parent(key)
        return name in listing.files

    def is_dir(self, key: str) -> bool:
        check_key(key, self.root)
        if not key:
            return True
        listing, name = self._parent(key)
        return name in listing.dirs

    def list_dir(self, key: str) -> list[str]:
        if not self.is_dir(key):
            if self.is_file(key):
                raise NotADirectoryError(f"{self.display(key)} is not a directory")
            raise not_found(self.display(key))
        listing = self._listing(key)
        return sorted(
            name for name in (*listing.files, *listing.dirs) if name_problem(name) is None
        )

    def entry(self, key: str) -> EntryInfo:
        size = self.known_size(key)
        if size is None:
            raise not_found(self.display(key))
        return EntryInfo(
            key=key,
            display=self.display(key),
            size=size,
            stored_size=size,
            compression="stored",
            crc32=None,
            file=None,
        )

    def locate(self, key: str) -> Payload:
        """The file's :class:`~._base.Payload`, from its folder's listing: a file of its
        own (offset 0), stored as it is, read by range, never mapped."""
        size = self.known_size(key)
        if size is None:
            if key and self.is_dir(key):
                raise IsADirectoryError(f"{self.display(key)} is a directory, not a file")
            raise not_found(self.display(key))
        return Payload(
            key=key,
            display=self.display(key),
            file=None,
            in_archive=False,
            offset=0,
            size=size,
            stored_size=size,
            compression="stored",
            crc32=None,
            encrypted=False,
            as_stored=True,
            mappable=False,
        )

    def known_size(self, key: str) -> int | None:
        check_key(key, self.root)
        if not key:
            return None
        listing, name = self._parent(key)
        return listing.files.get(name)

    def read_bytes(self, key: str, limit: int) -> bytes:
        size = self.known_size(key)
        if size is None:
            if key and self.is_dir(key):
                raise IsADirectoryError(f"{self.display(key)} is a directory, not a file")
            raise not_found(self.display(key))
        if size > limit:
            raise LimitExceededError(
                f"{self.display(key)} is {size} bytes, above the limit of {limit} bytes."
            )
        found = self._small.pop(key, None)
        if found is None:
            found = self.transport.call_many([("cat_file", (self._fspath(key),))])[0]
        if isinstance(found, Exception):
            raise found
        if len(found) != size:
            from ..errors import RemoteReadError

            raise RemoteReadError(
                f"{self.display(key)}: the listing says {size} bytes, "
                f"reading it gave {len(found)} bytes."
            )
        return found

    def writable(self, key: str | None = None) -> bool:
        return False

    def plain_files(self, key: str, wanted: int | None = None) -> frozenset[str] | None:
        return frozenset(self._listing(key).files)

    def plain_dirs(self, key: str, wanted: int | None = None) -> frozenset[str] | None:
        return frozenset(self._listing(key).dirs)

    def prepare(self, dirkey: str, *, payloads: bool) -> None:
        """List every folder below ``dirkey`` and read its ``meta.json``, one concurrent
        batch per level."""
        level = [dirkey]
        while level:
            for i in range(0, len(level), WARM):
                self._warm(level[i : i + WARM])
            nxt: list[str] = []
            for d in level:
                listing = self._listings.get(d)
                if listing is not None:
                    prefix = d + "/" if d else ""
                    nxt.extend(
                        prefix + name for name in sorted(listing.dirs) if name_problem(name) is None
                    )
            level = nxt

    def close(self) -> None:
        self.transport.close()

    # -- loads ----------------------------------------------------------------------------

    def fetch(
        self, wanted: Mapping[str, int | None], *, done: Callable[[str], object] | None = None
    ) -> dict[str, Any]:
        """Read the bytes of many files for a load: ``{key: uint8 array}`` holding the
        first ``wanted[key]`` bytes (the whole file for None, or when it is shorter: the
        loader then says so), or the error to raise when the key is used.

        ``done`` is called with each key once its bytes have arrived; an exception it
        raises cancels the reads still in flight (and is raised)."""
        out: dict[str, Any] = {}
        jobs: list[Job] = []
        left: dict[str, int] = {}
        for key, need in wanted.items():
            try:
                size = self.known_size(key)
            except UnsafeCheckpointError as error:
                out[key] = error
                continue
            if size is None:
                out[key] = not_found(self.display(key))
                continue
            n = size if need is None else min(size, need)
            buf = out[key] = np.empty(n, dtype=np.uint8)
            view = buf.data
            left[key] = 0
            for cut in range(0, n, PIECE):
                stop = min(n, cut + PIECE)
                jobs.append(Job(self._fspath(key), cut, stop, view[cut:stop], tag=key))
                left[key] += 1

        def finished(job: Job) -> None:
            left[job.tag] -= 1
            if not left[job.tag] and done is not None:
                done(job.tag)

        if done is not None:
            for key, count in left.items():
                if not count:
                    done(key)
        self.transport.read(jobs, finished)
        return out

    def read_into(self, key: str, offset: int, buf: Buffer) -> None:
        """Read the bytes ``[offset, offset + len(buf))`` of the file (one span of
        :meth:`read_ranges`)."""
        dest = memoryview(buf).cast("B")
        size = self.known_size(key)
        if size is None:
            if key and self.is_dir(key):
                raise IsADirectoryError(f"{self.display(key)} is a directory, not a file")
            raise not_found(self.display(key))
        if offset < 0 or offset + len(dest) > size:
            raise ValueError(
                f"{self.display(key)}: bytes {offset}..{offset + len(dest)} lie outside "
                f"its {size} bytes."
            )
        self.read_ranges(key, [(offset, offset + len(dest))], dest)

    def sub_store(self, key: str) -> Store:
        """The checkpoint at ``key`` of a remote folder of checkpoints, as a remote store of
        its own on the same filesystem: a folder (:class:`RemoteDirectoryStore`) or an
        archive read by ranges (:class:`~._remote_archive.RemoteArchiveStore`)."""
        from ._remote_archive import RemoteArchiveStore

        url, path = display_join(self.root, key), self._fspath(key)
        fs, concurrency = self.transport.fs, self.transport.concurrency
        if self.is_dir(key):
            return RemoteDirectoryStore(url, fs, path, concurrency=concurrency)
        if not self.is_file(key):
            raise not_found(url)
        return RemoteArchiveStore(url, fs, path, concurrency=concurrency, size=self.known_size(key))

    def read_ranges(self, key: str, spans: Sequence[tuple[int, int]], dest: memoryview) -> None:
        """Read the bytes ``[start, end)`` of the file ``key`` for each span into ``dest``,
        one span after the other (pieces of at most ``PIECE`` bytes, concurrent).

        Raises
        ------
        FileNotFoundError
            No such file in its folder's listing.
        ValueError
            A span past the end of the file (as listed).
        """
        size = self.known_size(key)
        if size is None:
            raise not_found(self.display(key))
        if any(not 0 <= start <= end <= size for start, end in spans):
            raise ValueError(f"{self.display(key)}: a byte range outside its {size} bytes.")
        self.transport.read(span_jobs(self._fspath(key), 0, spans, dest, PIECE))


def _listing(result: Any) -> _Listing:
    """A listing from what ``ls(path, detail=True)`` gave (an error: a missing folder)."""
    if isinstance(result, FileNotFoundError):
        return _Listing(missing=True)
    if isinstance(result, Exception):
        raise result
    found = _Listing()
    for item in result:
        name = str(item["name"]).rstrip("/").rpartition("/")[2]
        if not name:
            continue
        if item.get("type") == "directory":
            found.dirs.add(name)
        else:
            found.files[name] = int(item.get("size") or 0)
    return found
