"""Node kinds other than TensorDict, and :func:`parse_node`, the dispatcher."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import CheckpointFormatError
from ._classes import NodeKind, classify
from ._fields import (
    MAX_RANK,
    check_device,
    check_int,
    check_opt_str,
    check_shape,
    fail,
    short_repr,
)
from ._records import (
    CollectionRecord,
    NodeBase,
    TensorDictNode,
    _build,
    collection_entry,
    parse_format_version,
    parse_tensordict_node,
)
from ._subtd_index import decode_index

__all__ = [
    "LazyStackNode",
    "NodeMeta",
    "NonTensorDataNode",
    "NonTensorStackNode",
    "SubTensorDictNode",
    "TensorclassNode",
    "ViewNode",
    "ancestor_entry",
    "parse_node",
]

_HEADER_KEYS = frozenset({"_type", "_class", "_format_version"})
_STR = frozenset({str})
# Saved lazy views may only replay shape operations (op -> its keyword names).
_VIEW_OPS = {
    "squeeze": {"dim"},
    "unsqueeze": {"dim"},
    "view": {"size"},
    "transpose": {"dim0", "dim1"},
    "permute": {"dims"},
}
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class TensorclassNode(NodeBase):
    """A tensorclass instance: fields in ``_tensordict/``, extras here.

    Attributes
    ----------
    non_tensor : dict
        Every key of ``meta.json`` but ``"_type"``: the JSON-serializable non-tensor
        fields (normally empty since 0.4), to be updated from ``other.pickle`` or
        ``json_types.json``. Shared with the parser's caller: copy before mutating.
    """

    kind: ClassVar[str] = NodeKind.TENSORCLASS

    non_tensor: dict


@dataclass(frozen=True)
class NonTensorDataNode(NodeBase):
    """A NonTensorData/MetaData node: a tensorclass with no ``_tensordict/``.

    Attributes
    ----------
    non_tensor : dict
        Every key but ``"_type"`` (``data``, ``_metadata``, ``_is_non_tensor``...).
    data_present : bool
        Whether ``"data"`` is in ``meta.json``; if not, it is in ``other.pickle``.
    data : object
        The JSON value (None when absent).
    metadata : object
        ``"_metadata"`` (None when absent; older writers pickled it).
    """

    kind: ClassVar[str] = NodeKind.NON_TENSOR_DATA

    non_tensor: dict
    data_present: bool
    data: Any
    metadata: Any


@dataclass(frozen=True)
class NonTensorStackNode(NodeBase):
    """A NonTensorStack node.

    Attributes
    ----------
    data : list or None
        The nested lists of values, when stored as JSON.
    pickled : bool
        ``"data"`` is ``"pickle.pkl"``: the values are pickled in that file.
    stack_dim : int or None
        Ignored when the data is present (rebuilt stacks use dim 0).
    device : str or None
    stack_dim_name : str or None
    """

    kind: ClassVar[str] = NodeKind.NON_TENSOR_STACK

    data: list | None
    pickled: bool
    stack_dim: int | None
    device: str | None
    stack_dim_name: str | None

    @property
    def members_lazy(self) -> bool:
        """No ``"data"``: the members are in ``0/``, ``1/``... as for a lazy stack."""
        return self.data is None and not self.pickled


@dataclass(frozen=True)
class LazyStackNode(NodeBase):
    """A LazyStackedTensorDict node; members in ``0/``, ``1/``... up to the first gap.

    Attributes
    ----------
    stack_dim : int
    stack_dim_name : str or None
    """

    kind: ClassVar[str] = NodeKind.LAZY_STACK

    stack_dim: int
    stack_dim_name: str | None


@dataclass(frozen=True)
class ViewNode(NodeBase):
    """A legacy lazy view (permute, transpose, unsqueeze, squeeze, view) of ``_source/``.

    Attributes
    ----------
    custom_op, inv_op : str, str or None
    custom_op_kwargs, inv_op_kwargs : dict
        Values are ints or tuples of ints.
    batch_size : tuple of int or None
        ``"shape"`` when present (informative; the loader derives it).
    device : str or None
    """

    kind: ClassVar[str] = NodeKind.VIEW

    custom_op: str
    custom_op_kwargs: dict
    inv_op: str | None
    inv_op_kwargs: dict
    batch_size: tuple[int, ...] | None
    device: str | None


@dataclass(frozen=True)
class SubTensorDictNode(NodeBase):
    """A ``_SubTensorDict``: ``_source/`` indexed by :attr:`index` (see ``decode_index``)."""

    kind: ClassVar[str] = NodeKind.SUB_TENSORDICT

    index: Any


NodeMeta = (
    TensorDictNode
    | TensorclassNode
    | NonTensorDataNode
    | NonTensorStackNode
    | LazyStackNode
    | ViewNode
    | SubTensorDictNode
)


def parse_node(meta: dict, where: str) -> NodeMeta:
    """Turn a decoded ``meta.json`` into a typed node record.

    Parameters
    ----------
    meta : dict
        The object from :func:`parse_meta_json`.
    where : str
        The ``meta.json`` location, for error messages.

    Returns
    -------
    NodeMeta
        One of :class:`TensorDictNode`, :class:`TensorclassNode`,
        :class:`NonTensorDataNode`, :class:`NonTensorStackNode`,
        :class:`LazyStackNode`, :class:`ViewNode`, :class:`SubTensorDictNode`.

    Raises
    ------
    UnsupportedFormatVersionError
        ``"_format_version"`` is an integer above 1.
    CheckpointFormatError
        A missing ``"_type"``, or any field of the wrong type or value.

    Examples
    --------
    >>> node = parse_node({"_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>",
    ...                    "stack_dim": 0, "stack_dim_name": None}, "ls/meta.json")
    >>> type(node).__name__, node.stack_dim, node.format_version
    ('LazyStackNode', 0, 0)
    """
    if not isinstance(meta, dict):
        raise CheckpointFormatError(
            f"{where}: a node must be a JSON object, got {short_repr(meta)}"
        )
    if set(map(type, meta)) - _STR:  # C-speed check: JSON keys are always str
        for key in meta:
            if not isinstance(key, str):
                raise fail(where, "keys", "keys must be strings", key)
    version = parse_format_version(meta, where)
    kind, ref, builtin = classify(meta, where)
    class_id = meta.get("_class")
    header = {
        "type_name": meta["_type"],
        "class_id": class_id if isinstance(class_id, str) else None,
        "format_version": version,
        "class_ref": ref,
        "builtin": builtin,
    }
    return _PARSERS[kind](meta, where, header)


def ancestor_entry(meta: dict, key: str, where: str) -> CollectionRecord | None:
    """The collection record of ``key`` in the decoded ``meta.json`` of a node that a
    subpath goes through, the rest of it unread: tensordict opens the sub-folder by name
    and reads nothing of its ancestors, so their other entries and fields are not checked.
    The version gate and the class still are (they decide the kind). None when the node
    is no TensorDict or ``key`` no collection entry of it.

    Raises
    ------
    UnsupportedFormatVersionError, CheckpointFormatError
        As :func:`parse_node` does for the version and the class.
    """
    if not isinstance(meta, dict):
        return None
    parse_format_version(meta, where)
    if classify(meta, where)[0] != NodeKind.TENSORDICT:
        return None
    return collection_entry(meta, key)


def _ignored(meta: dict, known: set[str] | frozenset[str]) -> tuple[str, ...]:
    return tuple(key for key in meta if key not in known and key not in _HEADER_KEYS)


def _tensorclass(meta: dict, where: str, header: dict) -> TensorclassNode:
    # built as TensorDict nodes are (_build: no frozen __init__), one per tensorclass load
    non_tensor = {key: value for key, value in meta.items() if key != "_type"}
    return _build(TensorclassNode, {**header, "ignored_keys": (), "non_tensor": non_tensor})


def _non_tensor_data(meta: dict, where: str, header: dict) -> NonTensorDataNode:
    non_tensor = {key: value for key, value in meta.items() if key != "_type"}
    return _build(
        NonTensorDataNode,
        {
            **header,
            "ignored_keys": (),
            "non_tensor": non_tensor,
            "data_present": "data" in meta,
            "data": meta.get("data"),
            "metadata": meta.get("_metadata"),
        },
    )


def _stack_dim(meta: dict, where: str, *, required: bool) -> int | None:
    if "stack_dim" not in meta or (meta["stack_dim"] is None and not required):
        if required:
            raise CheckpointFormatError(f'{where}: no "stack_dim" field in a stacked node')
        return None
    dim = check_int(meta["stack_dim"], where, 'field "stack_dim"')
    if not -(MAX_RANK + 1) <= dim <= MAX_RANK:  # its members' dims are checked by the index
        if not required:
            return None  # values stored as lists: tensordict ignores it
        raise fail(
            where, 'field "stack_dim"', f"out of range for any batch (at most {MAX_RANK} dims)", dim
        )
    return dim


def _non_tensor_stack(meta: dict, where: str, header: dict) -> NonTensorStackNode:
    data = meta.get("data")
    pickled = False
    if isinstance(data, str):
        if data != "pickle.pkl":
            raise fail(where, 'field "data"', "invalid pickled NonTensorStack file name", data)
        data, pickled = None, True
    elif data is not None and not isinstance(data, list):
        raise fail(where, 'field "data"', 'expected a list, "pickle.pkl" or null', data)
    lazy = data is None and not pickled
    known = {"data", "stack_dim", "device", "stack_dim_name"}
    return NonTensorStackNode(
        **header,
        ignored_keys=_ignored(meta, known),
        data=data,
        pickled=pickled,
        stack_dim=_stack_dim(meta, where, required=lazy),
        device=check_device(meta.get("device"), where, 'field "device"', allow_null=True),
        stack_dim_name=check_opt_str(meta.get("stack_dim_name"), where, 'field "stack_dim_name"'),
    )


def _lazy_stack(meta: dict, where: str, header: dict) -> LazyStackNode:
    stack_dim = _stack_dim(meta, where, required=True)
    assert stack_dim is not None
    return LazyStackNode(
        **header,
        ignored_keys=_ignored(meta, {"stack_dim", "stack_dim_name"}),
        stack_dim=stack_dim,
        stack_dim_name=check_opt_str(meta.get("stack_dim_name"), where, 'field "stack_dim_name"'),
    )


def _view(meta: dict, where: str, header: dict) -> ViewNode:
    ops = {}
    for name in ("custom_op", "inv_op"):
        for field in (name, f"{name}_kwargs"):
            if field not in meta:
                raise CheckpointFormatError(f'{where}: no "{field}" field in a lazy view node')
        ops[name] = _view_op(name, meta[name], meta[f"{name}_kwargs"], where)
    batch_size = None
    if "shape" in meta:
        batch_size = check_shape(meta["shape"], where, 'field "shape" (batch size)')
    device = None
    if "device" in meta:
        device = check_device(meta["device"], where, 'field "device"', allow_null=True)
    known = {"custom_op", "inv_op", "custom_op_kwargs", "inv_op_kwargs", "shape", "device"}
    return ViewNode(
        **header,
        ignored_keys=_ignored(meta, known),
        custom_op=ops["custom_op"][0],
        custom_op_kwargs=ops["custom_op"][1],
        inv_op=ops["inv_op"][0],
        inv_op_kwargs=ops["inv_op"][1],
        batch_size=batch_size,
        device=device,
    )


def _view_op(name: str, op: object, kwargs: object, where: str) -> tuple[Any, dict]:
    """Validate one (op, kwargs) pair of a lazy view, as the reference does."""
    context = f'fields "{name}" / "{name}_kwargs"'
    value = {"op": op, "kwargs": kwargs}
    if not isinstance(kwargs, dict):
        raise fail(where, context, "invalid saved view operation", value)
    if name == "inv_op" and op is None:
        return None, {}
    if not isinstance(op, str) or op not in _VIEW_OPS:
        raise fail(where, context, "invalid saved view operation", value)
    if set(kwargs) != _VIEW_OPS[op] and not (op == "squeeze" and not kwargs):
        raise fail(where, context, "invalid saved view operation", value)
    result: dict[str, int | tuple[int, ...]] = {}
    for key, arg in kwargs.items():
        is_seq = key in ("size", "dims") or (op == "squeeze" and isinstance(arg, list))
        items = arg if is_seq else [arg]
        if not isinstance(items, list) or any(
            type(item) is not int or not _INT64[0] <= item <= _INT64[1] for item in items
        ):
            raise fail(where, context, "invalid saved view operation", value)
        result[key] = tuple(items) if is_seq else arg
    return op, result


def _sub_tensordict(meta: dict, where: str, header: dict) -> SubTensorDictNode:
    if "index" not in meta:
        raise CheckpointFormatError(f'{where}: no "index" field in a _SubTensorDict node')
    return SubTensorDictNode(
        **header, ignored_keys=_ignored(meta, {"index"}), index=decode_index(meta["index"], where)
    )


_PARSERS: dict[str, Callable[[dict, str, dict], NodeMeta]] = {
    NodeKind.TENSORDICT: parse_tensordict_node,
    NodeKind.TENSORCLASS: _tensorclass,
    NodeKind.NON_TENSOR_DATA: _non_tensor_data,
    NodeKind.NON_TENSOR_STACK: _non_tensor_stack,
    NodeKind.LAZY_STACK: _lazy_stack,
    NodeKind.VIEW: _view,
    NodeKind.SUB_TENSORDICT: _sub_tensordict,
}
