"""torchrl replay-buffer storages: how many rows of a storage were written.

torchrl (checked against 0.14.1; tdview never imports it) saves a replay buffer with
``ReplayBuffer.dumps(path)``. Its storage is ``path/storage/``, a tensordict memmap
folder whose batch size is the storage's *capacity*, and next to that folder's
``meta.json`` ``TensorStorageCheckpointer.dumps`` writes ``storage_metadata.json``::

    {"metadata": {}, "is_pytree": false, "len": 20}

``len`` is how many rows were written; rows ``[len, capacity)`` hold whatever the
storage held before (zeros for a ``LazyMemmapStorage``, uninitialised memory for a
``LazyTensorStorage``: statistics over them are noise). A buffer fills its storage
from row 0 up (the round-robin writer; once full, every row is written), so the
written rows are the first ``len``.

What tdview believes (the file is as hostile as the rest of the checkpoint): a JSON
object of at most :data:`MAX_STORAGE_METADATA_BYTES`, with an integer ``len`` (not a
boolean), ``is_pytree`` false or absent and ``metadata`` an object or absent; other
keys are ignored. ``len`` counts rows only for a storage of one batch dim, and must be
in ``[0, capacity]``. A storage of more batch dims leaves it unread: torchrl counts
elements over the storage's first ``ndim`` dims there (``LazyMemmapStorage(ndim=2)``),
and ``ndim`` is saved nowhere, so whether ``len`` counts rows or elements is unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import CheckpointFormatError, TDViewError
from ..format import parse_meta_json
from ._node import LEAF, TENSORCLASS, TENSORDICT, Node
from ._paths import NestedPath, join_key

if TYPE_CHECKING:
    from ._tree import Tree

#: The file torchrl writes next to a storage's ``meta.json``.
STORAGE_METADATA = "storage_metadata.json"
#: Largest ``storage_metadata.json`` read: a TensorDict storage's is about 50 bytes
#: (a pytree storage lists its leaves, but has no ``meta.json`` for tdview to open).
MAX_STORAGE_METADATA_BYTES = 64 * 1024


@dataclass(frozen=True)
class StorageRows:
    """The rows of a torchrl storage: ``written`` of ``capacity`` (its first batch dim).

    ``path`` is the storage node's path, ``where`` its ``storage_metadata.json``.
    """

    written: int
    capacity: int
    path: NestedPath
    where: str


def parse_storage_len(data: bytes, where: str) -> int:
    """The ``len`` of a ``storage_metadata.json`` (the bytes of the whole file).

    Raises
    ------
    CheckpointFormatError
        Not a JSON object, ``len`` missing or no integer, ``is_pytree`` not false, or
        ``metadata`` not an object.
    LimitExceededError
        Nested too deeply.

    Examples
    --------
    >>> parse_storage_len(b'{"metadata": {}, "is_pytree": false, "len": 20}', "s.json")
    20
    """
    obj = parse_meta_json(data, where)
    found = obj.get("len")
    if type(found) is not int:
        raise CheckpointFormatError(
            f'{where}: "len" must be an integer (rows written), got {_short(found)}'
        )
    pytree = obj.get("is_pytree", False)
    if pytree is not False:
        raise CheckpointFormatError(
            f'{where}: "is_pytree" is {_short(pytree)}, but this '
            "folder is a tensordict (it has a meta.json)"
        )
    if not isinstance(obj.get("metadata", {}), dict):
        raise CheckpointFormatError(
            f'{where}: "metadata" must be an object, got {_short(obj["metadata"])}'
        )
    return found


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def storage_rows(ckpt: Tree, node: Node) -> StorageRows | None:
    """The written rows of ``node`` when it is a torchrl storage: a folder holding a
    ``storage_metadata.json`` beside its ``meta.json`` and a batch size of one dim.
    None for any other node, and for a storage of more batch dims (see the module).

    Reads one small file; never a payload byte.

    Raises
    ------
    CheckpointFormatError
        The file is malformed, or its ``len`` is negative or above the capacity.
    TDViewError, OSError
        The store refused or failed to read the file.

    Examples
    --------
    >>> ckpt = Checkpoint("rb/storage")                                # doctest: +SKIP
    >>> rows = storage_rows(ckpt, ckpt.root)                            # doctest: +SKIP
    >>> rows.written, rows.capacity                                     # doctest: +SKIP
    (20, 100)
    """
    if node.kind == LEAF or node.dirkey is None or node.meta is None:
        return None
    key = join_key(node.dirkey, STORAGE_METADATA)
    store = ckpt.store
    if not store.is_file(key):
        return None
    batch = ckpt.batch_size(node)
    where = store.display(key)
    written = parse_storage_len(store.read_bytes(key, MAX_STORAGE_METADATA_BYTES), where)
    if batch is None or any(d < 0 for d in batch):
        return None  # unknown, or ragged (-1): no row count to check against
    if not batch:
        raise CheckpointFormatError(
            f'{where}: "len" is {written}, but the storage has no batch dimension to count rows in'
        )
    limit = math.prod(batch)
    if written < 0 or written > limit:
        raise CheckpointFormatError(
            f'{where}: "len" is {written}, outside [0, {limit}] (the storage\'s batch size '
            f"is {list(batch)})"
        )
    if len(batch) != 1:
        return None
    return StorageRows(written, batch[0], node.path, where)


def rows_of_leaf(ckpt: Tree, path: NestedPath) -> StorageRows | None:
    """The written rows of the torchrl storage that dim 0 of the leaf at ``path``
    indexes: the nearest folder above the leaf with a ``storage_metadata.json``, when
    every node from it down to the leaf is a TensorDict or tensorclass of that same
    first batch dim and the leaf is a strided tensor of that many rows. None otherwise,
    and when the file is unreadable or not believed (the node's details say why).

    Examples
    --------
    >>> rows_of_leaf(Checkpoint("rb/storage"), ("next", "reward")).written  # doctest: +SKIP
    20
    """
    leaf = ckpt.node(path)
    record = leaf.record
    if not leaf.is_leaf or record is None or record.is_nested or not record.shape:
        return None
    below: list[Node] = []
    for depth in range(len(path) - 1, -1, -1):
        node = ckpt.node(path[:depth]) if depth else ckpt.root
        if node.kind not in (TENSORDICT, TENSORCLASS):
            return None
        below.append(node)
        try:
            key = join_key(node.dirkey or "", STORAGE_METADATA)
            if node.dirkey is None or not ckpt.store.is_file(key):
                continue
            rows = storage_rows(ckpt, node)
        except (TDViewError, OSError):
            return None
        if rows is None or record.shape[0] != rows.capacity:
            return None
        for inner in below:
            batch = ckpt.batch_size(inner)
            if not batch or batch[0] != rows.capacity:
                return None
        return rows
    return None
