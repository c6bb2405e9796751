"""``tdview.load_memmap``: tensordict's ``load_memmap``, read by tdview's own code."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from .._gc import gc_paused
from ..errors import LimitExceededError, NotACheckpointError, NotACheckpointFolderError
from ..index import (
    Node,
    Tree,
    open_tree,
    resolve_subpath,
    show_path,
    walk,
)
from ._build import build, depth_room
from ._context import LoadContext, check_mode, check_usable
from ._index import apply_index, check_fits, check_index, fetch_rows
from ._leaves import leaf_tensor
from ._mapping import check_writable
from ._out import check_out
from ._pickles import check_allow_pickle
from ._prefetch import Prefetcher
from ._remote import check_remote_mode, fetch_subtree

__all__ = [
    "LoadRequest",
    "load_leaf",
    "load_path",
    "run",
]

_len_dispatch_stack = torch._C._len_torch_dispatch_stack


class _Options(NamedTuple):
    # the options of a load, with their defaults, written once (documented on LoadRequest)
    subpath: Any = None
    device: torch.device | None = None
    non_blocking: bool = False
    out: Any = None
    mode: str | None = None
    num_threads: int = 0
    allow_pickle: bool | None = None
    progress: Callable[[tuple[str, ...]], object] | None = None
    leaf: bool = False
    index: Any = None


class LoadRequest(_Options):
    """What one load is asked for, checked once, when it is made.

    Every entry point builds one (``tdview.load_memmap``, ``Checkpoint.load``,
    ``Checkpoint.load_leaf``, and so a folder of checkpoints, the widget and the protocol,
    which go through those) and hands it to :func:`run`. Frozen (a named tuple: made
    in a third of the time of a frozen dataclass, and every load makes one); a folder
    of checkpoints makes its member's with ``_replace``.

    Attributes
    ----------
    subpath : nested key, str or None
        As given (:func:`resolve_subpath` reads it; a leaf: ``Checkpoint.node``).
    device : torch.device or None
        Given as anything ``torch.device`` takes; a bad string fails when the request is
        made, before a checkpoint is opened. Whether this process can use it is checked
        by :func:`run` (the error names the checkpoint).
    non_blocking, out, mode, num_threads, allow_pickle
        As in :func:`tdview.load_memmap`.
    progress : callable, optional
        Called with the nested key (a tuple) of each leaf once it is loaded. An
        exception raised by it stops the load.
    leaf : bool
        Load the one tensor leaf at ``subpath`` (``Checkpoint.load_leaf``; only
        ``device`` and ``mode`` apply), not a tensordict.
    index : optional
        What ``td[index]`` takes on the batch dims: the load is ``load(...)[index]``,
        reading only the rows selected (:mod:`._index`).

    Raises
    ------
    ValueError
        ``mode`` is not None, ``"r"`` or ``"r+"``; ``num_threads`` is not a non-negative
        int.
    TypeError
        ``allow_pickle`` is not a bool or None; ``out`` is not a tensor collection;
        ``index`` is not what ``td[index]`` takes (a key, a float), or comes with ``out``.
    RuntimeError
        ``device`` is a string torch does not know.

    Examples
    --------
    >>> LoadRequest("model", device="cpu", mode="r").device
    device(type='cpu')
    >>> LoadRequest(mode="w")
    Traceback (most recent call last):
    ...
    ValueError: mode must be 'r', 'r+' or None, got 'w'.
    """

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> LoadRequest:
        request = _Options.__new__(cls, *args, **kwargs)
        check_mode(request.mode)
        check_allow_pickle(request.allow_pickle)
        check_out(request.out)
        if request.index is not None:
            check_index(request.index)
            if request.out is not None:
                raise TypeError("index= and out= cannot be combined: load into out, then index it.")
        num_threads = request.num_threads
        if type(num_threads) is not int or num_threads < 0:
            raise ValueError(f"num_threads must be a non-negative int, got {num_threads!r}.")
        device = request.device
        if device is not None and type(device) is not torch.device:
            # a bad string fails here, before any file opens
            return request._replace(device=torch.device(device))
        return request


def load_path(
    prefix: str | os.PathLike[str], request: LoadRequest, robust_key: bool | None = None
) -> Any:
    """:func:`tdview.load_memmap`: open ``prefix``, :func:`run` ``request`` on it, close it."""
    # a folder without meta.json is refused as tensordict refuses it (naming its checkpoints)
    ckpt = open_tree(prefix, robust_key=robust_key, one_load=True, folders=False)
    if ckpt.store.foreign_format is not None:  # tensordict's load_memmap refuses it too
        reads = f"tdview.Checkpoint({os.fspath(prefix)!r}).load() reads it."
        if os.path.isdir(os.fspath(prefix)):  # a folder (zarr): its meta.json is missing
            error: NotACheckpointError = NotACheckpointFolderError(
                os.path.join(os.fspath(prefix), "meta.json"),
                f"It is {ckpt.store.foreign_format}: {reads}",
            )
        else:
            error = NotACheckpointError(
                f"{prefix} is a file but not a memory-mapped tensordict archive (expected a "
                f"zip file with a top-level meta.json entry): it is "
                f"{ckpt.store.foreign_format}. {reads}"
            )
        ckpt.close()
        raise error
    try:
        return run(ckpt, request)
    finally:
        ckpt.close()


def run(ckpt: Tree, request: LoadRequest) -> Any:
    """Load what ``request`` asks for from the open ``ckpt``: the one load of tdview.

    A folder of checkpoints hands the request to the member its subpath reaches (with
    the member's part of the path). The index caches every ``meta.json`` it parsed and
    every node it found, so a second load from the same checkpoint costs only the
    subtree it loads.

    Raises
    ------
    DeviceUnavailableError
        This process cannot use ``request.device``.
    SubpathError
        The subpath names no saved tensordict (for a leaf: no tensor leaf).

    Examples
    --------
    >>> ckpt = Checkpoint("ckpt.tdz")                                  # doctest: +SKIP
    >>> weights = run(ckpt, LoadRequest("model", device="cuda"))       # doctest: +SKIP
    """
    target, subpath = ckpt.load_target(request.subpath, leaf=request.leaf, mode=request.mode)
    if target is not ckpt:  # a folder of checkpoints: the member's part of the path
        return run(target, request._replace(subpath=subpath))
    if subpath is not request.subpath:  # a raw array of the folder: its path there
        request = request._replace(subpath=subpath)
    device = request.device
    if device is not None:
        check_usable(device, f"{ckpt.path}: device={str(device)!r} was asked for")
    return _leaf(ckpt, request) if request.leaf else _subtree(ckpt, request)


def _subtree(ckpt: Tree, request: LoadRequest) -> Any:
    """:func:`run` for a tensordict (the device is checked usable)."""
    device = request.device
    node = resolve_subpath(ckpt, request.subpath)
    index = request.index
    if index is not None:  # what td[index] raises, before a payload byte is read
        check_fits(ckpt, node, index)
        if device is not None and device.type not in ("cpu", "meta"):
            device = None  # built where it is mapped: only the rows selected are copied
    mode = request.mode
    ctx = _context(ckpt, device, mode, request.allow_pickle, request.progress)
    if node.dirkey is not None:
        ckpt.store.prepare(node.dirkey, payloads=ctx.read_data)
    if ctx.read_data and ctx.remote:  # read every leaf's bytes first (see _remote)
        ctx.fetched = (
            fetch_subtree(ckpt, node, ctx.progress)
            if index is None
            else fetch_rows(ckpt, node, index, ctx.progress)
        )
        ctx.progress = None  # reported as the bytes arrived
    elif ctx.read_data and ctx.is_archive and mode != "r+":
        if index is not None:  # compressed entries' rows inflated ahead (see _index)
            ctx.fetched = fetch_rows(ckpt, node, index, None)
        if request.num_threads > 1:
            ctx.prefetch = _prefetcher(ckpt, node, request.num_threads, ctx.fetched)
    ctx.max_depth = depth_room()
    try:
        with gc_paused():
            result = build(ctx, node, device, request.out)
    except RecursionError:
        # depth_room counts the frames of a TensorDict in a TensorDict; nesting that takes
        # more per level (tensorclasses, views) can still meet the limit
        raise LimitExceededError(
            f"{ckpt.path}: the tree below {show_path(node.path)!r} is nested too deep for "
            f"Python's recursion limit ({sys.getrecursionlimit()}). Load a deeper part "
            "with subpath=."
        ) from None
    finally:
        if ctx.prefetch is not None:
            ctx.prefetch.close()
    if index is not None:
        result = apply_index(result, index, request.device, request.non_blocking)
    device = request.device
    if device is not None and not request.non_blocking and device.type not in ("meta", "cuda"):
        _synchronize()
    ctx.check_mapping()
    return result


def _context(
    ckpt: Tree,
    device: torch.device | None,
    mode: str | None,
    allow_pickle: bool | None,
    progress: Any = None,
) -> LoadContext:
    """The state of one load; checks that an archive opened ``"r+"`` can be written."""
    # meta and fake tensors carry shapes only: no payload is read for them (a fake mode is
    # on the dispatch mode stack: an empty stack is answered without looking through it)
    fake = _len_dispatch_stack() > 0 and torch._guards.active_fake_mode() is not None
    read_data = not fake and (device is None or device.type != "meta")
    check_remote_mode(ckpt, mode)
    if mode == "r+" and ckpt.store.packed:  # every entry lives in the archive file
        check_writable(ckpt.store.root)
    return LoadContext(ckpt, mode, allow_pickle, read_data, progress=progress)


def _prefetcher(ckpt: Tree, node: Node, num_threads: int, fetched: Any) -> Prefetcher | None:
    """Schedule every compressed leaf (and nested sizes) entry of the subtree that an
    indexed load has not read (``fetched``)."""
    store = ckpt.store
    keys = []
    for child in walk(ckpt, node):
        if not child.is_leaf:
            continue
        for key in (child.file, child.sizes_file):
            if fetched is not None and key is not None and fetched.has(key):
                continue
            if key is not None and store.entry(key).compression != "stored":
                keys.append(key)
    if len(keys) < 2:
        return None
    return Prefetcher(store, keys, num_threads)


def _synchronize() -> None:
    """Wait for the copies to the accelerator of this host, if it has one.

    As tensordict does after a load on a device other than meta and cuda (pageable
    copies to cuda are ordered on the current stream already).
    """
    accelerator = getattr(torch, "accelerator", None)
    current = accelerator.current_accelerator() if accelerator is not None else None
    if current is None:
        return
    if current.type == "cuda":
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
    else:
        assert accelerator is not None
        accelerator.synchronize()


def load_leaf(ckpt: Tree, subpath: Any, device: Any = None, mode: str | None = "r") -> torch.Tensor:
    """Load one tensor leaf (``Checkpoint.load_leaf``), e.g. for a preview.

    Parameters
    ----------
    ckpt : Checkpoint
    subpath : nested key or str
        The leaf's nested key.
    device : optional
        As in :func:`tdview.load_memmap`.
    mode : {"r", "r+", None}, optional
        Defaults to ``"r"``: the leaf is mapped copy-on-write.

    Raises
    ------
    SubpathError
        No node at ``subpath``, or it is not a tensor leaf.
    LeafDataError
        The leaf's file is missing or too short.

    Examples
    --------
    >>> Checkpoint("ckpt").load_leaf("nested/reward").shape              # doctest: +SKIP
    torch.Size([2, 3, 1])
    """
    return run(ckpt, LoadRequest(subpath, device, mode=mode, leaf=True))


def _leaf(ckpt: Tree, request: LoadRequest) -> torch.Tensor:
    """:func:`run` for one tensor leaf (the device is checked usable)."""
    node = resolve_subpath(ckpt, request.subpath, leaf=True)
    device = request.device
    ctx = _context(ckpt, device, request.mode, None)
    tensor = leaf_tensor(ctx, node, device, strict=True)
    assert tensor is not None
    ctx.check_mapping()
    return tensor
