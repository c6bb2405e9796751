"""The facts of one side of a key and the value statistics of a leaf pair: plain
records, JSON-ready."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Facts:
    """What the metadata says about one side of a key.

    ``nbytes`` is a leaf's data size (a nested leaf's packed data file), or the size of
    the pickle a non-tensor value is kept in; ``value`` is a non-tensor value kept in
    ``meta.json`` (``has_value`` tells it is there), ``pickled`` that the value (or a
    tensorclass's extra fields) is in a pickle file.
    """

    kind: str
    class_name: str
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    nbytes: int | None = None
    batch_size: tuple[int, ...] | None = None
    names: tuple[str | None, ...] | None = None
    value: Any = None
    has_value: bool = False
    pickled: bool = False
    nested: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "class": self.class_name}
        if self.dtype is not None:
            out["dtype"] = self.dtype.removeprefix("torch.")
        if self.shape is not None:
            out["shape"] = list(self.shape)
        if self.nested:
            out["nested"] = True
        if self.nbytes is not None:
            out["bytes"] = self.nbytes
        if self.batch_size is not None:
            out["batch_size"] = list(self.batch_size)
        if self.names is not None:
            out["names"] = list(self.names)
        if self.has_value:
            out["value"] = json_value(self.value)
        if self.pickled:
            out["pickled"] = True
        return out


@dataclass(slots=True)
class ValueStats:
    """Element-wise comparison of two tensors of one shape, computed in float64 (but for
    the norms of float32 chunks equal on both sides, in float32: see ``_stats``).

    ``differing`` counts elements where ``|a - b| > atol + rtol * |a|`` (a NaN against a
    NaN, or an infinity against the same infinity, is no difference); the statistics
    (``max_abs``, ``mean_abs``, ``rel_l2`` = ``||a - b|| / ||a||``, ``cosine``) are over
    the positions where both sides are finite, None where undefined (no such position, a zero norm).
    ``nan_appeared`` counts positions NaN in ``b`` and not in ``a``, ``nan_disappeared``
    the reverse; the same for infinities. Complex leaves compare by modulus of the
    difference; dtypes without numbers (quantized, bit and sub-byte dtypes) by bytes only
    (``bytes_only``: only ``equal`` is known).
    """

    numel: int = 0
    equal: bool = True
    differing: int | None = 0
    max_abs: float | None = None
    mean_abs: float | None = None
    rel_l2: float | None = None
    cosine: float | None = None
    nan_a: int = 0
    nan_b: int = 0
    nan_appeared: int = 0
    nan_disappeared: int = 0
    inf_a: int = 0
    inf_b: int = 0
    inf_appeared: int = 0
    inf_disappeared: int = 0
    bytes_only: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {name: json_value(getattr(self, name)) for name in self.__slots__}


def leaf_facts(record: Any) -> Facts:
    """The facts of a plain (not nested) leaf record."""
    return Facts("leaf", "Tensor", record.dtype.name, record.shape, record.nbytes)


def json_value(value: Any, depth: int = 0) -> Any:
    """A JSON-safe copy: non-finite floats as ``"NaN"``/``"Infinity"``/``"-Infinity"``,
    tuples as lists, other objects as their ``repr``."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if depth > 64:
        return "…"
    if isinstance(value, dict):
        return {str(k): json_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v, depth + 1) for v in value]
    return repr(value)
