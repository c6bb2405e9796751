"""A folder of a store seen as a store of its own: a checkpoint inside a zip of checkpoints.

``torchrl.checkpoint.Checkpoint(format="archive").save(path)`` writes one zip holding a
checkpoint folder per component (``components/0001-policy/state/meta.json``...) and no
top-level ``meta.json``. Opened as a folder of checkpoints, each such folder is a member
with its own root: a :class:`PrefixStore` over the archive, whose keys are the folder's
keys below that prefix. Every answer is the archive's (the same checks, the same one
mapping of the archive file, the same payload offsets), with the keys said back without
the prefix. It closes the archive only when it was opened for it (``owner``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

import numpy as np

from ._base import EntryInfo, Mapped, Payload, Store
from ._key_safety import check_key

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["PrefixStore"]


class PrefixStore(Store):
    """The keys of ``store`` below folder ``prefix``, as a store rooted there.

    Parameters
    ----------
    store : Store
        The store that holds the folder (an archive); it stays open and owned by its
        opener.
    prefix : str
        The folder's key in ``store`` (checked as a key is).

    Examples
    --------
    >>> member = PrefixStore(archive, "components/0001-policy/state")   # doctest: +SKIP
    >>> member.read_bytes("meta.json", 1 << 20)                        # doctest: +SKIP
    """

    def __init__(self, store: Store, prefix: str) -> None:
        check_key(prefix, store.root)
        self.outer = store
        self.prefix = prefix + "/"
        self.root = store.display(prefix)
        # what the store can do is what the folder's store can do
        for flag in ("kind", "mappable", "packed", "local_folders", "maps_unprobed"):
            setattr(self, flag, getattr(store, flag))
        self.foreign_format = store.foreign_format
        self.crc_recorded = store.crc_recorded

    def _key(self, key: str) -> str:
        check_key(key, self.root)
        return self.prefix + key if key else self.prefix[:-1]

    def display(self, key: str) -> str:
        return self.outer.display(self._key(key))

    def is_file(self, key: str) -> bool:
        return self.outer.is_file(self._key(key))

    def is_dir(self, key: str) -> bool:
        return self.outer.is_dir(self._key(key))

    def list_dir(self, key: str) -> list[str]:
        return self.outer.list_dir(self._key(key))

    def entry(self, key: str) -> EntryInfo:
        return dataclasses.replace(self.outer.entry(self._key(key)), key=key)

    def locate(self, key: str) -> Payload:
        return dataclasses.replace(self.outer.locate(self._key(key)), key=key)

    def read_bytes(self, key: str, limit: int) -> bytes:
        return self.outer.read_bytes(self._key(key), limit)

    def read_folder_meta(self, dirkey: str, limit: int) -> bytes | None:
        return self.outer.read_folder_meta(self._key(dirkey), limit)

    def writable(self, key: str | None = None) -> bool:
        return self.outer.writable(None if key is None else self._key(key))

    def prepare(self, dirkey: str, *, payloads: bool) -> None:
        self.outer.prepare(self._key(dirkey), payloads=payloads)

    def plain_entries(
        self, key: str, wanted: int | None = None
    ) -> tuple[frozenset[str] | None, frozenset[str] | None]:
        return self.outer.plain_entries(self._key(key), wanted)

    def plain_files(self, key: str, wanted: int | None = None) -> frozenset[str] | None:
        return self.outer.plain_files(self._key(key), wanted)

    def plain_dirs(self, key: str, wanted: int | None = None) -> frozenset[str] | None:
        return self.outer.plain_dirs(self._key(key), wanted)

    def known_size(self, key: str) -> int | None:
        return self.outer.known_size(self._key(key))

    def stored_span(self, key: str) -> tuple[int, int] | None:
        return self.outer.stored_span(self._key(key))

    def map(self, key: str, *, write: bool | None = False) -> Mapped:
        return self.outer.map(self._key(key) if key else "", write=write)

    def opened_path(self, fd: int, key: str) -> str:
        return self.outer.opened_path(fd, self._key(key))

    def read_into(self, key: str, offset: int, buf: Buffer) -> None:
        self.outer.read_into(self._key(key), offset, buf)

    def read_ranges(self, key: str, spans: Sequence[tuple[int, int]], dest: memoryview) -> None:
        self.outer.read_ranges(self._key(key), spans, dest)

    def decompress(
        self, key: str, max_size: int | None = None, pool: Executor | None = None
    ) -> np.ndarray:
        return self.outer.decompress(self._key(key), max_size, pool)

    def fetch(
        self, wanted: Mapping[str, int | None], *, done: Callable[[str], object] | None = None
    ) -> dict[str, Any]:
        keys = {self._key(key): key for key in wanted}
        inner = None if done is None else (lambda key: done(keys[key]))
        found = self.outer.fetch({k: wanted[keys[k]] for k in keys}, done=inner)
        return {keys[k]: value for k, value in found.items()}

    def check_intact(self) -> None:
        self.outer.check_intact()

    def local_crc32(self, key: str) -> int | None:
        return self.outer.local_crc32(self._key(key))

    def close(self) -> None:
        if self.owner is not None:  # opened for it ("<zip>::<key>"): closed with it
            self.owner.close()
