"""One comparison of a tdview load with tensordict's own load of the same checkpoint.

:func:`assert_same` walks both results together and checks classes, keys and their order,
batch sizes, dim names, devices, dtypes, shapes, values (bit for bit, NaN included), leaf
types (``MemoryMappedTensor`` with its file for directories, plain views of the archive
mapping for archives), the lock state, the non-tensor values, lazy-stack and view
parameters, and which leaves share a storage (and where in it they start).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from tensordict import (
    LazyStackedTensorDict,
    MemoryMappedTensor,
    NonTensorStack,
    TensorDictBase,
    is_tensorclass,
)
from tensordict._lazy import _CustomOpTensorDict
from tensordict._td import _SubTensorDict
from tensordict.tensorclass import NonTensorDataBase

__all__ = ["assert_same", "same_python_value"]


def same_python_value(a: Any, b: Any) -> bool:
    """Equality of non-tensor values, with NaN equal to NaN and types compared too."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_python_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_python_value(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return _same_tensor_values(a, b)
    return bool(a == b)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def _same_tensor_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.is_nested or b.is_nested:
        return (
            a.is_nested
            and b.is_nested
            and len(a.unbind(0)) == len(b.unbind(0))
            and all(
                x.shape == y.shape and torch.equal(_bits(x), _bits(y))
                for x, y in zip(a.unbind(0), b.unbind(0), strict=True)
            )
        )
    if a.device.type == "meta" or b.device.type == "meta":
        return True
    return torch.equal(_bits(a.cpu()), _bits(b.cpu()))


def assert_same(got: Any, ref: Any, *, values: bool = True, storage: bool = True) -> None:
    """Assert that ``got`` (tdview) is what ``ref`` (tensordict) is.

    Parameters
    ----------
    got, ref : object
        The two results.
    values : bool
        Compare tensor values (meta tensors never are).
    storage : bool
        Compare storage sizes, offsets and sharing between leaves.
    """
    pairs: list[tuple[str, torch.Tensor, torch.Tensor]] = []
    _compare(got, ref, "<root>", pairs, values)
    if storage:
        _compare_storage(pairs)


def _compare(got: Any, ref: Any, where: str, pairs: list, values: bool) -> None:
    assert type(got) is type(ref), f"{where}: {type(got)} != {type(ref)}"
    if isinstance(ref, torch.Tensor):
        _compare_tensor(got, ref, where, values)
        pairs.append((where, got, ref))
        return
    if is_tensorclass(ref):
        if isinstance(ref, NonTensorDataBase):
            assert same_python_value(got.data, ref.data), f"{where}: {got.data!r} != {ref.data!r}"
        assert list(got._non_tensordict) == list(ref._non_tensordict), where
        for key, value in ref._non_tensordict.items():
            assert same_python_value(got._non_tensordict[key], value), f"{where}.{key}"
        _compare(got._tensordict, ref._tensordict, f"{where}._tensordict", pairs, values)
        return
    assert isinstance(ref, TensorDictBase), f"{where}: unexpected {type(ref)}"
    assert got.batch_size == ref.batch_size, f"{where}: {got.batch_size} != {ref.batch_size}"
    assert got.device == ref.device, f"{where}: {got.device} != {ref.device}"
    assert got.is_locked == ref.is_locked, f"{where}: locked {got.is_locked}"
    if isinstance(ref, NonTensorStack):
        assert same_python_value(got.tolist(), ref.tolist()), f"{where}: {got.tolist()}"
    if isinstance(ref, LazyStackedTensorDict):
        assert got.stack_dim == ref.stack_dim, where
        assert got._td_dim_name == ref._td_dim_name, where
        assert len(got.tensordicts) == len(ref.tensordicts), where
        for i, (g, r) in enumerate(zip(got.tensordicts, ref.tensordicts, strict=True)):
            _compare(g, r, f"{where}[{i}]", pairs, values)
        return
    if isinstance(ref, _CustomOpTensorDict):
        for attr in ("custom_op", "inv_op", "custom_op_kwargs", "inv_op_kwargs"):
            assert getattr(got, attr) == getattr(ref, attr), f"{where}: {attr}"
        _compare(got._source, ref._source, f"{where}._source", pairs, values)
        return
    if isinstance(ref, _SubTensorDict):
        assert same_python_value(_index_repr(got.idx, values), _index_repr(ref.idx, values)), where
        _compare(got._source, ref._source, f"{where}._source", pairs, values)
        return
    assert got.names == ref.names, f"{where}: names {got.names} != {ref.names}"
    got_keys, ref_keys = list(got.keys()), list(ref.keys())
    assert got_keys == ref_keys, f"{where}: keys {got_keys} != {ref_keys}"
    assert (got._memmap_prefix is None) == (ref._memmap_prefix is None), where
    for key in ref.keys():
        _compare(got._get_str(key, None), ref._get_str(key, None), f"{where}/{key}", pairs, values)


def _index_repr(index: Any, values: bool) -> Any:
    if isinstance(index, tuple):
        return tuple(_index_repr(i, values) for i in index)
    if isinstance(index, torch.Tensor):
        return ("tensor", index.dtype, tuple(index.shape), index.tolist() if values else None)
    return index


def _compare_tensor(got: torch.Tensor, ref: torch.Tensor, where: str, values: bool) -> None:
    assert got.dtype == ref.dtype, f"{where}: {got.dtype} != {ref.dtype}"
    assert got.is_nested == ref.is_nested, where
    if not ref.is_nested:
        assert got.shape == ref.shape, f"{where}: {got.shape} != {ref.shape}"
    assert got.device == ref.device, f"{where}: {got.device} != {ref.device}"
    assert got.requires_grad == ref.requires_grad, where
    if isinstance(ref, MemoryMappedTensor):
        assert got.filename == ref.filename, f"{where}: {got.filename} != {ref.filename}"
        assert got._mode == ref._mode, where
        assert got._handler is None, where
        # a member of a lazy stack given as ``out`` gets the saved leaf indexed: (0,) ...
        assert same_python_value(
            _index_repr(got._index, values), _index_repr(ref._index, values)
        ), where
    if values:
        assert _same_tensor_values(got, ref), f"{where}: values differ"


def _storage_key(t: torch.Tensor) -> tuple[int, int, int] | None:
    if t.is_nested or t.device.type == "meta" or not t.numel():
        return None
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.nbytes(), t.storage_offset()


def _compare_storage(pairs: list[tuple[str, torch.Tensor, torch.Tensor]]) -> None:
    """Same storage sizes and offsets, and the same leaves sharing a storage."""
    got_groups: dict[int, set[str]] = {}
    ref_groups: dict[int, set[str]] = {}
    for where, got, ref in pairs:
        g, r = _storage_key(got), _storage_key(ref)
        assert (g is None) == (r is None), where
        if g is None or r is None:
            continue
        assert g[1:] == r[1:], f"{where}: storage (nbytes, offset) {g[1:]} != {r[1:]}"
        got_groups.setdefault(g[0], set()).add(where)
        ref_groups.setdefault(r[0], set()).add(where)
    got_sets = sorted(sorted(s) for s in got_groups.values())
    ref_sets = sorted(sorted(s) for s in ref_groups.values())
    assert got_sets == ref_sets, f"storage sharing differs: {got_sets} != {ref_sets}"
