"""``Collection``: a folder that is not a checkpoint but holds checkpoints.

A training run keeps ``step_1000/`` and ``step_2000.tdz``; torchrl's ``ReplayBuffer.dumps``
writes ``storage/`` (a checkpoint) beside ``writer/metadata.json`` and ``prefetch.pkl``;
``torchrl.checkpoint`` writes ``manifest.json`` and ``components/NNNN-name/state/``; a
tensordict cache keeps a folder per entry. Opened with :func:`~tdview.index.open_tree` (or
:class:`~tdview.index.Checkpoint`), such a folder becomes a collection whose tree mirrors
its folders on disk. It is no checkpoint: both are a :class:`~tdview.index.Tree`.

* a **member** is a checkpoint found in it: a directory holding a ``meta.json`` (its
  parent holds none: below a member, folders are the member's own), or a ``.tdz`` or
  ``.zip`` file. Each member is its own :class:`Checkpoint`, opened on first use, with
  its own root (and so its own confinement);
* a **folder** holds more of the same, listed when first asked for;
* **side files**: a ``.json`` file is a metadata node with its (bounded) value, a raw
  ``.memmap`` file is a tensor leaf typed by a neighbouring JSON where that description
  fits its size (raw bytes otherwise), a ``.pkl``/``.pickle`` file a pickled entry that
  tdview never unpickles. Other files, and names starting with a dot, are left out.

Nothing is found eagerly: opening a collection lists its root folder only, and each
folder is listed once, when its children are first asked for. Walks (totals, search,
``tdview tree --depth -1``) descend at most :data:`MAX_DEPTH` folder levels and consider
at most :data:`MAX_ENTRIES` entries per folder; symlinked folders are not followed (a
loop cannot make a walk endless).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any, TypeGuard

from .._text import echo
from ..errors import NotACheckpointError, NotACheckpointFolderError, SubpathError, TDViewError
from ..format import PickleInfo, scan_pickle, unscanned
from ..storage import Store
from ._cancel import cancel_point
from ._loading import LoadAccess
from ._match import Matcher
from ._node import LEAF, Node
from ._paths import NestedPath, normalize_subpath, show_path
from ._rollup import Rollup, rollup
from ._search import Batch, search, tree_batches
from ._side_files import (
    JSON_FILE,
    PICKLE_FILE,
    RAW_MEMMAP,
    describe_raw_arrays,
    raw_record,
    read_value,
    size_of,
)
from ._tree import Located, Page, Tree

# Node kinds of a collection's own tree (members' nodes keep the checkpoint kinds).
COLLECTION = "collection"
FOLDER = "folder"
MEMBER = "checkpoint"

#: Folder levels below the collection root that a walk descends.
MAX_DEPTH = 16
#: Entries of one folder considered (a folder of more says so on its node).
MAX_ENTRIES = 100_000
#: The largest side pickle whose imports are scanned.
MAX_SIDE_PICKLE = 1024 * 1024
_ARCHIVE_SUFFIXES = (".tdz", ".zip")
_PICKLE_SUFFIXES = (".pkl", ".pickle")


#: How a folder of checkpoints opens a member (:func:`~tdview.index.open_tree`).
OpenTree = Callable[..., Tree]


def is_folder(tree: Tree) -> TypeGuard[Collection]:
    """Whether ``tree`` is a folder of checkpoints, as its capability
    :attr:`~tdview.index.Tree.is_folder` says: its own nodes (folders, members, side
    files) are answered with what only it has (:meth:`Collection.side_value`,
    :meth:`Collection.member`...).

    Examples
    --------
    >>> is_folder(open_tree("run")), is_folder(open_tree("run/step_1000"))  # doctest: +SKIP
    (True, False)
    """
    return tree.is_folder


class Collection(Tree):
    """A folder of checkpoints (see the module docstring), browsed as one tree.

    ``open_tree(folder)`` (and ``Checkpoint(folder)``) returns one when ``folder`` has no
    ``meta.json``. Paths below a member reach into it: ``collection.node("storage/obs")``
    is the node ``obs`` of the member ``storage`` (a node of that member's own
    :class:`Checkpoint`, whose paths are relative to it); :meth:`locate` says which
    checkpoint owns a path.

    Parameters
    ----------
    store : Store
        The folder, open (the collection closes it).
    open_member : callable
        How a member is opened: :func:`~tdview.index.open_tree`.
    robust_key : bool, optional
        As :class:`Checkpoint` takes it, for each member.

    Examples
    --------
    >>> run = Checkpoint("run")                                   # doctest: +SKIP
    >>> [(n.key, n.kind) for n in run.children()]                 # doctest: +SKIP
    [('step_1000', 'checkpoint'), ('step_2000.tdz', 'checkpoint'), ('config.json', 'json')]
    >>> run.member("step_1000").path                              # doctest: +SKIP
    '/abs/run/step_1000'
    >>> run.load("step_1000/model")                               # doctest: +SKIP
    """

    is_folder = True

    def __init__(self, store: Store, open_member: OpenTree, *, robust_key: bool | None) -> None:
        self.store = store
        self.robust = robust_key is not False
        self._robust_key = robust_key
        self._open_member = open_member
        self._start_cache(None)  # no meta.json of its own: its members read theirs
        self._members: dict[str, Tree | TDViewError | OSError] = {}
        self._ahead = None
        # its loads go to its members (a load of its own maps raw side arrays by key)
        self._loading = LoadAccess(self, walks=False)
        self.root = Node(path=(), kind=COLLECTION, dirkey="")

    def __repr__(self) -> str:
        return f"Collection({self.path!r})"

    @staticmethod
    def browses(store: Store) -> bool:
        """Whether a store whose root holds no ``meta.json`` is browsed as a folder of
        checkpoints: one whose folders are the local disk's, an archive's (a zip of
        checkpoints: listed from its central directory), or a server's (a remote folder)."""
        return store.local_folders or store.packed or store.lists_folders

    def close(self) -> None:
        for member in self._members.values():
            if not isinstance(member, Exception):
                member.close()
        self.store.close()

    def read_ahead(self, dirkey: str, meta: Any, *, probes: bool = True) -> None:
        """Nothing: a folder of checkpoints has no ``meta.json`` to read ahead (each of its
        members reads ahead its own)."""

    # -- the collection's own tree ---------------------------------------------------

    def _own_children(self, node: Node) -> list[Node]:
        if node.children_cache is None:
            children = self._list(node) if node.kind in (COLLECTION, FOLDER) else []
            node.children_cache = {child.key: child for child in children}
            node.children_order = tuple(children)
        return list(node.children_order)

    def _list(self, node: Node) -> list[Node]:
        """The members, folders and side files of a folder, sorted by name, as the store
        lists it (:meth:`~tdview.storage.Store.entries`: a linked folder is not followed;
        a folder holding a ``meta.json`` is a member: :meth:`~tdview.storage.Store.holds`)."""
        assert node.dirkey is not None
        where = self.store.display(node.dirkey) if node.dirkey else self.path
        try:
            entries, more = self.store.entries(node.dirkey, MAX_ENTRIES)
        except (OSError, TDViewError) as error:
            node.problems.append(f"cannot list {where}: {error}")
            return []
        if more:
            node.problems.append(
                f"{where} holds more than {MAX_ENTRIES:,} entries: the rest are not shown"
            )
        named = sorted(entry for entry in entries if not entry[0].startswith("."))
        found = (self._entry_node(node, name, kind) for name, kind in named)
        children = [child for child in found if child is not None]
        describe_raw_arrays(self.store, node.dirkey, children)
        return children

    def _entry_node(self, parent: Node, name: str, kind: str) -> Node | None:
        path = parent.path + (name,)
        key = f"{parent.dirkey}/{name}" if parent.dirkey else name
        if kind == "dir":
            try:
                member = self.store.holds(key, "meta.json")
            except (OSError, TDViewError):
                return None  # a name the store refuses
            if member:
                return Node(path=path, kind=MEMBER, dirkey=key, type_hint="directory")
            return Node(path=path, kind=FOLDER, dirkey=key)
        if kind != "file":
            return None  # a linked folder is not followed (loops, folders outside)
        return self._file_node(path, key, name)

    def _file_node(self, path: NestedPath, key: str, name: str) -> Node | None:
        """The node of a file of the folder: a member archive, a side file, or None."""
        lower = name.lower()
        if lower.endswith(_ARCHIVE_SUFFIXES):
            return Node(path=path, kind=MEMBER, file=key, type_hint="archive")
        if lower.endswith(".json"):
            return Node(path=path, kind=JSON_FILE, file=key)
        if lower.endswith(_PICKLE_SUFFIXES):
            return Node(path=path, kind=PICKLE_FILE, file=key)
        if lower.endswith(".memmap"):
            size = size_of(self.store, key)
            return Node(
                path=path,
                kind=LEAF,
                file=key,
                type_hint=RAW_MEMMAP,
                record=raw_record(name, "torch.uint8", (size,)),
            )
        return None

    def side_value(self, node: Node) -> Any:
        """The value of a side JSON file, read on first use (None when it cannot be read:
        the node's problem says why)."""
        if node.kind == JSON_FILE and not node.has_value and node.file is not None:
            read_value(self.store, node)
        return node.value

    def side_pickle(self, node: Node) -> PickleInfo:
        """The imports of a side pickle, from its opcodes (never unpickled), with bounded
        work: one larger than :data:`MAX_SIDE_PICKLE` is not read, and a scan past its
        opcode or time budget stops; both say so (``info.unknown``: "too large to scan:
        imports unknown").

        Raises
        ------
        TDViewError, OSError
            The file cannot be read, or is not a pickle.
        """
        assert node.file is not None
        size = self.file_size(node)
        if size > MAX_SIDE_PICKLE:
            return unscanned(size, f"larger than {MAX_SIDE_PICKLE >> 20} MiB")
        where = self.store.display(node.file)
        return scan_pickle(self.store.read_bytes(node.file, MAX_SIDE_PICKLE), where)

    def file_size(self, node: Node) -> int:
        """Bytes of a side file or an archive member (0 when it cannot be read)."""
        return size_of(self.store, node.file) if node.file is not None else 0

    def total(self, node: Node) -> Rollup:
        """The totals of a node of the collection's own tree: its members' rollups, its
        side files' bytes (a side file counts no leaf, a raw array one). Cached."""
        if node.rollup_cache is None:
            node.rollup_cache = self._total(node)
        return node.rollup_cache

    def _total(self, node: Node) -> Rollup:
        if not self.is_own(node):
            raise SubpathError(
                f"{show_path(node.path)!r} is a node of a member of {self.path}:"
                " total it with that member (Collection.locate)"
            )
        if node.kind == LEAF:
            return rollup(self, node)
        if node.kind == MEMBER:
            try:
                member = self.member(node)
            except (TDViewError, OSError):
                return Rollup(problems=1)
            return rollup(member, member.root)
        if node.kind in (JSON_FILE, PICKLE_FILE):
            return Rollup(bytes=self.file_size(node))
        total = Rollup(problems=len(node.problems))
        for child in self._own_children(node):
            if child.kind != FOLDER or len(child.path) < MAX_DEPTH:
                total.add(self.total(child))
        return total

    def member(self, where: object) -> Tree:
        """The checkpoint of a member (a path or a member node), opened on first use.

        Raises
        ------
        SubpathError
            ``where`` is not a member.
        TDViewError, OSError
            What opening the member raised (it is also a problem of its node).
        """
        node = where if isinstance(where, Node) else self.own_node(normalize_subpath(where))
        if node is None or node.kind != MEMBER:
            raise SubpathError(
                f"{show_path(getattr(node, 'path', ()))!r} in {self.path} "
                "is not a checkpoint of the collection."
            )
        key = node.dirkey if node.dirkey is not None else node.file
        assert key is not None
        found = self._members.get(key)
        if found is None:
            try:
                # a zip's folder or entry read through it, a folder's path opened, a
                # remote folder's member with the folder's filesystem and options
                opened = self.store.sub_store(key)
                found = self._open_member(opened, robust_key=self._robust_key)
            except (TDViewError, OSError) as error:
                found = error
                node.problems.append(str(error))
            self._members[key] = found
        if isinstance(found, Exception):
            raise found
        return found

    def own_node(self, path: NestedPath) -> Node | None:
        """The collection node at ``path``, or None (paths inside members included)."""
        node = self.root
        for key in path:
            if node.kind not in (COLLECTION, FOLDER):
                return None
            self._own_children(node)
            assert node.children_cache is not None
            found = node.children_cache.get(key)
            if found is None:
                return None
            node = found
        return node

    def locate(self, subpath: object = ()) -> Located:
        """``(owner, prefix, inner)``: the checkpoint that owns the node at ``subpath``,
        the path of that checkpoint in the collection (``()`` for the collection itself)
        and the node's path inside it.

        Raises
        ------
        SubpathError
            A step names nothing (the message names the step and the keys there).
        """
        path = () if subpath == () else normalize_subpath(subpath)
        node = self.root
        for depth, key in enumerate(path):
            if node.kind == MEMBER:
                return Located(self.member(node), path[:depth], path[depth:])
            found = (self._own_children(node) and node.children_cache or {}).get(key)
            if found is None:
                keys = [c.key for c in self._own_children(node)][:8]
                raise SubpathError(
                    f"No node {show_path(path[: depth + 1])!r} in {self.path}: "
                    f"{show_path(path[:depth])!r} has no key {echo(key)} (its keys: "
                    f"{echo(keys, 400)})."
                )
            node = found
        if node.kind == MEMBER:
            try:
                return Located(self.member(node), path, ())
            except (TDViewError, OSError):
                pass  # a member that cannot be opened is a node of the collection's own
        return Located(self, (), path)

    def is_own(self, node: Node) -> bool:
        """Whether ``node`` belongs to the collection's own tree (not to a member)."""
        return node.kind in (COLLECTION, FOLDER, MEMBER, JSON_FILE, PICKLE_FILE) or (
            node.type_hint == RAW_MEMMAP
        )

    # -- the Tree interface, routed -------------------------------------------------------

    def node(self, subpath: object = ()) -> Node:
        owner, _, inner = self.locate(subpath)
        if owner is self:
            found = self.own_node(inner)
            assert found is not None
            return found
        return owner.node(inner)

    def children(self, where: object = ()) -> list[Node]:
        if isinstance(where, Node) and self.is_own(where):
            if where.kind == MEMBER:
                return self.member(where).children()
            return self._own_children(where)
        owner, _, inner = self.locate(where.path if isinstance(where, Node) else where)
        if owner is self:
            found = self.own_node(inner)
            assert found is not None
            return self._own_children(found)
        return owner.children(inner)

    def count_children(self, node: Node) -> int:
        if node.kind == MEMBER:
            try:
                member = self.member(node)
            except (TDViewError, OSError):
                return 0
            return member.count_children(member.root)
        return len(self._own_children(node))

    def page(self, where: object = (), offset: int = 0, limit: int | None = None) -> Page:
        node = where if isinstance(where, Node) else self.node(where)
        items = self.children(node)
        stop = len(items) if limit is None else offset + max(limit, 0)
        return Page(node.path, offset, len(items), items[max(offset, 0) : stop])

    def lookup(self, node: Node, key: str) -> Node | None:
        return next((c for c in self.children(node) if c.key == key), None)

    def batch_size(self, node: Node) -> tuple[int, ...] | None:
        if node.kind == MEMBER:
            try:
                member = self.member(node)
            except (TDViewError, OSError):
                return None
            return member.batch_size(member.root)
        return None

    def names(self, node: Node) -> tuple[str | None, ...] | None:
        return None

    def device(self, node: Node) -> str | None:
        return None

    def walk_own(self, node: Node | None = None) -> Iterator[Node]:
        """The collection's own nodes below ``node`` (members included, not entered),
        depth-first, at most :data:`MAX_DEPTH` folder levels below the root."""
        stack = [iter(self._own_children(node or self.root))]
        while stack:
            cancel_point()  # a cancelled request's walk stops here
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                continue
            yield child
            if child.kind == FOLDER and len(child.path) < MAX_DEPTH:
                stack.append(iter(self._own_children(child)))

    def search(
        self, pattern: str, *, limit: int = 1000, under: object = ()
    ) -> tuple[list[NestedPath], bool]:
        """:func:`tdview.index.search` over the collection: the names of its own nodes,
        and each member's keys (the member's path first), depth-first:
        ``(matches, truncated)``."""
        return search(self, pattern, limit=limit, under=under)

    def _search_batches(self, matcher: Matcher, under: object) -> Iterator[Batch]:
        """The matches of a search below ``under``: the collection's own names, and each
        member's keys with the member's path first (below a member: that member's)."""
        owner, prefix, inner = self.locate(under)
        if owner is not self:
            yield from tree_batches(owner, matcher, owner.node(inner), prefix)
            return
        start = self.own_node(inner)
        assert start is not None
        for node in self.walk_own(start):
            if matcher(node.path):
                yield node.path[:-1], (node.key,), range(1)
            if node.kind == MEMBER:
                try:
                    member = self.member(node)
                except (TDViewError, OSError):
                    continue
                yield from tree_batches(member, matcher, member.root, node.path)

    def load_target(self, subpath: object, *, leaf: bool, mode: str | None) -> tuple[Tree, object]:
        """The member a load of ``subpath`` reads and the subpath in it; a raw array of
        the folder for a leaf (read only).

        Raises
        ------
        SubpathError
            ``subpath`` reaches no member (a folder, a side file: :meth:`not_loadable`
            says why), or ``mode="r+"`` asks to write a raw array of the folder.
        """
        owner, _, inner = self.locate(() if subpath is None and not leaf else subpath)
        if owner is not self:
            return owner, inner if leaf else (inner or None)
        if not leaf:
            raise SubpathError(self.not_loadable(inner))
        if mode == "r+":
            raise SubpathError(
                f"{self.store.display('/'.join(inner))} is a side file of a "
                "collection: tdview maps it read-only (mode='r' or None)."
            )
        return self, inner

    def members(self) -> list[Node]:
        """Every member node of the collection (see :meth:`walk_own` for the bounds)."""
        return [node for node in self.walk_own() if node.kind == MEMBER]

    def not_loadable(self, path: NestedPath) -> str:
        """Why the collection node at ``path`` cannot be loaded as a tensordict."""
        node = self.own_node(path)
        where = self.store.display("/".join(path)) if path else self.path
        below = [] if node is None else [n for n in self.walk_own(node) if n.kind == MEMBER]
        names = [show_path(m.path) for m in below[:8]]
        if node is not None and node.kind in (JSON_FILE, PICKLE_FILE):
            return (
                f"{where} is a side file of a folder of checkpoints, not a tensordict: "
                "read it with json.load or (if you trust it) pickle.load."
            )
        return (
            f"{where} is a folder of checkpoints, not one tensordict: load one of its "
            f"checkpoints ({', '.join(names) or 'none found'})."
        )


def not_a_checkpoint_folder(coll: Collection) -> NotACheckpointError:
    """The loader's error for a folder of checkpoints: it names (up to 8 of) them. A zip
    of them (torchrl's archive checkpoint) is refused in tensordict's words for a file."""
    found = list(islice((n for n in coll.walk_own() if n.kind == MEMBER), 9))
    names = ", ".join(show_path(n.path) for n in found[:8]) + (", ..." if len(found) > 8 else "")
    if found:
        # a zip of checkpoints has no path of its members: the folder's Checkpoint loads one
        call = (
            f"tdview.load_memmap({os.path.join(coll.path, *found[0].path)!r})"
            if coll.store.local_folders
            else f"tdview.Checkpoint({coll.path!r}).load({'/'.join(found[0].path)!r})"
        )
        text = (
            f"{coll.path} is not a checkpoint but a folder holding checkpoints: {names}. "
            f"Load one of them ({call}), or browse the folder with tdview.Checkpoint or TDView."
        )
    else:
        text = f"{coll.path} is not a checkpoint, and no checkpoint was found in it."
    if os.path.isfile(coll.path):
        return NotACheckpointError(
            f"{coll.path} is a file but not a memory-mapped tensordict archive (expected a "
            f"zip file with a top-level meta.json entry): {text}"
        )
    return NotACheckpointFolderError(os.path.join(coll.path, "meta.json"), text)
