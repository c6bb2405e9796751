"""The one way from a load's ``subpath`` to the node it reads, for a subtree and a leaf.

``tdview.load_memmap(subpath=)``, ``Checkpoint.load`` and ``Checkpoint.load_leaf`` all
come here (a folder of checkpoints first routes the path into its member:
``Collection.locate``). Spelling a path is :mod:`._paths`' job; finding a key in a
store is the store's.
"""

from __future__ import annotations

from ..errors import SubpathError, TDViewError
from ..format import (
    MAX_META_BYTES,
    CollectionRecord,
    NodeMeta,
    TensorDictNode,
    ancestor_entry,
    decode_name,
    encode_key,
    is_safe_legacy_key,
    parse_meta_json,
)
from . import _children as ch
from ._node import Node
from ._paths import NestedPath, join_key, normalize_subpath, show_path
from ._tree import Tree, load_access


def resolve_subpath(ckpt: Tree, subpath: object, *, leaf: bool = False) -> Node:
    """The node a load of ``subpath`` reads: the collection node it names (the root for
    None), or with ``leaf`` the tensor leaf it names (``Checkpoint.load_leaf``).

    Raises
    ------
    ValueError
        A malformed subpath (``SubpathError``, a ValueError, when it names no saved
        tensordict: a missing key, a leaf, an element of a non-tensor stack...; for a
        leaf: no node, or not a tensor leaf).

    Examples
    --------
    >>> resolve_subpath(Checkpoint("ckpt"), ("model", "0")).path     # doctest: +SKIP
    ('model', '0')
    >>> resolve_subpath(Checkpoint("ckpt"), "model/0/weight")        # doctest: +SKIP
    Traceback (most recent call last):
    SubpathError: No tensordict found under subpath 'model/0/weight' (it is a tensor leaf...
    """
    if leaf:
        return _leaf(ckpt, subpath)
    if subpath is None:
        return ckpt.root
    path = normalize_subpath(subpath)
    # the common path first: recorded collections all the way, each ancestor read for
    # the one entry it is passed by; any other step is looked at (and told) below
    node = _descend(ckpt, path) if path else None
    steps = () if node is not None else path
    node = node or ckpt.root
    for depth, part in enumerate(steps):
        found = (
            None
            if node.is_leaf
            else (_lookup(ckpt, node, part) or _by_folder_name(ckpt, node, part))
        )
        if found is None:
            raise _no_tensordict(
                path,
                f"{show_path(path[:depth])!r} has no entry {part!r}"
                + _unrecorded_folder(ckpt, node, part),
            )
        node = found
    if node.is_leaf:
        raise _no_tensordict(
            path, "it is a tensor leaf, not a tensordict (Checkpoint.load_leaf loads one leaf)"
        )
    if node.dirkey is None:
        raise _no_tensordict(path, "; ".join(node.problems) or "it has no folder")
    if node.meta is None and not ckpt.store.is_file(join_key(node.dirkey, "meta.json")):
        raise _no_tensordict(path, f"missing meta.json in {ckpt.store.display(node.dirkey)}")
    return node


def _lookup(ckpt: Tree, node: Node, key: str) -> Node | None:
    if (
        node.meta is None
        and node.dirkey is not None
        and ckpt.store.is_file(join_key(node.dirkey, "meta.json"))
    ):
        ckpt.read_meta(node.dirkey)  # a broken step: raise its own error
    return ckpt.lookup(node, key)


def _by_folder_name(ckpt: Tree, node: Node, name: str) -> Node | None:
    """The child tensordict whose folder is ``name``, an encoded key as the folder shows
    on disk (``"sp%20ace"`` for ``"sp ace"``): tensordict's fallback to raw names finds
    that folder too."""
    if not ckpt.robust or not is_safe_legacy_key(name, collection=True):
        return None
    key = decode_name(name)
    if key == name or encode_key(key) != name:
        return None
    child = _lookup(ckpt, node, key)
    if child is None or child.is_leaf or child.dirkey is None:
        return None
    return child if child.dirkey.rpartition("/")[2] == name else None


def _unrecorded_folder(ckpt: Tree, node: Node, key: str) -> str:
    """A hint when a folder of ``key`` exists that the parent's ``meta.json`` does not
    record (tensordict's loader, which goes by folders, would load it)."""
    if node.is_leaf or node.dirkey is None:
        return ""
    for name in (encode_key(key), key):
        folder = join_key(node.dirkey, name)
        try:
            if is_safe_legacy_key(name, collection=True) and ckpt.store.is_file(
                join_key(folder, "meta.json")
            ):
                return (
                    f"; the folder {ckpt.store.display(folder)} exists, but the "
                    "saved tensordict does not record it: it was left by an earlier "
                    "save, or its key is also a field name of meta.json"
                )
        except (OSError, TDViewError):
            pass
    return ""


def _no_tensordict(path: tuple[str, ...], why: str) -> SubpathError:
    return SubpathError(f"No tensordict found under subpath {'/'.join(path)!r} ({why}).")


def _leaf(ckpt: Tree, subpath: object) -> Node:
    node = ckpt.node(subpath)
    if not node.is_leaf:
        raise SubpathError(
            f"{show_path(node.path)!r} in {ckpt.path} is a {node.kind}, not a tensor leaf."
        )
    return node


def _descend(ckpt: Tree, path: NestedPath) -> Node | None:
    """The collection node at ``path`` (not empty) when each step is a collection
    recorded by a TensorDict: of each folder on the way, only the entry of the next
    step is read from its decoded ``meta.json`` (see
    :func:`~tdview.format.ancestor_entry`), so the cost does not grow with the width
    of the ancestors; the node reached is read in full. None when a step is anything
    else (a leaf, no entry, a tensorclass, a folder not found, a ``meta.json`` that
    does not read): ``lookup`` then says why. Nothing on the way is cached as a
    node."""
    root = ckpt.root
    if root.children_cache is not None or root.lookup_cache:
        return None  # a tree looked into answers with its nodes (and their problems)
    meta: NodeMeta | dict | None = root.meta
    dirkey = ""
    last = len(path) - 1
    for depth, key in enumerate(path):
        if type(meta) is TensorDictNode:
            record = meta.entry(key)
        elif isinstance(meta, dict):
            try:
                record = ancestor_entry(
                    meta, key, ckpt.store.display(join_key(dirkey, "meta.json"))
                )
            except TDViewError:
                return None
        else:
            return None
        if type(record) is not CollectionRecord:
            return None
        folder = ch.collection_dir(ckpt.store, dirkey, key, robust=ckpt.robust)
        if folder is None:
            return None
        if depth == last:
            return load_access(ckpt).make_collection(path, folder, record.type_hint)
        meta, dirkey = _passing_meta(ckpt, folder), folder
    return None


def _passing_meta(ckpt: Tree, dirkey: str) -> NodeMeta | dict | None:
    """The parsed ``meta.json`` of a folder when it is read already, else its decoded
    JSON (cached; the bounds of :func:`~tdview.format.parse_meta_json` hold); None
    when it does not read."""
    found = ckpt._metas.get(dirkey)
    if found is not None:
        return None if isinstance(found, Exception) else found
    passed = load_access(ckpt).passed
    decoded = passed.get(dirkey)
    if decoded is None:
        key = join_key(dirkey, "meta.json")
        try:
            data = ckpt.store.read_bytes(key, MAX_META_BYTES)
            ckpt.meta_bytes_read += len(data)
            decoded = parse_meta_json(data, ckpt.store.display(key))
        except (TDViewError, OSError):
            return None
        passed.put(dirkey, decoded)
    return decoded
