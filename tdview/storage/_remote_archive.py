"""A checkpoint archive on a remote server or object store, read by byte ranges.

What an :class:`~._archive.ArchiveStore` reads from its mapping is read here with ranged
requests (:class:`~._ranges.Transport`); the catalog of names, the checks of names and
layout, and the local-header checks are the archive store's own.

Costs, for an archive of ``n`` entries whose central directory is ``C`` bytes:

* opening: one suffix read of the last 64 KiB (over HTTP ``Range: bytes=-65536``, which
  also gives the object's size; elsewhere an ``info`` call first), and when ``C`` is
  larger than that, one read of the rest of the central directory;
* the first ``meta.json`` read: when all the ``meta.json`` entries of the archive
  together take at most 8 MiB, all of them, in one batch of concurrent reads (entries
  that lie next to each other in the file are one read): the whole tree is then known,
  and browsing sends no further request. Larger archives read a folder's ``meta.json``
  with those of its sub-folders, one batch per folder opened, and a walk
  (``prepare``) reads those below it in batches. Each read covers a local header and
  the entry's bytes, never a payload byte of a leaf;
* a preview or an indexed load (:meth:`RemoteArchiveStore.read_ranges`): the byte
  ranges of a STORED entry that the rows need, after its local header (one read, once
  per entry); of a compressed entry, its stored bytes from the start as far as the
  inflation of the last row needs (:mod:`._inflate_ranges`);
* a load (:meth:`RemoteArchiveStore.fetch`): the entries asked for, as ranges from each
  local header to the end of its data, coalesced across gaps of at most 64 KiB and cut
  into pieces of at most 8 MiB read concurrently. Each entry's local header is checked
  (signature, name, layout) and so is every read (exact ranges and lengths); the CRC-32
  of STORED payloads only with ``verify`` (a CRC over 1 GB costs about a second here,
  more than reading it over loopback), as a mapped local load checks none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArchiveError, LeafDataError, LimitExceededError, UnsafeCheckpointError
from ._archive import META, ArchiveStore
from ._base import Mapped, Store
from ._catalog import local_payload
from ._codecs import STORED, decode
from ._columns import read_columns
from ._crc import crc32
from ._mapfile import not_a_checkpoint
from ._ranges import Job, Transport, span_jobs
from ._zip import (
    _FAST_BYTES,
    EOCD,
    LOCAL,
    CentralDirectory,
    CentralEntry,
    _find_eocd,
    _read_entries,
    _read_zip64,
)

if TYPE_CHECKING:
    from typing_extensions import Buffer  # what read_into fills: any writable buffer

__all__ = ["RemoteArchiveStore"]

TAIL = 64 << 10  # the first suffix read
MAX_CENTRAL = 512 << 20  # a larger central directory is refused (about 5 million entries)
WHOLE_TREE = 8 << 20  # all meta.json entries read at the first one, up to this many bytes
BATCH = 32 << 20  # meta.json bytes read per batch otherwise
SMALL = 1 << 20  # a meta.json larger than this is read on its own, when asked for
GAP = 64 << 10  # a load's ranges closer than this are read as one
PIECE = 8 << 20  # the largest single read of a load
SMALL_CONCURRENCY = 64  # metadata reads in flight at once
ALIGN = 64  # buffers start at the file offset's place modulo this
_MAX_EXTRA = 0xFFFF + 16  # local extra field, then room for a data descriptor


class RemoteArchiveStore(ArchiveStore):
    """Read the entries of a checkpoint archive through ranged reads (see the module
    docstring for what each step costs).

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
    verify : bool
        Check the CRC-32 of every STORED payload a load reads (compressed entries and
        metadata are always checked; the length, range and local-header checks of every
        read hold either way).

    Attributes
    ----------
    transport : Transport
        Counts the requests and bytes read (``transport.requests``, ``.bytes_read``).

    Examples
    --------
    >>> store = RemoteArchiveStore("https://h/x.tdz", fs, "https://h/x.tdz")  # doctest: +SKIP
    >>> store.read_bytes("meta.json", 1 << 20)                               # doctest: +SKIP
    """

    kind = "archive"
    mappable = False

    def __init__(
        self,
        url: str,
        fs: Any,
        path: str,
        *,
        concurrency: int | None = None,
        size: int | None = None,
        verify: bool = False,
    ) -> None:
        self.root = url
        self.path = path
        self.verify_payloads = verify  # not `verify`: ArchiveStore.verify(key) is a method
        self.transport = Transport(fs, concurrency=concurrency)
        self.transport.sizes[path] = size
        try:
            self._open()
        except BaseException:
            self.transport.close()
            raise
        self._offsets: dict[str, int] = {}
        self._expected: tuple[str, bool] | None = None
        self._single = 0
        self._prepared: set[tuple[str, bool]] = set()
        self._spans: dict[str, tuple[int, int]] = {}
        self._small: dict[str, bytes | Exception] = {}  # meta.json entries read ahead
        self._whole_tree_tried = False

    # -- opening ---------------------------------------------------------------------

    def _open(self) -> None:
        size, tail = self.transport.tail(self.path, TAIL)
        self.file_size = size
        if size < EOCD.size:
            raise not_a_checkpoint(self.root, f"the object is only {size} bytes long")
        base = size - len(tail)
        found = _find_eocd(tail, len(tail))
        if found is None:
            raise not_a_checkpoint(self.root, "no zip end-of-central-directory record found")
        eocd_pos, cd_size, cd_offset, comment = found
        record_pos = eocd_pos
        zip64 = _read_zip64(tail, len(tail), eocd_pos, self.root)
        if zip64 is not None:
            record_pos, cd_size, cd_offset = zip64
        record_abs = base + record_pos
        start = record_abs - cd_size
        shift = start - cd_offset
        if start < 0 or shift < 0:
            raise ArchiveError(
                f"corrupt zip archive {self.root}: a central directory of {cd_size} bytes at "
                f"offset {cd_offset} does not fit before its end record at offset "
                f"{record_abs}."
            )
        if cd_size > MAX_CENTRAL:
            raise LimitExceededError(
                f"{self.root}: the central directory is {cd_size:,} bytes, above tdview's "
                f"limit of {MAX_CENTRAL:,} bytes for a remote archive."
            )
        if start >= base:
            central = tail[start - base : record_pos]
        else:
            central = self.transport.read_bytes(self.path, start, base) + tail[:record_pos]
        self._load(_central_directory(central, start, shift, comment, self.root))

    # -- the Store interface -----------------------------------------------------------

    def read_bytes(self, key: str, limit: int) -> bytes:
        e = self._central(key)
        if e.size > limit:
            raise LimitExceededError(
                f"{self.display(key)} is {e.size} bytes, above the limit of {limit} bytes."
            )
        found = self._small.get(key)
        if found is None:
            self._read_small(self._ahead(key, e))
            found = self._small[key]
        if isinstance(found, Exception):
            raise found
        return found

    def writable(self, key: str | None = None) -> bool:
        return False

    def check_intact(self) -> None:
        return None  # nothing is mapped: a changed object shows in its reads' checks

    def close(self) -> None:
        # fsspec's block cache saves what it read as each of its files closes (every
        # ranged read opens and closes one): nothing is left to save here
        self.transport.close()

    def stored_span(self, key: str) -> tuple[int, int] | None:
        return None  # nothing to map: the loader reads through fetch

    def map(self, key: str, *, write: bool | None = False) -> Mapped:
        return Store.map(self, key, write=write)  # refused: nothing is mapped

    def opened_path(self, fd: int, key: str) -> str:
        return Store.opened_path(self, fd, key)

    def read_into(self, key: str, offset: int, buf: Buffer) -> None:
        """Read the stored bytes ``[offset, offset + len(buf))`` of the entry (pieces of
        at most ``PIECE`` bytes, concurrent); its local header is read first if it was
        not (one ranged read)."""
        e = self._readable(key)
        dest = memoryview(buf).cast("B")
        end = offset + len(dest)
        if offset < 0 or end > e.stored_size:
            raise ValueError(
                f"{self.display(key)}: bytes {offset}..{end} lie outside its "
                f"{e.stored_size} stored bytes."
            )
        if end > offset:
            jobs = span_jobs(self.path, self.payload_offset(key), [(offset, end)], dest, PIECE)
            self.transport.read(jobs)

    # -- small entries (meta.json) ----------------------------------------------------

    def _ahead(self, key: str, e: CentralEntry) -> list[str]:
        """The entries to read with ``key``: every meta.json of the archive the first
        time when they are small together; else ``key`` and the meta.json of the
        folders inside its folder."""
        if key.rpartition("/")[2] != META:
            return [key]
        if not self._whole_tree_tried:
            self._whole_tree_tried = True
            metas = self._metas_below("")
            if _region_bytes(self, metas) <= WHOLE_TREE:
                return [key, *metas]
        dirkey = key.rpartition("/")[0]
        prefix = dirkey + "/" if dirkey else ""
        try:
            names = self._catalog.children(dirkey)
        except UnsafeCheckpointError:
            return [key]
        near = [prefix + name + "/" + META for name in names[:4096]]
        return [key, *(k for k in near if self._has_small_meta(k))]

    def _has_small_meta(self, key: str) -> bool:
        try:
            e = self._file(key)
        except UnsafeCheckpointError:
            return False
        return e is not None and e.size <= SMALL and key not in self._small

    def _metas_below(self, dirkey: str) -> dict[str, int]:
        """The small ``meta.json`` entries below ``dirkey``, each with its stored size."""
        prefix = dirkey + "/" if dirkey else ""
        found = {}
        for name in self.keys():
            if (
                name.startswith(prefix)
                and (name == META or name.endswith("/" + META))
                and name not in self._small
            ):
                try:
                    e = self._file(name)
                except UnsafeCheckpointError:
                    continue
                if e is not None and e.size <= SMALL:
                    found[name] = e.stored_size
        return found

    def _read_small(self, keys: list[str]) -> None:
        """Read the entries ``keys`` (local header and data, in coalesced ranges, one
        batch) into :attr:`_small`, each as its bytes or the error reading it gave."""
        entries = []
        for key in dict.fromkeys(keys):
            try:
                entries.append((key, self._readable(key)))
            except (UnsafeCheckpointError, OSError) as error:
                self._small[key] = error
        regions = self._regions(entries, gap=0)
        for key, data in regions.items():
            self._small[key] = data

    def _regions(
        self,
        entries: list[tuple[str, CentralEntry]],
        *,
        gap: int,
        done: Callable[[str], object] | None = None,
        threads: Executor | None = None,
    ) -> dict[str, Any]:
        """Read and check the entries (each: its local header, then its data), ranges
        closer than ``gap`` read as one; the uncompressed content of each (``bytes``
        with ``gap=0``, for small entries, else uint8 arrays), or the error it gave."""
        plan = _Plan(self, entries, gap)
        out: dict[str, Any] = {}

        def finished(job: Job) -> None:
            for key in plan.finished(job):
                out[key] = self._content(key, plan, small=gap == 0)
                if done is not None and not isinstance(out[key], Exception):
                    done(key)

        jobs = plan.jobs(self.path)
        for key in plan.empty():
            out[key] = self._content(key, plan, small=gap == 0)
        # small reads (metadata) wait on the round trip, not on bandwidth: more at once
        self.transport.read(jobs, finished, concurrency=SMALL_CONCURRENCY if gap == 0 else None)
        return out

    def _content(self, key: str, plan: _Plan, *, small: bool) -> Any:
        e = plan.entries[key]
        region = plan.view(key)
        at = e.header_offset
        try:
            payload = self._check_local(e, region, at)
            self._offsets.setdefault(key, payload)
            data = region[payload - at : payload - at + e.stored_size]
            if len(data) != e.stored_size:
                raise ArchiveError(
                    f"corrupt entry {e.name!r} in {self.root}: its data at offset {payload} "
                    f"runs past the {len(region)} bytes read for it."
                )
            what = f"entry {key!r} in {self.root}"
            if e.method == STORED and e.stored_size == e.size:
                # metadata always; payloads with verify (a mapped local load checks none)
                if (small or self.verify_payloads) and crc32(data) != e.crc32:
                    raise LeafDataError(
                        f"{what}: CRC-32 mismatch, computed {crc32(data):#010x} but the "
                        f"archive records {e.crc32:#010x} (the server sent other bytes than "
                        "the archive's, or the object changed since it was opened)."
                    )
                return bytes(data) if small else data
            result = decode(e.method, e.flags, memoryview(data), e.size, e.crc32, what)
            return result.tobytes() if small else result
        except (ArchiveError, LeafDataError, UnsafeCheckpointError) as error:
            return error

    def _check_local(self, e: CentralEntry, head: Any, at: int) -> int:
        """The payload offset from the local header at the start of ``head`` (bytes read
        from offset ``at``): signature, name and layout checked as the archive store
        checks them."""
        if len(head) < LOCAL.size + len(e.raw_name):
            raise ArchiveError(
                f"corrupt entry {e.name!r} in {self.root}: its local header at offset {at} "
                f"runs past the end of the file ({self.file_size} bytes)."
            )
        return local_payload(self.root, e, head, 0, at, self._catalog, self.file_size)

    # -- local headers and payloads ----------------------------------------------------------

    def _read_local_header(self, e: CentralEntry) -> int:
        at = e.header_offset
        end = min(at + LOCAL.size + len(e.raw_name), self.file_size)
        return self._check_local(e, self.transport.read_bytes(self.path, at, end), at)

    def prepare(self, dirkey: str, *, payloads: bool) -> None:
        """A walk below ``dirkey`` reads every ``meta.json`` there: read them now, in
        batches of coalesced ranges (the payloads are read by :meth:`fetch`)."""
        super().prepare(dirkey, payloads=payloads)
        if self._prepared_above(dirkey, False):
            return
        self._prepared.add((dirkey, False))
        metas = self._metas_below(dirkey)
        batch: list[str] = []
        room = 0
        for key, stored_size in metas.items():
            batch.append(key)
            room += stored_size
            if room >= BATCH:
                self._read_small(batch)
                batch, room = [], 0
        self._read_small(batch)

    def _read_headers_below(self, dirkey: str, payloads: bool) -> None:
        """The local headers below ``dirkey`` not read yet, in one batch of concurrent
        reads (each ends before the entry's data)."""
        self._prepared.add((dirkey, payloads))
        prefix = dirkey + "/" if dirkey else ""
        jobs = []
        for name in self.keys():
            if (
                name.startswith(prefix)
                and name not in self._offsets
                and (payloads or name.endswith(META))
            ):
                e = self._file(name)
                if e is not None:
                    end = min(e.header_offset + LOCAL.size + len(e.raw_name), self.file_size)
                    jobs.append(Job(self.path, e.header_offset, end, tag=(name, e)))
        self.transport.read(jobs)
        for job in jobs:
            name, e = job.tag
            try:
                self._offsets[name] = self._check_local(e, job.data, job.start)
            except (ArchiveError, UnsafeCheckpointError):
                pass  # the one-by-one path raises it if the entry is used

    def raw_payload(self, key: str) -> memoryview:
        """The stored (possibly compressed) bytes of an entry, read now."""
        e = self._readable(key)
        start = self.payload_offset(key)
        return memoryview(self.transport.read_bytes(self.path, start, start + e.stored_size))

    def decompress(
        self, key: str, max_size: int | None = None, pool: Executor | None = None
    ) -> np.ndarray:
        e = self._readable(key)
        if max_size is not None and e.size > max_size:
            raise LimitExceededError(
                f"{self.display(key)} declares {e.size} uncompressed bytes, above the limit "
                f"of {max_size} bytes."
            )
        return decode(
            e.method,
            e.flags,
            self.raw_payload(key),
            e.size,
            e.crc32,
            f"entry {key!r} in {self.root}",
            pool,
        )

    def fetch(
        self, wanted: Mapping[str, int | None], *, done: Callable[[str], object] | None = None
    ) -> dict[str, Any]:
        """Read the content of many entries for a load: ``{key: uint8 array}`` (for an
        entry that cannot be read, the error to raise when it is used).

        Parameters
        ----------
        wanted : mapping
            Keys (their values, the bytes needed, are not used: an archive entry is read
            whole, its size being checked against its leaf's by the loader).
        done : callable, optional
            Called with each key once its bytes have arrived and been checked; an
            exception it raises cancels the reads still in flight (and is raised).
        """
        entries, out = [], {}
        for key in wanted:
            try:
                entries.append((key, self._readable(key)))
            except (UnsafeCheckpointError, OSError) as error:
                out[key] = error
        out.update(self._regions(entries, gap=GAP, done=done))
        return out

    def read_ranges(self, key: str, spans: Sequence[tuple[int, int]], dest: memoryview) -> None:
        """Read the bytes ``[start, end)`` of a STORED entry's content for each span into
        ``dest``, one span after the other (pieces of at most ``PIECE`` bytes, concurrent):
        a preview's rows, without the rest of the entry. A compressed entry is inflated
        from its start up to the last byte asked for, its stored bytes read by ranges as
        far as that needs (:mod:`._inflate_ranges`).

        Raises
        ------
        ArchiveError
            A STORED entry whose sizes differ, or a span outside it.
        ValueError
            A span outside a compressed entry.
        """
        e = self._readable(key)
        if e.method != STORED:
            self._inflated_ranges(key, e, spans, dest)
            return
        if e.stored_size != e.size:
            raise ArchiveError(
                f"{self.display(key)}: a STORED entry with {e.stored_size} stored bytes but a "
                f"declared size of {e.size} bytes."
            )
        if any(not 0 <= start <= end <= e.size for start, end in spans):
            raise ArchiveError(f"{self.display(key)}: a byte range outside its {e.size} bytes.")
        jobs = span_jobs(self.path, self.payload_offset(key), spans, dest, PIECE)
        self.transport.read(jobs)


class _Plan:
    """Where each entry's region lies, the coalesced spans, their buffers and reads."""

    def __init__(
        self, store: RemoteArchiveStore, entries: Iterable[tuple[str, CentralEntry]], gap: int
    ) -> None:
        self.entries: dict[str, CentralEntry] = {}
        regions = []
        for key, e in entries:
            self.entries[key] = e
            at = e.header_offset
            end = min(
                store._catalog.next_start(at)[0],
                at + LOCAL.size + len(e.raw_name) + _MAX_EXTRA + e.stored_size,
                store.file_size,
            )
            regions.append((at, max(end, at), key))
        regions.sort()
        # spans: [first, last, keys (by region start)]
        self.spans: list[list[Any]] = []
        for at, end, key in regions:
            if self.spans and at - self.spans[-1][1] <= gap:
                span = self.spans[-1]
                span[1] = max(span[1], end)
                span[2].append(key)
            else:
                self.spans.append([at, end, [key]])
        self.region = {key: (at, end) for at, end, key in regions}
        self._buffers: list[np.ndarray] = []
        self._span_of: dict[str, int] = {}
        self._left: dict[str, int] = {}
        self._jobs_of: list[list[str]] = []

    def jobs(self, path: str) -> list[Job]:
        """The reads: each span cut into pieces of at most ``PIECE`` bytes, into one
        buffer per span."""
        jobs: list[Job] = []
        for i, (first, last, keys) in enumerate(self.spans):
            pad = first % ALIGN
            buf = np.empty(last - first + pad, dtype=np.uint8)
            self._buffers.append(buf)
            view = buf.data[pad:]
            k = 0  # the first key whose region may reach into the piece
            cut = first
            for key in keys:
                self._span_of[key] = i
                self._left[key] = 0
            while cut < last:
                stop = min(last, cut + PIECE)
                while k < len(keys) and self.region[keys[k]][1] <= cut:
                    k += 1
                mine = []
                j = k
                while j < len(keys) and self.region[keys[j]][0] < stop:
                    if self.region[keys[j]][1] > cut:
                        mine.append(keys[j])
                        self._left[keys[j]] += 1
                    j += 1
                jobs.append(
                    Job(path, cut, stop, view[cut - first : stop - first], tag=len(self._jobs_of))
                )
                self._jobs_of.append(mine)
                cut = stop
        return jobs

    def finished(self, job: Job) -> list[str]:
        """The keys whose every piece has arrived with ``job``."""
        ready = []
        for key in self._jobs_of[job.tag]:
            self._left[key] -= 1
            if not self._left[key]:
                ready.append(key)
        return ready

    def empty(self) -> list[str]:
        """The keys that no read covers (an empty region)."""
        return [
            key
            for key, left in self._left.items()
            if not left and self.region[key][0] == self.region[key][1]
        ]

    def view(self, key: str) -> Any:
        """The bytes read for ``key``'s region (a uint8 array; its first byte at a
        position that is the file offset's modulo ``ALIGN``)."""
        i = self._span_of[key]
        first = self.spans[i][0]
        at, end = self.region[key]
        pad = first % ALIGN
        return self._buffers[i][pad + at - first : pad + end - first]


def _region_bytes(store: RemoteArchiveStore, keys: Iterable[str]) -> int:
    total = 0
    for key in keys:
        e = store._file(key)
        if e is not None:
            total += LOCAL.size + len(e.raw_name) + e.stored_size
    return total


def _central_directory(
    central: bytes, start: int, shift: int, comment: bytes, where: str
) -> CentralDirectory:
    """Parse the central directory read into ``central`` (its first byte at file offset
    ``start``): what :func:`~._zip.parse_central_directory` makes of a whole file."""
    if len(central) >= _FAST_BYTES:
        fast = read_columns(central, 0, len(central), shift)
        if fast is not None:
            return CentralDirectory(None, start, shift, comment, fast)
    entries = _read_entries(central, 0, len(central), shift, where)
    return CentralDirectory(entries, start, shift, comment)
