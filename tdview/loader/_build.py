"""Building the tensordict object of each node kind from the index.

Every node is rebuilt as tensordict's loader rebuilds it: the class is the saved one
(:mod:`._classes`), a TensorDict gets its leaves first and then its collections (the
index's load order), a tensorclass gets its fields from ``_tensordict/`` and its
non-tensor extras from JSON, ``json_types.json`` or (if allowed) ``other.pickle``, lazy
stacks and legacy views are rebuilt around their members or source.
"""

from __future__ import annotations

import copy
import sys
import warnings
from collections.abc import Iterable
from pathlib import Path
from types import FrameType
from typing import Any, cast

import torch
from tensordict import NonTensorData, TensorDict, is_tensor_collection, is_tensorclass
from tensordict.tensorclass import NonTensorDataBase

from ..errors import CheckpointFormatError, LimitExceededError, UnsafeCheckpointError
from ..format import NodeMeta, TensorclassNode, TensorDictNode, to_torch_index
from ..index import (
    LEAF,
    LeafFile,
    LoadItem,
    Node,
    PlainFolder,
    join_key,
    range_problem,
    refusal,
    show_path,
)
from . import _out
from ._classes import (
    LAZY_STACK,
    NON_TENSOR_STACK,
    SUB,
    TENSORCLASS,
    TENSORDICT,
    VIEW,
    loader_kind,
    resolve_class,
    saved_as_tensordict,
)
from ._context import LoadContext, child_path, user_stacklevel
from ._leaves import file_leaf_tensor, leaf_tensor
from ._pickles import non_tensor_extras
from ._stacks import stack_values

__all__ = ["build", "depth_room", "node_meta"]

_SCALARS = (str, int, float, bool, type(None))
_NON_TENSOR_KEYS = {"data", "_metadata", "_is_non_tensor"}
#: Python frames each level of nesting takes in :func:`build` (a TensorDict in a
#: TensorDict: ``build``, ``_tensordict``), and frames kept free for what a level calls.
FRAMES_PER_LEVEL, SPARE_FRAMES = 2, 60


def depth_room() -> int:
    """How many tensordicts deep one load may build from here: what Python's recursion
    limit leaves above the caller's frames (about 470 with the default limit, as deep as
    tensordict's own loader goes; more after ``sys.setrecursionlimit``)."""
    frame: FrameType | None = sys._getframe()
    used = 0
    while frame is not None:
        frame, used = frame.f_back, used + 1
    return max(1, (sys.getrecursionlimit() - used - SPARE_FRAMES) // FRAMES_PER_LEVEL)


def node_meta(ctx: LoadContext, node: Node) -> NodeMeta:
    """The parsed ``meta.json`` of a collection node; raises what reading it raised."""
    if node.meta is not None:
        return node.meta
    if node.dirkey is None:
        raise FileNotFoundError(
            f"{ctx.ckpt.path}: the folder of {show_path(node.path)!r} is missing"
        )
    return ctx.ckpt.read_meta(node.dirkey)  # re-raises the error the index recorded


def build(
    ctx: LoadContext,
    node: Node,
    device: torch.device | None,
    out: Any = None,
    children: Iterable[LoadItem | PlainFolder] | None = None,
    path: tuple[str, ...] | None = None,
    parent: Any = None,
) -> Any:
    """Rebuild the tensordict, tensorclass or stack that ``node`` holds.

    Parameters
    ----------
    ctx : LoadContext
    node : Node
        A collection node of the index.
    device : torch.device or None
    out : optional
        A tensor collection to load into (see :mod:`._out`).
    children : iterable of Node or LeafFile, optional
        The children of a TensorDict node when the index lists them elsewhere (the
        fields of a tensorclass are listed on the tensorclass node).
    path : nested key, optional
        With ``children``: the path they are below (the tensorclass's), which names a
        plain leaf given as a :class:`~tdview.index.LeafFile`.
    parent : TensorDict, optional
        The fresh TensorDict the result goes into: a ``NonTensorData`` saved without
        a batch size is then made with the parent's (what setting it would broadcast
        it to, without the copy that broadcast makes).

    Examples
    --------
    >>> build(ctx, ckpt.root, None)                                  # doctest: +SKIP
    TensorDict(...)
    """
    if ctx.depth >= ctx.max_depth:
        raise _too_deep(ctx, node.dirkey)
    ctx.depth += 1  # counted here, not in a wrapper: one frame less per level
    try:
        meta = node_meta(ctx, node)
        if saved_as_tensordict(meta):
            assert isinstance(meta, TensorDictNode)
            if (
                children is None
                and out is None
                and node.dirkey is not None
                and node.children_cache is None  # else its nodes are at hand
                and ctx.walks
            ):
                from . import _walk  # _walk builds on this module

                walked = _walk.walk_tensordict(ctx, node.path, node.dirkey, meta, device)
                if walked is not NOT_WALKED:
                    return walked
            items = _items(ctx, node) if children is None else children
            return _tensordict(
                ctx, node.path if path is None else path, node.dirkey, meta, TensorDict,
                device, out, items,
            )  # fmt: skip
        where = ctx.store.display(node.dirkey or "")
        cls = resolve_class(meta, where)
        kind, wrap = loader_kind(cls, meta, where)
        if kind == TENSORDICT:
            assert isinstance(meta, TensorDictNode)
            items = _items(ctx, node) if children is None else children
            result = _tensordict(
                ctx, node.path if path is None else path, node.dirkey, meta, cls, device, out,
                items,
            )  # fmt: skip
            return result if wrap is None else wrap(result)
        if kind == TENSORCLASS:
            return _tensorclass(ctx, node, meta, cls, device, out, parent)
        return _BUILDERS[kind](ctx, node, meta, cls, device, out)
    finally:
        ctx.depth -= 1


def _too_deep(ctx: LoadContext, dirkey: str | None) -> LimitExceededError:
    return LimitExceededError(
        f"{ctx.store.display(dirkey or '')}: nested more than {ctx.max_depth} "
        "tensordicts deep below the one being loaded, more than Python's recursion limit "
        f"({sys.getrecursionlimit()}) leaves room for. Load a deeper part with subpath= "
        "(or raise the limit with sys.setrecursionlimit); the index and the viewer show "
        "trees of any depth."
    )


def _items(ctx: LoadContext, node: Node) -> Iterable[LoadItem | PlainFolder]:
    """A TensorDict node's children as the loader takes them: sub-folders holding a
    TensorDict as :class:`~tdview.index.PlainFolder` where nothing is loaded into."""
    return ctx.index.load_items(node, unprobed=ctx.maps_files, folders=True)


#: What the walk through descriptors (:mod:`._walk`) gives for a folder, or a step of it
#: for a child, that it does not take (the general way takes it).
NOT_WALKED: Any = object()


def _new_tensordict(
    ctx: LoadContext, cls: type, meta: TensorDictNode, device: torch.device | None
) -> Any:
    if device is None and meta.device is not None:
        device = ctx.device(meta.device)
    if cls is TensorDict:
        # skips the checks of __init__, which has nothing to check on an empty dict
        result = TensorDict._new_unsafe(batch_size=torch.Size(meta.batch_size), device=device)
    elif issubclass(cls, TensorDict):
        result = cls({}, batch_size=meta.batch_size, device=device)
    else:  # TensorDictParams, PersistentTensorDict, stores...: saved as plain TensorDicts
        result = TensorDict._new_unsafe(batch_size=torch.Size(meta.batch_size), device=device)
    if meta.names is not None:
        result._set_names(list(meta.names))  # type: ignore[arg-type]
    return result


def _tensordict(
    ctx: LoadContext,
    parent: tuple[str, ...],
    dirkey: str | None,
    meta: TensorDictNode,
    cls: type,
    device: torch.device | None,
    out: Any,
    items: Iterable[LoadItem | PlainFolder],
    prefix: Path | None = None,
    inside: bool = False,
) -> Any:
    """The TensorDict of folder ``dirkey`` whose children ``items`` are below the nested
    key ``parent`` (a tensorclass's, for its fields); ``prefix``: the folder's path, when
    the caller made it (see ``_memmap_prefix`` below); ``inside``: its ``meta.json`` is
    known to be read from inside the root (:attr:`~tdview.index.PlainFolder.inside`)."""
    if out is not None:
        if is_tensorclass(out):
            out = out._tensordict  # a TensorDict save loads into a tensorclass's fields
        device = _out.out_device(out, device)
        result = out
    else:
        result = _new_tensordict(ctx, cls, meta, device)
    # A fresh exact TensorDict takes its leaves straight into its dict (what _set_str
    # does once it skips validation, which tensordict's loader also skips for leaves).
    direct = result._tensordict if out is None and type(result) is TensorDict else None
    loaded: set[str] = set()
    tensor: torch.Tensor | None
    own = None  # this folder's path, made for the first sub-folder built here
    for child in items:
        if type(child) is LeafFile:  # a plain leaf with its file, no node
            record, file = child
            key = record.key
            try:
                tensor = file_leaf_tensor(ctx, record, file, device, parent)
            except (FileNotFoundError, UnsafeCheckpointError):
                if not ctx.maps_files:
                    raise
                # given unprobed (see LoadAccess.load_items), and absent or refused: what
                # its node gives (left out with a warning, or the refusal, with its reason)
                leaf = ctx.index.leaf_node((*parent, key), file.rpartition("/")[0], record)
                tensor = leaf_tensor(ctx, leaf, device)
                if tensor is None:
                    continue
        elif type(child) is PlainFolder:
            key = child.record.key
            if out is None and saved_as_tensordict(child.meta):
                # a TensorDict folder: built without a node, as build builds one
                if ctx.depth >= ctx.max_depth:
                    raise _too_deep(ctx, child.dirkey)
                path, sub, sub_meta = (*parent, key), child.dirkey, child.meta
                if ctx.keeps_prefix and own is None:
                    own = ctx.prefix_path(dirkey or "") if prefix is None else prefix
                ctx.depth += 1
                try:
                    place = None if own is None else child_path(own, sub.rpartition("/")[2])
                    value = NOT_WALKED
                    if ctx.walks:
                        from ._walk import walk_tensordict  # as in build

                        value = walk_tensordict(
                            ctx, path, sub, sub_meta, device, place, child.inside
                        )
                    if value is NOT_WALKED:
                        value = _tensordict(
                            ctx, path, sub, sub_meta, TensorDict, device, None,
                            ctx.index.folder_items(path, sub, sub_meta, unprobed=ctx.maps_files),
                            place, child.inside,
                        )  # fmt: skip
                finally:
                    ctx.depth -= 1
                if direct is not None and _fits_as_saved(meta, sub_meta, device):
                    direct[key] = value  # what _set_str does with a value that fits
                else:
                    _set_collection(ctx, result, key, value, meta, parent, sub)
            else:  # another class, or loaded into: its node takes the general path
                folder = ctx.index.make_collection(
                    (*parent, key), child.dirkey, child.record.type_hint
                )
                if not _load_collection(ctx, result, out, parent, meta, folder, device):
                    continue
            loaded.add(key)
            continue
        else:
            node = cast(Node, child)
            key = node.path[-1]
            if node.kind != LEAF:
                if _load_collection(ctx, result, out, parent, meta, node, device):
                    loaded.add(key)
                continue
            tensor = leaf_tensor(ctx, node, device)
            if tensor is None:
                continue
        if direct is not None:
            direct[key] = tensor
        else:
            result._set_str(key, tensor, validated=True, inplace=False)
        loaded.add(key)
        if ctx.progress is not None:
            ctx.progress((*parent, key))
    if out is not None:
        _out.delete_stale(result, loaded)
    if ctx.keeps_prefix and (inside or ctx.store.link(join_key(dirkey or "", "meta.json")) is None):
        # where memmap_() writes back, as tensordict records it; not a folder whose
        # meta.json is a symlink out of the root (memmap_ would write through it)
        if own is None:
            own = ctx.prefix_path(dirkey or "") if prefix is None else prefix
        result._memmap_prefix = own
    else:
        result._memmap_prefix = None
    return result


def _load_collection(
    ctx: LoadContext,
    result: Any,
    out: Any,
    parent: tuple[str, ...],
    meta: TensorDictNode,
    child: Node,
    device: torch.device | None,
) -> bool:
    """Build the collection node ``child`` into ``result``; False when it is left out (a
    missing folder, an unrecorded one)."""
    if not _wanted(ctx, parent, meta, child):
        return False
    key = child.path[-1]
    existing = _out.reusable(result, key) if out is not None else None
    value = build(ctx, child, device, existing, parent=result if out is None else None)
    if value is not existing:
        _set_collection(ctx, result, key, value, meta, parent, child.dirkey)
    return True


def _set_collection(
    ctx: LoadContext,
    result: Any,
    key: str,
    value: Any,
    meta: TensorDictNode,
    parent: tuple[str, ...],
    dirkey: str | None,
) -> None:
    """Set a built collection into ``result``; validated (the batch size checked,
    NonTensorData broadcast, devices moved) unless it fits as it is."""
    try:
        result._set_str(key, value, validated=_fits(result, value), inplace=False)
    except (RuntimeError, ValueError) as error:
        raise CheckpointFormatError(
            f"{ctx.store.display(dirkey or '')}: {show_path((*parent, key))!r} "
            f"does not fit in its parent {show_path(parent)!r} (batch size "
            f"{list(meta.batch_size)}): {error}"
        ) from None


def _fits_as_saved(
    meta: TensorDictNode, sub_meta: TensorDictNode, device: torch.device | None
) -> bool:
    """:func:`_fits` told from the two ``meta.json`` of a fresh TensorDict and a fresh
    TensorDict child: the same batch size, no dim names, and the same device (the load's,
    or the same saved one)."""
    return (
        sub_meta.batch_size == meta.batch_size
        and meta.names is None
        and sub_meta.names is None
        and (device is not None or meta.device is None or sub_meta.device == meta.device)
    )


def _fits(result: Any, value: Any) -> bool:
    """Whether ``value``, a tensor collection, goes into the fresh ``result`` as it is:
    the same batch size and device, and no dim names on either (what tensordict's
    validation of a set checks, and then leaves the value untouched)."""
    return (
        value.batch_size == result.batch_size
        and (result.device is None or value.device == result.device)
        and not result._has_names()
        and not value._has_names()
    )


def _wanted(ctx: LoadContext, parent: tuple[str, ...], meta: TensorDictNode, child: Node) -> bool:
    """Whether a collection child is loaded: missing folders and unrecorded ones are not."""
    if meta.legacy_no_collection_records:
        # found by listing a 0.3-era node: tensordict 0.15 does not load it either
        warnings.warn(
            f"tdview left out {ctx.store.display(child.dirkey or '')}: the meta.json of "
            f"{show_path(parent)!r} does not name it (a tensordict 0.3 layout), and "
            "tensordict 0.15 does not load it either.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        return False
    if child.dirkey is None:
        refused = refusal(child)
        if refused is not None:  # never left out: an error, as for a leaf
            raise type(refused.error)(
                f"{show_path(child.path)!r} of {ctx.ckpt.path}: {refused}."
            ) from refused.error
        problem = "; ".join(child.problems) or "its folder is missing"
        # tensordict leaves out a missing folder too (a refused one was raised above)
        also = " (tensordict also leaves it out)" if problem.endswith("is missing") else ""
        warnings.warn(
            f"tdview left out {show_path(child.path)!r} of {ctx.ckpt.path}: {problem}{also}.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        return False
    return True


def _copy_values(fields: dict) -> dict:
    """A copy of JSON fields that shares nothing mutable with the index's cache."""
    if all(type(value) in _SCALARS for value in fields.values()):
        return dict(fields)
    return copy.deepcopy(fields)


def _tensorclass(
    ctx: LoadContext,
    node: Node,
    meta: Any,
    cls: type,
    device: torch.device | None,
    out: Any,
    parent: Any = None,
) -> Any:
    non_tensor = _copy_values(meta.non_tensor)
    extras = non_tensor_extras(ctx.store, node.dirkey or "", ctx.allow_pickle)
    if extras is not None:
        non_tensor.update(extras)
    held = ctx.store.held_value(node.dirkey or "") if "data" in non_tensor else None
    if held is not None:  # a value of the format's own types (numpy's, of an HDF5 file)
        non_tensor["data"] = held[0]
    tc_out, td_out = _out.tensorclass_out(out, cls)
    inner = ctx.index.inner(node)
    if inner is not None:
        td = build(ctx, inner, device, td_out, _field_nodes(ctx, node, inner), node.path)
    elif issubclass(cls, NonTensorDataBase):
        if tc_out is not None:
            td = tc_out._tensordict
        elif parent is not None and not parent._has_names() and _broadcast(cls, non_tensor, parent):
            # made as setting it into the parent makes it: on the parent's device and,
            # broadcast, with its batch size (see _broadcast), without that set's copy
            td = TensorDict._new_unsafe(
                batch_size=parent.batch_size,
                device="cpu" if parent.device is None else parent.device,
            )
        else:  # alone: no batch size, but an HDF5 or zarr group's (Store.values_batched)
            batch = ctx.ckpt.batch_size(node) if parent is None and ctx.store.values_batched else ()
            td = TensorDict(batch_size=batch or (), device="cpu")
    else:
        raise ValueError(
            f"The _tensordict directory seems to be missing: {ctx.store.display(node.dirkey or '')}"
            f" holds a {cls.__qualname__} without its _tensordict folder."
        )
    result = cls._from_tensordict(td, non_tensor, rebuild=False)  # type: ignore[attr-defined]
    if tc_out is None:
        return result
    tc_out._non_tensordict.clear()
    tc_out._non_tensordict.update(result._non_tensordict)
    return tc_out


def _broadcast(cls: type, non_tensor: dict, parent: Any) -> bool:
    """Whether a ``NonTensorData`` saved without a batch size can be made as setting it
    into ``parent`` leaves it. Moved to the parent's device only (no batch dims) it
    keeps its fields. Broadcast to a batch size, tensordict makes a new
    ``NonTensorData(data=...)``: its ``_metadata`` is dropped, which ``non_tensor`` is
    made to say; a ``data`` that the constructor would treat as a field of tensors, or
    a subclass, takes the set's own broadcast."""
    if not parent.batch_size:
        return True
    if cls is not NonTensorData or non_tensor.keys() != _NON_TENSOR_KEYS:
        return False
    data = non_tensor["data"]
    if isinstance(data, torch.Tensor) or is_tensor_collection(data):
        return False
    non_tensor.clear()
    non_tensor.update(data=data, _metadata=None, _is_non_tensor=True)
    return True


def _field_nodes(
    ctx: LoadContext, node: Node, inner: Node
) -> Iterable[LoadItem | PlainFolder] | None:
    """The index lists a tensorclass's fields on the tensorclass node (same nodes, same
    caches): those, without the JSON fields of its own meta.json; where the index has
    not listed them yet, its load items (:meth:`~tdview.index.LoadAccess.load_fields`:
    no node per plain leaf)."""
    if not isinstance(node.meta, TensorclassNode) or not isinstance(inner.meta, TensorDictNode):
        return None
    items = ctx.index.load_fields(node, unprobed=ctx.maps_files, folders=True)
    if items is not None:
        return items
    return [c for c in ctx.ckpt.children(node) if not (c.has_value and c.dirkey is None)]


def _source(ctx: LoadContext, node: Node) -> Node:
    children = ctx.ckpt.children(node)
    source = children[0] if children else None
    if source is None or source.dirkey is None:
        raise FileNotFoundError(
            f"{ctx.store.display(node.dirkey or '')}: the _source folder of the view "
            f"{show_path(node.path)!r} is missing"
        )
    return source


def _view(
    ctx: LoadContext, node: Node, meta: Any, cls: type, device: torch.device | None, out: Any
) -> Any:
    _check_ranges(ctx, node)
    source = build(ctx, _source(ctx, node), device, out)
    return cls(
        source,
        custom_op=meta.custom_op,
        inv_op=meta.inv_op,
        custom_op_kwargs=_as_saved(meta.custom_op_kwargs),
        inv_op_kwargs=_as_saved(meta.inv_op_kwargs),
    )


def _as_saved(kwargs: dict) -> dict:
    """View kwargs with lists where the JSON had them (the format layer made tuples)."""
    return {
        key: list(value) if isinstance(value, tuple) else value for key, value in kwargs.items()
    }


def _check_ranges(ctx: LoadContext, node: Node) -> None:
    """Raise what the index finds wrong with a stack's, view's or sub-tensordict's numbers
    against its members' or source's batch dims (before tensordict ends in an
    ``OverflowError`` or ``IndexError`` that names no file)."""
    problem = range_problem(ctx.ckpt, node)
    if problem is not None:
        raise CheckpointFormatError(problem)


def _sub(
    ctx: LoadContext, node: Node, meta: Any, cls: type, device: torch.device | None, out: Any
) -> Any:
    _check_ranges(ctx, node)
    index = to_torch_index(meta.index)
    if out is not None:
        build(ctx, _source(ctx, node), device, _out.sub_out(out))
        return out
    return cls(build(ctx, _source(ctx, node), device), index)


def _lazy_stack(
    ctx: LoadContext, node: Node, meta: Any, cls: type, device: torch.device | None, out: Any
) -> Any:
    members = ctx.ckpt.children(node)
    _check_ranges(ctx, node)
    outs = _out.member_outs(out, meta.stack_dim, len(members))
    stacked = [
        build(ctx, member, device, member_out)
        for member, member_out in zip(members, outs, strict=True)
    ]
    result = cls(*stacked, stack_dim=meta.stack_dim)
    if meta.stack_dim_name is not None:
        result._td_dim_name = meta.stack_dim_name
    return result


def _non_tensor_stack(
    ctx: LoadContext, node: Node, meta: Any, cls: type, device: torch.device | None, out: Any
) -> Any:
    if getattr(meta, "members_lazy", True):
        return _lazy_stack(ctx, node, meta, cls, device, out)
    return stack_values(ctx, node, meta)


_BUILDERS = {
    TENSORCLASS: _tensorclass,
    LAZY_STACK: _lazy_stack,
    NON_TENSOR_STACK: _non_tensor_stack,
    VIEW: _view,
    SUB: _sub,
}
