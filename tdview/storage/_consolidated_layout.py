"""A tensordict consolidated file, seen as the folders a memory-mapped save would write.

``td.consolidate(filename=path)`` writes one file: the leaves' bytes back to back (the
*payload*), then a JSON document describing the tree, then that document's length as a
little-endian int64. The document is nested by tensordict level::

    {"cls": "TensorDict",                 # or LazyStackedTensorDict, NonTensorStack,
                                          # NonTensorData, or str(cls) of a tensorclass
     "cls_metadata": {"batch_size": [3], "names": ["t"], "device": null, "is_locked": false},
                                          # a stack: {"stack_dim", "stack_dim_name", ...}
     "leaves": {"a": ["torch.float32", [3], 0, 16, 4]},   # dtype, shape, start, stop, pad
     "non_tensors": {"s": ["hi", [3], null]},             # data, batch size, device
     "b": {...}, "0": {...}}              # every other key: a nested level

This module turns that document into the layout the index already reads: a folder per
level with a ``meta.json`` made from it (written as tensordict's memmap writer writes
one: entry records, then ``shape``, ``device``, ``_type``...), each leaf a
``<key>.memmap`` file that is the span of the payload holding it, each non-tensor a
NonTensorData folder, a tensorclass its ``_tensordict/`` folder, a stack its ``0/``,
``1/``... The footer is the consolidated format's own metadata, so the store parses it;
the ``meta.json`` it makes is only bytes to the store (never read back here).

Everything is checked when the file is opened: the footer's length against the file
and :data:`MAX_FOOTER`, the document's shape (levels, leaf and non-tensor records, the
nesting depth), and every leaf's span: inside the payload, no two overlapping. A folder's
files are made the first time it is asked for.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import CheckpointFormatError, LimitExceededError, UnsafeCheckpointError
from ._group_tree import encode_name  # the robust key encoding of tensordict's writers

__all__ = ["FOOTER", "MAX_FOOTER", "Folder", "Layout", "footer_length", "looks_consolidated"]

#: the trailing int64 that gives the JSON document's length
FOOTER = 8
#: the largest JSON document read (a 10,000-leaf file's is about 1 MB; as a meta.json's)
MAX_FOOTER = 64 << 20
#: levels of nesting accepted (tensordict's own trees are far shallower)
MAX_DEPTH = 200
META = "meta.json"

# the classes the document names by their short name, as meta.json names them
_TD = ("<class 'tensordict._td.TensorDict'>", "tensordict:TensorDict")
_LAZY = ("<class 'tensordict._lazy.LazyStackedTensorDict'>", "tensordict:LazyStackedTensorDict")
_NT_STACK = ("<class 'tensordict.tensorclass.NonTensorStack'>", "tensordict:NonTensorStack")
# a level's "cls": TensorDict, LazyStackedTensorDict, NonTensorStack, or str(cls) of a
# tensorclass (non-tensor data is a record of "non_tensors", never a level)
_NT_DATA = "<class 'tensordict.tensorclass.NonTensorData'>"
# a jagged (NJT) tensor is recorded as its parts "<NJT_VALUES>key", "<NJT_OFFSETS>key"...
_JAGGED = re.compile(r"<NJT(_VALUES|_LENGTHS|_OFFSETS)?>(.*)", re.DOTALL)
_JAGGED_NOTE = (
    "a jagged (torch.jagged layout) tensor with lengths or another ragged dim: tdview does "
    "not read it; TensorDict.from_consolidated does"
)
_LEVEL_FIELDS = frozenset({"cls", "cls_metadata", "leaves", "non_tensors", "size"})


def footer_length(tail: bytes, file_size: int, where: str) -> int:
    """The JSON document's length from the file's last 8 bytes, checked against the file
    and :data:`MAX_FOOTER`.

    Raises
    ------
    CheckpointFormatError
        The length is not positive or runs past the start of the file.
    LimitExceededError
        The length is above :data:`MAX_FOOTER`.

    Examples
    --------
    >>> footer_length((10).to_bytes(8, "little"), 100, "x.td")
    10
    """
    n = int.from_bytes(tail[-FOOTER:], "little", signed=True)
    if n <= 0 or n > file_size - FOOTER:
        raise CheckpointFormatError(
            f"{where}: the consolidated file's footer gives a metadata length of {n} bytes, "
            f"which does not fit in its {file_size} bytes."
        )
    if n > MAX_FOOTER:
        raise LimitExceededError(
            f"{where}: the consolidated metadata is {n:,} bytes, above tdview's limit of "
            f"{MAX_FOOTER:,} bytes."
        )
    return n


def looks_consolidated(tail: bytes, file_size: int) -> bool:
    """Whether a file of ``file_size`` bytes ending with ``tail`` (at least its last 8
    bytes) is worth parsing as a consolidated file: its footer gives a length that fits,
    and the bytes before it that ``tail`` holds start a JSON object.

    Examples
    --------
    >>> doc = b'{"cls": "TensorDict"}'
    >>> looks_consolidated(doc + len(doc).to_bytes(8, "little"), len(doc) + 8)
    True
    >>> looks_consolidated(b"PK\\x05\\x06" + bytes(18), 22)
    False
    """
    if len(tail) < FOOTER or file_size < FOOTER + 2:
        return False
    n = int.from_bytes(tail[-FOOTER:], "little", signed=True)
    if not 2 <= n <= min(file_size - FOOTER, MAX_FOOTER):
        return False
    start = len(tail) - FOOTER - n
    return start < 0 or tail[start : start + 1] == b"{"


class Folder:
    """One folder of the layout: its ``meta.json`` bytes, its leaf files (name -> span in
    the payload), the sizes files of its jagged leaves (name -> the span of their offsets
    and the element's other dims: made from the offsets when read) and its sub-folders
    (name -> the level and the role it plays)."""

    __slots__ = ("dirs", "files", "meta", "sizes")

    def __init__(self) -> None:
        self.meta = b""
        self.files: dict[str, tuple[int, int]] = {}
        self.sizes: dict[str, tuple[int, int, tuple[int, ...]]] = {}
        self.dirs: dict[str, tuple[Any, str]] = {}

    def names(self) -> list[str]:
        """The sorted names of the folder: files, ``meta.json`` and sub-folders."""
        return sorted([META, *self.files, *self.sizes, *self.dirs])


class Layout:
    """The folders of a consolidated file, from its JSON document.

    Parameters
    ----------
    document : bytes
        The JSON document (the bytes before the trailing length).
    payload_size : int
        The bytes before the document: every leaf's span must lie inside them.
    where : str
        The file, named in every error.

    Raises
    ------
    CheckpointFormatError
        The document is not JSON, or not the shape tensordict writes.
    UnsafeCheckpointError
        A leaf's span runs outside the payload, or two leaves' spans overlap.

    Examples
    --------
    >>> doc = {"cls": "TensorDict", "non_tensors": {}, "cls_metadata": {"batch_size": []},
    ...        "leaves": {"a": ["torch.float32", [2], 0, 8, 0]}}
    >>> layout = Layout(json.dumps(doc).encode(), 8, "x.td")
    >>> layout.folder("").names(), layout.folder("").files
    (['a.memmap', 'meta.json'], {'a.memmap': (0, 8)})
    """

    def __init__(self, document: bytes, payload_size: int, where: str) -> None:
        self.where = where
        self.payload_size = payload_size
        try:
            tree = json.loads(document)
        except RecursionError:
            raise LimitExceededError(
                f"{where}: the consolidated metadata nests too deeply to read."
            ) from None
        except (ValueError, UnicodeDecodeError) as error:
            raise CheckpointFormatError(
                f"{where}: the consolidated metadata is not JSON ({error})."
            ) from None
        self.tree = tree
        spans: list[tuple[int, int, tuple[str, ...]]] = []
        stack: list[tuple[Any, tuple[str, ...]]] = [(tree, ())]
        while stack:  # every level, checked; each leaf's span kept
            level, path = stack.pop()
            self._check_level(level, path, spans)
            stack += [(level[k], (*path, k)) for k in level if k not in _LEVEL_FIELDS]
        spans.sort()
        self._check_spans(spans)
        self._folders: dict[str, Folder] = {}

    # -- checks, once, at open -------------------------------------------------------

    def _fail(self, path: tuple[str, ...], what: str, value: object) -> CheckpointFormatError:
        shown = repr(value)
        if len(shown) > 200:
            shown = shown[:200] + "..."
        at = "/".join(path) or "<root>"
        return CheckpointFormatError(
            f"{self.where}: consolidated metadata at {at!r}: {what}, got {shown}."
        )

    def _check_level(
        self, level: Any, path: tuple[str, ...], spans: list[tuple[int, int, tuple[str, ...]]]
    ) -> None:
        """Check one level's fields and records; add each leaf's ``(start, end, path)``."""
        if len(path) > MAX_DEPTH:
            raise LimitExceededError(
                f"{self.where}: the consolidated metadata nests more than {MAX_DEPTH} levels."
            )
        if not isinstance(level, dict):
            raise self._fail(path, "a level must be a JSON object", level)
        if not isinstance(level.get("cls"), str):
            raise self._fail(path, 'field "cls" must be a string', level.get("cls"))
        for field in ("cls_metadata", "leaves", "non_tensors"):
            if not isinstance(level.get(field, {}), dict):
                raise self._fail(path, f'field "{field}" must be an object', level[field])
        payload = self.payload_size
        for key, leaf in level.get("leaves", {}).items():
            if type(leaf) is not list or len(leaf) not in (5, 6):
                raise self._fail((*path, key), "a leaf is [dtype, shape, start, stop, pad]", leaf)
            dtype, shape, start, stop, pad = leaf[:5]
            if type(dtype) is not str:
                raise self._fail((*path, key), "the dtype must be a string", dtype)
            if type(shape) is not list or not all(type(d) is int and d >= 0 for d in shape):
                what = "the shape must be a list of non-negative integers"
                raise self._fail((*path, key), what, shape)
            if not (_count(start) and _count(stop) and _count(pad)) or start + pad > stop:
                what = "start, stop and pad must be integers, start + pad <= stop"
                raise self._fail((*path, key), what, leaf[2:5])
            if stop > payload:
                raise UnsafeCheckpointError(
                    f"{self.where}: leaf {'/'.join((*path, key))!r} lies at bytes "
                    f"{start}..{stop}, past the {payload} bytes of the payload."
                )
            spans.append((start, stop - pad, (*path, key)))
        for key, record in level.get("non_tensors", {}).items():
            if type(record) is not list or len(record) != 3:
                what = "a non-tensor is [data, batch size, device]"
                raise self._fail((*path, key), what, record)

    def _check_spans(self, spans: list[tuple[int, int, tuple[str, ...]]]) -> None:
        """No two leaves' bytes overlap (spans sorted by start; empty ones overlap none)."""
        end = 0
        last: tuple[str, ...] = ()
        for start, stop, path in spans:
            if start < end and stop > start:
                raise UnsafeCheckpointError(
                    f"{self.where}: leaves {'/'.join(last)!r} and {'/'.join(path)!r} overlap "
                    f"(bytes {start}..{stop} start before {end})."
                )
            if stop > start:
                end, last = stop, path

    # -- folders ---------------------------------------------------------------------

    def folder(self, dirkey: str) -> Folder | None:
        """The folder ``dirkey`` (``""``: the root), or None when there is none."""
        found = self._folders.get(dirkey)
        if found is not None:
            return found
        if not dirkey:
            level, role = self.tree, _role(self.tree)
        else:
            parent_key, _, name = dirkey.rpartition("/")
            parent = self.folder(parent_key)
            if parent is None or name not in parent.dirs:
                return None
            level, role = parent.dirs[name]
        made = self._folders[dirkey] = _FOLDERS[role](level)
        return made

    def split(self, key: str) -> tuple[Folder | None, str]:
        """The folder holding file ``key``, and the file's name there."""
        dirkey, _, name = key.rpartition("/")
        return self.folder(dirkey), name


def _count(value: object) -> bool:
    return type(value) is int and value >= 0


def _role(level: dict) -> str:
    """How a level is laid out: by the class the document names."""
    cls = level["cls"]
    if cls in ("TensorDict", "LazyStackedTensorDict", "NonTensorStack"):
        return cls
    return "tensorclass"  # str(cls) of a tensorclass (anything else fails as a class)


def _tensordict(level: dict) -> Folder:
    """A TensorDict folder: entry records, then the node fields, as tensordict writes."""
    folder = Folder()
    cls_meta = level.get("cls_metadata", {})
    device = cls_meta.get("device")
    meta: dict[str, Any] = {}
    jagged: dict[str, dict[str, list]] = {}
    for key, leaf in level.get("leaves", {}).items():
        dtype, shape, start, stop, pad = leaf[:5]
        part = _JAGGED.match(key)
        if part is not None:  # a jagged tensor's parts: one nested leaf (_jagged)
            jagged.setdefault(part[2], {})[part[1] or ""] = leaf
            continue
        meta[key] = {"device": device or "cpu", "shape": shape, "dtype": dtype, "is_nested": False}
        if stop - pad > start:  # tensordict writes no file for a leaf without elements
            folder.files[encode_name(key) + ".memmap"] = (start, stop - pad - start)
    for key, parts in jagged.items():
        _jagged(folder, meta, key, parts, device)
    for key, record in level.get("non_tensors", {}).items():
        meta[key] = {"type": "NonTensorData"}
        folder.dirs[encode_name(key)] = (record, "data")
    for key, child in level.items():
        if key not in _LEVEL_FIELDS and isinstance(child, dict):
            role = _role(child)
            meta[key] = {"type": child["cls"] if role != "tensorclass" else _short(child["cls"])}
            folder.dirs[encode_name(key)] = (child, role)
    meta["shape"] = cls_meta.get("batch_size", [])
    meta["device"] = device if isinstance(device, str) else "None"
    meta["_type"], meta["_format_version"], meta["_class"] = _TD[0], 1, _TD[1]
    names = cls_meta.get("names")
    if isinstance(names, list) and any(name is not None for name in names):
        meta["_names"] = names
    folder.meta = _dumps(meta)
    return folder


def _jagged(folder: Folder, meta: dict, key: str, parts: dict[str, list], device: Any) -> None:
    """A jagged tensor as a memmap save's nested leaf: its values, packed, in
    ``<key>.memmap``, and the ``[N, D]`` int64 sizes of its elements in
    ``<key>.shape.memmap``, made from its offsets when read. One with lengths (holes
    between elements) or another ragged dim is a note."""
    values, offsets = parts.get("_VALUES"), parts.get("_OFFSETS")
    if (
        values is None
        or offsets is None
        or "_LENGTHS" in parts
        or (len(offsets) == 6 and offsets[5] != 1)
        or offsets[0] != "torch.int64"
        or len(offsets[1]) != 1
        or not values[1]
        or offsets[3] - offsets[4] - offsets[2] != 8 * offsets[1][0]
    ):
        meta[key] = {"type": "NonTensorData"}
        folder.dirs[encode_name(key)] = ([_JAGGED_NOTE, [], None], "data")
        return
    dtype, shape, start, stop, pad = values[:5]
    elements = max(offsets[1][0] - 1, 0)
    meta[key] = {
        "device": device or "cpu",
        "shape": [elements, len(shape)],
        "dtype": dtype,
        "is_nested": True,
    }
    name = encode_name(key)
    if stop - pad > start:
        folder.files[name + ".memmap"] = (start, stop - pad - start)
    span = (offsets[2], offsets[3] - offsets[4] - offsets[2], tuple(shape[1:]))
    folder.sizes[name + ".shape.memmap"] = span


def _tensorclass(level: dict) -> Folder:
    """A tensorclass: ``{"_type": str(cls)}`` and its fields in ``_tensordict/``."""
    folder = Folder()
    folder.meta = _dumps({"_type": level["cls"]})
    folder.dirs["_tensordict"] = (level, "TensorDict")
    return folder


def _stack(level: dict, header: tuple[str, str]) -> Folder:
    """A lazy stack (or a NonTensorStack kept as its members): its members in ``0/``,
    ``1/``...; a NonTensorStack's members may be non-tensors."""
    folder = Folder()
    cls_meta = level.get("cls_metadata", {})
    meta: dict[str, Any] = {"_type": header[0], "_format_version": 1, "_class": header[1]}
    meta["stack_dim"] = cls_meta.get("stack_dim", 0)
    meta["stack_dim_name"] = cls_meta.get("stack_dim_name")
    values = _stack_values(level) if header is _NT_STACK else None
    if values is not None:  # as tensordict's memmap writer writes a stack of values
        meta["device"], meta["data"] = None, values
        folder.meta = _dumps(meta)
        return folder
    for key, record in level.get("non_tensors", {}).items():
        folder.dirs[encode_name(key)] = (record, "data")
    for key, child in level.items():
        if key not in _LEVEL_FIELDS and isinstance(child, dict):
            folder.dirs[encode_name(key)] = (child, _role(child))
    folder.meta = _dumps(meta)
    return folder


def _stack_values(level: dict) -> list | None:
    """A NonTensorStack's values as nested lists (``stack.tolist()``), or None when its
    members are not all values, its stack dim is not 0, or a value is itself a list
    (a load would read the list as one more stack dim): it is then kept as members."""
    if level.get("cls_metadata", {}).get("stack_dim", 0) != 0:
        return None
    records = level.get("non_tensors", {})
    values = []
    for i in range(len(records) + sum(1 for k in level if k not in _LEVEL_FIELDS)):
        record, child = records.get(str(i)), level.get(str(i))
        if record is not None and not isinstance(record[0], list):
            values.append(record[0])
        elif isinstance(child, dict) and child.get("cls") == "NonTensorStack":
            inner = _stack_values(child)
            if inner is None:
                return None
            values.append(inner)
        else:
            return None
    return values or None


def _non_tensor(record: list) -> Folder:
    """A NonTensorData folder: its value in ``meta.json``, as tensordict writes it, and
    its batch size and device (which tensordict's memmap writer leaves out) in
    ``_tensordict/``, as a tensorclass's."""
    folder = Folder()
    data, batch_size, device = record
    folder.meta = _dumps(
        {"_type": _NT_DATA, "data": data, "_metadata": None, "_is_non_tensor": True}
    )
    inner = {"cls": "TensorDict", "cls_metadata": {"batch_size": batch_size, "device": device}}
    folder.dirs["_tensordict"] = (inner, "TensorDict")
    return folder


def _short(cls: str) -> str:
    """``"<class 'pkg.mod.Point'>"`` -> ``"Point"`` (a parent's record of a child)."""
    return cls.removeprefix("<class '").removesuffix("'>").rpartition(".")[2]


def _dumps(meta: dict) -> bytes:
    return json.dumps(meta).encode()


_FOLDERS: dict[str, Any] = {
    "TensorDict": _tensordict,
    "tensorclass": _tensorclass,
    "LazyStackedTensorDict": lambda level: _stack(level, _LAZY),
    "NonTensorStack": lambda level: _stack(level, _NT_STACK),
    "data": _non_tensor,
}
