"""A file of groups and arrays (HDF5, zarr) seen as a checkpoint folder tree.

tensordict's ``to_h5`` and ``to_zarr`` write a nested tensordict as groups (nested
tensordicts) and arrays (leaves, and non-tensor values marked by attributes). The index
reads checkpoints as folders with a ``meta.json`` and ``<key>.memmap`` leaves, so a
:class:`GroupTreeStore` presents such a file that way: each group is a folder whose
``meta.json`` is made from the group's metadata (a TensorDict with its batch size and
dim names, one record per array), each tensor array a ``<encoded key>.memmap`` file
whose bytes are the array's elements in C order, little-endian, read through the
format's own library (h5py's or zarr's slicing: only the elements asked for, the
chunks holding them decompressed by the library), each non-tensor value a
``NonTensorData`` or ``NonTensorStack`` folder. Tree, search, preview, load and diff
then work unchanged: the store cannot be mapped (``mappable`` False), so the loader
reads leaves with ``fetch`` and a preview reads byte ranges (``read_ranges``), as for
a remote store; a load gives plain tensors in memory (``leaves_in_memory``), as the
format's own reader does, not ``MemoryMappedTensor``.

Nothing is read from an array but its metadata until its bytes are asked for (a
non-tensor value when its folder's ``meta.json`` is, bounded). Dtypes come from a
closed table (:data:`TORCH_DTYPES`); an array of another dtype is a folder whose
``meta.json`` cannot be read, the error naming the file, the key and the dtype.
A format subclass builds the tree of :class:`Group` and :class:`Array` and reads them.
"""

from __future__ import annotations

import abc
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CheckpointFormatError, LimitExceededError, UnsafeCheckpointError
from ._base import EntryInfo, Payload, Store
from ._key_safety import check_key, not_found

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = [
    "MAX_DIMS",
    "MAX_NON_TENSOR_BYTES",
    "MAX_OBJECTS",
    "TORCH_DTYPES",
    "Array",
    "Group",
    "GroupTreeStore",
    "encode_name",
    "torch_dtype",
]

#: numpy ``(kind, itemsize)`` -> torch dtype name: the dtypes a tensor array may have
TORCH_DTYPES = {
    ("b", 1): "bool",
    ("u", 1): "uint8",
    ("i", 1): "int8",
    ("i", 2): "int16",
    ("i", 4): "int32",
    ("i", 8): "int64",
    ("u", 2): "uint16",
    ("u", 4): "uint32",
    ("u", 8): "uint64",
    ("f", 2): "float16",
    ("f", 4): "float32",
    ("f", 8): "float64",
    ("c", 8): "complex64",
    ("c", 16): "complex128",
}
MAX_OBJECTS = 1_000_000  # groups and arrays in one file
MAX_DIMS = 64  # dims of one array (torch's own limit)
MAX_DEPTH = 256  # nesting of groups
MAX_NON_TENSOR_BYTES = 1 << 20  # the JSON of one non-tensor value
_UNSAFE = set('/<>:"|?*\\ %') | {chr(c) for c in range(32)} | {chr(127)}
_ENCODE = str.maketrans({c: f"%{ord(c):02X}" for c in _UNSAFE})
_TD = '"_type": "<class \'tensordict._td.TensorDict\'>", "_format_version": 1, '
_TD += '"_class": "tensordict:TensorDict"'


def encode_name(name: str) -> str:
    """The file name tensordict's robust key encoding gives ``name`` (storage may not
    import ``format``; ``tests/test_h5.py`` holds it equal to ``format.encode_key``).

    Examples
    --------
    >>> encode_name("a b"), encode_name(""), encode_name("..")
    ('a%20b', '%', '%2E%2E')
    """
    if name in ("", ".", ".."):
        return {"": "%", ".": "%2E", "..": "%2E%2E"}[name]
    return name.translate(_ENCODE)


def torch_dtype(dtype: np.dtype) -> str | None:
    """The torch dtype name of a plain numeric numpy dtype (either byte order), or None.

    Examples
    --------
    >>> torch_dtype(np.dtype(">f4")), torch_dtype(np.dtype("S3"))
    ('float32', None)
    """
    if dtype.fields is not None or dtype.subdtype is not None:
        return None
    return TORCH_DTYPES.get((dtype.kind, dtype.itemsize))


@dataclass
class Array:
    """An array of the file: a tensor leaf (``kind="tensor"``, ``dtype`` a torch name),
    a non-tensor value (``"data"``: NonTensorData, ``"stack"``: NonTensorStack of
    ``shape``), one of no dtype of the table (``"unsupported"``, ``dtype`` the
    library's name), or one not read (``"refused"``, ``ref`` saying why, after its
    path). ``ref``: what the format's reader needs to find it. ``batched``: a
    non-tensor value that counts for its group's batch size with its ``shape``, as in
    ``from_h5`` (an opaque number read as a tensor then)."""

    name: str
    path: str
    shape: tuple[int, ...]
    dtype: str
    kind: str
    ref: Any
    batched: bool = False

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype if self.dtype != "bool" else np.bool_).itemsize


@dataclass
class Group:
    """A group: a nested tensordict. ``batch``/``names``: what the file recorded (zarr's
    ``__tensordict__`` attribute), else None and the batch size is the largest that
    its entries share, as tensordict's ``from_h5`` gives."""

    name: str
    path: str
    members: list[Group | Array] = field(default_factory=list)
    batch: list[int] | None = None
    names: list[str | None] | None = None

    def shared_batch(self) -> list[int]:
        """The batch size (see the class docstring), worked out once."""
        if self.batch is None:
            self.batch = _largest_batch(self)
        return self.batch


def _largest_batch(group: Group) -> list[int]:
    """tensordict's ``_set_max_batch_size``: the leading dims every entry shares
    (non-tensor values aside; an empty nested group, not first, agrees with any)."""
    shapes: list[list[int] | None] = []
    for member in group.members:
        if isinstance(member, Group):
            shapes.append(None if _empty(member) and shapes else member.shared_batch())
        elif member.kind in ("tensor", "stack") or member.batched:
            shapes.append(list(member.shape))
    if not shapes or shapes[0] is None:
        return []
    first, out = shapes[0], []
    for dim, size in enumerate(first):
        if any(s is not None and (len(s) <= dim or s[dim] != size) for s in shapes[1:]):
            break
        out.append(size)
    return out


def _empty(group: Group) -> bool:
    return all(isinstance(m, Group) and _empty(m) for m in group.members)


class GroupTreeStore(Store):
    """The store of a file of groups and arrays (see the module docstring). A subclass
    opens the file, builds ``tree`` and reads arrays (:meth:`read_block`,
    :meth:`value_json`)."""

    mappable = False
    packed = False
    leaves_in_memory = True
    values_batched = True

    def __init__(self, root: str, tree: Group) -> None:
        self.root = root
        self._files: dict[str, Array] = {}  # "<dir>/<enc>.memmap" -> tensor array
        self._folders: dict[str, Group | Array] = {}  # dirkey -> group or non-tensor
        self._listing: dict[str, list[str]] = {}
        self._metas: dict[str, bytes] = {}
        self._add_folder("", tree)

    def _add_folder(self, dirkey: str, item: Group | Array) -> None:
        self._folders[dirkey] = item
        names = ["meta.json"]
        for member in item.members if isinstance(item, Group) else ():
            name = encode_name(member.name)
            key = f"{dirkey}/{name}" if dirkey else name
            if isinstance(member, Array) and member.kind == "tensor":
                if member.numel:  # tensordict writes no file for an empty leaf
                    self._files[key + ".memmap"] = member
                    names.append(name + ".memmap")
                continue
            names.append(name)
            self._add_folder(key, member)
        self._listing[dirkey] = sorted(names)

    # -- what a format reads ----------------------------------------------------------

    @abc.abstractmethod
    def read_block(self, array: Array, index: tuple[Any, ...]) -> np.ndarray:
        """The elements ``array[index]`` (integers, then one slice) as a native,
        little-endian numpy array of the array's dtype, read by the format's library."""

    def held_value(self, dirkey: str) -> tuple[Any] | None:
        item = self._folders.get(dirkey)
        if isinstance(item, Array) and item.kind == "data":
            return self.native_value(item)
        return None

    def native_value(self, array: Array) -> tuple[Any] | None:
        """``(value,)`` of a non-tensor value as the format's reader gives it, where its
        JSON loses its type; None where the JSON is the value (the default)."""
        return None

    @abc.abstractmethod
    def value_json(self, array: Array) -> str:
        """The JSON text of a non-tensor value (``"data"``) or of the nested list of a
        stack's elements (``"stack"``), at most :data:`MAX_NON_TENSOR_BYTES`."""

    # -- keys -------------------------------------------------------------------------

    def display(self, key: str) -> str:
        base, _, leaf = key.rpartition("/")
        if key in self._files:
            return f"{self.root}::{self._files[key].path}"
        if leaf == "meta.json" and base in self._folders:
            return f"{self.root}::{self._folders[base].path} (its meta.json, made by tdview)"
        return f"{self.root}::{key}"

    def is_file(self, key: str) -> bool:
        check_key(key, self.root)
        return key in self._files or self._meta_folder(key) is not None

    def is_dir(self, key: str) -> bool:
        check_key(key, self.root)
        return key in self._folders

    def list_dir(self, key: str) -> list[str]:
        check_key(key, self.root)
        if key not in self._folders:
            raise not_found(self.display(key))
        return list(self._listing[key])

    def _meta_folder(self, key: str) -> str | None:
        base, _, leaf = key.rpartition("/")
        return base if leaf == "meta.json" and base in self._folders else None

    def entry(self, key: str) -> EntryInfo:
        payload = self.locate(key)
        return EntryInfo(key, payload.display, payload.size, payload.size, "stored", None, None)

    def locate(self, key: str) -> Payload:
        check_key(key, self.root)
        if key in self._folders:
            raise IsADirectoryError(f"{self.display(key)} is a group, not a file.")
        size = self._size(key)
        return Payload(key, self.display(key), None, False, 0, size, size, "stored", None, False,
                       as_stored=True, mappable=False)  # fmt: skip

    def _size(self, key: str) -> int:
        found = self._files.get(key)
        if found is not None:
            return found.numel * found.itemsize
        if self._meta_folder(key) is None:
            raise not_found(self.display(key))
        return len(self._meta(key))

    def known_size(self, key: str) -> int | None:
        found = self._files.get(key)
        return None if found is None else found.numel * found.itemsize

    def writable(self, key: str | None = None) -> bool:
        return False

    # -- meta.json --------------------------------------------------------------------

    def read_bytes(self, key: str, limit: int) -> bytes:
        check_key(key, self.root)
        size = self._size(key)
        if size > limit:
            raise LimitExceededError(
                f"{self.display(key)} has {size} bytes, above the limit of {limit} bytes."
            )
        if key in self._files:
            out = np.empty(size, np.uint8)
            self.read_into(key, 0, out.data)
            return out.tobytes()
        return self._meta(key)

    def _meta(self, key: str) -> bytes:
        found = self._metas.get(key)
        if found is None:
            dirkey = self._meta_folder(key)
            assert dirkey is not None
            item = self._folders[dirkey]
            text = _group_meta(item) if isinstance(item, Group) else self._value_meta(item)
            found = self._metas[key] = text.encode()
        return found

    def _value_meta(self, array: Array) -> str:
        if array.kind == "refused":
            raise UnsafeCheckpointError(f"{self.root}: {array.path!r} {array.ref}.")
        if array.kind == "unsupported":
            raise CheckpointFormatError(
                f"{self.root}: the array {array.path!r} has the dtype {array.dtype!r}, "
                "which is not a tensor dtype tdview reads, nor a value tensordict wrote."
            )
        data = self.value_json(array)
        if len(data) > MAX_NON_TENSOR_BYTES:
            raise LimitExceededError(
                f"{self.root}: the value of {array.path!r} takes {len(data)} bytes of JSON, "
                f"above the limit of {MAX_NON_TENSOR_BYTES}."
            )
        if array.kind == "stack":  # on the CPU, as from_h5 and from_zarr give a stack
            return (
                '{"_type": "<class \'tensordict.tensorclass.NonTensorStack\'>", '
                '"_format_version": 1, "_class": "tensordict:NonTensorStack", '
                f'"stack_dim": 0, "device": "cpu", "data": {data}}}'
            )
        return (
            '{"_type": "<class \'tensordict.tensorclass.NonTensorData\'>", '
            f'"data": {data}, "_metadata": null, "_is_non_tensor": true}}'
        )

    # -- payloads ---------------------------------------------------------------------

    def read_into(self, key: str, offset: int, buf: Buffer) -> None:
        check_key(key, self.root)
        dest = memoryview(buf).cast("B")
        array = self._files.get(key)
        if array is None:
            data = self.read_bytes(key, MAX_NON_TENSOR_BYTES * 2)
            if offset + len(dest) > len(data):
                raise ValueError(f"{self.display(key)}: bytes {offset}..{offset + len(dest)}.")
            dest[:] = data[offset : offset + len(dest)]
            return
        item, size = array.itemsize, array.numel * array.itemsize
        if offset < 0 or offset + len(dest) > size:
            raise ValueError(
                f"{self.display(key)}: the bytes {offset}..{offset + len(dest)} run past its "
                f"{size} bytes."
            )
        if not len(dest):
            return
        first, last = offset // item, -(-(offset + len(dest)) // item)
        flat = self._read_flat(array, first, last).view(np.uint8)
        skip = offset - first * item
        dest[:] = flat[skip : skip + len(dest)].data

    def _read_flat(self, array: Array, start: int, stop: int) -> np.ndarray:
        """Elements ``[start, stop)`` of the array in C order, reading at most the rows
        of one dim that hold them: fixed indices down to the dim where they part."""
        shape, prefix = array.shape, list[int]()
        while True:
            dim = len(prefix)
            if dim == len(shape):
                return self.read_block(array, tuple(prefix)).reshape(-1)
            row = math.prod(shape[dim + 1 :])
            low, high = start // row, (stop - 1) // row
            if low == high and dim + 1 < len(shape):
                prefix.append(low)
                start, stop = start - low * row, stop - low * row
                continue
            block = self.read_block(array, (*prefix, slice(low, high + 1)))
            flat = np.ascontiguousarray(block).reshape(-1)
            return flat[start - low * row : stop - low * row]

    def read_ranges(self, key: str, spans: Sequence[tuple[int, int]], dest: memoryview) -> None:
        at = 0
        for start, end in spans:
            if not 0 <= start <= end:
                raise ValueError(f"{self.display(key)}: a byte range {start}..{end}.")
            self.read_into(key, start, dest[at : at + end - start])
            at += end - start


def _group_meta(group: Group) -> str:
    """A TensorDict's ``meta.json`` as tensordict writes it, from a group's metadata."""
    parts = []
    for member in group.members:
        if isinstance(member, Array) and member.kind == "tensor":
            record = {"device": "cpu", "shape": list(member.shape),
                      "dtype": f"torch.{member.dtype}", "is_nested": False}  # fmt: skip
        elif isinstance(member, Group):
            record = {"type": "TensorDict"}
        else:
            record = {"type": "NonTensorStack" if member.kind == "stack" else "NonTensorData"}
        parts.append(f"{json.dumps(member.name)}: {json.dumps(record)}")
    parts.append(f'"shape": {json.dumps(group.shared_batch())}, "device": "None", {_TD}')
    if group.names is not None and any(n is not None for n in group.names):
        parts.append(f'"_names": {json.dumps(group.names)}')
    return "{" + ", ".join(parts) + "}"
