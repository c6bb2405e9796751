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
files are made the first time it is asked for (:mod:`._consolidated_folders`).
"""

from __future__ import annotations

import json
from itertools import chain
from operator import itemgetter, methodcaller
from typing import Any

import numpy as np

from ..errors import CheckpointFormatError, LimitExceededError, UnsafeCheckpointError
from ._consolidated_folders import LEVEL_FIELDS, Folder, make_folder, role
from ._fast_json import NOT_READ, fast_loads

__all__ = ["FOOTER", "MAX_FOOTER", "Folder", "Layout", "footer_length", "looks_consolidated"]

#: the trailing int64 that gives the JSON document's length
FOOTER = 8
#: the largest JSON document read (a 10,000-leaf file's is about 1 MB; as a meta.json's)
MAX_FOOTER = 64 << 20
#: levels of nesting accepted (tensordict's own trees are far shallower)
MAX_DEPTH = 200
_NO_FIELD: dict[str, Any] = {}


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
        self.tree = tree = self._parse(document)
        if not _checked_at_once(tree, payload_size):
            # a doubt: level by level, leaf by leaf, the first error named
            self._check_each(tree)
        self._folders: dict[str, Folder] = {}

    def _parse(self, document: bytes) -> Any:
        tree = fast_loads(document if type(document) is bytes else bytes(document))
        if tree is not NOT_READ:
            return tree
        try:
            return json.loads(document)
        except RecursionError:
            raise LimitExceededError(
                f"{self.where}: the consolidated metadata nests too deeply to read."
            ) from None
        except (ValueError, UnicodeDecodeError) as error:
            raise CheckpointFormatError(
                f"{self.where}: the consolidated metadata is not JSON ({error})."
            ) from None

    # -- checks, once, at open -------------------------------------------------------

    def _check_each(self, tree: Any) -> None:
        """Check every level and leaf one by one, raising the first error met."""
        spans: list[tuple[int, int, tuple[str, ...]]] = []
        stack: list[tuple[Any, tuple[str, ...]]] = [(tree, ())]
        while stack:  # every level, checked; each leaf's span kept
            level, path = stack.pop()
            self._check_level(level, path, spans)
            stack += [(level[k], (*path, k)) for k in level if k not in LEVEL_FIELDS]
        spans.sort()
        self._check_spans(spans)

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
            level, kind = self.tree, role(self.tree)
        else:
            parent_key, _, name = dirkey.rpartition("/")
            parent = self.folder(parent_key)
            if parent is None or name not in parent.dirs:
                return None
            level, kind = parent.dirs[name]
        made = self._folders[dirkey] = make_folder(level, kind)
        return made

    def split(self, key: str) -> tuple[Folder | None, str]:
        """The folder holding file ``key``, and the file's name there."""
        dirkey, _, name = key.rpartition("/")
        return self.folder(dirkey), name


def _count(value: object) -> bool:
    return type(value) is int and value >= 0


_GET_LEAVES = methodcaller("get", "leaves", {})
_GET_NON_TENSORS = methodcaller("get", "non_tensors", {})
_DTYPE, _SHAPE, _START, _STOP, _PAD = (itemgetter(i) for i in range(5))


def _checked_at_once(tree: Any, payload: int) -> bool:
    """Whether ``tree`` passes every check of :meth:`Layout._check_each`, told by whole
    columns (a few C-level passes over all leaves rather than Python code per leaf);
    False at the first doubt: the checks one by one then name what is wrong."""
    levels, stack = [], [(tree, 0)]
    while stack:
        level, depth = stack.pop()
        if type(level) is not dict or depth > MAX_DEPTH or type(level.get("cls")) is not str:
            return False
        for field in ("cls_metadata", "leaves", "non_tensors"):
            if type(level.get(field, _NO_FIELD)) is not dict:
                return False
        levels.append(level)
        stack.extend([(level[key], depth + 1) for key in level.keys() - LEVEL_FIELDS])
    leaves = list(chain.from_iterable(map(dict.values, map(_GET_LEAVES, levels))))
    others = list(chain.from_iterable(map(dict.values, map(_GET_NON_TENSORS, levels))))
    if set(map(type, leaves)) - {list} or set(map(len, leaves)) - {5, 6}:
        return False
    if set(map(type, others)) - {list} or set(map(len, others)) - {3}:
        return False
    shapes = list(map(_SHAPE, leaves))
    numbers = [*map(_START, leaves), *map(_STOP, leaves), *map(_PAD, leaves)]
    if set(map(type, map(_DTYPE, leaves))) - {str} or set(map(type, shapes)) - {list}:
        return False
    sizes = list(chain.from_iterable(shapes))
    if set(map(type, sizes)) - {int} or set(map(type, numbers)) - {int}:
        return False  # (a bool is no int here, as in _count)
    if (
        min(sizes, default=0) < 0
        or min(numbers, default=0) < 0
        or max(numbers, default=0) > payload
    ):
        return False
    try:
        start, stop, pad = np.array(numbers, np.int64).reshape(3, -1)
    except OverflowError:  # past 63 bits (a payload of that size is no file)
        return False
    end = stop - pad
    if (end < start).any():
        return False
    used = end > start
    order = np.lexsort((end[used], start[used]))
    first, last = start[used][order], end[used][order]
    return not (first[1:] < last[:-1]).any()  # no two leaves' bytes overlap
