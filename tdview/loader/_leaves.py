"""Turning one leaf of the index into a tensor.

* Directory: the store opens the file when the leaf is loaded, not only when the index
  listed it (``O_NOFOLLOW``, ``O_NONBLOCK``: a symlink or a FIFO swapped in since is
  refused, nothing blocks) and checks that descriptor (``fstat``: a regular file of at
  least ``numel * itemsize`` bytes; tdview never grows a file); that descriptor is mapped
  (:mod:`._fdmap`: shared when the mode allows writes, copy-on-write otherwise; the path
  is not opened again) and wrapped as a :class:`~tensordict.MemoryMappedTensor`. A leaf
  of a store whose leaves are read into memory (HDF5, zarr: ``Store.leaves_in_memory``)
  stays a plain tensor, as the format's own reader gives it.
  A file read through a symlink out of the checkpoint root (a Hugging Face, git-annex or
  DVC store, or a trusted path: see :mod:`tdview.storage._content_stores`) is opened and checked
  by the store, mapped copy-on-write from that descriptor, and refused with
  ``mode="r+"``: nothing is ever written through such a link.
* Archive: a STORED entry must hold exactly ``numel * itemsize`` bytes and becomes a view
  of the archive's one mapping (copied when its offset is not a multiple of the item
  size); a compressed entry is decompressed (size and CRC-32 checked). Every read of the
  mapping made here (a copy, nested sizes, a copy to a device) first checks that the file
  did not shrink (``ArchiveError``, not SIGBUS), and so does a load before it returns.
* Nested (strided) leaves read their int64 ``[N, D]`` sizes from ``<stem>.shape.memmap``;
  the data is packed element after element.
* No bytes are read for ``device="meta"`` or under a FakeTensorMode: the leaf is an empty
  tensor of the right shape and dtype, as tensordict builds it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from math import prod

import torch
from tensordict import MemoryMappedTensor

from ..errors import (
    ArchiveModeError,
    LeafDataError,
    LeafNotAFileError,
    LinkWriteError,
    UnsafeCheckpointError,
)
from ..format import LeafRecord, torch_dtype
from ..index import Node, refusal, show_path
from ..storage import Link, Store
from ._context import LoadContext, user_stacklevel
from ._fdmap import AVAILABLE, map_descriptor
from ._remote import remote_flat

__all__ = ["file_leaf_tensor", "leaf_tensor"]

_R_PLUS = "Cannot open {root} with mode='r+': "
_COMPRESSED = (
    _R_PLUS + "entry {name!r} is compressed, so in-place writes cannot propagate "
    "to the file. Re-save the archive without compression to make it writable."
)
_UNALIGNED = (
    _R_PLUS + "the payload of entry {name!r} is not aligned (the archive was likely "
    "written by an external zip tool), so it must be copied and in-place writes "
    "cannot propagate to the file. Re-save the archive with tensordict to make it "
    "writable."
)
_NESTED = (
    _R_PLUS + "entry {name!r} is a nested tensor, which must be materialized in memory "
    "when loading from an archive, so in-place writes cannot propagate to the file."
)
_LIMIT = 2**62
_make_subclass = torch.Tensor._make_subclass


def leaf_tensor(
    ctx: LoadContext, node: Node, device: torch.device | None, *, strict: bool = False
) -> torch.Tensor | None:
    """Load the tensor of a leaf node.

    Parameters
    ----------
    ctx : LoadContext
    node : Node
        A leaf of the index.
    device : torch.device or None
        Where the leaf goes; None keeps it memory-mapped on the CPU.
    strict : bool
        A missing file raises instead of warning (for loading one leaf on its own).

    Returns
    -------
    torch.Tensor or None
        None when the leaf's file is missing: the key is left out, as tensordict does,
        with a ``UserWarning`` naming the file.

    Raises
    ------
    LeafDataError
        A file or entry too short (or, in an archive, of the wrong size), a missing
        sizes file, inconsistent nested sizes, or a dtype that cannot be materialized.
    UnsafeCheckpointError
        The store refuses the leaf's file (a symlink out of the checkpoint root that no
        rule trusts: :class:`~tdview.errors.UntrustedLinkError`, a FIFO...): never left
        out, a model silently missing a weight being worse than an error.
    LinkWriteError
        ``mode="r+"`` and the file is read through a symlink out of the root.

    Examples
    --------
    >>> leaf_tensor(ctx, ckpt.node("nested/reward"), None)          # doctest: +SKIP
    MemoryMappedTensor([...])
    """
    record = node.record
    assert record is not None
    if node.file is not None and not record.is_nested:
        return file_leaf_tensor(ctx, record, node.file, device, node.path[:-1])
    dtype = ctx.dtypes.get(record.dtype.name)
    if dtype is None:
        dtype = _dtype(ctx, node.path, record)
    if not record.is_nested and record.numel == 0:
        # no file is written for a tensor without elements: rebuild it from its shape
        return torch.empty(size=record.shape, dtype=dtype, device=device)
    if node.file is None:
        return _missing(ctx, node, dtype, device, strict)
    if not ctx.read_data:
        return torch.empty(size=record.shape, dtype=dtype, device=device)
    tensor = _nested(ctx, node, dtype)  # only nested leaves are left
    if device is not None:
        tensor = tensor.to(device, non_blocking=True)
    return tensor


def file_leaf_tensor(
    ctx: LoadContext,
    record: LeafRecord,
    file: str,
    device: torch.device | None,
    parent: tuple[str, ...],
) -> torch.Tensor:
    """Load a plain (not nested) leaf whose file (store key) exists; ``parent``, the nested
    key of its TensorDict, names it in errors. What :func:`leaf_tensor` does for such a
    leaf, without a node."""
    dtype = ctx.dtypes.get(record.dtype.name)
    if dtype is None:
        dtype = _dtype(ctx, (*parent, record.key), record)
    if ctx.read_data:
        numel = prod(record.shape)
        if numel:
            if ctx.is_archive:
                tensor = _archive_leaf(ctx, file, dtype, record, numel)
                if device is not None:
                    ctx.store.check_intact()  # the copy reads it
            else:
                tensor = _directory_leaf(ctx, file, dtype, record, numel)
            return tensor if device is None else tensor.to(device, non_blocking=True)
    # shapes only (meta or fake tensors), or no elements (no values to read); size= as a
    # keyword: torch parses it about 1 us faster than a positional shape (once per leaf)
    return torch.empty(size=record.shape, dtype=dtype, device=device)


def _dtype(ctx: LoadContext, path: tuple[str, ...], record: LeafRecord) -> torch.dtype:
    found = ctx.dtypes.get(record.dtype.name)
    if found is None:
        if not record.dtype.loadable:
            raise LeafDataError(
                f"leaf {show_path(path)!r} in {ctx.ckpt.path}: dtype {record.dtype.name} "
                "cannot be loaded (quantized dtypes record no scale or zero point, and "
                "sub-byte integers cannot be copied by torch)."
            )
        found = ctx.dtypes[record.dtype.name] = torch_dtype(record.dtype)
    return found


def _missing(
    ctx: LoadContext, node: Node, dtype: torch.dtype, device: torch.device | None, strict: bool
) -> torch.Tensor | None:
    """A leaf without its data file: an all-empty nested tensor, or a dropped key; the
    store's refusal of the file is raised."""
    record = node.record
    assert record is not None
    refused = refusal(node)
    if refused is not None:
        error = refused.error
        # a folder in place of the file: a tdview error (still an IsADirectoryError)
        kind = LeafNotAFileError if type(error) is IsADirectoryError else type(error)
        raise kind(f"leaf {show_path(node.path)!r} of {ctx.ckpt.path}: {refused}.") from error
    if record.is_nested and node.sizes_file is not None:
        # tensordict writes the sizes but no data file when every element is empty
        if not ctx.read_data:
            return torch.empty(size=record.shape, dtype=dtype, device=device)
        sizes = _sizes(ctx, node)
        if _nested_numel(sizes, ctx.store.display(node.sizes_file)) == 0:
            tensor = _nested_view(torch.empty(0, dtype=dtype), sizes)
            return tensor if device is None else tensor.to(device, non_blocking=True)
    problem = "; ".join(node.problems) or "its file is missing"
    message = f"leaf {show_path(node.path)!r} of {ctx.ckpt.path}: {problem}"
    if strict:
        raise LeafDataError(message + ".")
    # tensordict leaves out a missing file too (a refused one was raised above)
    also = " (tensordict also leaves such keys out)" if problem.endswith("is missing") else ""
    warnings.warn(f"tdview left out {message}{also}.", UserWarning, stacklevel=user_stacklevel())
    return None


def _shared(path: str, mode: str | None) -> bool:
    """Whether to map a directory file shared: per ``mode``, and per file for None."""
    if mode == "r":
        return False
    writable = os.access(path, os.W_OK)
    if mode == "r+" and not writable:
        raise PermissionError(f"Cannot open {path} with mode='r+': the file is not writable.")
    return writable


def _map_file(
    ctx: LoadContext, key: str, dtype: torch.dtype, numel: int, what: str | Callable[[], str]
) -> tuple[torch.Tensor, str, str | None]:
    """Map the first ``numel`` elements of a directory file, checking its size first:
    ``(tensor, path, the mode its MemoryMappedTensor records)``; ``"r"`` for a file read
    through a link out of the root (mapped copy-on-write whatever the load's mode).

    ``what`` (or what it returns, made only for an error) names the data in messages."""
    if ctx.remote:  # read into memory (see _remote): no file, nothing mapped
        flat = remote_flat(ctx, key, dtype, numel * dtype.itemsize, exact=False)
        return flat, None, ctx.mode  # type: ignore[return-value]
    path = ctx.file(key)
    mode = ctx.mode
    store = ctx.store
    if mode is None and numel and AVAILABLE:
        # the default mode, per file: one open, for writing where the process may write
        # the file (a shared mapping), read-only otherwise and through a link out of the
        # root (copy-on-write, recorded "r"); checked, sized and mapped as below
        fd, st, shared = store.map(key, write=None)
        try:
            _check_size(path, numel * dtype.itemsize, what, st.st_size)
            flat = map_descriptor(fd, dtype, numel, shared=shared)
        finally:
            os.close(fd)
        return flat, path, (None if shared or store.link(key) is None else "r")
    link = store.link(key)
    if link is not None:
        if numel == 0:
            return torch.empty(0, dtype=dtype), path, "r"
        return _map_linked(ctx, key, link, dtype, numel, what), path, "r"
    if numel == 0:
        return torch.empty(0, dtype=dtype), path, mode
    shared = _shared(path, mode)
    # opened by the store, checked on the descriptor (no symlink or FIFO swapped in since
    # the index listed it: a regular file), long enough (a shared mapping would grow a
    # short file), and mapped from that descriptor: the path is not walked again
    fd, st, _ = store.map(key, write=shared)
    try:
        _check_size(path, numel * dtype.itemsize, what, st.st_size)
        if AVAILABLE:
            return map_descriptor(fd, dtype, numel, shared=shared), path, mode
        # no mmap(2) to call (Windows, where the store follows no symlink either)
        return (
            torch.from_file(path, shared=shared, size=numel, dtype=dtype, device="cpu"),
            path,
            mode,
        )
    finally:
        os.close(fd)


def _map_linked(
    ctx: LoadContext,
    key: str,
    link: Link,
    dtype: torch.dtype,
    numel: int,
    what: str | Callable[[], str],
) -> torch.Tensor:
    """Map copy-on-write a file read through a symlink out of the root, from the
    descriptor the store opened and checked; ``mode="r+"`` is refused."""
    path = ctx.file(key)
    if ctx.mode == "r+":
        through = (
            f"it is a symlink ({link.target!r})"
            if link.link == path
            else f"it is reached through the symlink {link.link} -> {link.target!r}"
        )
        raise LinkWriteError(
            f"Cannot open {path} with mode='r+': {through} to {link.real}, outside the "
            f"checkpoint root {ctx.ckpt.path} ({link.reason}), and tdview never writes "
            "through such a link. Load it with mode='r' or the default mode (both map it "
            "copy-on-write), or copy the checkpoint to change its files."
        )
    store = ctx.store
    fd, st, _ = store.map(key, write=False)
    try:
        _check_size(path, numel * dtype.itemsize, what, st.st_size)
        if not AVAILABLE:
            return torch.from_file(
                store.opened_path(fd, key),
                shared=False,
                size=numel,
                dtype=dtype,
                device="cpu",
            )
        return map_descriptor(fd, dtype, numel, shared=False)
    finally:
        os.close(fd)


def _check_size(
    path: str, need: int, what: str | Callable[[], str], size: int | None = None
) -> None:
    if size is None:
        size = os.stat(path).st_size
    if size < need:
        raise LeafDataError(
            f"{path} has {size} bytes, but {what if isinstance(what, str) else what()} needs "
            f"{need} bytes. tdview does not grow files: the file was truncated, or does not "
            "belong to this checkpoint."
        )


def _folder_leaf(
    ctx: LoadContext, tensor: torch.Tensor, path: str, mode: str | None, parent_shape: object
) -> torch.Tensor:
    """A folder's leaf as the format's reader gives it: the MemoryMappedTensor of
    tensordict's loader, or the plain tensor of an HDF5 or zarr reader."""
    if ctx.in_memory:
        return tensor
    return _as_memmap(tensor, path, mode, parent_shape)


def _as_memmap(
    tensor: torch.Tensor, path: str, mode: str | None, parent_shape: object
) -> MemoryMappedTensor:
    """Wrap a mapped tensor as the MemoryMappedTensor tensordict's loader returns."""
    # what MemoryMappedTensor(tensor) does for a plain tensor, without its argument checks
    result = _make_subclass(MemoryMappedTensor, tensor)
    result._filename = path  # absolute already (the filename setter would re-resolve it)
    result._handler = None  # type: ignore[assignment]
    result._mode = mode
    result._index = None
    result._index_chain = ()
    result._parent_shape = parent_shape  # type: ignore[assignment]
    return result


def _describe(record: LeafRecord) -> str:
    return f"leaf {record.key!r} of shape {list(record.shape)} and dtype {record.dtype.name}"


def _directory_leaf(
    ctx: LoadContext, key: str, dtype: torch.dtype, record: LeafRecord, numel: int
) -> torch.Tensor:
    flat, path, mode = _map_file(ctx, key, dtype, numel, lambda: _describe(record))
    shape = record.shape
    tensor = flat.as_strided(shape, ctx.strides(shape))
    return _folder_leaf(ctx, tensor, path, mode, torch.Size(shape))


def _archive_leaf(
    ctx: LoadContext, key: str, dtype: torch.dtype, record: LeafRecord, numel: int
) -> torch.Tensor:
    """A leaf of an archive: a view of the mapping when its entry is stored and aligned."""
    need = numel * dtype.itemsize
    span = ctx.store.stored_span(key)
    shape = record.shape
    if span is not None and span[1] == need and span[0] % dtype.itemsize == 0:
        return ctx.typed_mapping(dtype, ctx.store.map_key(key)).as_strided(
            shape, ctx.strides(shape), span[0] // dtype.itemsize
        )
    return _archive_flat(ctx, key, dtype, need, exact=True).view(shape)


def _archive_flat(
    ctx: LoadContext, key: str, dtype: torch.dtype, need: int, *, exact: bool
) -> torch.Tensor:
    """The first ``need`` bytes of an archive entry as a flat tensor of ``dtype``."""
    store = ctx.store
    entry = store.entry(key)
    if entry.encrypted:
        raise UnsafeCheckpointError(
            f"refusing to read encrypted archive entry {key!r} in {store.root}: tdview does "
            "not decrypt zip entries."
        )
    if entry.size < need or (exact and entry.size != need):
        raise LeafDataError(
            f"{entry.display} holds {entry.size} bytes, but the leaf needs "
            f"{'exactly ' if exact else ''}{need} bytes ({dtype} elements)."
        )
    if need == 0:
        return torch.empty(0, dtype=dtype)
    if ctx.remote or (ctx.fetched is not None and ctx.fetched.has(key)):
        # read into memory (see _remote; an indexed load's inflated rows: _index)
        return remote_flat(ctx, key, dtype, need, exact=exact)
    if entry.compression == "stored":
        if entry.stored_size != entry.size:
            raise LeafDataError(
                f"{entry.display}: a stored entry with {entry.stored_size} stored bytes but a "
                f"declared size of {entry.size} bytes."
            )
        offset = _stored_offset(store, key)
        aligned = offset % dtype.itemsize == 0
        if not aligned and ctx.mode == "r+":
            raise ArchiveModeError(_UNALIGNED.format(root=store.root, name=key))
        flat = ctx.mapping(store.map_key(key))[offset : offset + need]
        # the caller reads it now (a copy, nested sizes): a file truncated since it was
        # mapped is an ArchiveError, not a SIGBUS
        store.check_intact()
        # a view needs an offset that is a multiple of the item size: copy otherwise
        return (flat if aligned else flat.clone()).view(dtype)
    if ctx.mode == "r+":
        raise ArchiveModeError(_COMPRESSED.format(root=store.root, name=key))
    data = ctx.prefetch.take(key) if ctx.prefetch is not None else None
    if data is None:
        data = store.decompress(key, max_size=entry.size)
    return torch.from_numpy(data)[:need].view(dtype)


def _stored_offset(store: Store, key: str) -> int:
    """Where a STORED entry's bytes start in the archive file (its local header read the
    first time: the error of a wrong one is raised)."""
    span = store.stored_span(key)
    if span is not None:
        return span[0]
    payload = store.locate(key)
    if payload.offset is None:
        assert payload.error is not None
        raise payload.error
    return payload.offset


def _sizes(ctx: LoadContext, node: Node) -> torch.Tensor:
    """The int64 ``[N, D]`` sizes of a nested leaf."""
    record = node.record
    assert record is not None and node.sizes_file is not None
    n, d = record.shape
    if ctx.is_archive:
        flat = _archive_flat(ctx, node.sizes_file, torch.int64, n * d * 8, exact=True)
        return flat.view(n, d)
    what = f"the sizes of nested leaf {record.key!r} (shape [{n}, {d}], int64)"
    flat, path, mode = _map_file(ctx, node.sizes_file, torch.int64, n * d, what)
    return _folder_leaf(ctx, flat.view(n, d), path, mode, torch.Size((n, d)))


def _nested_numel(sizes: torch.Tensor, where: str) -> int:
    """The total element count of nested sizes, refusing negative or overflowing ones."""
    if not sizes.numel():
        return 0
    if int(sizes.min()) < 0:
        raise LeafDataError(f"{where}: nested sizes must not be negative, got {int(sizes.min())}.")
    approx = sizes.to(torch.float64).prod(-1)
    if float(approx.sum()) >= _LIMIT:
        raise LeafDataError(f"{where}: nested sizes describe more than 2**62 elements.")
    return int(sizes.prod(-1).sum())


def _nested_view(buffer: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """A strided nested tensor of contiguous elements packed in ``buffer``."""
    strides, offsets = torch._nested_compute_contiguous_strides_offsets(sizes)
    return torch._nested_view_from_buffer(buffer, sizes, strides, offsets)


def _nested(ctx: LoadContext, node: Node, dtype: torch.dtype) -> torch.Tensor:
    record = node.record
    assert record is not None and node.file is not None
    if node.sizes_file is None:
        raise LeafDataError(
            f"nested leaf {show_path(node.path)!r} of {ctx.ckpt.path} cannot be loaded: "
            + ("; ".join(node.problems) or "its sizes file is missing")
            + "."
        )
    if ctx.is_archive and ctx.mode == "r+":
        raise ArchiveModeError(_NESTED.format(root=ctx.store.root, name=node.file))
    sizes = _sizes(ctx, node)
    numel = _nested_numel(sizes, ctx.store.display(node.sizes_file))
    if ctx.is_archive:
        flat = _archive_flat(ctx, node.file, dtype, numel * dtype.itemsize, exact=False)
        if flat.storage_offset():
            # the nested constructor ignores a view's storage offset: copy the elements
            flat = flat.clone()
        return _nested_view(flat, sizes)
    what = f"nested leaf {record.key!r} ({numel} elements of {record.dtype.name})"
    buffer, path, mode = _map_file(ctx, node.file, dtype, numel, what)
    return _folder_leaf(ctx, _nested_view(buffer, sizes), path, mode, sizes)
