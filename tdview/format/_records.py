"""TensorDict nodes: the leaf and collection records of one ``meta.json``.

A TensorDict node's ``meta.json`` is one flat object mixing entry records and node
fields. ``"shape"``, ``"device"`` and ``"_type"`` are always node fields (the
writer overwrites an entry of that name, whose key is then lost).
``"_format_version"``, ``"_class"`` and ``"_names"`` are entries when their value
is a dict (the writer kept the entry and dropped the node field). Every other dict
with a non-null ``"type"`` is a collection record; a dict with non-null
``"dtype"`` and ``"shape"`` is a leaf record; anything else is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any, ClassVar, final

from .._cache import BoundedCache
from ..errors import UnsupportedFormatVersionError
from ._classes import ClassRef, NodeKind
from ._dtypes import DTYPES, DTypeInfo, parse_dtype
from ._fields import (
    MAX_DIM,
    MAX_NBYTES,
    MAX_RANK,
    check_bool,
    check_device,
    check_opt_str,
    check_shape,
    fail,
    short_repr,
)

__all__ = [
    "FORMAT_VERSION",
    "CollectionRecord",
    "LeafRecord",
    "NodeBase",
    "TensorDictNode",
    "collection_entry",
    "parse_format_version",
    "parse_tensordict_node",
]

#: The newest format version tdview reads.
FORMAT_VERSION = 1
_NODE_FIELDS = frozenset({"shape", "device", "_type"})
_MAYBE_ENTRY = frozenset({"_format_version", "_class", "_names"})
_new = object.__new__


def _build(cls: type, fields: dict[str, Any]) -> Any:
    """Make a frozen record from its complete, already checked fields.

    What the generated ``__init__`` does (one ``object.__setattr__`` per field), at a
    fraction of the cost.
    """
    obj: Any = _new(cls)
    obj.__dict__.update(fields)
    return obj


def _intern(cache: BoundedCache[Any, Any], value: Any) -> Any:
    """One shared copy of an equal value (keys, shapes and devices repeat across the
    ``meta.json`` files of a checkpoint); the cache is bounded."""
    found = cache.get(value)
    return cache.put(value, value) if found is None else found


_INTERN_SIZE = 8192
_KEYS: BoundedCache[str, str] = BoundedCache(_INTERN_SIZE)
_SHAPES: BoundedCache[tuple[int, ...], tuple[int, ...]] = BoundedCache(_INTERN_SIZE)
_DEVICES: BoundedCache[str, str] = BoundedCache(_INTERN_SIZE)


@dataclass(frozen=True)
class NodeBase:
    """What every node records about itself.

    Attributes
    ----------
    type_name : str
        The ``"_type"`` string, e.g. ``"<class 'tensordict._td.TensorDict'>"``.
    class_id : str or None
        The ``"_class"`` string (``"tensordict:TensorDict"``), None when absent or
        not a string.
    format_version : int
        ``"_format_version"`` when it is an integer (at most 1), else 0.
    class_ref : ClassRef
        The class as saved (from ``"_class"`` when it names a known class or is
        present, else from ``"_type"``). Never imported.
    builtin : bool
        Whether the class is one of tensordict's own (any ``tensordict.*`` module).
    ignored_keys : tuple of str
        Keys present in ``meta.json`` that this node does not use.
    """

    kind: ClassVar[str] = ""

    type_name: str
    class_id: str | None
    format_version: int
    class_ref: ClassRef
    builtin: bool
    ignored_keys: tuple[str, ...]

    @property
    def class_name(self) -> str:
        """The saved class's qualname, e.g. ``"TensorDictParams"`` or ``"MetaData[str]"``."""
        return self.class_ref.qualname


@final  # `type(record) is LeafRecord` then tells mypy the other branch's type too
@dataclass(frozen=True, slots=True)
class LeafRecord:
    """A tensor leaf stored in ``<name>.memmap``.

    Attributes
    ----------
    key : str
    dtype : DTypeInfo
    shape : tuple of int
        The tensor's shape; for a nested leaf, the shape ``(N, D)`` of its sizes
        tensor (stored in ``<name>.shape.memmap`` as int64).
    is_nested : bool
    device : str or None
        The source tensor's device at save time (informative only).
    """

    key: str
    dtype: DTypeInfo
    shape: tuple[int, ...]
    is_nested: bool
    device: str | None

    @property
    def numel(self) -> int | None:
        """Number of elements; None for a nested leaf (it depends on the sizes file)."""
        return None if self.is_nested else prod(self.shape)

    @property
    def nbytes(self) -> int | None:
        """Bytes of data, ``numel * itemsize``; None for a nested leaf."""
        return None if self.is_nested else prod(self.shape) * self.dtype.itemsize

    @property
    def sizes_nbytes(self) -> int | None:
        """Bytes of a nested leaf's sizes file (``N * D * 8``); None otherwise."""
        if not self.is_nested:
            return None
        return self.shape[0] * self.shape[1] * 8


@final
@dataclass(frozen=True, slots=True)
class CollectionRecord:
    """A nested collection stored in the subdirectory ``<name>/``.

    Attributes
    ----------
    key : str
    type_hint : str or None
        The ``"type"`` the writer recorded (the child's bare class name). Only a
        hint: the child's own ``meta.json`` decides its class.
    """

    key: str
    type_hint: str | None


_SET_KEY, _SET_DTYPE, _SET_SHAPE, _SET_NESTED, _SET_DEVICE = (
    LeafRecord.__dict__[name].__set__ for name in ("key", "dtype", "shape", "is_nested", "device")
)
_SET_CKEY, _SET_HINT = (CollectionRecord.__dict__[name].__set__ for name in ("key", "type_hint"))


def _leaf_record(
    key: str, dtype: DTypeInfo, shape: tuple[int, ...], device: str | None
) -> LeafRecord:
    """A plain (not nested) leaf record from checked fields, built without ``__init__``
    (one per leaf of a checkpoint); key, shape and device are shared copies."""
    obj = _new(LeafRecord)
    _SET_KEY(obj, _intern(_KEYS, key))
    _SET_DTYPE(obj, dtype)
    _SET_SHAPE(obj, _intern(_SHAPES, shape))
    _SET_NESTED(obj, False)
    _SET_DEVICE(obj, None if device is None else _intern(_DEVICES, device))
    return obj


def _collection_record(key: str, hint: str | None) -> CollectionRecord:
    obj = _new(CollectionRecord)
    _SET_CKEY(obj, _intern(_KEYS, key))
    _SET_HINT(obj, hint)
    return obj


@dataclass(frozen=True)
class TensorDictNode(NodeBase):
    """A TensorDict (or subclass) node.

    Attributes
    ----------
    entries : tuple of LeafRecord or CollectionRecord
        In file order.
    batch_size : tuple of int
        ``"shape"``; ``()`` when absent.
    device : str or None
        ``"device"``; None when absent or ``"None"``.
    names : tuple of (str or None), or None
        ``"_names"`` when it is a list that names at least one dim.
    """

    kind: ClassVar[str] = NodeKind.TENSORDICT

    entries: tuple[LeafRecord | CollectionRecord, ...]
    batch_size: tuple[int, ...]
    device: str | None
    names: tuple[str | None, ...] | None

    @property
    def load_order(self) -> tuple[LeafRecord | CollectionRecord, ...]:
        """The entries in the order the reference loads them: leaves, then collections."""
        order = self.__dict__.get("_load_order")
        if order is None:
            leaves = [e for e in self.entries if isinstance(e, LeafRecord)]
            order = (*leaves, *(e for e in self.entries if isinstance(e, CollectionRecord)))
            self.__dict__["_load_order"] = order  # a cache, not a field (frozen)
        return order

    @property
    def leaf_count(self) -> int:
        """How many leaf records it holds (they come first in :attr:`load_order`)."""
        count = self.__dict__.get("_leaf_count")
        if count is None:
            count = sum(1 for e in self.entries if isinstance(e, LeafRecord))
            self.__dict__["_leaf_count"] = count  # a cache, not a field (frozen)
        return count

    def entry(self, key: str) -> LeafRecord | CollectionRecord | None:
        """The entry of ``key`` (None when the node records none), from a dict made on
        the first call: looking up every key of a level of 100,000 stays linear."""
        by_key = self.__dict__.get("_by_key")
        if by_key is None:
            by_key = {}
            for e in self.entries:
                by_key.setdefault(e.key, e)  # the first, as a scan in order finds it
            self.__dict__["_by_key"] = by_key  # a cache, not a field (frozen)
        return by_key.get(key)

    @property
    def leaves(self) -> tuple[LeafRecord, ...]:
        """The leaf records, in file order."""
        return tuple(e for e in self.entries if isinstance(e, LeafRecord))

    @property
    def collections(self) -> tuple[CollectionRecord, ...]:
        """The collection records, in file order."""
        return tuple(e for e in self.entries if isinstance(e, CollectionRecord))

    @property
    def is_subclass(self) -> bool:
        """Whether the node was saved from a user subclass (e.g. ``__main__:MyTD``)."""
        return not self.builtin

    @property
    def legacy_no_collection_records(self) -> bool:
        """Version 0 and no collection record: maybe a 0.3-era node whose nested
        tensordicts are only found by listing subdirectories."""
        if self.format_version != 0:
            return False
        return not any(isinstance(e, CollectionRecord) for e in self.entries)


def parse_format_version(meta: dict, where: str) -> int:
    """Apply the version gate and return the node's format version.

    A missing or non-integer ``"_format_version"`` (a dict entry, a bool) is 0.

    Raises
    ------
    UnsupportedFormatVersionError
        The version is an integer above :data:`FORMAT_VERSION`.
    CheckpointFormatError
        The version is a negative integer.
    """
    version = meta.get("_format_version", 0)
    if type(version) is not int:
        return 0
    if version < 0:
        raise fail(where, 'field "_format_version"', "not a format version (0 or more)", version)
    if version > FORMAT_VERSION:
        raise UnsupportedFormatVersionError(
            f"{where} was saved in the format version {short_repr(version, 40)}, but this "
            f"version of tdview reads the format versions up to {FORMAT_VERSION}. "
            "Upgrade tdview to load it."
        )
    return version


def parse_tensordict_node(meta: dict, where: str, header: dict) -> TensorDictNode:
    """Parse a TensorDict node; ``header`` holds the :class:`NodeBase` fields."""
    leaves: list[LeafRecord] = []
    collections: list[CollectionRecord] = []
    entries: list[LeafRecord | CollectionRecord] = []
    ignored: list[str] = []
    dtypes = DTYPES
    for key, value in meta.items():
        if key in _NODE_FIELDS:
            continue
        if not isinstance(value, dict):
            if key not in _MAYBE_ENTRY or not _valid_node_field(key, value):
                ignored.append(key)
            continue
        get = value.get
        hint = get("type")
        if hint is not None:
            record: Any = _collection_record(key, hint if isinstance(hint, str) else None)
            collections.append(record)
            entries.append(record)
            continue
        dtype, shape = get("dtype"), get("shape")
        if dtype is None or shape is None:
            ignored.append(key)
            continue
        # the common leaf, checked inline: a known dtype, not nested, a short list of
        # non-negative ints whose byte size fits, a string or no device
        info = dtypes.get(dtype) if type(dtype) is str else None
        nested, device = get("is_nested", False), get("device")
        record = None
        if (
            info is not None
            and (nested is False or nested is None)
            and type(shape) is list
            and len(shape) <= MAX_RANK
            and (device is None or type(device) is str)
        ):
            for dim in shape:
                if type(dim) is not int or dim < 0 or dim > MAX_DIM:
                    break
            else:
                if prod(shape) * info.itemsize < MAX_NBYTES and 0 not in shape:
                    record = _leaf_record(key, info, tuple(shape), device)
        if record is None:
            record = parse_leaf(key, value, where)
        leaves.append(record)
        entries.append(record)
    batch_size = check_shape(meta.get("shape", []), where, 'field "shape" (batch size)')
    if batch_size:  # every leaf's shape starts with the batch size (tensordict sets none
        dims = len(batch_size)  # other, and would load a tensordict that fails on use)
        for record in leaves:
            if record.shape[:dims] != batch_size and not record.is_nested:
                raise fail(
                    where,
                    f"leaf {record.key!r} shape",
                    f"does not start with the batch size {list(batch_size)}",
                    list(record.shape),
                )
    if "device" in meta:
        device = check_device(meta["device"], where, 'field "device"', allow_null=False)
    else:
        device = None
    names_value = meta.get("_names")
    names = (
        _parse_names(names_value, len(batch_size), where) if isinstance(names_value, list) else None
    )
    node = _build(
        TensorDictNode,
        {
            **header,
            "ignored_keys": tuple(ignored),
            "entries": tuple(entries),
            "batch_size": batch_size,
            "device": device,
            "names": names,
        },
    )
    node.__dict__["_load_order"] = (*leaves, *collections)
    return node


def collection_entry(meta: dict, key: str) -> CollectionRecord | None:
    """The collection record of ``key`` in a decoded TensorDict ``meta.json`` (None when
    ``key`` is a node field, a leaf or no entry), by the rules of
    :func:`parse_tensordict_node` for that key alone: its other entries are not read."""
    value = meta.get(key)
    if key in _NODE_FIELDS or not isinstance(value, dict):
        return None
    hint = value.get("type")
    if hint is None:
        return None
    return _collection_record(key, hint if isinstance(hint, str) else None)


def parse_leaf(key: str, record: dict, where: str) -> LeafRecord:
    """Parse one leaf record ``{"dtype", "shape", "is_nested"?, "device"?}``."""
    dtype = parse_dtype(record["dtype"], where, key)
    is_nested = record.get("is_nested", False)
    is_nested = (
        False if is_nested is None else check_bool(is_nested, where, f"leaf {key!r} is_nested")
    )
    context = f"leaf {key!r} shape"
    if is_nested:
        shape = check_shape(record["shape"], where, context, itemsize=8)
        if len(shape) != 2:
            raise fail(where, context, "a nested leaf records the [N, D] shape of its sizes", shape)
    else:
        shape = check_shape(record["shape"], where, context, itemsize=dtype.itemsize)
    device = check_opt_str(record.get("device"), where, f"leaf {key!r} device")
    return LeafRecord(key, dtype, shape, is_nested, device)


def _valid_node_field(key: str, value: object) -> bool:
    """Whether a non-dict ``_format_version``/``_class``/``_names`` value is used."""
    if key == "_format_version":
        return type(value) is int
    if key == "_class":
        return isinstance(value, str)
    return isinstance(value, list)


def _parse_names(value: list, batch_dims: int, where: str) -> tuple[str | None, ...] | None:
    """Apply ``"_names"`` as the reference does; all-None names mean no names."""
    context = 'field "_names"'
    for name in value:
        if name is not None and not isinstance(name, str):
            raise fail(where, context, "dim names must be strings or null", value)
    num_none = sum(name is None for name in value)
    if num_none == batch_dims:
        # the reference drops such names (with a warning when the length is wrong)
        return None
    if len(set(value)) != len(value) - max(num_none - 1, 0):
        raise fail(where, context, "dim names must be unique", value)
    if len(value) != batch_dims:
        raise fail(where, context, f"{len(value)} dim names for {batch_dims} batch dims", value)
    return tuple(value)
