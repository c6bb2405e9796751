"""A checkpoint archive stored inside another zip (a ``state.tdz`` in a torchrl archive
checkpoint), read in place.

A STORED entry is read where it lies in the outer archive's one mapping: the outer file
up to the entry's end is read as a zip whose first bytes come before it (the prepended
data zip readers allow), so every offset of the inner archive is an offset in the outer
file, and a load's leaves are views of the mapping of that file (:meth:`~NestedArchiveStore.map`
opens it, checked by the outer store). A deflated entry is decompressed once (bounded,
CRC-checked) and read from memory: nothing of it can be mapped (``mappable`` False), so
a load reads its leaves as a remote archive's are read (``fetch``). Every check of the
archive store holds for the inner archive (names, layout, local headers, sizes).
"""

from __future__ import annotations

from typing import Any

from ..errors import ArchiveError, LimitExceededError
from ._archive import ArchiveStore
from ._base import Mapped, Store
from ._mapfile import not_a_checkpoint
from ._zip import EOCD
from ._zip import parse_central_directory as _parse

__all__ = ["MAX_INFLATED", "NestedArchiveStore"]

#: the largest deflated inner archive decompressed into memory
MAX_INFLATED = 4 << 30


class NestedArchiveStore(ArchiveStore):
    """The archive that entry ``key`` of ``outer`` holds.

    Parameters
    ----------
    outer : ArchiveStore
        The archive holding it (it stays open and owned by its opener).
    key : str
        The entry (``components/0001-policy/state.tdz``).

    Raises
    ------
    NotACheckpointError
        The entry is not a zip with a top-level ``meta.json``.
    LimitExceededError
        A deflated entry larger than :data:`MAX_INFLATED`.

    Examples
    --------
    >>> inner = NestedArchiveStore(outer, "components/0001-policy/state.tdz")  # doctest: +SKIP
    >>> inner.list_dir("")                                                     # doctest: +SKIP
    ['meta.json', 'tensor_00000000.memmap']
    """

    def __init__(self, outer: ArchiveStore, key: str) -> None:
        self.outer = outer
        self.root = outer.display(key)
        payload = outer.locate(key)
        if payload.mappable and payload.offset is not None:  # in place, in the outer file
            self.mapping: Any = outer.mapping
            self.file_size = payload.offset + payload.size
            self._identity = outer._identity
        else:
            if payload.size > MAX_INFLATED:
                raise LimitExceededError(
                    f"{self.root} declares {payload.size:,} bytes, above tdview's limit of "
                    f"{MAX_INFLATED:,} bytes for an archive decompressed into memory."
                )
            self.mapping = outer.decompress(key).tobytes()
            self.file_size = len(self.mapping)
            self.mappable = False
        if payload.size < EOCD.size:
            raise not_a_checkpoint(self.root, f"the entry is only {payload.size} bytes long")
        self._load(_parse(self.mapping, self.file_size, self.root))
        self._view = memoryview(self.mapping)
        self._offsets: dict[str, int] = {}
        self._expected: tuple[str, bool] | None = None
        self._single = 0
        self._prepared: set[tuple[str, bool]] = set()
        self._spans: dict[str, tuple[int, int]] = {}

    def stored_span(self, key: str) -> tuple[int, int] | None:
        return super().stored_span(key) if self.mappable else None  # in memory: fetched

    def read_bytes(self, key: str, limit: int) -> bytes:
        return bytes(super().read_bytes(key, limit))

    def map(self, key: str, *, write: bool | None = False) -> Mapped:
        """The outer archive's file (every stored leaf lies in it, at :meth:`stored_span`),
        for writing as an archive's is (``mode="r+"``: the entry's bytes, in place); a
        deflated inner archive is in memory: refused."""
        if not self.mappable:
            return Store.map(self, key, write=write)
        if key:
            self._central(key)
        return self.outer.map("", write=write)

    def opened_path(self, fd: int, key: str) -> str:
        return self.outer.opened_path(fd, "")

    def writable(self, key: str | None = None) -> bool:
        return self.mappable and self.outer.writable()

    def check_intact(self) -> None:
        self.outer.check_intact()

    def close(self) -> None:
        try:
            self._view.release()  # the mapping is the outer store's to close
        except BufferError:
            pass  # views of it handed out keep it
        if self.owner is not None:  # opened for it ("<zip>::<key>"): closed with it
            self.owner.close()


def nested_archive(outer: Store, key: str) -> Store:
    """The store of entry ``key`` of archive ``outer``: :class:`NestedArchiveStore`."""
    if not isinstance(outer, ArchiveStore) or not outer.is_file(key):
        raise ArchiveError(f"{outer.display(key)} is not an archive entry of {outer.root}.")
    return NestedArchiveStore(outer, key)
