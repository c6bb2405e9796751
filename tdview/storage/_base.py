"""The store interface shared by checkpoint directories and checkpoint archives.

A store maps *keys* to bytes. A key is a relative, ``/``-separated string such as
``"meta.json"`` or ``"nested/b.memmap"``; ``""`` is the root. Stores know nothing
about ``meta.json``: the format layer decides which keys to ask for.

Every key that reaches a store is checked by :mod:`._key_safety`, so that no key can
leave the checkpoint root.
"""

from __future__ import annotations

import abc
import io
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._platform import WINDOWS_PATHS
from ..errors import ArchiveError, LimitExceededError, TDViewError
from ._folder_walk import FolderWalk
from ._links import Link

if TYPE_CHECKING:
    from typing_extensions import Buffer  # what read_into fills: any writable buffer

__all__ = [
    "WINDOWS_PATHS",
    "EntryInfo",
    "Mapped",
    "Payload",
    "Store",
]


@dataclass(frozen=True)
class EntryInfo:
    """What a store knows about one file (one archive entry), without reading it.

    Attributes
    ----------
    key : str
        The relative key, e.g. ``"nested/b.memmap"``.
    display : str
        The name to show in messages: ``"/abs/dir/nested/b.memmap"`` for a directory,
        ``"/abs/x.tdz::nested/b.memmap"`` for an archive.
    size : int
        Uncompressed size in bytes.
    stored_size : int
        Bytes on disk: the compressed size in an archive, ``size`` in a directory.
    compression : str
        ``"stored"``, ``"deflate"``, ``"bzip2"``, ``"lzma"`` or ``"unknown(<n>)"``.
    crc32 : int or None
        The CRC-32 recorded in the archive's central directory; ``None`` for files.
    file : str or None
        The absolute real path of the file (directory stores), ``None`` in archives.
    encrypted : bool
        True when the archive entry has the "encrypted" flag; reading it is refused.
    link : Link or None
        For a file read through a symlink out of the checkpoint root (directory stores):
        that link, where it leads and why it is followed (read-only); ``None`` otherwise.
    """

    key: str
    display: str
    size: int
    stored_size: int
    compression: str
    crc32: int | None
    file: str | None
    encrypted: bool = False
    link: Link | None = None


@dataclass(frozen=True)
class Payload:
    """Where the bytes of one file (one archive entry) are and how they are stored: what
    reading, mapping or copying them needs to know, from :meth:`Store.locate`.

    Attributes
    ----------
    key : str
        The relative key, e.g. ``"nested/b.memmap"``.
    display : str
        The name to show in messages (see :class:`EntryInfo`).
    file : str or None
        The absolute real path of the file that holds the bytes alone (a local directory
        store); ``None`` for an archive entry and for a remote file.
    in_archive : bool
        True for an entry of a zip archive: its stored bytes lie at ``offset`` in the
        archive file and are the entry's exactly (a leaf's entry must have its exact
        size). False for a file of its own, which may be longer than its leaf needs.
    offset : int or None
        Where the stored bytes start: in the archive file, read from the entry's local
        header; 0 for a file of its own. ``None`` when the local header is wrong:
        ``error`` is what reading it raised.
    size : int
        Uncompressed size in bytes.
    stored_size : int
        Bytes stored: the compressed size in an archive, ``size`` for a file.
    compression : str
        ``"stored"``, ``"deflate"``, ``"bzip2"``, ``"lzma"`` or ``"unknown(<n>)"``.
    crc32 : int or None
        The CRC-32 the archive records; ``None`` for files (none is known).
    encrypted : bool
        An archive entry with the "encrypted" flag: reading it is refused.
    as_stored : bool
        The stored bytes are the content (not compressed, not encrypted, stored and
        declared sizes equal): they can be read by range, or used, as they lie.
    mappable : bool
        The bytes can be memory-mapped where they lie: ``as_stored``, ``offset`` known,
        and the store local (:attr:`Store.mappable`). A leaf may still need ``offset``
        to be a multiple of its dtype's size for a zero-copy view.
    link : Link or None
        The symlink out of the checkpoint root the file is read through (read-only, see
        :class:`EntryInfo`), or ``None``.
    error : BaseException or None
        Why ``offset`` is ``None`` (an ``ArchiveError`` or ``UnsafeCheckpointError`` of
        the local header), else ``None``.
    """

    key: str
    display: str
    file: str | None
    in_archive: bool
    offset: int | None
    size: int
    stored_size: int
    compression: str
    crc32: int | None
    encrypted: bool
    as_stored: bool
    mappable: bool
    link: Link | None = None
    error: BaseException | None = field(default=None, compare=False)


#: What :meth:`Store.map` opens: ``(descriptor, its fstat, whether it is open for
#: writing)``. The caller closes the descriptor.
Mapped = tuple[int, os.stat_result, bool]


class Store(abc.ABC):
    """A read-only view of a checkpoint's files, by relative key.

    Attributes
    ----------
    root : str
        Absolute path of the checkpoint directory or archive file.
    kind : str
        ``"directory"`` or ``"archive"``.
    """

    root: str
    kind: str
    #: False for a store whose files cannot be memory-mapped (a remote one, see
    #: :mod:`._remote`): the loader reads its leaves into memory with its ``fetch``
    mappable: bool = True
    #: True for a store whose leaves are arrays of another format read by its library
    #: (an HDF5 file, a zarr store): a load gives them as plain tensors in memory, as
    #: that format's reader does (``from_h5(...).to_tensordict()``, ``from_zarr``),
    #: where a folder's leaf is a ``MemoryMappedTensor`` (with no file when remote)
    leaves_in_memory: bool = False
    #: True for a store whose non-tensor values have their group's batch size even
    #: loaded on their own (HDF5, zarr: ``from_h5`` makes each ``NonTensorData`` with its
    #: group's); tensordict's layout records none: alone, one has no batch size
    values_batched: bool = False
    #: True for a store whose files are the entries of one archive file: each holds
    #: exactly its bytes, may be compressed (:meth:`decompress`), has the CRC-32 the
    #: archive records, and, mapped, is a view of the one mapping of that file
    #: (:meth:`map` opens the archive file; :meth:`stored_span` says where it lies)
    packed: bool = False
    #: True for a store whose folders are folders on the local disk, where a loaded
    #: tensordict may write back (``memmap_``): tensordict records their path as the
    #: tensordict's ``_memmap_prefix``
    local_folders: bool = False
    #: True for a store whose :meth:`map` (``write=None``) takes a leaf key never
    #: probed (no ``is_file`` first): it opens the file by name, checks it, and raises
    #: ``FileNotFoundError`` when it is absent, so a load needs no probe per leaf
    maps_unprobed: bool = False
    #: True for a store whose :meth:`folder_walk` can hold its folders open (a local
    #: directory on Linux, not a content store's checkout): a load then walks them
    walks_folders: bool = False
    #: True for a store of folders listed by a server (a remote folder): one whose root
    #: holds no ``meta.json`` is browsed as a folder of checkpoints, each member opened
    #: as a store of its own (:meth:`sub_store`)
    lists_folders: bool = False
    #: None for tensordict's memory-mapped layout as saved (a folder, a ``.tdz``), which
    #: ``load_memmap`` reads; for a store that presents another format in that layout
    #: (a consolidated file), a phrase naming it: ``load_memmap`` refuses it as
    #: tensordict does, and ``Checkpoint(path).load()`` reads it
    foreign_format: str | None = None
    #: True for a store whose files' CRC-32s are recorded (an archive's central
    #: directory): ``EntryInfo.crc32`` gives it without a payload byte read; False where
    #: none is (a directory, a consolidated file: a CRC is computed from the bytes)
    crc_recorded: bool = False
    #: what the file records about itself, shown on the root (safetensors'
    #: ``__metadata__``, a shard index's ``metadata``); None for a store with none
    metadata: dict[str, Any] | None = None

    @abc.abstractmethod
    def display(self, key: str) -> str:
        """Return the name of ``key`` to use in messages."""

    @abc.abstractmethod
    def is_file(self, key: str) -> bool:
        """Return True when ``key`` names a regular file (a non-directory entry)."""

    @abc.abstractmethod
    def is_dir(self, key: str) -> bool:
        """Return True when ``key`` names a directory (``""`` always does)."""

    @abc.abstractmethod
    def list_dir(self, key: str) -> list[str]:
        """Return the sorted child names (files and directories) of directory ``key``."""

    @abc.abstractmethod
    def entry(self, key: str) -> EntryInfo:
        """Return the :class:`EntryInfo` of file ``key``; ``FileNotFoundError`` if absent."""

    @abc.abstractmethod
    def locate(self, key: str) -> Payload:
        """Return the :class:`Payload` of file ``key``: where its bytes are, how they are
        stored, whether they can be mapped or used as stored. Reads no payload byte (an
        archive reads the entry's local header, once; a wrong one is the payload's
        ``error``, not raised). ``FileNotFoundError`` naming the key if it is absent,
        ``IsADirectoryError`` for a directory. (Not ``payload``: that name is the
        archive's zero-copy view of a stored entry, :meth:`ArchiveStore.payload`.)"""

    @abc.abstractmethod
    def read_bytes(self, key: str, limit: int) -> bytes:
        """Return the whole (decompressed, checked) content of a small file.

        ``LimitExceededError`` is raised before reading when its size is above ``limit``.
        """

    def read_folder_meta(self, dirkey: str, limit: int) -> bytes | None:
        """``read_bytes(dirkey + "/meta.json")`` where ``is_dir(dirkey)`` is true, in one
        call where the store has a shorter way (a walk's common step: a sub-folder and its
        ``meta.json``); None when it has none, or not for this key: the caller then asks
        :meth:`is_dir` and :meth:`read_bytes`, which answer (and raise) as ever."""
        return None

    @abc.abstractmethod
    def writable(self, key: str | None = None) -> bool:
        """Return True when the process may write the file (archive: the archive file)."""

    def prepare(self, dirkey: str, *, payloads: bool) -> None:
        """Get ready to read many entries below directory ``dirkey``: every
        ``meta.json``, and every payload when ``payloads`` (an archive reads their local
        headers in one pass). Nothing by default."""
        return None

    def plain_dirs(self, key: str, wanted: int | None = None) -> frozenset[str] | None:
        """Names of sub-directories of directory ``key`` for which :meth:`is_dir` is
        surely True, when the store knows them cheaply; ``None`` when it does not (a
        shortcut as :meth:`plain_files` is, never a listing to trust for absence).
        ``wanted``: see :meth:`plain_files`."""
        return None

    def plain_files(self, key: str, wanted: int | None = None) -> frozenset[str] | None:
        """Names of files directly in directory ``key`` for which :meth:`is_file` is
        surely True, when the store knows them cheaply; ``None`` when it does not.

        A name absent from the set may still be a file (ask :meth:`is_file`): the set is
        a shortcut for probing many names of one directory, never a listing to trust
        for absence. ``wanted``: how many names the caller is about to probe there (a
        store may answer None when probing that many costs less than a listing).
        """
        return None

    def plain_entries(
        self, key: str, wanted: int | None = None
    ) -> tuple[frozenset[str] | None, frozenset[str] | None]:
        """``(plain_files(key, wanted), plain_dirs(key, wanted))``, in one call where the
        store answers both from one look (a walk asks both of every folder)."""
        return self.plain_files(key, wanted), self.plain_dirs(key, wanted)

    def folder_walk(self, dirkey: str) -> tuple[FolderWalk, int] | None:
        """Folder ``dirkey`` held open for a walk that reads folder by folder through
        descriptors (:class:`~._folder_walk.FolderWalk`): ``(the walk, the folder's
        descriptor)``, which the caller closes; None where the store has no such way (an
        archive, a remote store, a content store's checkout, no ``O_PATH``) or not for
        this folder: the caller asks by key."""
        return None

    def known_size(self, key: str) -> int | None:
        """The size of file ``key`` when the store already knows it (found while probing
        for it: no system call), else None: a caller that needs it asks :meth:`entry`,
        or ``stat``s the file."""
        return None

    def link(self, key: str) -> Link | None:
        """The symlink out of the checkpoint root through which ``key``'s file is read
        (see :mod:`._links`), or None: always None in an archive. Nothing may be written
        through such a link."""
        return None

    # -- payloads: mapping, reading, decompressing ------------------------------------

    def stored_span(self, key: str) -> tuple[int, int] | None:
        """``(offset, size)`` of the content of file ``key`` in the file :meth:`map`
        opens, for a store that answers it from what it holds (a dict hit for an
        archive entry whose local header was read), when that content lies there as
        stored and can be mapped; None otherwise, and always for a store whose files are
        their own files or cannot be mapped (ask :meth:`locate`, which says why)."""
        return None

    def map(self, key: str, *, write: bool | None = False) -> Mapped:
        """Open, for a memory mapping, the file that holds ``key``'s bytes, checked on
        the descriptor opened: ``(fd, fstat, whether it is open for writing)`` (the
        caller closes ``fd``). A file of its own for a directory (``key``'s content at
        offset 0); for an archive, the archive file, checked to be the one the store
        read, with ``key``'s content at :meth:`stored_span` (``""``: the archive file
        itself).

        ``write``: True opens it for reading and writing (a shared mapping), False
        read-only, None for writing where the process may write the file (and read-only
        otherwise).

        Raises
        ------
        io.UnsupportedOperation
            The store cannot be mapped (:attr:`mappable` is False: a remote store).
        UnsafeCheckpointError, FileNotFoundError
            What opening the file raises (refused, absent, a link written through).
        """
        raise io.UnsupportedOperation(
            f"{self.display(key)} cannot be memory-mapped: it is read, not mapped "
            f"({type(self).__name__})."
        )

    def map_key(self, key: str) -> str:
        """The key whose :meth:`map` opens the file that holds ``key``'s bytes, the same
        for every key of that file: ``""`` (the one file) for an archive; a file's own
        name for a store of several (a safetensors shard set). A load keeps one mapping
        per such key, and a leaf's :meth:`stored_span` lies in its file's."""
        return ""

    def opened_path(self, fd: int, key: str) -> str:
        """A path that opens the very file of descriptor ``fd`` (from :meth:`map` of
        ``key``), for an API that takes a path (``torch.from_file``, where no ``mmap(2)``
        can be called): ``/proc/self/fd/<fd>`` on Linux, the file's real path elsewhere.
        """
        raise io.UnsupportedOperation(f"{self.display(key)} cannot be memory-mapped.")

    def read_into(self, key: str, offset: int, buf: Buffer) -> None:
        """Fill ``buf`` (a writable buffer) with the stored bytes of file ``key`` that
        start at ``offset``: its content for a payload stored as it is
        (:attr:`Payload.as_stored`), the compressed stream of a compressed entry.

        Raises
        ------
        ValueError
            The range runs past the stored bytes (as the store knows their size).
        LeafDataError
            The file ended while it was read (it was truncated since).
        UnsafeCheckpointError, FileNotFoundError, IsADirectoryError
            What the store raises for the key (refused, encrypted, absent).
        """
        raise io.UnsupportedOperation(f"{type(self).__name__} cannot read {key!r} by range.")

    def read_ranges(self, key: str, spans: Sequence[tuple[int, int]], dest: memoryview) -> None:
        """Read the bytes ``[start, end)`` of a file's content for each span into
        ``dest``, one span after the other (a preview's rows, an indexed load's, without
        the rest of the file). A remote store issues them concurrently; this one reads
        them in turn (:meth:`read_into`). An archive inflates a compressed entry from its
        start only up to the last byte asked for (:mod:`._inflate_ranges`).

        Raises
        ------
        ArchiveError
            A compressed file of a store that cannot inflate it by range.
        ValueError
            A span outside the file.
        LeafDataError
            A compressed entry's stream is corrupt (the message names the entry).
        """
        if self.packed and not self.locate(key).as_stored:
            raise ArchiveError(
                f"{self.display(key)} is compressed: it is read whole, not by byte ranges."
            )
        at = 0
        for start, end in spans:
            if not 0 <= start <= end:
                raise ValueError(f"{self.display(key)}: a byte range {start}..{end}.")
            self.read_into(key, start, dest[at : at + end - start])
            at += end - start

    def decompress(
        self, key: str, max_size: int | None = None, pool: Executor | None = None
    ) -> np.ndarray:
        """A fresh, writable uint8 array of the whole content of file ``key``:
        decompressed and CRC-checked for a compressed archive entry, read as it is
        otherwise. ``max_size``: refuse (``LimitExceededError``) a file whose declared
        size is larger, before reading. ``pool``: threads a store may use (the CRC of a
        large entry's chunks)."""
        size = self.locate(key).size
        if max_size is not None and size > max_size:
            raise LimitExceededError(
                f"{self.display(key)} declares {size} bytes, above the limit of {max_size} bytes."
            )
        out = np.empty(size, dtype=np.uint8)
        if size:
            self.read_into(key, 0, out.data)
        return out

    def fetch(
        self, wanted: Mapping[str, int | None], *, done: Callable[[str], object] | None = None
    ) -> dict[str, Any]:
        """Read the content of many files for a load: ``{key: uint8 array}`` holding the
        first ``wanted[key]`` bytes (the whole file for None, or when it is shorter), or
        for a file that cannot be read, the error to raise when it is used. ``done`` is
        called with each key once its bytes are in. A remote store issues the reads
        concurrently, coalesced; this one reads them one after the other. An archive
        entry is read whole (the loader checks its size against its leaf's)."""
        out: dict[str, Any] = {}
        for key, need in wanted.items():
            try:
                if need is None or self.packed:
                    out[key] = self.decompress(key)
                else:
                    found = out[key] = np.empty(min(need, self.locate(key).size), np.uint8)
                    self.read_into(key, 0, found.data)
            except (OSError, ValueError, TDViewError) as error:
                out[key] = error
            if done is not None:
                done(key)
        return out

    def local_crc32(self, key: str) -> int | None:
        """The CRC-32 that the local header of archive entry ``key`` records, beside the
        central directory's (:attr:`EntryInfo.crc32`); None for a store whose files are
        their own, and where the header defers it to a data descriptor or cannot be read.
        Writing an entry in place (``mode="r+"``) leaves both stale alike: two that
        differ are damage (``tdview check``)."""
        return None

    def sub_store(self, key: str) -> Store:
        """A checkpoint inside this store, as a store rooted there (a zip of checkpoints):
        folder ``key`` read through this one (:class:`~._prefix.PrefixStore`: its keys are
        the folder's, its answers this store's), or archive entry ``key`` that is itself
        an archive (:class:`~._nested_archive.NestedArchiveStore`, read in place). Closing
        it closes nothing of this store.

        Examples
        --------
        >>> archive.sub_store("components/0001-policy/state").list_dir("")  # doctest: +SKIP
        ['meta.json', 'tensor_00000000.memmap']
        """
        from ._nested_archive import nested_archive
        from ._prefix import PrefixStore

        return PrefixStore(self, key) if self.is_dir(key) else nested_archive(self, key)

    def held_value(self, dirkey: str) -> tuple[Any] | None:
        """``(value,)``: the value of the non-tensor folder ``dirkey`` as the format's
        own reader gives it, where JSON cannot say its type (an HDF5 file's numbers and
        arrays: numpy's, as ``from_h5`` gives them); None where its ``meta.json`` says it
        all (every store but those)."""
        return None

    def check_intact(self) -> None:
        """Raise when what the store mapped can no longer be read safely (an archive
        file shorter now than when it was opened: a page past its end would kill the
        process with SIGBUS); one ``fstat``. Nothing for a store that maps nothing
        itself."""
        return None

    #: the store a :meth:`sub_store` closes with itself (it was opened for it), or None
    owner: Store | None = None

    def close(self) -> None:
        """Release what the store holds open (nothing for a directory)."""
        return None

    def exists(self, key: str) -> bool:
        """Return True when ``key`` is a file or a directory."""
        return self.is_file(key) or self.is_dir(key)

    def holds(self, dirkey: str, name: str) -> bool:
        """Whether folder ``dirkey`` holds an entry ``name``, whatever it is (a dangling
        link too): a folder's ``meta.json`` makes it a checkpoint (``open_tree``)."""
        return name in self.list_dir(dirkey)

    def entries(self, dirkey: str, limit: int) -> tuple[list[tuple[str, str]], bool]:
        """At most ``limit`` ``(name, kind)`` of folder ``dirkey`` (``"dir"``, ``"file"``,
        ``"linked dir"``: not followed by a walk), and whether it holds more."""
        names = self.list_dir(dirkey)
        join = dirkey + "/" if dirkey else ""
        kinds = [(n, "dir" if self.is_dir(join + n) else "file") for n in names[:limit]]
        return kinds, len(names) > limit

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"
