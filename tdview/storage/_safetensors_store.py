"""A safetensors checkpoint (one file, or a shard set) as a store of tensordict folders.

The tensors' real keys are grouped into folders by ``.`` (:mod:`._safetensors_tree`),
each folder presented with a ``meta.json`` made from the header, and each tensor is a
``<key>.memmap`` file whose bytes are a span of the safetensors file: the store is
``packed`` (its files are spans of one file, stored as they are), and a single local
file is ``mappable`` (every leaf a view of one mapping, as an archive's are), so that
the tree, the search, previews, loads and the diff read it as they read any checkpoint.
A shard set (several files) is read, not mapped: its leaves lie in several files.

Opening reads the 8-byte length and the header of each file (:mod:`._safetensors`):
over fsspec, two ranged reads per shard; no payload byte is read until a preview or a
load asks for one. ``__metadata__`` (or a shard index's ``metadata``) is
:attr:`SafetensorsStore.metadata`.

Examples
--------
>>> store = open_store("/models/model.safetensors")               # doctest: +SKIP
>>> store.list_dir(""), store.tensor_name("model/embed/weight.memmap")  # doctest: +SKIP
(['meta.json', 'model'], 'model.embed.weight')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArchiveError, LimitExceededError, TDViewError
from ._base import EntryInfo, Mapped, Payload, Store
from ._key_safety import check_key, not_found
from ._ranges import Transport
from ._safetensors_files import Shard
from ._safetensors_tree import META, Layout

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["SafetensorsStore"]


class SafetensorsStore(Store):
    """The store of a safetensors checkpoint (see the module docstring).

    Parameters
    ----------
    root : str
        The file, the shard index or the folder opened: :attr:`root`.
    shards : list of Shard
        The files read (one for a single file).
    metadata : dict, optional
        ``__metadata__``, or the shard index's ``metadata``.
    refused : dict, optional
        Real key -> why its tensor is not read (a shard set's problems: a key the index
        does not name, or names in another shard).
    unknown : dict, optional
        Real key -> why no shard gives its record (the index names it, no shard holds it,
        or its shard is missing).
    where : dict, optional
        Real key -> the shard that holds it (all in the one file by default).
    """

    kind = "safetensors"
    packed = True
    foreign_format = "a safetensors file"

    def __init__(
        self,
        root: str,
        shards: list[Shard],
        *,
        metadata: Mapping[str, Any] | None = None,
        refused: Mapping[str, str] | None = None,
        unknown: Mapping[str, str] | None = None,
        where: Mapping[str, Shard] | None = None,
    ) -> None:
        self.root = root
        self.shards = shards
        self.metadata = None if metadata is None else dict(metadata)
        # local files are mapped, one mapping per file (map_key); remote ones are read
        self.mappable = all(shard.open_checked is not None for shard in shards)
        self._by_name = {shard.name: shard for shard in shards} if len(shards) > 1 else {}
        if refused is not None or unknown is not None:  # (given by shard_set alone)
            self.foreign_format = "a safetensors shard set"
        self._unknown = dict(unknown or {})
        self._where = dict(where) if where is not None else {}
        self.layout = _layout(shards, None if where is None else self._where, self._unknown)
        #: what the store closes with its shards (the folder they are opened through)
        self.closing: list[Store] = []
        #: a remote store's ranged reads (counted: ``transport.requests``), else None
        self.transport: Transport | None = None
        self._refused = dict(refused or {})  # real key -> why

    # -- naming --------------------------------------------------------------------------

    def tensor_name(self, key: str) -> str | None:
        """The real key of the tensor whose file ``key`` is (None for any other key)."""
        return self.layout.leaf(key)

    def _leaf(self, key: str) -> str | None:
        """The real key of leaf file ``key`` whose bytes may be read, else None."""
        name = self.layout.leaf(key)
        return None if name is None or name in self._refused else name

    def _tensor(self, key: str) -> tuple[Shard, int, int]:
        """``(shard, begin, end)`` of a leaf file, else its error."""
        name = self.layout.leaf(key)
        if name is None or name in self._refused:
            check_key(key, self.root)
            if name is not None:
                raise ArchiveError(self._refused[name])  # it names the shard and the key
            if self.layout.is_dir(key):
                raise IsADirectoryError(f"{self.display(key)} is a directory, not a file")
            raise not_found(self.display(key))
        shard = self._where.get(name) or self.shards[0]
        return shard, *shard.header.span(name)

    def display(self, key: str) -> str:
        name = self.layout.leaf(key)
        if name is not None:
            shard = self._where.get(name) or self.shards[0]
            return f"{shard.display}::{name}"
        return f"{self.root}::{key}" if key else self.root

    # -- the Store interface -------------------------------------------------------------

    def _meta(self, key: str) -> bytes | None:
        """The bytes of ``key`` when it is a folder's ``meta.json`` (made from the
        header), else None."""
        dirkey, _, name = key.rpartition("/")
        return self.layout.meta(dirkey) if name == META and self.layout.is_dir(dirkey) else None

    def is_file(self, key: str) -> bool:
        dirkey, _, name = key.rpartition("/")
        if self._leaf(key) is not None or (name == META and self.layout.is_dir(dirkey)):
            return True
        check_key(key, self.root)
        return False

    def is_dir(self, key: str) -> bool:
        if self.layout.is_dir(key):
            return True
        check_key(key, self.root)
        return False

    def list_dir(self, key: str) -> list[str]:
        if self.layout.is_dir(key):
            return self.layout.children(key)
        check_key(key, self.root)
        name = self.layout.unknown(key)
        if name is not None:
            raise ArchiveError(self._unknown[name])  # it names the shard and the key
        if self.is_file(key):
            raise NotADirectoryError(f"{self.display(key)} is not a directory")
        raise not_found(self.display(key))

    def plain_entries(
        self, key: str, wanted: int | None = None
    ) -> tuple[frozenset[str] | None, frozenset[str] | None]:
        if not self.layout.is_dir(key) or self._refused:
            return None, None
        return self.layout.files_in(key), self.layout.dirs_in(key)

    def plain_files(self, key: str, wanted: int | None = None) -> frozenset[str] | None:
        return self.plain_entries(key, wanted)[0]

    def plain_dirs(self, key: str, wanted: int | None = None) -> frozenset[str] | None:
        return self.plain_entries(key, wanted)[1]

    def _size(self, key: str) -> int:
        data = self._meta(key)
        if data is not None:
            return len(data)
        _, begin, end = self._tensor(key)
        return end - begin

    def entry(self, key: str) -> EntryInfo:
        size = self._size(key)
        return EntryInfo(key, self.display(key), size, size, "stored", None, None)

    def locate(self, key: str) -> Payload:
        data = self._meta(key)
        if data is not None:  # made from the header: no bytes of its own in the file
            size, offset, in_file = len(data), 0, False
        else:
            _, begin, end = self._tensor(key)
            size, offset, in_file = end - begin, begin, True
        return Payload(
            key=key,
            display=self.display(key),
            file=None,
            in_archive=in_file,
            offset=offset,
            size=size,
            stored_size=size,
            compression="stored",
            crc32=None,
            encrypted=False,
            as_stored=True,
            mappable=self.mappable and in_file,
        )

    def read_bytes(self, key: str, limit: int) -> bytes:
        data = self._meta(key)
        size = self._size(key) if data is None else len(data)
        if size > limit:
            raise LimitExceededError(
                f"{self.display(key)} is {size} bytes, above the limit of {limit} bytes."
            )
        return data if data is not None else self.decompress(key).tobytes()

    def read_folder_meta(self, dirkey: str, limit: int) -> bytes | None:
        if not self.layout.is_dir(dirkey):
            return None
        data = self.layout.meta(dirkey)
        return data if len(data) <= limit else None

    def writable(self, key: str | None = None) -> bool:
        if key is not None:
            check_key(key, self.root)
        return self.mappable and all(shard.writable() for shard in self.shards)

    # -- payloads --------------------------------------------------------------------------

    def stored_span(self, key: str) -> tuple[int, int] | None:
        if not self.mappable or self._leaf(key) is None:
            return None
        _, begin, end = self._tensor(key)
        return begin, end - begin

    def map_key(self, key: str) -> str:
        """A shard's name for a leaf of a shard set (each shard is mapped once); ``""``
        for the one file."""
        if not self._by_name or self.layout.leaf(key) is None:
            return ""
        return self._shard_of(key).name

    def _shard_of(self, key: str) -> Shard:
        """The shard :meth:`map` opens for ``key``: a shard named (:meth:`map_key`), the
        first for ``""``, a leaf's own; else the key's error."""
        found = self._by_name.get(key)
        if found is not None or not key:
            return found or self.shards[0]
        return self._tensor(key)[0]

    def map(self, key: str, *, write: bool | None = False) -> Mapped:
        """The file that holds ``key``'s bytes (a leaf's shard; ``""`` the one file), for
        the mapping its leaves are views of (each at :meth:`stored_span`); a remote file:
        ``io.UnsupportedOperation``."""
        opener = self._shard_of(key).open_checked
        if not self.mappable or opener is None:
            return super().map(key, write=write)
        fd, st = opener(bool(write))
        return fd, st, bool(write)

    def opened_path(self, fd: int, key: str) -> str:
        return self._shard_of(key).display

    def read_into(self, key: str, offset: int, buf: Buffer) -> None:
        out = memoryview(buf).cast("B")
        data = self._meta(key)
        if data is not None:
            begin, end, shard = 0, len(data), None
        else:
            shard, begin, end = self._tensor(key)
        if offset < 0 or begin + offset + len(out) > end:
            raise ValueError(
                f"{self.display(key)}: bytes {offset}..{offset + len(out)} lie outside its "
                f"{end - begin} bytes."
            )
        if data is not None:
            out[:] = data[offset : offset + len(out)]
        elif shard is not None and len(out):
            shard.read(begin + offset, out)

    def fetch(
        self, wanted: Mapping[str, int | None], *, done: Callable[[str], object] | None = None
    ) -> dict[str, Any]:
        """Each leaf's bytes, whole (the loader checks their size), read shard by shard
        (a remote shard's concurrently); a key that cannot be read gets its error."""
        out: dict[str, Any] = {}
        spans: dict[int, tuple[Shard, list[tuple[int, memoryview, str]]]] = {}
        for key in wanted:
            try:
                shard, begin, end = self._tensor(key)
            except (OSError, ValueError, TDViewError) as error:
                out[key] = error
                if done is not None:
                    done(key)
                continue
            out[key] = np.empty(end - begin, np.uint8)
            spans.setdefault(id(shard), (shard, []))[1].append((begin, out[key].data, key))
        for shard, reads in spans.values():
            try:
                shard.read_many(reads, done or _nothing)
            except (OSError, TDViewError) as error:
                for _, _, key in reads:
                    out[key] = error
        return out

    def check_intact(self) -> None:
        if self.mappable:
            for shard in self.shards:
                shard.check_intact()

    def close(self) -> None:
        for shard in self.shards:
            shard.close()
        for other in self.closing:
            other.close()


def _nothing(key: str) -> None:
    return None


def _layout(
    shards: list[Shard], where: dict[str, Shard] | None, unknown: Mapping[str, str]
) -> Layout:
    """The tree of the tensors read: a single file's whole header (``where`` None), or
    each key of a shard set from the shard that holds it, and the ``unknown`` keys."""
    if where is None:
        header = shards[0].header
        return Layout(header.records, header.describe, empty=header.empty)
    names: dict[str, object] = {**where, **unknown}
    empty = [name for shard in shards for name in shard.header.empty if where.get(name) is shard]

    def describe(name: str) -> tuple[str, list[int]]:
        return where[name].header.describe(name)

    return Layout(names, describe, empty=empty, unknown=unknown)
