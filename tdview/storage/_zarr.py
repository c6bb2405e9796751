"""zarr stores written by tensordict's ``to_zarr`` (zarr-python 3), read with zarr.

:class:`ZarrStore` reads the store's ``zarr.json`` documents through zarr's metadata
API (tensordict writes the whole tree's metadata inline in the root's, so opening it
is one read) and presents the groups and arrays as a checkpoint folder tree
(:mod:`._group_tree`). No chunk is read while browsing; a preview or a load reads
the elements it needs by zarr's own slicing (the chunks that hold them).

What tensordict writes, as its ``persistent.py`` reads it: a group per nested
tensordict, with its batch size and dim names in the ``__tensordict__`` attribute; an
array per tensor leaf; a non-tensor value as a uint8 array of its JSON (or pickle)
bytes marked ``__tensordict_non_tensor__``; a ``NonTensorStack`` of strings as a
string array marked ``__tensordict_stack__``. A pickled value is never unpickled: its
node says so. A member name that could leave the store (``..``, ``/``) is refused when
the store is opened. A local path or an fsspec URL (``s3://``, ``https://``...) opens:
one that ends in ``.zarr`` at once, another when the remote open's other guesses fail
and the head of its ``zarr.json`` says it is one (:func:`zarr_group_at`).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import numpy as np

from ..errors import (
    CheckpointFormatError,
    LeafDataError,
    LimitExceededError,
    MissingExtraError,
    TDViewError,
    UnsafeCheckpointError,
)
from ._group_tree import (
    MAX_DEPTH,
    MAX_DIMS,
    MAX_NON_TENSOR_BYTES,
    MAX_OBJECTS,
    Array,
    Group,
    GroupTreeStore,
    torch_dtype,
)
from ._key_safety import name_problem

__all__ = ["ZarrStore", "is_zarr_folder", "is_zarr_url", "open_zarr_url", "zarr_group_at"]

_TD_ATTR, _NON_TENSOR_ATTR, _STACK_ATTR = (
    "__tensordict__",
    "__tensordict_non_tensor__",
    "__tensordict_stack__",
)


def is_zarr_folder(path: str) -> bool:
    """A folder with a ``zarr.json`` and no ``meta.json`` (a checkpoint's own wins).

    Examples
    --------
    >>> is_zarr_folder("/nonexistent")
    False
    """
    return os.path.isfile(os.path.join(path, "zarr.json")) and not os.path.lexists(
        os.path.join(path, "meta.json")
    )


def is_zarr_url(path: str) -> bool:
    """A URL whose last name ends with ``.zarr`` (zarr's convention): a remote folder
    cannot be told by a look at it without a request, and this costs none.

    Examples
    --------
    >>> is_zarr_url("s3://bucket/run/td.zarr/"), is_zarr_url("s3://bucket/run/td.tdz")
    (True, False)
    """
    return str(path).rstrip("/").endswith(".zarr")


#: The head of a ``zarr.json`` read to tell a zarr store at a URL of another name: the
#: root's ``zarr_format`` comes after its attributes (tensordict's are a few lines).
ZARR_HEAD = 4096
_ZARR_FORMAT = re.compile(rb'^\s*\{.*?"zarr_format"\s*:\s*3\b', re.DOTALL)


def zarr_group_at(fs: Any, path: str) -> bool:
    """Whether the folder ``path`` of the fsspec filesystem ``fs`` is a zarr (v3) store:
    one ranged read of the head of its ``zarr.json`` (what the remote open tries last,
    for a URL that does not end in ``.zarr``).

    Examples
    --------
    >>> import fsspec
    >>> zarr_group_at(fsspec.filesystem("memory"), "/nothing/here")
    False
    """
    try:
        head = fs.cat_file(f"{path.rstrip('/')}/zarr.json", start=0, end=ZARR_HEAD)
    except (OSError, ValueError):  # absent (FileNotFoundError), refused, not a file
        return False
    return isinstance(head, bytes) and _ZARR_FORMAT.match(head) is not None


def open_zarr_url(path: str) -> ZarrStore:
    """The :class:`ZarrStore` of a URL (or a :func:`~tdview.storage.remote` path, its
    filesystem and storage options), read through zarr's ``FsspecStore``."""
    from ._remote import RemotePath, filesystem, remote

    zarr = _zarr()
    where = path if isinstance(path, RemotePath) else remote(path)
    url = str(where).rstrip("/")
    if where.fs is None:  # zarr makes the filesystem, asynchronous, on its own loop
        filesystem(where)  # a missing package: the error names the extra
        options = {**where.options, "asynchronous": True}
        store = zarr.storage.FsspecStore.from_url(url, storage_options=options, read_only=True)
    else:
        from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper

        fs = where.fs if where.fs.async_impl else AsyncFileSystemWrapper(where.fs)
        store = zarr.storage.FsspecStore(fs, read_only=True, path=where.path.rstrip("/"))
    return ZarrStore(url, store)


def _zarr() -> Any:
    try:
        import zarr
    except ImportError:
        raise MissingExtraError(
            'reading a zarr store needs zarr, which is not installed: pip install "tdview[zarr]".'
        ) from None
    return zarr


class ZarrStore(GroupTreeStore):
    """A zarr store as a checkpoint folder tree (see the module docstring).

    Parameters
    ----------
    root : str
        The name shown: the folder's absolute path, or the URL.
    store : zarr.abc.store.Store, optional
        The zarr store to read (an ``FsspecStore`` for a URL); a ``LocalStore`` of
        ``root`` by default.

    Examples
    --------
    >>> with ZarrStore("/data/td.zarr") as store:                   # doctest: +SKIP
    ...     store.list_dir("")
    ['meta.json', 'nested', 'obs.memmap']
    """

    kind = "zarr"
    foreign_format = "a zarr store (td.to_zarr)"

    def __init__(self, root: str, store: Any = None) -> None:
        zarr = _zarr()
        self._zarr = zarr
        if store is None:
            store = _confined(zarr, root)
        self._count, self._root = 0, root
        try:
            self._group_of = zarr.open_group(store=store, mode="r")
            tree = self._group(self._group_of, "", "/", 0)
        except TDViewError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as error:  # zarr's own
            raise CheckpointFormatError(
                f"{root}: zarr cannot read it as a group: {type(error).__name__}: {error}"
            ) from None
        super().__init__(root, tree)

    def _group(self, group: Any, name: str, path: str, depth: int) -> Group:
        """The tree below ``group``: every member from one call to zarr (the inline
        metadata tensordict writes; without it zarr reads each ``zarr.json``)."""
        out = self._made_group(group, name, path)
        groups = {"": out}
        for member, obj in group.members(max_depth=None):
            self._count += 1
            if self._count > MAX_OBJECTS:
                raise LimitExceededError(f"{self._root}: more than {MAX_OBJECTS} objects.")
            parts = member.split("/")
            if len(parts) > MAX_DEPTH:
                raise LimitExceededError(
                    f"{self._root}::/{member}: groups nest deeper than {MAX_DEPTH}."
                )
            for part in parts:
                problem = name_problem(part)
                if problem is not None:
                    raise UnsafeCheckpointError(
                        f"{self._root}: the member {member!r} {problem}: it could leave the store."
                    )
            parent = groups.get("/".join(parts[:-1]))
            if parent is None:  # zarr gives parents first; a member of none is dropped
                continue
            where = f"/{member}"
            if isinstance(obj, self._zarr.Group):
                made = groups[member] = self._made_group(obj, parts[-1], where)
                parent.members.append(made)
            else:
                parent.members.append(self._array(obj, parts[-1], where))
        return out

    def _made_group(self, group: Any, name: str, path: str) -> Group:
        """A group with the batch size and dim names tensordict recorded, if any."""
        recorded = group.attrs.get(_TD_ATTR)
        out = Group(name, path)
        if isinstance(recorded, dict) and _ints(recorded.get("batch_size")):
            out.batch = list(recorded["batch_size"])
            names = recorded.get("names")
            if isinstance(names, list) and len(names) == len(out.batch):
                out.names = [n if isinstance(n, str) else None for n in names]
        return out

    def _array(self, arr: Any, name: str, path: str) -> Array:
        shape = tuple(int(n) for n in arr.shape)
        if len(shape) > MAX_DIMS:
            raise LimitExceededError(f"{self._root}::{path}: {len(shape)} dims, above {MAX_DIMS}.")
        attrs = arr.attrs
        marker, stack = attrs.get(_NON_TENSOR_ATTR), attrs.get(_STACK_ATTR)
        kind = "stack" if _ints(stack) else "data"
        shown = tuple(stack) if kind == "stack" else shape
        if marker is not None:
            encoding = marker.get("encoding") if isinstance(marker, dict) else None
            if encoding != "json":
                why = f"holds a value stored as {encoding!r}: tdview never unpickles"
                return Array(name, path, shown, str(encoding), "refused", why)
            return Array(name, path, shown, "json", kind, arr)
        try:
            dtype = np.dtype(arr.dtype)
        except TypeError:  # zarr's own string dtypes
            dtype = np.dtype(object)
        found = torch_dtype(dtype)
        if found is None:
            return Array(name, path, shown, str(arr.dtype), kind, arr)
        return Array(name, path, shape, found, "tensor", arr)

    def read_block(self, array: Array, index: tuple[Any, ...]) -> np.ndarray:
        try:
            data = np.asarray(array.ref[index if index else ...])
        except TDViewError:
            raise
        except (OSError, ValueError, KeyError, RuntimeError) as error:  # a damaged chunk
            raise LeafDataError(
                f"{self.root}::{array.path}: zarr cannot read it: {error}"
            ) from None
        wanted = np.dtype(array.dtype if array.dtype != "bool" else np.bool_).newbyteorder("<")
        return data.astype(wanted, copy=False)

    def value_json(self, array: Array) -> str:
        arr = array.ref
        if arr.nbytes > MAX_NON_TENSOR_BYTES and array.dtype == "json":
            raise LimitExceededError(
                f"{self.root}: the value of {array.path!r} has {arr.nbytes} bytes, above "
                f"the limit of {MAX_NON_TENSOR_BYTES}."
            )
        if arr.size > MAX_NON_TENSOR_BYTES // 8:
            raise LimitExceededError(
                f"{self.root}: the value of {array.path!r} holds {arr.size} elements, above "
                f"the limit of {MAX_NON_TENSOR_BYTES // 8}."
            )
        try:
            if array.dtype == "json":  # parsed and written again: nothing but the value
                raw = np.asarray(arr[...], dtype=np.uint8).tobytes()
                return json.dumps(json.loads(raw.decode("utf-8")), allow_nan=True)
            return json.dumps(np.asarray(arr[...]).tolist(), allow_nan=True)
        except (ValueError, TypeError) as error:
            raise CheckpointFormatError(
                f"{self.root}: the value of {array.path!r} ({array.dtype}) is not one tdview "
                f"shows: {error}."
            ) from None


def _confined(zarr: Any, root: str) -> Any:
    """zarr's ``LocalStore`` of ``root`` whose reads refuse a file whose real path is
    out of the store (a chunk or ``zarr.json`` that is a symlink out of it)."""
    real_root = os.path.realpath(root)

    def check(key: str) -> None:
        real = os.path.realpath(os.path.join(root, key))
        if os.path.commonpath([real, real_root]) != real_root:
            raise UnsafeCheckpointError(
                f"{root}: {key!r} leads out of the store (to {real}): tdview does not follow it."
            )

    class ConfinedStore(zarr.storage.LocalStore):
        async def get(self, key: str, prototype: Any = None, byte_range: Any = None) -> Any:
            check(key)
            return await super().get(key, prototype, byte_range)

        async def get_partial_values(self, prototype: Any, key_ranges: Any) -> Any:
            key_ranges = list(key_ranges)
            for key, _ in key_ranges:
                check(key)
            return await super().get_partial_values(prototype, key_ranges)

    return ConfinedStore(root, read_only=True)


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(type(n) is int and n >= 0 for n in value)
