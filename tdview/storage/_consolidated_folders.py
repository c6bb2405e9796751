"""The folders of a consolidated file's layout (see :mod:`._consolidated_layout`), made
from the levels of its JSON footer as tensordict's memmap writer would write them: a
TensorDict's ``meta.json`` (entry records, then ``shape``, ``device``, ``_type``...), a
tensorclass's ``_tensordict/``, a stack's members, a non-tensor's value, a jagged leaf's
values and sizes."""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring_ascii
from typing import Any

from ._group_tree import encode_name  # the robust key encoding of tensordict's writers

__all__ = ["LEVEL_FIELDS", "META", "Folder", "make_folder", "role"]

META = "meta.json"
# the classes the document names by their short name, as meta.json names them
_TD = ("<class 'tensordict._td.TensorDict'>", "tensordict:TensorDict")
_LAZY = ("<class 'tensordict._lazy.LazyStackedTensorDict'>", "tensordict:LazyStackedTensorDict")
_NT_STACK = ("<class 'tensordict.tensorclass.NonTensorStack'>", "tensordict:NonTensorStack")
_NT_DATA = "<class 'tensordict.tensorclass.NonTensorData'>"
# a TensorDict folder's last fields, and a non-tensor's record, as JSON
_TD_FIELDS = (json.dumps(_TD[0]), "1", json.dumps(_TD[1]))
_NON_TENSOR = '{"type": "NonTensorData"}'
# a jagged (NJT) tensor is recorded as its parts "<NJT_VALUES>key", "<NJT_OFFSETS>key"...
_JAGGED = re.compile(r"<NJT(_VALUES|_LENGTHS|_OFFSETS)?>(.*)", re.DOTALL)
_JAGGED_NOTE = (
    "a jagged (torch.jagged layout) tensor with lengths or another ragged dim: tdview does "
    "not read it; TensorDict.from_consolidated does"
)
# a level's fields; every other key is a nested level, whose "cls" is TensorDict,
# LazyStackedTensorDict, NonTensorStack, or str(cls) of a tensorclass (non-tensor data is
# a record of "non_tensors", never a level)
LEVEL_FIELDS = frozenset({"cls", "cls_metadata", "leaves", "non_tensors", "size"})


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


def role(level: dict) -> str:
    """How a level is laid out: by the class the document names."""
    cls = level["cls"]
    if cls in ("TensorDict", "LazyStackedTensorDict", "NonTensorStack"):
        return cls
    return "tensorclass"  # str(cls) of a tensorclass (anything else fails as a class)


def _tensordict(level: dict) -> Folder:
    """A TensorDict folder: entry records, then the node fields, as tensordict writes.
    The ``meta.json`` is written as ``json.dumps`` of its dict would be, each value
    encoded as it is set (a folder's is made in a few microseconds: one per level)."""
    folder = Folder()
    cls_meta = level.get("cls_metadata", {})
    device = cls_meta.get("device")
    meta: dict[str, str] = {}  # key -> its value as JSON
    jagged: dict[str, dict[str, list]] = {}
    leaf_device = f'{{"device": {_json(device or "cpu")}, "shape": '
    for key, leaf in level.get("leaves", {}).items():
        dtype, shape, start, stop, pad = leaf[:5]
        part = _JAGGED.match(key) if key.startswith("<NJT") else None
        if part is not None:  # a jagged tensor's parts: one nested leaf (_jagged)
            jagged.setdefault(part[2], {})[part[1] or ""] = leaf
            continue
        # (a shape is a list of ints: checked when the file was opened)
        meta[key] = f'{leaf_device}{shape}, "dtype": {_json(dtype)}, "is_nested": false}}'
        if stop - pad > start:  # tensordict writes no file for a leaf without elements
            folder.files[encode_name(key) + ".memmap"] = (start, stop - pad - start)
    for key, parts in jagged.items():
        _jagged(folder, meta, key, parts, device)
    for key, record in level.get("non_tensors", {}).items():
        meta[key] = _NON_TENSOR
        folder.dirs[encode_name(key)] = (record, "data")
    for key, child in level.items():
        if key not in LEVEL_FIELDS and isinstance(child, dict):
            kind = role(child)
            cls = child["cls"] if kind != "tensorclass" else _short(child["cls"])
            meta[key] = f'{{"type": {_json(cls)}}}'
            folder.dirs[encode_name(key)] = (child, kind)
    meta["shape"] = _json(cls_meta.get("batch_size", []))
    meta["device"] = _json(device if isinstance(device, str) else "None")
    meta["_type"], meta["_format_version"], meta["_class"] = _TD_FIELDS
    names = cls_meta.get("names")
    if isinstance(names, list) and any(name is not None for name in names):
        meta["_names"] = _json(names)
    text = ", ".join([f"{encode_basestring_ascii(key)}: {value}" for key, value in meta.items()])
    folder.meta = ("{" + text + "}").encode()
    return folder


def _json(value: Any) -> str:
    """``json.dumps(value)``: a string or a list of ints without its machinery."""
    if type(value) is str:
        return encode_basestring_ascii(value)
    if type(value) is list and not set(map(type, value)) - {int}:
        return str(value)
    return json.dumps(value)


def _jagged(
    folder: Folder, meta: dict[str, str], key: str, parts: dict[str, list], device: Any
) -> None:
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
        meta[key] = _NON_TENSOR
        folder.dirs[encode_name(key)] = ([_JAGGED_NOTE, [], None], "data")
        return
    dtype, shape, start, stop, pad = values[:5]
    elements = max(offsets[1][0] - 1, 0)
    meta[key] = json.dumps(
        {
            "device": device or "cpu",
            "shape": [elements, len(shape)],
            "dtype": dtype,
            "is_nested": True,
        }
    )
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
        if key not in LEVEL_FIELDS and isinstance(child, dict):
            folder.dirs[encode_name(key)] = (child, role(child))
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
    for i in range(len(records) + sum(1 for k in level if k not in LEVEL_FIELDS)):
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


FOLDERS: dict[str, Any] = {
    "TensorDict": _tensordict,
    "tensorclass": _tensorclass,
    "LazyStackedTensorDict": lambda level: _stack(level, _LAZY),
    "NonTensorStack": lambda level: _stack(level, _NT_STACK),
    "data": _non_tensor,
}


def make_folder(level: Any, kind: str) -> Folder:
    """The folder of ``level`` laid out as ``kind`` (:func:`role`, or ``"data"`` for a
    non-tensor record)."""
    return FOLDERS[kind](level)
