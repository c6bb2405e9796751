"""``Tree``: what a checkpoint and a folder of checkpoints both answer.

:func:`~tdview.index.open_tree` opens a path as one or the other: a
:class:`~tdview.index.Checkpoint` (a folder or archive whose root holds a ``meta.json``)
or a :class:`~tdview.index.Collection` (a folder of checkpoints). Neither is the other;
the protocol, the views, the diff and the loader ask either the questions below: the
``root`` node, a ``node`` by path, its ``children`` (a ``page`` of them), its ``total``,
the ``search`` batches, ``locate`` (which checkpoint owns a path: the one place a path is
routed into a member), the load doors and ``close``. What only a folder of checkpoints
answers (its side files, its members) is asked where its capability ``is_folder`` says
so (:func:`~tdview.index.is_folder`).

Both read ``meta.json`` files through the one cache kept here (a folder of checkpoints
reads none of its own: each member is its own checkpoint).
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, Self, cast

from .._cache import BoundedCache
from ..errors import TDViewError
from ..format import MAX_META_BYTES, NodeMeta, TensorDictNode, parse_meta_json, parse_node
from ..storage import Store
from ._ahead import ReadAhead
from ._loading import LoadAccess
from ._node import Node
from ._paths import NestedPath, join_key

# Parsed TensorDict nodes shared by identical meta.json files: how many, and how large.
SHARED_METAS = 4096
_SHARED_META_BYTES = 16384


@dataclass(frozen=True)
class Page:
    """One page of a node's children (``total`` counts them all)."""

    path: NestedPath
    offset: int
    total: int
    items: list[Node]


class Located(NamedTuple):
    """Where a path lies: the tree that owns its node (``owner``: a member, or the tree
    asked), that tree's path in the one asked (``prefix``) and the path inside it
    (``inner``)."""

    owner: Tree
    prefix: NestedPath
    inner: NestedPath


class Tree(abc.ABC):
    """The interface of an open checkpoint or folder of checkpoints (see the module).

    Examples
    --------
    >>> from tdview.index import open_tree                             # doctest: +SKIP
    >>> with open_tree("run") as tree:                                 # doctest: +SKIP
    ...     owner, prefix, inner = tree.locate("step_1000/model")
    ...     print(prefix, inner, tree.total(tree.root).leaves)
    ('step_1000',) ('model',) 12
    """

    #: Capability: True for a folder of checkpoints, whose own nodes (folders, members,
    #: side files) are answered by it (:func:`~tdview.index.is_folder`); False for one
    #: checkpoint, which owns every path it has.
    is_folder: bool = False

    store: Store
    root: Node
    robust: bool
    #: bytes of ``meta.json`` read so far (lets a caller bound the work of a display)
    meta_bytes_read: int
    #: the cached rollup of each folder totalled so far (see :func:`~tdview.index.rollup`)
    folder_rollups: dict[str, Any]
    _loading: LoadAccess
    _ahead: ReadAhead | None
    _metas: dict[str, NodeMeta | TDViewError | OSError]
    _metas_bound: int | None
    _parsed: BoundedCache[bytes, NodeMeta]
    _first: bytes | TDViewError | OSError | None = None  # the root's, read when opened

    def _start_cache(self, metas_bound: int | None) -> None:
        """The empty caches of :meth:`read_meta` (``metas_bound``: see one_load)."""
        self._metas = {}
        self._metas_bound = metas_bound
        self._parsed = BoundedCache(SHARED_METAS)  # see _remember
        self.meta_bytes_read = 0
        self.folder_rollups = {}

    @property
    def path(self) -> str:
        return self.store.root

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abc.abstractmethod
    def close(self) -> None: ...

    # -- the tree ---------------------------------------------------------------------------

    @abc.abstractmethod
    def node(self, subpath: object = ()) -> Node:
        """The node at a nested key (``("a", "b")``) or ``"a/b"`` path (``SubpathError``
        when a step names no child)."""

    @abc.abstractmethod
    def children(self, where: object = ()) -> list[Node]:
        """The children of a node (or of the node at a path), in load order."""

    @abc.abstractmethod
    def count_children(self, node: Node) -> int:
        """How many children :meth:`children` gives (without reading them where it can)."""

    @abc.abstractmethod
    def page(self, where: object = (), offset: int = 0, limit: int | None = None) -> Page:
        """A page of children: ``offset``, ``limit`` (None: all) and the ``total``."""

    @abc.abstractmethod
    def lookup(self, node: Node, key: str) -> Node | None:
        """The child ``key`` of ``node`` (None when it has none)."""

    @abc.abstractmethod
    def locate(self, subpath: object = ()) -> Located:
        """Which tree owns the node at ``subpath``: the one place a path is routed."""

    @abc.abstractmethod
    def total(self, node: Node) -> Any:
        """The totals of ``node``'s subtree (a :class:`~tdview.index.Rollup`), cached."""

    @abc.abstractmethod
    def batch_size(self, node: Node) -> tuple[int, ...] | None: ...

    @abc.abstractmethod
    def names(self, node: Node) -> tuple[str | None, ...] | None: ...

    @abc.abstractmethod
    def device(self, node: Node) -> str | None: ...

    @abc.abstractmethod
    def _search_batches(self, matcher: Any, under: object) -> Iterator[Any]:
        """The matches of a search below ``under`` (see :func:`~tdview.index.search`)."""

    @abc.abstractmethod
    def load_target(self, subpath: object, *, leaf: bool, mode: str | None) -> tuple[Tree, object]:
        """The tree a load of ``subpath`` reads and the subpath there (a folder of
        checkpoints: the member's; ``SubpathError`` for what cannot be loaded)."""

    @abc.abstractmethod
    def read_ahead(self, dirkey: str, meta: NodeMeta, *, probes: bool = True) -> None: ...

    # -- meta.json, read through one cache --------------------------------------------------

    def read_meta(self, dirkey: str, *, walking: bool = False) -> NodeMeta:
        """The parsed ``meta.json`` of a folder (cached); raises what reading it raised.

        ``walking``: the caller goes on to the folder's children. No folder is listed for
        its ``meta.json``: the store opens it by name (a folder is listed, if at all,
        when its children are looked for, and its ``meta.json`` says how many).
        """
        found = self._metas.get(dirkey)
        if found is None:
            key = join_key(dirkey, "meta.json")
            first, self._first = (self._first, None) if not dirkey else (None, self._first)
            try:
                if isinstance(first, Exception):
                    raise first
                ahead = self._ahead.take(key) if self._ahead is not None else None
                parsed = None
                if first is not None:
                    data = first
                elif ahead is not None:
                    data, parsed = ahead.result()  # what the read raised is raised here
                else:
                    data = self.store.read_bytes(key, MAX_META_BYTES)
                found = self._decode(key, data, parsed)
            except (TDViewError, OSError) as error:
                found = error
            self._keep(dirkey, found)
        if isinstance(found, Exception):
            raise found
        return found

    def _decode(self, key: str, data: bytes, parsed: object) -> NodeMeta:
        """The node of the ``meta.json`` bytes read at ``key`` (or parsed ahead)."""
        self.meta_bytes_read += len(data)
        found = self._parsed.get(data)
        if found is None:
            if isinstance(parsed, Exception):
                raise parsed
            if parsed is not None:
                found = cast(NodeMeta, parsed)
            else:
                where = self.store.display(key)
                found = parse_node(parse_meta_json(data, where), where)
            self._remember(data, found)
        return found

    def _keep(self, dirkey: str, found: NodeMeta | TDViewError | OSError) -> None:
        metas = self._metas
        if self._metas_bound is not None and len(metas) >= self._metas_bound:
            metas.clear()
        metas[dirkey] = found

    def _remember(self, data: bytes, meta: NodeMeta) -> None:
        """Keep a parsed TensorDict node by its ``meta.json`` bytes: the layers and
        experts of a model repeat the same file, which is then parsed once. Only
        TensorDict nodes (immutable records) are shared; the cache is bounded."""
        if type(meta) is TensorDictNode and len(data) <= _SHARED_META_BYTES:
            self._parsed.put(data, meta)

    # -- loading (tdview.loader; imported on first use: it stands on the index) -----------

    def load(
        self,
        subpath: object = None,
        device: Any = None,
        non_blocking: bool = False,
        *,
        out: Any = None,
        mode: str | None = None,
        num_threads: int = 0,
        allow_pickle: bool | None = None,
        progress: Any = None,
        index: Any = None,
    ) -> Any:
        """Load the tensordict at ``subpath`` (the root by default), as
        :func:`tdview.load_memmap` does, reusing this index: the metadata already read is
        not read again, so a later load costs only its own subtree.

        ``progress``, if given, is called with the nested key of each leaf once loaded.
        ``index`` (what ``td[index]`` takes on the batch dims) loads ``load(...)[index]``,
        reading only the rows selected.
        In a folder of checkpoints (a ``Collection``), ``subpath`` must reach a member
        (or a node in one).

        Examples
        --------
        >>> ckpt = Checkpoint("ckpt.tdz")                                # doctest: +SKIP
        >>> head = ckpt.load("model/head", device="cpu", mode="r")       # doctest: +SKIP
        """
        from ..loader import LoadRequest, run

        request = LoadRequest(
            subpath, device, non_blocking, out, mode, num_threads, allow_pickle, progress,
            index=index,
        )  # fmt: skip
        return run(self, request)

    def load_leaf(self, subpath: object, device: Any = None, mode: str | None = "r") -> Any:
        """Load one tensor leaf (a ``torch.Tensor``; copy-on-write with the default ``"r"``).

        In a folder of checkpoints, a member's leaf, or a raw array of the folder (read
        only: ``mode="r+"`` is refused).

        Examples
        --------
        >>> Checkpoint("ckpt").load_leaf("nested/reward").shape              # doctest: +SKIP
        torch.Size([2, 3, 1])
        """
        from ..loader import LoadRequest, run

        return run(self, LoadRequest(subpath, device, mode=mode, leaf=True))


def load_access(tree: Tree) -> LoadAccess:
    """The doors of ``tree`` that a load goes through (see :mod:`._loading`): kept off
    the tree's own face, which is for users."""
    return tree._loading
