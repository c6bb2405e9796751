"""``LoadAccess``: the index's inner face, for the loader and the index's own walks.

A load reads a checkpoint folder by folder without building a node per leaf: it needs
the folder's parsed ``meta.json`` kept by the index, the children of a folder as bare
files, the node of one entry when a fast path does not take it. Those doors live here,
not on :class:`~tdview.index.Checkpoint`, whose face is for users; a checkpoint holds one
``LoadAccess`` (:func:`load_access`), sharing its caches.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Literal, Protocol, overload

from .._cache import BoundedCache
from ..errors import TDViewError
from ..format import (
    MAX_META_BYTES,
    CollectionRecord,
    LeafRecord,
    NodeMeta,
    NonTensorDataNode,
    NonTensorStackNode,
    TensorclassNode,
    TensorDictNode,
)
from ..storage import Store
from . import _children as ch
from ._ahead import ReadAhead
from ._node import TENSORDICT, LoadItem, Node, PlainFolder, index_kind
from ._paths import NestedPath, join_key, show_path

#: Decoded meta.json of the folders a subpath went through (see _subpath): how many.
_PASSED = 64


class Indexed(Protocol):
    """What :class:`LoadAccess`, and the index's walks (totals, search, dims), read of
    the checkpoint they serve: a :class:`~tdview.index.Checkpoint` or a folder of them.
    Typed by it, the walks need not import the checkpoint (no circle of imports)."""

    robust: bool
    root: Node
    meta_bytes_read: int
    folder_rollups: dict[str, Any]
    _loading: LoadAccess
    _ahead: ReadAhead | None
    _metas: dict[str, NodeMeta | TDViewError | OSError]

    @property
    def store(self) -> Store: ...  # read-only here: a folder of checkpoints narrows it
    def read_meta(self, dirkey: str, *, walking: bool = False) -> NodeMeta: ...
    def children(self, where: object = ()) -> list[Node]: ...
    def node(self, subpath: object = ()) -> Node: ...
    def batch_size(self, node: Node) -> tuple[int, ...] | None: ...
    def total(self, node: Node) -> Any: ...  # a Rollup (index/_rollup.py)
    def _search_batches(self, matcher: Any, under: object) -> Iterator[Any]: ...  # _search
    def read_ahead(self, dirkey: str, meta: NodeMeta, *, probes: bool = True) -> None: ...
    def _decode(self, key: str, data: bytes, parsed: object) -> NodeMeta: ...
    def _keep(self, dirkey: str, found: NodeMeta | TDViewError | OSError) -> None: ...


class LoadAccess:
    """The doors of one open checkpoint that a load (and the index's walks) go through.

    Parameters
    ----------
    ckpt : Checkpoint
        The index whose caches it reads and fills.
    walks : bool
        Whether a load may read it folder by folder (a folder of checkpoints may not: its
        loads go to its members).
    """

    __slots__ = ("_ckpt", "_walks", "passed")

    def __init__(self, ckpt: Indexed, *, walks: bool = True) -> None:
        self._ckpt = ckpt
        self._walks = walks
        #: decoded ``meta.json`` of the folders a subpath went through (see :mod:`._subpath`)
        self.passed: BoundedCache[str, dict] = BoundedCache(_PASSED)

    # -- folders and their meta.json ---------------------------------------------------

    def kept_meta(self, dirkey: str) -> NodeMeta | TDViewError | OSError | None:
        """What ``read_meta`` keeps for folder ``dirkey``: its parsed ``meta.json``, the
        error reading it raised, or None when it has not been read (or was dropped from
        the bounded cache)."""
        return self._ckpt._metas.get(dirkey)

    def folder_meta(self, dirkey: str, data: bytes) -> NodeMeta | None:
        """The parsed ``meta.json`` of folder ``dirkey`` from its bytes, read by the caller
        (a walk through descriptors: :meth:`~tdview.storage.Store.folder_walk`), kept as
        ``read_meta`` keeps it; None when it does not parse (the error is kept:
        ``read_meta`` and the folder's node raise and record it)."""
        ckpt = self._ckpt
        try:
            found: NodeMeta | TDViewError | OSError = ckpt._decode(
                dirkey + "/meta.json", data, None
            )
        except (TDViewError, OSError) as error:
            found = error
        ckpt._keep(dirkey, found)
        return None if isinstance(found, Exception) else found

    def read_folder(self, dirkey: str) -> NodeMeta | None:
        """``read_meta`` of a sub-folder met in a walk, and whether it is a plain folder,
        in one call to the store (:meth:`~tdview.storage.Store.read_folder_meta`); None
        where the store has no shorter way for it, or it is not a plain folder with a
        readable ``meta.json``: the caller then probes it and asks ``read_meta``, which
        answer (and raise) as ever."""
        ckpt = self._ckpt
        if ckpt._ahead is not None or dirkey in ckpt._metas:
            return None
        data = ckpt.store.read_folder_meta(dirkey, MAX_META_BYTES)
        return None if data is None else self.folder_meta(dirkey, data)

    @property
    def walks_folders(self) -> bool:
        """Whether a load may read this checkpoint folder by folder through descriptors
        (:meth:`~tdview.storage.Store.folder_walk`): not while reading ahead (a slow file
        system, whose reads the threads of :mod:`._ahead` make)."""
        return self._walks and self._ckpt._ahead is None

    # -- nodes ----------------------------------------------------------------------------

    def make_collection(
        self, path: NestedPath, dirkey: str | None, type_hint: str | None, *, walking: bool = False
    ) -> Node:
        """The node of a sub-folder; reading problems are recorded on it, not raised.
        ``walking``: see ``Checkpoint.read_meta``."""
        node = Node(path=path, kind=TENSORDICT, dirkey=dirkey, type_hint=type_hint)
        if dirkey is None:
            node.problems.append(f"the folder of {show_path(path)!r} is missing")
            return node
        try:
            node.meta = meta = self._ckpt.read_meta(dirkey, walking=walking)
        except (TDViewError, OSError) as error:
            node.problems.append(str(error))
            return node
        if type(meta) is TensorDictNode:  # the common node: nothing more to look at
            return node
        node.kind = index_kind(meta)
        if isinstance(node.meta, NonTensorDataNode) and node.meta.data_present:
            node.value, node.has_value = node.meta.data, True
        if isinstance(node.meta, NonTensorStackNode) and node.meta.data is not None:
            node.value, node.has_value = node.meta.data, True
        if isinstance(node.meta, TensorclassNode) and self.inner(node) is None:
            node.problems.append(
                f"the {ch.TENSORCLASS_INNER} folder of tensorclass {node.class_name} "
                f"is missing in {self._ckpt.store.display(dirkey)}"
            )
        return node

    def inner(self, node: Node) -> Node | None:
        """The ``_tensordict`` TensorDict node of a tensorclass (None if it has none).

        NonTensorData nodes have none since tensordict 0.4, but older ones may.
        """
        if not node.inner_known:
            node.inner_cache = self._read_inner(node)
            node.inner_known = True
        return node.inner_cache

    def _read_inner(self, node: Node) -> Node | None:
        if not isinstance(node.meta, (TensorclassNode, NonTensorDataNode)) or node.dirkey is None:
            return None
        folder = join_key(node.dirkey, ch.TENSORCLASS_INNER)
        if not self._ckpt.store.is_dir(folder):
            return None
        return self.make_collection(node.path + (ch.TENSORCLASS_INNER,), folder, None)

    def collection_node(self, path: NestedPath, dirkey: str, record: CollectionRecord) -> Node:
        """The node of collection ``record`` of the TensorDict folder ``dirkey`` at
        ``path``: its folder looked for, its problems recorded (what ``children`` gives
        for it). For a sub-folder a walk through descriptors did not take."""
        ckpt = self._ckpt
        return ch.collection_node(
            ckpt.store, path, dirkey, record, self.make_collection, ckpt.robust
        )

    def leaf_node(self, path: NestedPath, dirkey: str, record: LeafRecord) -> Node:
        """The node of leaf ``record`` of the TensorDict folder ``dirkey`` at ``path``,
        its file looked for (its problems recorded): what ``children`` gives for it. For
        a leaf :meth:`load_items` gave unprobed whose file is absent."""
        return ch.leaf_node(self._ckpt.store, path, dirkey, record, robust=self._ckpt.robust)

    # -- children as a load needs them ---------------------------------------------------

    @overload
    def load_items(
        self, node: Node, *, unprobed: bool = False, folders: Literal[False] = False
    ) -> Iterable[LoadItem]: ...
    @overload
    def load_items(
        self, node: Node, *, unprobed: bool = False, folders: bool
    ) -> Iterable[LoadItem | PlainFolder]: ...
    def load_items(
        self, node: Node, *, unprobed: bool = False, folders: bool = False
    ) -> Iterable[LoadItem | PlainFolder]:
        """The children of ``node`` as a loader needs them, in load order: a plain leaf
        whose file exists may come as a :class:`~tdview.index.LeafFile` instead of a node,
        so that loading a large tree builds (and keeps) no node per leaf. ``unprobed``: the
        caller maps each leaf file (the store's ``map`` tells if it is absent, and the
        caller then asks :meth:`leaf_node`), so a store that
        :attr:`~tdview.storage.Store.maps_unprobed` looks for none first. ``folders``: a
        sub-folder holding a TensorDict node may come as a :class:`PlainFolder` (see
        :meth:`folder_items`)."""
        meta = node.meta
        if (
            node.children_cache is not None
            or type(meta) is not TensorDictNode
            or node.dirkey is None
            or meta.legacy_no_collection_records
        ):
            return self._ckpt.children(node)
        return self.folder_items(node.path, node.dirkey, meta, unprobed=unprobed, folders=folders)

    def folder_items(
        self,
        path: NestedPath,
        dirkey: str,
        meta: TensorDictNode,
        *,
        unprobed: bool = False,
        folders: bool = True,
    ) -> Iterator[LoadItem | PlainFolder]:
        """:meth:`load_items` of the TensorDict folder ``dirkey`` at ``path``, whose parsed
        ``meta.json`` is ``meta`` (one that records its collections), without a node: for a
        :class:`~tdview.index.PlainFolder` it gave. A sub-folder that holds such a node
        comes as a :class:`~tdview.index.PlainFolder` too (a load builds no node per
        folder); any other as its node (every one with ``folders=False``)."""
        ckpt = self._ckpt
        ahead = ckpt._ahead
        if ahead is not None:
            ckpt.read_ahead(dirkey, meta)
        return ch.tensordict_children(
            ckpt.store,
            path,
            dirkey,
            meta,
            self.make_collection,
            robust=ckpt.robust,
            files_only=True,
            unprobed=unprobed and ahead is None and ckpt.store.maps_unprobed,
            read=ckpt.read_meta if folders else None,
            read_folder=self.read_folder,
        )

    def load_fields(
        self, node: Node, *, unprobed: bool = False, folders: bool = False
    ) -> Iterable[LoadItem | PlainFolder] | None:
        """The fields of tensorclass ``node`` kept in its ``_tensordict`` folder, as
        :meth:`load_items` gives a TensorDict's children (nodes with the tensorclass's
        paths, as ``children`` lists them on it); None when ``children`` must answer (the
        node's children were read or looked up already, or its inner node is not a plain
        TensorDict)."""
        inner = self.inner(node)
        if (
            node.children_cache is not None
            or node.lookup_cache
            or inner is None
            or inner.dirkey is None
            or type(inner.meta) is not TensorDictNode
            or inner.meta.legacy_no_collection_records
        ):
            return None
        return self.folder_items(
            node.path, inner.dirkey, inner.meta, unprobed=unprobed, folders=folders
        )
