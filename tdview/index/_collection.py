"""``Collection``: a folder that is not a checkpoint but holds checkpoints.

A training run keeps ``step_1000/`` and ``step_2000.tdz``; torchrl's ``ReplayBuffer.dumps``
writes ``storage/`` (a checkpoint) beside ``writer/metadata.json`` and ``prefetch.pkl``;
``torchrl.checkpoint`` writes ``manifest.json`` and ``components/NNNN-name/state/``; a
tensordict cache keeps a folder per entry. Opened with :class:`~tdview.index.Checkpoint`,
such a folder becomes a collection whose tree mirrors its folders on disk:

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

import json
import os
from collections.abc import Iterator
from itertools import islice
from typing import Any

from .._cache import BoundedCache
from .._text import echo
from ..errors import NotACheckpointFolderError, SubpathError, TDViewError
from ..format import (
    DEFAULT_MAX_DEPTH,
    DTYPES,
    LeafRecord,
    PickleInfo,
    json_depth,
    scan_pickle,
    unscanned,
)
from ..storage import DirectoryStore
from ._cancel import cancel_point
from ._checkpoint import SHARED_METAS, Checkpoint, Page
from ._loading import LoadAccess
from ._match import Matcher
from ._node import LEAF, Node
from ._paths import NestedPath, normalize_subpath, show_path
from ._rollup import Rollup, rollup
from ._search import Batch, search, tree_batches

# Node kinds of a collection's own tree (members' nodes keep the checkpoint kinds).
COLLECTION = "collection"
FOLDER = "folder"
MEMBER = "checkpoint"
JSON_FILE = "json"
PICKLE_FILE = "pickle"
RAW_MEMMAP = "raw .memmap"  # the class name of a side .memmap leaf

#: Folder levels below the collection root that a walk descends.
MAX_DEPTH = 16
#: Entries of one folder considered (a folder of more says so on its node).
MAX_ENTRIES = 100_000
#: The largest side JSON file whose value is read.
MAX_SIDE_JSON = 1024 * 1024
#: The largest side pickle whose imports are scanned.
MAX_SIDE_PICKLE = 1024 * 1024
_ARCHIVE_SUFFIXES = (".tdz", ".zip")
_PICKLE_SUFFIXES = (".pkl", ".pickle")


def is_collection_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a directory that is not itself a checkpoint (no ``meta.json``).

    Examples
    --------
    >>> is_collection_folder("/nonexistent")
    False
    """
    path = os.fspath(path)
    # a checkpoint (the common case) answers with its meta.json's one lstat
    return not os.path.lexists(os.path.join(path, "meta.json")) and os.path.isdir(path)


class Collection(Checkpoint, holds_checkpoints=True):
    """A folder of checkpoints (see the module docstring), browsed as one tree.

    ``Checkpoint(folder)`` returns one when ``folder`` has no ``meta.json``. Paths below a
    member reach into it: ``collection.node("storage/obs")`` is the node ``obs`` of the
    member ``storage`` (a node of that member's own :class:`Checkpoint`, whose paths are
    relative to it); :meth:`locate` says which checkpoint owns a path.

    Examples
    --------
    >>> run = Checkpoint("run")                                   # doctest: +SKIP
    >>> [(n.key, n.kind) for n in run.children()]                 # doctest: +SKIP
    [('step_1000', 'checkpoint'), ('step_2000.tdz', 'checkpoint'), ('config.json', 'json')]
    >>> run.member("step_1000").path                              # doctest: +SKIP
    '/abs/run/step_1000'
    >>> run.load("step_1000/model")                               # doctest: +SKIP
    """

    store: DirectoryStore  # a folder, never an archive

    def __init__(
        self,
        prefix: str | os.PathLike[str],
        *,
        robust_key: bool | None = None,
        one_load: bool = False,
    ) -> None:
        self.store = DirectoryStore(prefix)
        self.robust = robust_key is not False
        self._robust_key = robust_key
        self._metas = {}
        self._metas_bound = None  # its members are opened for as long as it is
        self._parsed = BoundedCache(SHARED_METAS)
        self.meta_bytes_read = 0
        self.folder_rollups = {}
        self._members: dict[str, Checkpoint | TDViewError | OSError] = {}
        self._ahead = None
        # its loads go to its members (a load of its own maps raw side arrays by key)
        self._loading = LoadAccess(self, walks=False)
        self.root = Node(path=(), kind=COLLECTION, dirkey="")

    def __repr__(self) -> str:
        return f"Collection({self.path!r})"

    def close(self) -> None:
        for member in self._members.values():
            if isinstance(member, Checkpoint):
                member.close()
        self.store.close()

    # -- the collection's own tree ---------------------------------------------------

    def _own_children(self, node: Node) -> list[Node]:
        if node.children_cache is None:
            children = self._list(node) if node.kind in (COLLECTION, FOLDER) else []
            node.children_cache = {child.key: child for child in children}
            node.children_order = tuple(children)
        return list(node.children_order)

    def _list(self, node: Node) -> list[Node]:
        """The members, folders and side files of a folder, sorted by name."""
        assert node.dirkey is not None
        real = os.path.join(self.store.root, node.dirkey)
        try:
            with os.scandir(real) as listing:
                entries: list[os.DirEntry[str]] = []
                for entry in listing:
                    if len(entries) == MAX_ENTRIES:
                        node.problems.append(
                            f"{real} holds more than {MAX_ENTRIES:,} entries: the rest are "
                            "not shown"
                        )
                        break
                    if not entry.name.startswith("."):
                        entries.append(entry)
        except OSError as error:
            node.problems.append(f"cannot list {real}: {error}")
            return []
        entries.sort(key=lambda e: e.name)
        found = (self._entry_node(node, entry) for entry in entries)
        children = [child for child in found if child is not None]
        _describe_raw_arrays(self.store, node.dirkey, children)
        return children

    def _entry_node(self, parent: Node, entry: os.DirEntry[str]) -> Node | None:
        name = entry.name
        path = parent.path + (name,)
        key = f"{parent.dirkey}/{name}" if parent.dirkey else name
        try:
            if entry.is_dir(follow_symlinks=False):
                if os.path.lexists(os.path.join(entry.path, "meta.json")):
                    return Node(path=path, kind=MEMBER, dirkey=key, type_hint="directory")
                return Node(path=path, kind=FOLDER, dirkey=key)
            if entry.is_symlink() and entry.is_dir():
                return None  # a linked folder is not followed (loops, folders outside)
        except OSError:
            return None
        lower = name.lower()
        if lower.endswith(_ARCHIVE_SUFFIXES):
            return Node(path=path, kind=MEMBER, file=key, type_hint="archive")
        if lower.endswith(".json"):
            return Node(path=path, kind=JSON_FILE, file=key)
        if lower.endswith(_PICKLE_SUFFIXES):
            return Node(path=path, kind=PICKLE_FILE, file=key)
        if lower.endswith(".memmap"):
            size = _file_size(self.store, key)
            return Node(
                path=path,
                kind=LEAF,
                file=key,
                type_hint=RAW_MEMMAP,
                record=_raw_record(name, "torch.uint8", (size,)),
            )
        return None

    def side_value(self, node: Node) -> Any:
        """The value of a side JSON file, read on first use (None when it cannot be read:
        the node's problem says why)."""
        if node.kind == JSON_FILE and not node.has_value and node.file is not None:
            _read_value(self.store, node)
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
        return _file_size(self.store, node.file) if node.file is not None else 0

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

    def member(self, where: object) -> Checkpoint:
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
                found = Checkpoint(os.path.join(self.store.root, key), robust_key=self._robust_key)
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

    def locate(self, subpath: object = ()) -> tuple[Checkpoint, NestedPath, NestedPath]:
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
                return self.member(node), path[:depth], path[depth:]
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
                return self.member(node), path, ()
            except (TDViewError, OSError):
                pass  # a member that cannot be opened is a node of the collection's own
        return self, (), path

    def is_own(self, node: Node) -> bool:
        """Whether ``node`` belongs to the collection's own tree (not to a member)."""
        return node.kind in (COLLECTION, FOLDER, MEMBER, JSON_FILE, PICKLE_FILE) or (
            node.type_hint == RAW_MEMMAP
        )

    # -- the Checkpoint interface, routed -----------------------------------------------

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


def not_a_checkpoint_folder(coll: Collection) -> NotACheckpointFolderError:
    """The loader's error for a folder of checkpoints: it names (up to 8 of) them."""
    found = list(islice((n for n in coll.walk_own() if n.kind == MEMBER), 9))
    names = ", ".join(show_path(n.path) for n in found[:8]) + (", ..." if len(found) > 8 else "")
    if found:
        text = (
            f"{coll.path} is not a checkpoint but a folder holding checkpoints: {names}. "
            f"Load one of them (tdview.load_memmap({os.path.join(coll.path, *found[0].path)!r}"
            "), or browse the folder with tdview.Checkpoint or TDView."
        )
    else:
        text = f"{coll.path} is not a checkpoint, and no checkpoint was found in it."
    return NotACheckpointFolderError(os.path.join(coll.path, "meta.json"), text)


def read_side_json(store: DirectoryStore, key: str) -> Any:
    """The value of a side ``.json`` file (at most :data:`MAX_SIDE_JSON` bytes, nesting
    bounded as a ``meta.json``'s)."""
    where = store.display(key)
    size = store.entry(key).size
    if size > MAX_SIDE_JSON:
        raise ValueError(
            f"{where} is {size:,} bytes: larger than the {MAX_SIDE_JSON:,} "
            "bytes tdview reads of a side JSON file"
        )
    data = store.read_bytes(key, MAX_SIDE_JSON)
    if json_depth(data) > DEFAULT_MAX_DEPTH:
        raise ValueError(f"{where} nests deeper than {DEFAULT_MAX_DEPTH} levels")
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{where} is not JSON: {error}") from None


def _read_value(store: DirectoryStore, node: Node) -> None:
    assert node.file is not None
    try:
        node.value, node.has_value = read_side_json(store, node.file), True
    except (TDViewError, OSError, ValueError) as error:
        node.problems.append(str(error))
        node.has_value = True  # read once: the problem stays


def _file_size(store: DirectoryStore, key: str) -> int:
    try:
        return store.entry(key).size
    except (TDViewError, OSError):
        return 0


def _raw_record(name: str, dtype: str, shape: tuple[int, ...]) -> LeafRecord:
    return LeafRecord(key=name, dtype=DTYPES[dtype], shape=shape, is_nested=False, device=None)


def _describe_raw_arrays(store: DirectoryStore, dirkey: str, children: list[Node]) -> None:
    """Type the raw ``.memmap`` files of a folder from a neighbouring JSON.

    Two descriptions are read: torchrl's samplers (``sampler_metadata.json`` records
    ``_max_capacity``; ``sumtree.memmap`` and ``mintree.memmap`` hold that many float64,
    as torchrl 0.14's ``PrioritizedSampler.dumps`` writes them), and a JSON object that
    maps the file's stem to ``{"shape": [...], "dtype": "torch.<name>"}``. A description
    whose size does not fit the file is not used: the file stays raw bytes, with a
    problem that says so.
    """
    raws = [c for c in children if c.type_hint == RAW_MEMMAP]
    if not raws:
        return
    described: dict[str, tuple[str, tuple[int, ...], str]] = {}
    for side in children:
        if side.kind != JSON_FILE:
            continue
        if not side.has_value:
            _read_value(store, side)
        value = side.value
        if not isinstance(value, dict):
            continue
        capacity = value.get("_max_capacity")
        if (
            side.key == "sampler_metadata.json"
            and isinstance(capacity, (int, float))
            and (capacity == int(capacity) and capacity >= 0)
        ):
            for stem in ("sumtree", "mintree"):
                described[stem] = ("torch.float64", (int(capacity),), side.key)
        for stem, spec in value.items():
            if isinstance(spec, dict) and spec.get("dtype") in DTYPES:
                shape = spec.get("shape")
                if isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape):
                    described[stem] = (spec["dtype"], tuple(shape), side.key)
    for raw in raws:
        stem = raw.key[: -len(".memmap")]
        if stem not in described:
            continue
        dtype, shape, source = described[stem]
        record = _raw_record(raw.key, dtype, shape)
        size = _file_size(store, raw.file or "")
        if record.nbytes == size:
            raw.record = record
        else:
            raw.problems.append(
                f"{store.display(raw.file or '')}: {source} describes it as {dtype} "
                f"{list(shape)} ({record.nbytes:,} bytes) but the file holds {size:,} "
                "bytes; shown as raw bytes"
            )
