"""How each node kind's children are found in the store, from its ``meta.json`` alone.

The reference never lists a TensorDict folder: it opens the names it derives from
``meta.json`` (robust names first, then the safe legacy name). Lazy stacks count
``0/``, ``1/``... up to the first gap; tensorclasses keep their fields in
``_tensordict/`` (a tensorclass over a lazy stack, such as a stacked torchrl ``History``,
keeps the stack's members there, shown on the tensorclass); views keep their source in
``_source/``. Only 0.3-era TensorDict
nodes, which recorded no collections, need a listing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from math import prod
from typing import Literal, overload

from .._cache import BoundedCache
from ..errors import TDViewError, UnsafeCheckpointError
from ..format import (
    CollectionRecord,
    LazyStackNode,
    LeafRecord,
    NodeMeta,
    NonTensorStackNode,
    SubTensorDictNode,
    TensorclassNode,
    TensorDictNode,
    ViewNode,
    candidate_names,
)
from ..storage import Store
from ._facts import Refusal
from ._node import LEAF, NON_TENSOR, LeafFile, Node, PlainFolder, SubFolder
from ._paths import NestedPath, join_key

TENSORCLASS_INNER = "_tensordict"
VIEW_SOURCE = "_source"

# Makes the node of a sub-folder: (path, folder key or None when missing, type hint).
MakeCollection = Callable[[NestedPath, "str | None", "str | None"], Node]
# Reads a folder's parsed meta.json (a checkpoint's cached read_meta): folder key -> meta.
ReadMeta = Callable[[str], NodeMeta]
# Probes a sub-folder and reads its meta.json in one call; None: ask the probe and ReadMeta.
ReadFolder = Callable[[str], "NodeMeta | None"]


# key -> the names to try (``candidate_names``), per (robust, collection): a checkpoint
# repeats its keys (``weight``, ``0``, ``w1``...) in every level. Bounded.
_NAMES_SIZE = 4096
_NAMES: dict[tuple[bool, bool], BoundedCache[str, tuple[str, ...]]] = {
    (robust, collection): BoundedCache(_NAMES_SIZE)
    for robust in (False, True)
    for collection in (False, True)
}
_NO_FILES: frozenset[str] = frozenset()
# A LeafFile made without the Python-level __new__ of a NamedTuple (a third of its cost:
# a diff of 100,000 leaves makes one per leaf and side)
_new_tuple = tuple.__new__


def _names(key: str, *, robust: bool, collection: bool) -> tuple[str, ...]:
    """``candidate_names``, cached; a leaf's names carry their ``.memmap`` suffix."""
    cache = _NAMES[robust, collection]
    found = cache.get(key)
    if found is None:
        names = candidate_names(key, robust=robust, collection=collection)
        found = tuple(names) if collection else tuple(name + ".memmap" for name in names)
        cache.put(key, found)
    return found


#: The ``type`` a TensorDict folder's entry records in its parent (None: none recorded);
#: a folder recorded as another (``NonTensorData``, a tensorclass...) goes to its node
#: without a look for a PlainFolder first.
_TENSORDICT_HINTS = (None, "TensorDict")

#: Leaves of a folder probed ahead at most (a folder with more is listed instead).
PROBED_LEAVES = 8


def collection_names(key: str, *, robust: bool) -> tuple[str, ...]:
    """The folder names a collection entry ``key`` is looked for under, in order."""
    return _NAMES[robust, True].get(key) or _names(key, robust=robust, collection=True)


def leaf_names(key: str, *, robust: bool) -> tuple[str, ...]:
    """The file names (``.memmap``) a leaf ``key`` is looked for under, in order."""
    return _NAMES[robust, False].get(key) or _names(key, robust=robust, collection=False)


def leaf_files(store: Store, dirkey: str, key: str, *, robust: bool) -> tuple[str | None, str]:
    """Find a leaf's ``.memmap`` file: ``(store key or None, the name tried first)``."""
    names = _names(key, robust=robust, collection=False)
    for name in names:
        candidate = join_key(dirkey, name)
        if _exists(store.is_file, candidate):
            return candidate, candidate
    first = join_key(dirkey, names[0] if names else key + ".memmap")
    return None, first


def collection_dir(
    store: Store, dirkey: str, key: str, *, robust: bool, dirs: Collection[str] = _NO_FILES
) -> str | None:
    """Find a collection's folder (robust name first, then the safe legacy name); a name
    among ``dirs`` (the folder's plain sub-directories, when known) needs no probe. A
    name the store refuses (``a/./b``, ``..``) counts as absent."""
    prefix = dirkey + "/" if dirkey else ""
    is_dir = store.is_dir
    for name in collection_names(key, robust=robust):
        candidate = prefix + name
        if name in dirs:
            return candidate
        try:
            if is_dir(candidate):
                return candidate
        except UnsafeCheckpointError:
            pass
    return None


def _exists(probe: Callable[[str], bool], key: str) -> bool:
    """A probe that treats a name the store refuses (``a/./b``, ``..``) as absent."""
    try:
        return probe(key)
    except UnsafeCheckpointError:
        return False


def _plain_leaf_file(
    is_file: Callable[[str], bool], files: Collection[str], prefix: str, names: tuple[str, ...]
) -> str | None:
    """The store key of the first candidate name that exists: looked up in the folder's
    listing (``files``) first, then asked of the store; a refused name counts as absent."""
    for name in names:
        if name in files or _exists(is_file, prefix + name):
            return prefix + name
    return None


def _folder_facts(
    store: Store, dirkey: str, robust: bool, wanted: int
) -> tuple[
    Callable[[str], bool], Collection[str], Collection[str], str, dict[str, tuple[str, ...]]
]:
    """What a walk of a TensorDict folder's entries needs: the store's file test, the
    folder's listed files and sub-folders (``wanted``, the number of entries, lets the
    store probe a few names rather than list), the key prefix of its entries, and the
    cache of leaf file names for ``robust``."""
    files, dirs = store.plain_entries(dirkey, wanted)
    return (
        store.is_file,
        files or _NO_FILES,
        dirs or _NO_FILES,
        dirkey + "/" if dirkey else "",
        _NAMES[robust, False],
    )


@overload
def tensordict_children(
    store: Store,
    path: NestedPath,
    dirkey: str,
    meta: TensorDictNode,
    make: MakeCollection,
    *,
    robust: bool,
    files_only: Literal[False] = False,
) -> Iterator[Node]: ...
@overload
def tensordict_children(
    store: Store,
    path: NestedPath,
    dirkey: str,
    meta: TensorDictNode,
    make: MakeCollection,
    *,
    robust: bool,
    files_only: Literal[True],
    unprobed: bool = False,
    read: ReadMeta | None = None,
    read_folder: ReadFolder | None = None,
) -> Iterator[Node | LeafFile | PlainFolder]: ...
def tensordict_children(
    store: Store,
    path: NestedPath,
    dirkey: str,
    meta: TensorDictNode,
    make: MakeCollection,
    *,
    robust: bool,
    files_only: bool = False,
    unprobed: bool = False,
    read: ReadMeta | None = None,
    read_folder: ReadFolder | None = None,
) -> Iterator[Node | LeafFile | PlainFolder]:
    """Children of a TensorDict node in load order: leaves first, then collections.

    ``files_only``: a plain leaf whose file exists comes as a :class:`LeafFile` instead
    of a node (a loader needs nothing more). ``unprobed`` (with ``files_only``, for a
    store that :attr:`~tdview.storage.Store.maps_unprobed`): a plain leaf with one
    candidate name, in a folder not listed, comes as a :class:`LeafFile` without being
    looked for; its file may be absent, which mapping it tells. ``read`` (with
    ``files_only``: a checkpoint's ``read_meta``): a collection whose folder is found and
    holds a TensorDict node comes as a :class:`PlainFolder` (no node); any other (a
    missing folder, an unreadable ``meta.json``, another kind) as its node.
    ``read_folder`` (with ``read``: a checkpoint's ``read_folder``) tries the first name
    of a collection's folder in one call first, where the folder is not listed.
    """
    is_file, files, dirs, prefix, leaf_cache = _folder_facts(
        store, dirkey, robust, len(meta.entries)
    )
    unprobed = unprobed and files_only and files is _NO_FILES
    for record in meta.load_order:
        key = record.key
        if type(record) is LeafRecord and not record.is_nested:
            # the common leaf: its file found in the folder's listing, without a node check
            names = leaf_cache.get(key) or _names(key, robust=robust, collection=False)
            if unprobed and len(names) == 1:
                yield _new_tuple(LeafFile, (record, prefix + names[0]))
                continue
            file = _plain_leaf_file(is_file, files, prefix, names)
            if file is None:
                yield leaf_node(store, (*path, key), dirkey, record, robust=robust)
            elif files_only:
                yield _new_tuple(LeafFile, (record, file))  # LeafFile(record, file), faster
            else:
                yield Node((*path, key), LEAF, None, None, record, file)
        elif isinstance(record, LeafRecord):
            yield leaf_node(store, (*path, key), dirkey, record, robust=robust)
        elif isinstance(record, CollectionRecord):
            if read is not None and files_only and record.type_hint in _TENSORDICT_HINTS:
                if read_folder is not None and dirs is _NO_FILES:
                    # the common folder: probed and its meta.json read in one call
                    names = collection_names(key, robust=robust)
                    if names:
                        found = read_folder(prefix + names[0])
                        if type(found) is TensorDictNode:
                            # read inside the root: opened by name in a plain folder
                            yield _new_tuple(PlainFolder, (record, prefix + names[0], found, True))
                            continue
                folder = collection_dir(store, dirkey, key, robust=robust, dirs=dirs)
                if folder is not None:
                    try:
                        found = read(folder)
                    except (TDViewError, OSError):
                        found = None  # its node records the error (read again, cached)
                    if type(found) is TensorDictNode:
                        yield _new_tuple(PlainFolder, (record, folder, found, False))
                        continue
            yield collection_node(store, path, dirkey, record, make, robust, dirs)
    if meta.legacy_no_collection_records:
        yield from _listed_collections(store, path, dirkey, meta, make)


def tensordict_totals(
    store: Store,
    path: NestedPath,
    dirkey: str,
    meta: TensorDictNode,
    *,
    robust: bool,
) -> tuple[int, int, int, dict[str, int], list[Node | SubFolder]]:
    """What a rollup needs of a TensorDict folder, without building a node per child.

    Returns ``(bytes, numel, leaves, bytes per dtype)`` of its plain leaves whose file
    exists, then what is left to total, in load order: a node for each other leaf
    (nested, or with a missing file: its node carries the problem) and a
    :class:`SubFolder` for each collection.
    """
    is_file, files, dirs, prefix, leaf_cache = _folder_facts(
        store, dirkey, robust, len(meta.entries)
    )
    nbytes = numel = leaves = 0
    by_dtype: dict[str, int] = {}
    rest: list[Node | SubFolder] = []
    for record in meta.load_order:
        key = record.key
        if type(record) is LeafRecord:
            names = leaf_cache.get(key) or _names(key, robust=robust, collection=False)
            if not record.is_nested and _plain_leaf_file(is_file, files, prefix, names):
                dtype = record.dtype
                count = prod(record.shape)
                size = count * dtype.itemsize
                nbytes += size
                numel += count
                leaves += 1
                name = dtype.name
                by_dtype[name] = by_dtype.get(name, 0) + size
            else:
                rest.append(leaf_node(store, (*path, key), dirkey, record, robust=robust))
        else:
            rest.append(
                SubFolder(
                    (*path, key),
                    collection_dir(store, dirkey, key, robust=robust, dirs=dirs),
                    record.type_hint,
                )
            )
    return nbytes, numel, leaves, by_dtype, rest


def tensordict_child(
    store: Store,
    path: NestedPath,
    dirkey: str,
    meta: TensorDictNode,
    key: str,
    make: MakeCollection,
    *,
    robust: bool,
) -> Node | None:
    """The child ``key`` of a TensorDict node, without looking at its siblings (None if the
    node records no such entry)."""
    record = meta.entry(key)
    if record is None:
        return None
    if isinstance(record, LeafRecord):
        return leaf_node(store, path + (key,), dirkey, record, robust=robust)
    return collection_node(store, path, dirkey, record, make, robust)


def leaf_node(
    store: Store, path: NestedPath, dirkey: str, record: LeafRecord, *, robust: bool
) -> Node:
    """The node of the leaf ``record`` of folder ``dirkey``, at ``path``: its files looked
    for, their problems recorded."""
    file, tried = leaf_files(store, dirkey, record.key, robust=robust)
    node = Node(path=path, kind=LEAF, record=record, file=file)
    if record.is_nested:
        # the sizes file sits next to the data file; tensordict writes it even when every
        # element is empty, a case where it writes no data file
        stems = (
            [file]
            if file is not None
            else [
                join_key(dirkey, name)
                for name in _names(record.key, robust=robust, collection=False)
            ]
        )
        for stem in stems:
            sizes = stem[: -len(".memmap")] + ".shape.memmap"
            if _exists(store.is_file, sizes):
                node.sizes_file = sizes
                break
        if file is not None and node.sizes_file is None:
            sizes = file[: -len(".memmap")] + ".shape.memmap"
            node.problems.append(f"the sizes file {store.display(sizes)} of nested leaf is missing")
    if file is None and node.sizes_file is not None:
        node.problems.append(
            f"the file {store.display(tried)} is missing (tensordict writes "
            "none when every element of a nested tensor is empty)"
        )
    elif file is None and (record.is_nested or (record.numel or 0) > 0):
        node.problems.append(_absence(store, tried))
    return node


def collection_node(
    store: Store,
    path: NestedPath,
    dirkey: str,
    record: CollectionRecord,
    make: MakeCollection,
    robust: bool,
    dirs: Collection[str] = _NO_FILES,
) -> Node:
    """The node of a collection entry; when its folder is not found and the store refuses
    it (a symlink out of the checkpoint, a loop...), its problem says why."""
    key = record.key
    folder = collection_dir(store, dirkey, key, robust=robust, dirs=dirs)
    node = make((*path, key), folder, record.type_hint)
    names = _names(key, robust=robust, collection=True)
    if folder is None and names:
        tried = join_key(dirkey, names[0])
        reason = _refusal(store.list_dir, tried)
        if reason is not None:
            node.problems[:] = [
                Refusal(f"its folder {store.display(tried)} cannot be read: {reason}", reason.error)
            ]
    return node


def _absence(store: Store, key: str) -> str:
    """Why a leaf's file is not there: it is missing, or the store refuses it (a symlink
    out of the checkpoint, a FIFO or device...), with the store's reason."""
    reason = _refusal(store.entry, key)
    if reason is None:
        return f"the file {store.display(key)} is missing"
    return Refusal(f"the file {store.display(key)} cannot be read: {reason}", reason.error)


def _refusal(read: Callable[[str], object], key: str) -> Refusal | None:
    """The store's reason for refusing ``key`` when ``read(key)`` fails for another reason
    than its absence; None when it is absent (or reads fine)."""
    try:
        read(key)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (TDViewError, OSError) as exc:
        return Refusal(str(exc).rstrip("."), exc)
    return None


def _listed_collections(
    store: Store, path: NestedPath, dirkey: str, meta: TensorDictNode, make: MakeCollection
) -> Iterator[Node]:
    """0.3-era nodes: sub-folders with a ``meta.json`` are collections named by the folder."""
    recorded = {record.key for record in meta.entries}
    for name in store.list_dir(dirkey):
        folder = join_key(dirkey, name)
        if name not in recorded and store.is_file(join_key(folder, "meta.json")):
            yield make(path + (name,), folder, None)


def member_children(
    store: Store, path: NestedPath, dirkey: str, make: MakeCollection
) -> Iterator[Node]:
    """Members ``0/``, ``1/``... of a lazy stack, up to the first missing index."""
    i = 0
    while store.is_dir(join_key(dirkey, str(i))):
        yield make(path + (str(i),), join_key(dirkey, str(i)), None)
        i += 1


def member_child(
    store: Store,
    path: NestedPath,
    dirkey: str,
    key: str,
    make: MakeCollection,
    known: Collection[str] = (),
) -> Node | None:
    """Member ``key`` (``"0"``, ``"1"``...) of a lazy stack, if it is before the first gap.

    ``known``: members found before, whose folders (and those before them) need no check
    again, so that looking members up one after the other stays linear."""
    if not key.isdigit() or not key.isascii() or str(int(key)) != key:
        return None
    last = int(key)
    first = last
    while first > 0 and str(first - 1) not in known:
        first -= 1
    if not all(store.is_dir(join_key(dirkey, str(i))) for i in range(first, last + 1)):
        return None
    return make(path + (key,), join_key(dirkey, key), None)


def json_field_children(path: NestedPath, meta: TensorclassNode) -> Iterator[Node]:
    """A tensorclass's non-tensor fields kept in its own ``meta.json`` (older writers)."""
    for key, value in meta.non_tensor.items():
        yield Node(
            path=path + (key,),
            kind=NON_TENSOR,
            value=value,
            has_value=True,
            type_hint="NonTensorData",
        )


def has_members(meta: object) -> bool:
    return isinstance(meta, LazyStackNode) or (
        isinstance(meta, NonTensorStackNode) and meta.members_lazy
    )


def has_source(meta: object) -> bool:
    return isinstance(meta, (ViewNode, SubTensorDictNode))
