"""Loading plain TensorDict folders through descriptors, folder by folder.

The common checkpoint is a tree of plain TensorDict folders (a model saved with one
folder per module: about one leaf and one ``meta.json`` per folder). Its load is a walk
whose every step is one system call on the folder held open
(:class:`~tdview.storage.FolderWalk`): a sub-folder opened by name, its ``meta.json``
read, each leaf opened (and mapped) or, for shapes only, ``fstatat``'d. No key is
probed, no node is made, and nothing on the way is followed.

Anything else goes the general way, child by child: a name the walk does not take (a
symlink, an absent file, an odd name, a file too short: the store then says why, and
a missing leaf is left out with its warning), a nested leaf, another kind of folder (a
tensorclass, a stack, a folder that does not parse). A folder of many leaves in a
shapes-only load (more than :data:`PROBED_NAMES`) is listed once by the store instead,
which costs less than a ``stat`` per leaf.
"""

from __future__ import annotations

import os
from math import prod
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from ..format import MAX_META_BYTES, CollectionRecord, LeafRecord, TensorDictNode
from ..index import collection_names, join_key, leaf_names
from ..storage import FolderWalk
from ._build import (
    NOT_WALKED,
    _fits_as_saved,
    _load_collection,
    _new_tensordict,
    _set_collection,
    _too_deep,
)
from ._classes import saved_as_tensordict
from ._context import LoadContext, child_path
from ._fdmap import map_descriptor
from ._leaves import _as_memmap, _dtype, leaf_tensor

__all__ = ["NOT_WALKED", "PROBED_NAMES", "walk_tensordict"]

#: Leaves of a folder a shapes-only load looks at one by one at most (a folder of more is
#: listed by the store: one ``getdents`` for all its names).
PROBED_NAMES = 8
_TENSORDICT_HINTS = (None, "TensorDict")
_Size = torch.Size
_empty = torch.empty


def _walks(ctx: LoadContext, meta: TensorDictNode) -> bool:
    """Whether the folder of ``meta`` is loaded by the walk (see the module), in a load
    that walks (``ctx.walks``)."""
    return (
        ctx.read_data or meta.leaf_count <= PROBED_NAMES
    ) and not meta.legacy_no_collection_records


def walk_tensordict(
    ctx: LoadContext,
    path: tuple[str, ...],
    dirkey: str,
    meta: TensorDictNode,
    device: torch.device | None,
    prefix: Path | None = None,
    inside: bool = False,
) -> Any:
    """The TensorDict of the plain folder ``dirkey`` at nested key ``path``, whose parsed
    ``meta.json`` is ``meta``, built by the walk in a load that walks (``ctx.walks``);
    ``NOT_WALKED`` where the walk does not take the folder or the store cannot hold it
    open (the caller takes the general way). ``prefix``: the folder's path when the
    caller made it; ``inside``: its ``meta.json`` is known to be read from inside the
    root (else the store is asked)."""
    if not _walks(ctx, meta):
        return NOT_WALKED
    opened = ctx.store.folder_walk(dirkey)
    if opened is None:
        return NOT_WALKED
    walk, fd = opened
    try:
        if ctx.keeps_prefix and prefix is None:
            prefix = ctx.prefix_path(dirkey)
        result = _folder(ctx, walk, fd, path, dirkey, meta, device, prefix)
    finally:
        os.close(fd)
    if not inside and ctx.store.link(join_key(dirkey, "meta.json")):
        # its meta.json is a link out of the root: memmap_ writes none through it (its
        # sub-folders, reached inside the root, keep theirs)
        result._memmap_prefix = None
    return result


def _folder(
    ctx: LoadContext,
    walk: FolderWalk,
    fd: int,
    path: tuple[str, ...],
    dirkey: str,
    meta: TensorDictNode,
    device: torch.device | None,
    prefix: Path | None,
) -> Any:
    """The TensorDict of the folder open at ``fd`` (see :func:`walk_tensordict`)."""
    result = _new_tensordict(ctx, TensorDict, meta, device)
    entries = result._tensordict  # a fresh TensorDict: what _set_str does for a leaf
    index = ctx.index
    robust = ctx.ckpt.robust
    progress = ctx.progress
    keys = dirkey + "/" if dirkey else ""
    for record in meta.load_order:
        key = record.key
        if type(record) is LeafRecord:
            tensor = NOT_WALKED
            if not record.is_nested:
                names = leaf_names(key, robust=robust)
                if names:
                    tensor = _leaf(ctx, walk, fd, path, record, names[0], keys, device)
            if tensor is NOT_WALKED:  # the general way: found by key, or left out
                node = index.leaf_node((*path, key), dirkey, record)
                tensor = leaf_tensor(ctx, node, device)
                if tensor is None:
                    continue
            entries[key] = tensor
            if progress is not None:
                progress((*path, key))
            continue
        assert isinstance(record, CollectionRecord)
        built = NOT_WALKED
        if record.type_hint in _TENSORDICT_HINTS:
            names = collection_names(key, robust=robust)
            if names:
                built = _sub_folder(
                    ctx, walk, fd, (*path, key), keys + names[0], names[0], device, prefix
                )
        if built is NOT_WALKED:  # the general way: its node
            node = index.collection_node(path, dirkey, record)
            _load_collection(ctx, result, None, path, meta, node, device)
            continue
        value, sub_meta = built
        if _fits_as_saved(meta, sub_meta, device):
            entries[key] = value  # what _set_str does with a value that fits
        else:
            _set_collection(ctx, result, key, value, meta, path, keys + names[0])
    result._memmap_prefix = prefix
    return result


def _sub_folder(
    ctx: LoadContext,
    walk: FolderWalk,
    fd: int,
    path: tuple[str, ...],
    dirkey: str,
    name: str,
    device: torch.device | None,
    prefix: Path | None,
) -> Any:
    """``(TensorDict, its parsed meta.json)`` of sub-folder ``name`` of the folder open at
    ``fd``, when it is a plain folder whose ``meta.json`` parses as a TensorDict node;
    else ``NOT_WALKED``."""
    sub = walk.folder(fd, name)
    if sub < 0:
        return NOT_WALKED
    try:
        index = ctx.index
        meta = index.kept_meta(dirkey)  # parsed before (an index kept open), or an error
        if meta is None:
            data = walk.read_meta(sub, MAX_META_BYTES)
            if data is None:
                return NOT_WALKED
            meta = index.folder_meta(dirkey, data)
        if not (
            isinstance(meta, TensorDictNode) and saved_as_tensordict(meta) and _walks(ctx, meta)
        ):
            # another kind, many leaves for shapes only, or an error: its node takes it
            return NOT_WALKED
        if ctx.depth >= ctx.max_depth:
            raise _too_deep(ctx, dirkey)
        ctx.depth += 1
        try:
            value = _folder(
                ctx, walk, sub, path, dirkey, meta, device,
                None if prefix is None else child_path(prefix, name),
            )  # fmt: skip
        finally:
            ctx.depth -= 1
    finally:
        os.close(sub)
    return value, meta


def _leaf(
    ctx: LoadContext,
    walk: FolderWalk,
    fd: int,
    path: tuple[str, ...],
    record: LeafRecord,
    name: str,
    keys: str,
    device: torch.device | None,
) -> Any:
    """A plain leaf whose file is ``name`` in the folder open at ``fd`` (at nested key
    ``path``): mapped, or (no data read) an empty tensor of its shape once its file is
    found; ``NOT_WALKED`` where the general way must answer (absent, a symlink, too
    short). A dtype that cannot be loaded raises, naming the leaf, as it does there."""
    dtype = ctx.dtypes.get(record.dtype.name)
    if dtype is None:
        dtype = _dtype(ctx, (*path, record.key), record)
    shape = record.shape
    numel = prod(shape)
    if not ctx.read_data:
        if numel and walk.file_size(fd, name) < 0:
            return NOT_WALKED
        return _empty(size=shape, dtype=dtype, device=device)
    if not numel:
        return _empty(size=shape, dtype=dtype, device=device)
    opened = walk.open_leaf(fd, name, ctx.mode)
    if opened is None:
        return NOT_WALKED
    file, size, write = opened
    try:
        if size < numel * dtype.itemsize:
            return NOT_WALKED  # the general way raises, naming the file and both sizes
        flat = map_descriptor(file, dtype, numel, shared=write)
    finally:
        os.close(file)
    tensor = _as_memmap(
        flat.as_strided(shape, ctx.strides(shape)), ctx.file(keys + name), ctx.mode, _Size(shape)
    )
    return tensor if device is None else tensor.to(device, non_blocking=True)
