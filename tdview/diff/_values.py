"""Values that are not streamed: nested tensors' sizes, and Python values compared as
values (NaN equal to NaN, tensors and arrays element-wise)."""

from __future__ import annotations

import math
from typing import Any

from ..errors import LeafDataError
from ..format import LeafRecord

#: Largest sizes file of a nested leaf that is read (``N * D * 8`` bytes).
MAX_SIZES_BYTES = 64 << 20


def read_sizes(store: Any, key: str, record: LeafRecord) -> bytes:
    """The raw int64 sizes of a nested leaf (exactly ``N * D * 8`` bytes)."""
    need = record.sizes_nbytes or 0
    data = store.read_bytes(key, max(need, MAX_SIZES_BYTES)) if need else b""
    if len(data) < need:
        raise LeafDataError(
            f"{store.display(key)} has {len(data)} bytes, but the sizes of "
            f"shape {list(record.shape)} need {need}."
        )
    return data[:need]


def nested_numel(sizes: bytes, record: LeafRecord, where: str) -> int:
    """The elements a nested leaf's sizes describe (each row's product, summed)."""
    import numpy as np

    n, d = record.shape
    if not n or not sizes:
        return 0
    array = np.frombuffer(sizes, dtype="<i8").reshape(n, d)
    if (array < 0).any():
        raise LeafDataError(f"{where}: nested sizes must not be negative.")
    if float(array.astype(np.float64).prod(axis=1).sum()) >= 2.0**62:
        raise LeafDataError(f"{where}: nested sizes describe more than 2**62 elements.")
    return int(array.prod(axis=1).sum())


def same_value(a: Any, b: Any, depth: int = 0) -> bool | None:
    """Whether two Python values are equal: NaN equals NaN, tensors and arrays compare
    element by element (with their dtypes and shapes), containers by their items. None
    when equality cannot be decided (an ``==`` that raises or is not a bool)."""
    if depth > 64:
        return None
    try:
        import torch

        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                return False
            if a.dtype != b.dtype or a.shape != b.shape:
                return False
            if a.is_floating_point() or a.is_complex():
                return bool(
                    torch.equal(a.isnan(), b.isnan())
                    and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))
                )
            return bool(torch.equal(a, b))
        if type(a) is not type(b):
            if (
                isinstance(a, (int, float))
                and isinstance(b, (int, float))
                and not (isinstance(a, bool) or isinstance(b, bool))
            ):
                return bool(a == b)
            return False
        if isinstance(a, float):
            return a == b or (math.isnan(a) and math.isnan(b))
        if isinstance(a, (list, tuple)):
            if len(a) != len(b):
                return False
            return _all(same_value(x, y, depth + 1) for x, y in zip(a, b, strict=True))
        if isinstance(a, dict):
            if list(a.keys()) != list(b.keys()):
                return False
            return _all(same_value(v, b[k], depth + 1) for k, v in a.items())
        if type(a).__module__ == "numpy" and hasattr(a, "shape"):
            import numpy as np

            return bool(
                a.shape == b.shape
                and a.dtype == b.dtype
                and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
            )
        result = a == b
        return result if isinstance(result, bool) else None
    except Exception:  # noqa: BLE001 - a user type's __eq__
        return None


def _all(results: Any) -> bool | None:
    """True if every result is True, False if one is False, else None."""
    unknown = False
    for result in results:
        if result is False:
            return False
        if result is None:
            unknown = True
    return None if unknown else True
