"""Rollups: the totals of a subtree (bytes, numel, leaves, bytes per dtype).

A rollup walks the tree depth-first through the index, so it parses every ``meta.json``
of the subtree once (cached) and never reads a payload byte. It totals a plain
TensorDict folder from its records, without a node per child, and caches it per folder.
A pickled non-tensor value adds the size of its pickle file (see :class:`Rollup`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeGuard

from .._gc import gc_paused
from ..errors import TDViewError
from ..format import TensorclassNode, TensorDictNode
from ._cancel import cancel_point
from ._children import json_field_children, tensordict_totals
from ._facts import leaf_entry, needs_unpickling, pickle_key
from ._loading import Indexed as Checkpoint  # typed by what it reads: no circle
from ._node import Node, SubFolder
from ._paths import NestedPath


@dataclass(slots=True)
class Rollup:
    """Totals of a subtree. Nested leaves count the bytes of their data file.

    A non-tensor value that loading would unpickle (its ``other.pickle`` or
    ``pickle.pkl``, see :func:`~tdview.index.needs_unpickling`) is no leaf: it adds the
    size of its pickle file to ``bytes`` and ``pickle_bytes`` and one to ``pickles``,
    nothing to ``numel``, ``leaves`` (tensors, as the loader reports them) or
    ``by_dtype``. So ``bytes == sum(by_dtype.values()) + pickle_bytes``.
    """

    bytes: int = 0
    numel: int = 0
    leaves: int = 0
    by_dtype: dict[str, int] = field(default_factory=dict)
    problems: int = 0
    pickles: int = 0
    pickle_bytes: int = 0

    def add(self, other: Rollup) -> None:
        self.bytes += other.bytes
        self.numel += other.numel
        self.leaves += other.leaves
        self.problems += other.problems
        self.pickles += other.pickles
        self.pickle_bytes += other.pickle_bytes
        for dtype, size in other.by_dtype.items():
            self.by_dtype[dtype] = self.by_dtype.get(dtype, 0) + size


def rollup(ckpt: Checkpoint, node: Node) -> Rollup:
    """The cached totals of ``node``'s subtree: the checkpoint's own :meth:`total` (a
    folder of checkpoints totals its folders, members and side files its own way), a
    leaf's here.

    The walk is iterative (a deep tree cannot exhaust the stack). A plain TensorDict
    folder is totalled from its parsed ``meta.json`` without a node per child (its plain
    leaves added in place, its sub-folders followed by key); other nodes by their
    children. Each folder's rollup is cached on the checkpoint, so it holds for any node
    object of that folder, made before or after.
    """
    return tree_rollup(ckpt, node) if node.is_leaf else ckpt.total(node)


def tree_rollup(ckpt: Checkpoint, node: Node) -> Rollup:
    """:func:`rollup` in a checkpoint's own tree (``Checkpoint.total``)."""
    cached = cached_rollup(ckpt, node)
    if cached is not None:
        return cached
    if node.is_leaf:
        total = Rollup(problems=len(node.problems))
        total.add(_leaf_rollup(ckpt, node))
        node.rollup_cache = total
        return total
    if node.dirkey is not None:
        ckpt.store.prepare(node.dirkey, payloads=False)
    with gc_paused():
        _rollup_tree(ckpt, node)
    return node.rollup_cache


def cached_rollup(ckpt: Checkpoint, node: Node) -> Rollup | None:
    """The rollup of ``node`` if it is known already (None otherwise); walks nothing."""
    cached = node.rollup_cache
    if cached is None and node.dirkey is not None and not node.is_leaf:
        cached = node.rollup_cache = ckpt.folder_rollups.get(node.dirkey)
    return cached


# One level of the walk: the node (None for a folder totalled without one), its folder,
# what is left to total below it, and its running total.
_Frame = tuple["Node | None", "str | None", Iterator["Node | SubFolder"], Rollup]


def _rollup_tree(ckpt: Checkpoint, top: Node) -> None:
    """Fill the rollup of ``top`` and of every folder below it (post-order)."""
    folder_rollups = ckpt.folder_rollups
    stack: list[_Frame] = [_node_frame(ckpt, top)]
    while stack:
        cancel_point()  # a cancelled request's rollup stops here (nothing half cached)
        node, dirkey, pending, total = stack[-1]
        for item in pending:
            if isinstance(item, SubFolder):  # a sub-folder of a plain TensorDict
                path, folder, hint = item
                if folder is None:
                    total.problems += 1  # its folder is missing
                    continue
                cached = folder_rollups.get(folder)
                if cached is not None:
                    total.add(cached)
                    continue
                stack.append(_folder_frame(ckpt, path, folder, hint))
                break
            if item.is_leaf:
                total.add(rollup(ckpt, item))
                continue
            cached = cached_rollup(ckpt, item)
            if cached is not None:
                total.add(cached)
                continue
            stack.append(_node_frame(ckpt, item))
            break  # descend; this level resumes from ``pending`` afterwards
        else:
            stack.pop()
            if node is not None:
                node.rollup_cache = total
            if dirkey is not None:
                folder_rollups[dirkey] = total
            if stack:
                stack[-1][3].add(total)


def _plain(meta: object) -> TypeGuard[TensorDictNode]:
    """Whether a folder's node is a TensorDict whose children its ``meta.json`` lists."""
    return type(meta) is TensorDictNode and not meta.legacy_no_collection_records


def _totals_frame(
    ckpt: Checkpoint,
    node: Node | None,
    path: NestedPath,
    cache_key: str | None,
    folder: str,
    meta: TensorDictNode,
    problems: int = 0,
    extra: Iterable[Node] = (),
) -> _Frame:
    """A frame whose plain leaves are totalled at once from ``folder``'s ``meta``; the
    rollup is cached under ``cache_key`` (a tensorclass's own folder, for its inner
    TensorDict's entries) and ``extra`` children (its JSON fields) follow the rest."""
    ckpt.read_ahead(folder, meta)  # on a slow file system: the reads it is about to make
    nbytes, numel, leaves, by_dtype, rest = tensordict_totals(
        ckpt.store, path, folder, meta, robust=ckpt.robust
    )
    rest.extend(extra)
    return node, cache_key, iter(rest), Rollup(nbytes, numel, leaves, by_dtype, problems)


def _folder_frame(ckpt: Checkpoint, path: NestedPath, folder: str, hint: str | None) -> _Frame:
    """A sub-folder met by key: a plain TensorDict is totalled without a node."""
    try:
        meta = ckpt.read_meta(folder, walking=True)
    except (TDViewError, OSError):
        meta = None  # the node made below records the problem
    if _plain(meta):
        return _totals_frame(ckpt, None, path, folder, folder, meta)
    return _node_frame(ckpt, ckpt._loading.make_collection(path, folder, hint))


def _node_frame(ckpt: Checkpoint, node: Node) -> _Frame:
    meta, dirkey, problems = node.meta, node.dirkey, len(node.problems)
    if dirkey is not None and _plain(meta) and node.children_cache is None:
        return _totals_frame(
            ckpt,
            node,
            node.path,
            dirkey,
            dirkey,
            meta,
            problems,
        )
    if isinstance(meta, TensorclassNode) and node.children_cache is None:
        inner = ckpt._loading.inner(node)
        if inner is not None and inner.dirkey is not None and _plain(inner.meta):
            # its fields: the inner TensorDict's entries, then the JSON fields
            frame = _totals_frame(
                ckpt,
                node,
                node.path,
                dirkey,
                inner.dirkey,
                inner.meta,
                problems,
                json_field_children(node.path, meta),
            )
            frame[3].add(_pickle_rollup(ckpt, node))
            return frame
    total = _pickle_rollup(ckpt, node)
    total.problems += problems
    return node, dirkey, iter(ckpt.children(node)), total


def _pickle_rollup(ckpt: Checkpoint, node: Node) -> Rollup:
    """The size of the pickle file that loading ``node`` would unpickle, as a rollup of
    no leaf: its entry is looked up (the file is read only when a ``json_types.json``
    may describe it, to check its hash). Empty when there is none or it cannot be looked
    up (the node's details then say why)."""
    key = pickle_key(node)
    if key is None:
        return Rollup()
    try:
        if not needs_unpickling(ckpt.store, node):
            return Rollup()
        size = ckpt.store.entry(key).size
    except (TDViewError, OSError):
        return Rollup()
    return Rollup(bytes=size, pickles=1, pickle_bytes=size)


def _leaf_rollup(ckpt: Checkpoint, node: Node) -> Rollup:
    record = node.record
    assert record is not None
    nbytes = record.nbytes
    if nbytes is None:  # nested: the size of the packed data file
        entry = leaf_entry(ckpt.store, node)
        nbytes = entry.size if entry is not None else 0
    numel = record.numel if record.numel is not None else nbytes // record.dtype.itemsize
    return Rollup(nbytes, numel, 1, {record.dtype.name: nbytes})
