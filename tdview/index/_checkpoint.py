"""``Checkpoint``: the lazy, metadata-only index of a tensordict checkpoint; ``open_tree``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from time import perf_counter
from typing import Any

from .._gc import gc_paused
from .._text import echo
from ..errors import SubpathError, TDViewError
from ..format import (
    MAX_META_BYTES,
    NodeMeta,
    NonTensorDataNode,
    TensorclassNode,
    TensorDictNode,
    ViewNode,
)
from ..storage import Store, open_store
from . import _children as ch
from ._ahead import SLOW_READ_S, ReadAhead, read_ahead_wanted
from ._collection import Collection, not_a_checkpoint_folder
from ._dims import nested_batch_problems, range_problem
from ._loading import LoadAccess
from ._match import Matcher
from ._node import (
    LAZY_STACK,
    NON_TENSOR_STACK,
    VIEW,
    Node,
)
from ._paths import join_key, normalize_subpath, show_path
from ._rollup import Rollup, tree_rollup
from ._search import Batch, tree_batches
from ._tree import Located, Page, Tree

# Parsed meta.json files kept by a checkpoint opened for one load (all dropped beyond)
_ONE_LOAD_METAS = 4096
# Kinds whose numbers are checked against their members' or source's batch dims.
_RANGED = frozenset({LAZY_STACK, NON_TENSOR_STACK, VIEW})


class Checkpoint(Tree):
    """The structure of a checkpoint (directory or archive), read from metadata only.

    Nodes are read when first asked for and cached; rollups and search walk the tree on
    demand. Nothing here reads a tensor payload byte, unpickles, imports a module named
    in the checkpoint, or writes.

    Parameters
    ----------
    prefix : str or Path
        A checkpoint directory, or a zip archive (any suffix) with a top-level meta.json.
        A directory without a ``meta.json`` opens as a folder of checkpoints: a
        :class:`~tdview.index.Collection` (not a checkpoint: both are a
        :class:`~tdview.index.Tree`, and :func:`~tdview.index.open_tree` routes the path).
    robust_key : bool, optional
        ``False`` reads the legacy raw-name layout only; ``None``/``True`` read the
        percent-encoded names with the legacy fallback.
    one_load : bool, optional
        The checkpoint is opened for one load and closed (:func:`tdview.load_memmap`):
        the parsed ``meta.json`` of the folders are kept only up to a bound, not for
        later reads (a load of a million folders holds no cache of them).

    Examples
    --------
    >>> ckpt = Checkpoint("run/ckpt.tdz")                      # doctest: +SKIP
    >>> [n.key for n in ckpt.children("model")]                 # doctest: +SKIP
    ['embed', 'layers', 'norm', 'head']
    >>> ckpt.node("model/head/weight").record.shape             # doctest: +SKIP
    (512, 64)
    """

    def __new__(
        cls,
        prefix: str | os.PathLike[str],
        *,
        robust_key: bool | None = None,
        one_load: bool = False,
    ) -> Any:  # a Checkpoint, or a Collection for a folder of checkpoints
        # Checkpoint(path) for users: open_tree routes the path (the one place it is)
        return open_tree(prefix, robust_key=robust_key, one_load=one_load)

    def __init__(
        self,
        prefix: str | os.PathLike[str],
        *,
        robust_key: bool | None = None,
        one_load: bool = False,
    ) -> None:
        pass  # opened by open_tree (see __new__), which gave this object built

    @classmethod
    def _over(
        cls,
        store: Store,
        first: bytes | TDViewError | OSError | None,
        took: float,
        *,
        robust_key: bool | None,
        one_load: bool,
    ) -> Checkpoint:
        """The checkpoint of an open ``store``, whose root's ``meta.json`` (``first``: its
        bytes, or what reading them raised) took ``took`` seconds to read."""
        self: Checkpoint = object.__new__(cls)
        self.store = store
        self._first = first  # read_meta takes it once
        # the reads queued ahead (see _ahead), on a slow file system only
        wanted = read_ahead_wanted(took)
        self._ahead = ReadAhead(store, robust_key is not False) if wanted else None
        self.robust = robust_key is not False
        self._start_cache(_ONE_LOAD_METAS if one_load else None)
        #: the doors of the loader and of the index's walks (see :func:`load_access`)
        self._loading = LoadAccess(self)
        self.root = self._loading.make_collection((), "", None)
        return self

    def close(self) -> None:
        if self._ahead is not None:
            self._ahead.close()  # no read of its store left running
        self.store.close()

    def __repr__(self) -> str:
        return f"Checkpoint({self.path!r}, {self.store.kind})"

    # -- navigation -----------------------------------------------------------------

    def count_children(self, node: Node) -> int:
        """How many children :meth:`children` gives, without reading them when the
        node's own ``meta.json`` tells (a TensorDict lists one record per child)."""
        if node.children_cache is not None:
            return len(node.children_cache)
        meta = node.meta
        if isinstance(meta, TensorDictNode) and not meta.legacy_no_collection_records:
            return len(meta.entries)
        return len(self.children(node))

    def children(self, where: object = ()) -> list[Node]:
        """The children of a node in the order tensordict loads them."""
        node = where if isinstance(where, Node) else self.node(where)
        if node.children_cache is None:
            with gc_paused():
                children = self._read_children(node)
            # keep the nodes that lookup() already made (and their caches)
            known = node.lookup_cache
            if known:
                cache = {child.key: known.get(child.key, child) for child in children}
            else:
                cache = {child.path[-1]: child for child in children}
            # published order first, cache last: another request's thread that sees the
            # cache set finds the order set too
            node.children_order = tuple(cache.values())
            node.children_cache = cache
            known.clear()
            if node.kind in _RANGED:  # its numbers against its members' or source's dims
                problem = range_problem(self, node)
                if problem is not None:
                    node.problems.append(problem)
            else:
                nested_batch_problems(self, node, children)
        return list(node.children_order)

    def read_ahead(self, dirkey: str, meta: NodeMeta, *, probes: bool = True) -> None:
        """On a slow file system (see :mod:`._ahead`), queue the reads a walk of the
        folder ``dirkey`` is about to make (``probes``: of its leaf files too)."""
        if self._ahead is not None:
            self._ahead.below(dirkey, meta, probes=probes)

    def page(self, where: object = (), offset: int = 0, limit: int | None = None) -> Page:
        """A page of children: ``offset``, ``limit`` (None: all) and the ``total``."""
        node = where if isinstance(where, Node) else self.node(where)
        if node.children_cache is None:
            self.children(node)
        items = node.children_order  # sliced, not copied whole: a page of a level of
        stop = len(items) if limit is None else offset + max(limit, 0)  # 10^5 per request
        return Page(node.path, offset, len(items), list(items[max(offset, 0) : stop]))

    def child(self, node: Node, key: str) -> Node | None:
        """The child ``key`` of ``node`` (``_tensordict`` reaches a tensorclass's fields)."""
        return self.lookup(node, key)

    def lookup(self, node: Node, key: str) -> Node | None:
        """The child ``key`` of ``node``, reading only what that child needs.

        Unlike :meth:`children`, the siblings are not read (no ``meta.json`` parsed, no file
        looked up), so following a path costs one node per step. The node is cached, and
        :meth:`children` later returns the same object.
        """
        if node.children_cache is not None:
            found = node.children_cache.get(key)
        else:
            found = node.lookup_cache.get(key)
            if found is None:
                found = self._read_child(node, key)
                if found is not None:
                    node.lookup_cache[key] = found
        if found is None and key == ch.TENSORCLASS_INNER:
            return self._loading.inner(node)
        return found

    def _read_child(self, node: Node, key: str) -> Node | None:
        meta, dirkey = node.meta, node.dirkey
        if meta is None or dirkey is None:
            return None
        make = self._loading.make_collection
        if isinstance(meta, TensorDictNode):
            found = ch.tensordict_child(
                self.store, node.path, dirkey, meta, key, make, robust=self.robust
            )
            if found is None and meta.legacy_no_collection_records:
                return next((c for c in self.children(node) if c.key == key), None)
            return found
        if isinstance(meta, TensorclassNode):
            inner = self._loading.inner(node)
            if inner is not None and isinstance(inner.meta, TensorDictNode):
                assert inner.dirkey is not None
                found = ch.tensordict_child(
                    self.store, node.path, inner.dirkey, inner.meta, key, make, robust=self.robust
                )
                if found is not None:
                    return found
            elif inner is not None and inner.dirkey is not None and ch.has_members(inner.meta):
                found = ch.member_child(
                    self.store, node.path, inner.dirkey, key, make, node.lookup_cache
                )
                if found is not None:
                    return found
            return next((c for c in ch.json_field_children(node.path, meta) if c.key == key), None)
        if ch.has_members(meta):
            return ch.member_child(self.store, node.path, dirkey, key, make, node.lookup_cache)
        if ch.has_source(meta) and key == ch.VIEW_SOURCE:
            return self._read_children(node)[0]
        return None

    def node(self, subpath: object = ()) -> Node:
        """The node at a nested key (``("a", "b")``) or ``"a/b"`` path.

        Raises
        ------
        SubpathError
            If a step names no child (the message names the step and its parent).
        """
        path = () if subpath == () else normalize_subpath(subpath)
        node = self.root
        for depth, key in enumerate(path):
            found = self.child(node, key)
            if found is None:
                keys = [c.key for c in self.children(node)][:8]
                raise SubpathError(
                    f"No node {show_path(path[: depth + 1])!r} in {self.path}: "
                    f"{show_path(path[:depth])!r} has no key {echo(key)} (its keys: "
                    f"{echo(keys, 400)})."
                )
            node = found
        return node

    def _read_children(self, node: Node) -> list[Node]:
        meta, dirkey = node.meta, node.dirkey
        if meta is None or dirkey is None:
            return []
        make = self._loading.make_collection
        if isinstance(meta, TensorDictNode):
            return list(
                ch.tensordict_children(
                    self.store, node.path, dirkey, meta, make, robust=self.robust
                )
            )
        if isinstance(meta, TensorclassNode):
            inner = self._loading.inner(node)
            fields = list(ch.json_field_children(node.path, meta))
            if inner is not None and inner.dirkey is not None and ch.has_members(inner.meta):
                # over a lazy stack (a stacked torchrl History): the stack's members,
                # shown on the tensorclass as its fields are
                return list(ch.member_children(self.store, node.path, inner.dirkey, make)) + fields
            if inner is None or not isinstance(inner.meta, TensorDictNode):
                return fields
            assert inner.dirkey is not None
            return (
                list(
                    ch.tensordict_children(
                        self.store, node.path, inner.dirkey, inner.meta, make, robust=self.robust
                    )
                )
                + fields
            )
        if ch.has_members(meta):
            return list(ch.member_children(self.store, node.path, dirkey, make))
        if ch.has_source(meta):
            source = join_key(dirkey, ch.VIEW_SOURCE)
            folder = source if self.store.is_dir(source) else None
            return [make(node.path + (ch.VIEW_SOURCE,), folder, None)]
        return []

    # -- node facts -----------------------------------------------------------------

    def total(self, node: Node) -> Rollup:
        """The totals of ``node``'s subtree, cached (:func:`~tdview.index.rollup`)."""
        return tree_rollup(self, node)

    def _search_batches(self, matcher: Matcher, under: object) -> Iterator[Batch]:
        """The matches of a search below ``under`` (see :func:`~tdview.index.search`)."""
        return tree_batches(self, matcher, self.node(under))

    def locate(self, subpath: object = ()) -> Located:
        """``(owner, prefix, inner)`` as a folder of checkpoints answers it: a checkpoint
        owns all its paths (``(self, (), path)``; :meth:`node` says if one is missing)."""
        return Located(self, (), () if subpath == () else normalize_subpath(subpath))

    def load_target(
        self, subpath: object, *, leaf: bool, mode: str | None
    ) -> tuple[Checkpoint, object]:
        """A checkpoint loads its own paths: ``(self, subpath)``."""
        return self, subpath

    def batch_size(self, node: Node) -> tuple[int, ...] | None:
        """The batch size tensordict would give the node (None when unknown)."""
        meta = node.meta
        if isinstance(meta, TensorDictNode):
            return meta.batch_size
        if isinstance(meta, ViewNode):
            return meta.batch_size
        if isinstance(meta, TensorclassNode):
            inner = self._loading.inner(node)
            return self.batch_size(inner) if inner is not None else None
        if isinstance(meta, NonTensorDataNode):
            return self._non_tensor_batch_size(node)
        if node.kind in (LAZY_STACK, NON_TENSOR_STACK) and node.has_value:
            return _list_shape(node.value)
        if node.kind in (LAZY_STACK, NON_TENSOR_STACK):
            return self._stack_batch_size(node)
        return None

    def _non_tensor_batch_size(self, node: Node) -> tuple[int, ...]:
        """A NonTensorData saves no batch size: tensordict gives it its parent's when it
        sets it there on load (a string in a TensorDict of batch [4] has batch [4]);
        alone, or as a member of a stack, it has none."""
        if not node.path:
            return ()
        try:
            parent = self.node(node.path[:-1])
        except TDViewError:
            return ()
        if parent.kind in (LAZY_STACK, NON_TENSOR_STACK):
            return ()
        return self.batch_size(parent) or ()

    def _stack_batch_size(self, node: Node) -> tuple[int, ...] | None:
        """As tensordict computes it: the members' batch size with -1 in every dim where
        they differ (a ragged stack of episodes is ``[2, -1]``), and the number of
        members inserted at the stack dim. None when a member's is unknown or their
        numbers of dims differ (tensordict refuses to stack those)."""
        members = self.children(node)
        if not members:
            return None
        merged = self.batch_size(members[0])
        for member in members[1:]:
            if merged is None:
                return None
            size = self.batch_size(member)
            if size is None or len(size) != len(merged):
                return None
            if size != merged:
                merged = tuple(m if m == s else -1 for m, s in zip(merged, size, strict=True))
        if merged is None:
            return None
        dim = getattr(node.meta, "stack_dim", 0) or 0
        if not -(len(merged) + 1) <= dim <= len(merged):
            return None  # out of range: a problem of the node (see _dims)
        dim = dim if dim >= 0 else dim + len(merged) + 1
        return merged[:dim] + (len(members),) + merged[dim:]

    def names(self, node: Node) -> tuple[str | None, ...] | None:
        meta = node.meta
        if isinstance(meta, TensorclassNode):
            inner = self._loading.inner(node)
            return self.names(inner) if inner is not None else None
        return meta.names if isinstance(meta, TensorDictNode) else None

    def device(self, node: Node) -> str | None:
        meta = node.meta
        if isinstance(meta, TensorclassNode):
            inner = self._loading.inner(node)
            return self.device(inner) if inner is not None else None
        return getattr(meta, "device", None)


def open_tree(
    prefix: str | os.PathLike[str] | Store,
    *,
    robust_key: bool | None = None,
    one_load: bool = False,
    folders: bool = True,
) -> Tree:
    """Open a checkpoint, or a folder of checkpoints: the one place a path is routed.

    The root's ``meta.json`` is read (timed: a slow file system reads ahead, see
    :mod:`._ahead`); a store whose root holds none is a folder of checkpoints, a
    :class:`Collection` (where the store can be browsed as one: :meth:`Collection.browses`).

    Parameters
    ----------
    prefix : str or Path or Store
        A checkpoint directory, a zip archive (any suffix) with a top-level ``meta.json``,
        an fsspec URL, a folder holding checkpoints (or a zip of them), or a store already
        open (a checkpoint inside a zip of checkpoints: ``Store.sub_store``).
    robust_key, one_load
        As :class:`Checkpoint` takes them.
    folders : bool, optional
        ``False``: a folder of checkpoints is refused with a
        :class:`~tdview.errors.NotACheckpointFolderError` naming (up to 8 of) them, as
        :func:`tdview.load_memmap` refuses it.

    Examples
    --------
    >>> with open_tree("run") as tree:                                # doctest: +SKIP
    ...     print(type(tree).__name__, [n.key for n in tree.children()])
    Collection ['step_1000', 'step_2000.tdz']
    """
    with gc_paused():  # a header or footer parsed on open: a million objects that stay
        store = open_store(prefix)
    try:
        first, took = _root_meta(store)
    except BaseException:
        store.close()
        raise
    if first is None:
        folder = Collection(store, open_tree, robust_key=robust_key)
        if not folders:
            error = not_a_checkpoint_folder(folder)
            folder.close()
            raise error
        return folder
    return Checkpoint._over(store, first, took, robust_key=robust_key, one_load=one_load)


def _root_meta(store: Store) -> tuple[bytes | TDViewError | OSError | None, float]:
    """The root's ``meta.json`` (its bytes, or what reading it raised) and how long it
    took to read; ``(None, 0.0)`` when the root holds none and the store is browsed as a
    folder of checkpoints (a dangling link named ``meta.json`` is a checkpoint's, broken:
    the store says whether the root holds the name, :meth:`~tdview.storage.Store.holds`)."""
    start = perf_counter()
    try:
        first = store.read_bytes("meta.json", MAX_META_BYTES)
    except FileNotFoundError as error:
        try:
            if Collection.browses(store) and not store.holds("", "meta.json"):
                return None, 0.0
        except OSError:
            pass
        return error, 0.0
    except (TDViewError, OSError) as error:
        return error, 0.0
    # only a local folder's reads are timed: a remote store has its own concurrent reads
    took = _confirmed(store, perf_counter() - start) if store.local_folders else 0.0
    return first, took


def _confirmed(store: Store, took: float) -> float:
    """How long reading the root's ``meta.json`` takes: a read slow enough to read ahead
    (see :mod:`._ahead`) is made once more and the faster one counts, so that one hiccup
    of a busy local disk does not switch threads on (a network file system is slow both
    times: each open is a round trip)."""
    if took <= SLOW_READ_S:
        return took
    start = perf_counter()
    try:
        store.read_bytes("meta.json", MAX_META_BYTES)
    except (TDViewError, OSError):
        return took
    return min(took, perf_counter() - start)


def _list_shape(value: object) -> tuple[int, ...]:
    """The stack shape of nested lists: one dim per level of equal-length lists."""
    shape: list[int] = []
    level = value
    while isinstance(level, list):
        shape.append(len(level))
        if not level or not all(isinstance(item, list) for item in level):
            break
        if len({len(item) for item in level}) != 1:
            break
        level = level[0]
    return tuple(shape)
