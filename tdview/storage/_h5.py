"""HDF5 files written by tensordict's ``to_h5`` (``PersistentTensorDict``), read with h5py.

:class:`H5Store` walks the file's groups and datasets once, reading their metadata
only (name, shape, dtype, attributes: no dataset's data), and presents them as a
checkpoint folder tree (:mod:`._group_tree`). A dataset's elements are read by h5py
slicing when a preview or a load asks for them: the hyperslab asked for, the chunks
holding it decompressed by HDF5.

What tensordict writes, as its ``persistent.py`` reads it: a group per nested
tensordict, a dataset per tensor leaf; a ``str`` value as a variable-length string
dataset marked ``__tensordict_str__``; other non-tensor values as opaque datasets; a
``NonTensorStack`` as one dataset marked ``__tensordict_stack__`` with its shape. No
batch size is recorded: each group's is the largest its entries share, as ``from_h5``
gives. A string value loads as the installed tensordict's ``from_h5`` gives it
(:func:`reads_str`): ``dataset[()]`` as h5py reads it (``bytes``), but a string
tensordict marked ``__tensordict_str__`` as ``str`` from tensordict 0.17 on (0.15 and
0.16 read ``bytes`` and warn that it changes). The tree shows it as text either way.

Hostile files: a soft link is followed within the file (each object once, so no
cycle), an external link only to a file inside this file's folder, a virtual dataset
or a dataset with external raw storage only when every source file is inside it; every
other one is a node whose ``meta.json`` raises :class:`~tdview.errors.UnsafeCheckpointError`
naming the link and its target. Dims, objects and nesting are bounded.
"""

from __future__ import annotations

import json
import os
import re
from functools import cache
from importlib import metadata
from typing import Any

import numpy as np

from ..errors import (
    CheckpointFormatError,
    LeafDataError,
    LimitExceededError,
    MissingExtraError,
    TDViewError,
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

__all__ = ["H5_SIGNATURE", "H5Store", "is_h5", "is_h5_url", "open_h5_url", "reads_str"]

H5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_STR_ATTR, _STACK_ATTR = "__tensordict_str__", "__tensordict_stack__"


def is_h5(path: str) -> bool:
    """Whether the regular file ``path`` starts with the HDF5 signature (a user block
    moves it to 512, 1024, 2048... bytes: those are tried too, up to 64 KiB).

    Examples
    --------
    >>> is_h5("/nonexistent.h5")
    False
    """
    try:
        with open(path, "rb") as f:
            at = 0
            while at <= 1 << 16:
                f.seek(at)
                if f.read(8) == H5_SIGNATURE:
                    return True
                at = 512 if at == 0 else at * 2
    except OSError:
        return False
    return False


def is_h5_url(path: str) -> bool:
    """A URL whose name ends with ``.h5``, ``.hdf5`` or ``.hdf`` (an object's suffix
    tells it without a request).

    Examples
    --------
    >>> is_h5_url("https://host/run/episodes.h5"), is_h5_url("s3://b/ckpt.tdz")
    (True, False)
    """
    return str(path).lower().endswith((".h5", ".hdf5", ".hdf"))


def open_h5_url(path: str) -> H5Store:
    """The :class:`H5Store` of a remote HDF5 file, read by h5py through an fsspec file
    (its reads are ranged reads, in blocks of 1 MiB cached by fsspec)."""
    from ._remote import RemotePath, filesystem, remote

    _h5py()  # a missing h5py: the error names the extra before any request
    where = path if isinstance(path, RemotePath) else remote(path)
    fs, fspath = filesystem(where)
    fileobj = fs.open(fspath, "rb", block_size=1 << 20, cache_type="blockcache")
    try:
        return H5Store(str(where), fileobj)
    except BaseException:
        fileobj.close()
        raise


@cache
def reads_str() -> bool:
    """Whether the installed tensordict's ``from_h5`` reads a string it wrote (marked
    ``__tensordict_str__``) as ``str``: from 0.17 on, as its ``FutureWarning`` says;
    ``bytes`` before. Without tensordict, ``str`` (what its readers give from then on).

    Examples
    --------
    >>> reads_str()  # tensordict 0.15 installed                    # doctest: +SKIP
    False
    """
    try:
        found = re.match(r"(\d+)\.(\d+)", metadata.version("tensordict"))
    except metadata.PackageNotFoundError:
        return True
    return found is None or (int(found[1]), int(found[2])) >= (0, 17)


def _attribute(h5py: Any, oid: Any, name: str, kinds: str = "iu") -> np.ndarray | None:
    """The value of attribute ``name`` of object ``oid`` (a small integer array, as
    ``__tensordict_stack__`` is, or of another of numpy's ``kinds``: ``"b"`` for the
    ``__tensordict_str__`` flag), or None when it has none or another kind."""
    bname = name.encode()
    if not h5py.h5a.exists(oid, bname):
        return None
    aid = h5py.h5a.open(oid, bname)
    if aid.dtype.kind not in kinds or aid.get_storage_size() > 1024:
        return None
    out = np.empty(aid.shape, dtype=aid.dtype)
    aid.read(out)
    return out


def _h5py() -> Any:
    try:
        import h5py
    except ImportError:
        raise MissingExtraError(
            'reading an HDF5 file needs h5py, which is not installed: pip install "tdview[h5]".'
        ) from None
    return h5py


class H5Store(GroupTreeStore):
    """An HDF5 file as a checkpoint folder tree (see the module docstring).

    Examples
    --------
    >>> with H5Store("/data/td.h5") as store:                      # doctest: +SKIP
    ...     store.list_dir("")
    ['meta.json', 'nested', 'obs.memmap']
    """

    kind = "h5"
    foreign_format = "an HDF5 file (td.to_h5)"

    def __init__(self, path: str, fileobj: Any = None) -> None:
        h5py = _h5py()
        self._h5py, self._fileobj = h5py, fileobj
        # a remote file (``fileobj``, read by ranges) has no folder: no link is followed
        self._folder = None if fileobj is not None else os.path.dirname(os.path.realpath(path))
        try:
            self._file = h5py.File(path if fileobj is None else fileobj, "r")
        except OSError as error:  # HDF5's own: a damaged superblock, a truncated file
            raise CheckpointFormatError(f"{path}: h5py cannot open it: {error}") from None
        try:
            self._seen: set[Any] = set()
            self._count = 0
            tree = self._group(self._file.id, "", "/", 0)
        except (OSError, KeyError, RuntimeError, ValueError) as error:
            self._file.close()
            if isinstance(error, TDViewError):
                raise
            raise CheckpointFormatError(
                f"{path}: h5py cannot read its groups: {type(error).__name__}: {error}"
            ) from None
        except BaseException:
            self._file.close()
            raise
        super().__init__(path, tree)

    def close(self) -> None:
        self._file.close()
        if self._fileobj is not None:
            self._fileobj.close()

    # -- the walk over metadata -------------------------------------------------------

    def _group(self, gid: Any, name: str, path: str, depth: int) -> Group:
        """The tree below the group ``gid`` (h5py's low-level API: one object opened
        per link, no high-level object made)."""
        if depth > MAX_DEPTH:
            raise LimitExceededError(f"{self.root_or(path)}: groups nest deeper than {MAX_DEPTH}.")
        out, h5py = Group(name, path), self._h5py
        for bname in gid:  # by name, as the reference's keys() gives them
            self._count += 1
            if self._count > MAX_OBJECTS:
                raise LimitExceededError(f"{self.root_or(path)}: more than {MAX_OBJECTS} objects.")
            child = bname.decode("utf-8", "surrogateescape")
            where = f"{path.rstrip('/')}/{child}"
            refused = self._link_refused(gid, bname)
            oid = h5py.h5o.open(gid, bname) if refused is None else None
            if oid is not None and isinstance(oid, h5py.h5d.DatasetID):
                refused = self._sources_refused(oid)
            if refused is not None or oid is None:
                out.members.append(Array(child, where, (), "link", "refused", refused))
            elif isinstance(oid, h5py.h5g.GroupID):
                if hash(oid) not in self._seen:  # else a link back to a group above: a cycle
                    self._seen.add(hash(oid))
                    out.members.append(self._group(oid, child, where, depth + 1))
            else:
                out.members.append(self._dataset(oid, child, where))
        return out

    def root_or(self, path: str) -> str:
        return f"{self._file.filename}::{path}"

    def _link_refused(self, gid: Any, bname: bytes) -> str | None:
        """Why the link ``bname`` of group ``gid`` is not followed, or None."""
        h5l = self._h5py.h5l
        kind = gid.links.get_info(bname).type
        if kind == h5l.TYPE_EXTERNAL:
            filename, target = (os.fsdecode(v) for v in gid.links.get_val(bname))
            return self._outside(filename, f"an external link to {filename}::{target}")
        if kind == h5l.TYPE_SOFT:
            target = os.fsdecode(gid.links.get_val(bname))
            try:
                self._h5py.h5o.get_info(gid, bname)
            except KeyError:
                return f"is a soft link to {target}, which is absent"
        return None

    def _outside(self, filename: str, what: str) -> str | None:
        if self._folder is None:
            return f"is {what}, out of a remote file: tdview does not follow it"
        target = os.path.realpath(os.path.join(self._folder, filename))
        if os.path.commonpath([target, self._folder]) != self._folder:
            why = f"out of the file's folder {self._folder}: tdview does not follow it"
            return f"is {what}, {why}"
        if not os.path.isfile(target):
            return f"is {what}, which is absent"
        return None

    def _sources_refused(self, oid: Any) -> str | None:
        """Why a dataset's data is not read: a virtual dataset's source file or an
        external raw storage file out of the file's folder; None when it is."""
        dcpl = oid.get_create_plist()
        if dcpl.get_layout() == self._h5py.h5d.VIRTUAL:
            for at in range(dcpl.get_virtual_count()):
                name = os.fsdecode(dcpl.get_virtual_filename(at))
                if name != ".":
                    why = self._outside(name, f"a virtual dataset of {name}")
                    if why is not None:
                        return why
        for at in range(dcpl.get_external_count()):
            name = os.fsdecode(dcpl.get_external(at)[0])
            why = self._outside(name, f"a dataset stored in {name}")
            if why is not None:
                return why
        return None

    def _dataset(self, oid: Any, name: str, path: str) -> Array:
        shape, dtype, h5py = tuple(oid.shape or ()), oid.dtype, self._h5py
        if len(shape) > MAX_DIMS:
            raise LimitExceededError(f"{self.root_or(path)}: {len(shape)} dims, above {MAX_DIMS}.")
        string = h5py.check_string_dtype(dtype) is not None
        if string or h5py.check_opaque_dtype(dtype) or h5py.check_vlen_dtype(dtype):
            stack = _attribute(h5py, oid, _STACK_ATTR)
            if stack is not None and stack.ndim == 1 and stack.size <= MAX_DIMS:
                return Array(name, path, tuple(int(n) for n in stack), str(dtype), "stack", path)
            numeric = not string and torch_dtype(dtype) is not None  # from_h5 sees a tensor
            return Array(name, path, shape, str(dtype), "data", path, batched=numeric)
        found = torch_dtype(dtype)
        if found is None:
            return Array(name, path, shape, str(dtype), "unsupported", path)
        return Array(name, path, shape, found, "tensor", path)

    # -- reads ------------------------------------------------------------------------

    def read_block(self, array: Array, index: tuple[Any, ...]) -> np.ndarray:
        try:
            data = np.asarray(self._file[array.ref][index])
        except (OSError, KeyError, RuntimeError) as error:  # HDF5's own: damaged chunks
            raise LeafDataError(
                f"{self.root}::{array.path}: h5py cannot read it: {error}"
            ) from None
        wanted = np.dtype(array.dtype if array.dtype != "bool" else np.bool_).newbyteorder("<")
        return data.astype(wanted, copy=False)

    def native_value(self, array: Array) -> tuple[Any] | None:
        """A value as ``from_h5`` reads it, ``dataset[()]``: a number or an array a
        numpy scalar or array (its JSON would load as ``int``, ``list``), a string
        ``bytes``; but a string tensordict marked, ``str`` where the installed
        tensordict reads it so (:func:`reads_str`)."""
        ds = self._bounded(array)
        string = self._h5py.check_string_dtype(ds.dtype) is not None
        if not string and ds.dtype.kind == "O":
            return None
        marked = string and reads_str() and self._marked_str(ds)
        try:
            return (ds.asstr()[()] if marked else ds[()],)
        except (OSError, KeyError, RuntimeError) as error:  # HDF5's own: damaged chunks
            raise LeafDataError(
                f"{self.root}::{array.path}: h5py cannot read it: {error}"
            ) from None

    def _marked_str(self, ds: Any) -> bool:
        """Whether tensordict marked the string dataset ``ds`` as one it wrote."""
        flag = _attribute(self._h5py, ds.id, _STR_ATTR, kinds="biu")
        return flag is not None and flag.size == 1 and bool(flag.reshape(()))

    def _bounded(self, array: Array) -> Any:
        ds = self._file[array.ref]
        if ds.size * max(ds.dtype.itemsize, 1) > MAX_NON_TENSOR_BYTES:
            raise LimitExceededError(
                f"{self.root}: the value of {array.path!r} holds {ds.size} elements of "
                f"{ds.dtype}, above the limit of {MAX_NON_TENSOR_BYTES} bytes."
            )
        return ds

    def value_json(self, array: Array) -> str:
        ds = self._bounded(array)
        if self._h5py.check_string_dtype(ds.dtype) is not None:
            value = ds.asstr()[()]
            value = value.tolist() if isinstance(value, np.ndarray) else value
        else:
            value = np.asarray(ds[()]).tolist()
        try:
            return json.dumps(value, allow_nan=True)
        except TypeError:
            raise CheckpointFormatError(
                f"{self.root}: the value of {array.path!r} ({ds.dtype}) is not one tdview "
                "shows: only strings, numbers and booleans are."
            ) from None
