"""Decoding the saved index of a ``_SubTensorDict`` node.

Tagged form (0.15): ``["tuple", [items]]``, ``["list", [items]]``,
``["slice", {"start", "stop", "step"}]``, ``["range", {...}]``,
``["tensor", nested_list, device]``, ``["ellipsis"]``; integers, booleans and
``null`` stand for themselves; ``[]`` is the empty tuple. Any other array is the
legacy untagged form: a tuple of its decoded items. The result is a plain Python
index description; tensors stay :class:`IndexTensor` until
:func:`to_torch_index` builds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._fields import check_device, fail

__all__ = ["IndexTensor", "MAX_INDEX_DEPTH", "decode_index", "index_problem", "to_torch_index"]

#: Largest nesting of index containers accepted.
MAX_INDEX_DEPTH = 64
_TAGS = {"tuple": 2, "list": 2, "slice": 2, "range": 2, "tensor": 3, "ellipsis": 1}
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, eq=False)
class IndexTensor:
    """A tensor used as an index, not yet built.

    Attributes
    ----------
    data : object
        The nested lists of ints or bools (or one scalar for a 0-dim tensor).
    shape : tuple of int
    dtype : str
        ``"bool"`` if every element is a boolean, else ``"int64"``.
    device : str or None
    """

    data: Any
    shape: tuple[int, ...]
    dtype: str
    device: str | None

    def to_torch(self) -> Any:
        """Build the ``torch.Tensor`` (imports torch)."""
        import torch

        dtype = torch.bool if self.dtype == "bool" else torch.int64
        return torch.tensor(self.data, dtype=dtype, device=self.device).reshape(self.shape)

    def __repr__(self) -> str:
        return f"IndexTensor(shape={self.shape}, dtype={self.dtype!r}, device={self.device!r})"


def decode_index(value: object, where: str) -> Any:
    """Decode the ``"index"`` field of a ``_SubTensorDict`` node.

    Parameters
    ----------
    value : object
        The decoded JSON value.
    where : str
        The ``meta.json`` location, for error messages.

    Returns
    -------
    object
        An int, bool, None, Ellipsis, slice, range, :class:`IndexTensor`, or a
        tuple/list of those.

    Raises
    ------
    CheckpointFormatError
        Anything that is not a valid index.

    Examples
    --------
    >>> decode_index(["tuple", [["slice", {"start": 0, "stop": 1, "step": None}], 2]], "m")
    (slice(0, 1, None), 2)
    >>> decode_index([["ellipsis"], 1], "m")
    (Ellipsis, 1)
    """
    return _decode(value, where, 0)


def _decode(value: object, where: str, depth: int) -> Any:
    if depth > MAX_INDEX_DEPTH:
        raise fail(where, 'field "index"', f"nested deeper than {MAX_INDEX_DEPTH}", "...")
    if value is None or type(value) is bool:
        return value
    if type(value) is int:
        return _int64(value, where)
    if not isinstance(value, list):
        raise fail(where, 'field "index"', "not a valid index item", value)
    if not value:
        return ()
    tag = value[0]
    if not (isinstance(tag, str) and tag in _TAGS):
        # legacy untagged form: a tuple of items
        return tuple(_decode(item, where, depth + 1) for item in value)
    if len(value) != _TAGS[tag]:
        raise fail(where, 'field "index"', f"a {tag!r} item has the wrong length", value)
    if tag == "ellipsis":
        return Ellipsis
    if tag == "tensor":
        return _tensor(value[1], value[2], where)
    content = value[1]
    if tag in ("tuple", "list"):
        if not isinstance(content, list):
            raise fail(where, 'field "index"', f"a {tag!r} item needs a list", value)
        items = [_decode(item, where, depth + 1) for item in content]
        return tuple(items) if tag == "tuple" else items
    return _slice_or_range(tag, content, where)


def _slice_or_range(tag: str, content: object, where: str) -> Any:
    if not (isinstance(content, dict) and set(content) == {"start", "stop", "step"}):
        raise fail(where, 'field "index"', f"a {tag!r} item needs start, stop, step", content)
    args = [content["start"], content["stop"], content["step"]]
    for arg in args:
        if arg is not None and type(arg) is not int:
            raise fail(where, 'field "index"', f"{tag} bounds must be integers or null", content)
        if arg is not None:
            _int64(arg, where)
    if tag == "slice":
        return slice(*args)
    if args[0] is None or args[1] is None or args[2] in (None, 0):
        raise fail(
            where, 'field "index"', "a range needs integer bounds and a non-zero step", content
        )
    return range(*args)


def _tensor(data: object, device: object, where: str) -> IndexTensor:
    device = check_device(device, where, 'field "index" (tensor device)', allow_null=True)
    shape: list[int] = []
    level = data
    while isinstance(level, list):
        shape.append(len(level))
        if len(shape) > MAX_INDEX_DEPTH:
            raise fail(where, 'field "index"', "tensor nested too deep", "...")
        if not level:
            break
        level = level[0]
    flat = _flatten(data, tuple(shape), where)
    dtype = "bool" if flat and all(type(x) is bool for x in flat) else "int64"
    if dtype == "int64":
        for item in flat:
            if type(item) not in (int, bool):
                raise fail(
                    where, 'field "index"', "tensor entries must be integers or booleans", item
                )
            _int64(item, where)
    return IndexTensor(data, tuple(shape), dtype, device)


def _flatten(data: object, shape: tuple[int, ...], where: str) -> list:
    """Flatten a nested list, checking it is rectangular with ``shape``."""
    level = [data]
    for size in shape:
        nxt: list = []
        for item in level:
            if not isinstance(item, list) or len(item) != size:
                raise fail(where, 'field "index"', "tensor data is not rectangular", data)
            nxt.extend(item)
        level = nxt
    for item in level:
        if isinstance(item, list):
            raise fail(where, 'field "index"', "tensor data is not rectangular", data)
    return level


def _int64(value: int, where: str) -> int:
    if not _INT64[0] <= value <= _INT64[1]:
        raise fail(where, 'field "index"', "integer does not fit in 64 bits", value)
    return value


def to_torch_index(index: Any) -> Any:
    """Replace every :class:`IndexTensor` in a decoded index by a ``torch.Tensor``.

    Examples
    --------
    >>> to_torch_index((slice(0, 2), IndexTensor([0, 2], (2,), "int64", "cpu")))
    (slice(0, 2, None), tensor([0, 2]))
    """
    if isinstance(index, IndexTensor):
        return index.to_torch()
    if isinstance(index, tuple):
        return tuple(to_torch_index(item) for item in index)
    if isinstance(index, list):
        return [to_torch_index(item) for item in index]
    return index


def index_problem(index: Any, shape: tuple[int, ...]) -> str | None:
    """What is wrong with a decoded index applied to a batch of ``shape``, or None.

    The checks are torch's, made before any tensor exists: an integer, a range or an
    integer tensor must stay within its dim (``-size <= i < size``), a slice's step must
    be positive, a boolean tensor must have the shape of the dims it covers, and there
    must be no more indices than dims. A form this does not follow (a list of slices)
    passes unchecked.

    Examples
    --------
    >>> index_problem((slice(0, 1), 2), (2, 3))
    >>> index_problem((10**30,), (2,))
    'index 1000000000000000000000000000000 is out of range for dim 0 of size 2'
    >>> index_problem((0, 0, 0), (2, 3))
    '3 indices for 2 batch dims'
    """
    items = index if isinstance(index, tuple) else (index,)
    used = [_dims_used(item) for item in items]
    if any(n is None for n in used):
        return None
    ellipses = sum(item is Ellipsis for item in items)
    if ellipses > 1:
        return "more than one ellipsis"
    total = sum(n for n in used if n is not None)
    if total > len(shape):
        return f"{total} indices for {len(shape)} batch dims"
    dim = 0
    for item, n in zip(items, used, strict=True):
        if item is Ellipsis:
            dim += len(shape) - total
            continue
        if not n:  # None, a boolean: a new dim of size 1, nothing to check
            continue
        problem = _item_problem(item, shape[dim : dim + (n or 0)], dim)
        if problem is not None:
            return problem
        dim += n or 0
    return None


def _dims_used(item: Any) -> int | None:
    """How many dims of the batch one index item covers (None: a form not checked)."""
    if item is None or item is Ellipsis or type(item) is bool:
        return 0
    if isinstance(item, IndexTensor):
        return len(item.shape) if item.dtype == "bool" else 1
    if type(item) is int or isinstance(item, (slice, range)):
        return 1
    if isinstance(item, list) and all(type(x) in (int, bool) for x in item):
        return 1
    return None


def _item_problem(item: Any, dims: tuple[int, ...], at: int) -> str | None:
    if type(item) is int:
        return _out_of_range(item, dims[0], at)
    if isinstance(item, slice):
        if item.step is not None and item.step <= 0:
            return f"slice step {item.step} of dim {at} is not positive"
        return None
    if isinstance(item, range):
        if len(item) == 0:
            return None
        low, high = sorted((item[0], item[-1]))  # O(1): a range may span 2**63 values
        return _out_of_range(low, dims[0], at) or _out_of_range(high, dims[0], at)
    values: list[Any]
    if isinstance(item, IndexTensor):
        if item.dtype == "bool":
            if item.shape != dims and -1 not in dims:
                return (
                    f"a boolean index of shape {list(item.shape)} for dims "
                    f"{list(dims)} (from dim {at})"
                )
            return None
        values = _flatten(item.data, item.shape, "") if item.shape else [item.data]
    else:
        values = item  # a list of ints (a list of bools is a mask of dim ``at``)
        if values and all(type(x) is bool for x in values):
            return (
                None
                if len(values) == dims[0]
                else (f"a boolean index of length {len(values)} for dim {at} of size {dims[0]}")
            )
    ints = [int(x) for x in values]
    if not ints:
        return None
    return _out_of_range(min(ints), dims[0], at) or _out_of_range(max(ints), dims[0], at)


def _out_of_range(value: int, size: int, at: int) -> str | None:
    if size < 0 or -size <= value < size:  # -1: a ragged dim, its size unknown
        return None
    return f"index {value} is out of range for dim {at} of size {size}"
