"""A leaf's values for a preview, with numpy alone: no torch, no tensordict.

A preview needs a few rows of a leaf, its statistics and a heatmap, not a tensor: the
leaf is an array over the bytes where they lie, indexed as numpy indexes (a view: only
the pages read are read) and read a block at a time.

* A directory's file: mapped read-only from the descriptor the store opened and checked
  (``Store.map``: no symlink or FIFO swapped in since the index listed it), after its
  size was checked on that descriptor.
* An archive's STORED entry: a view of one read-only mapping of the archive file per
  checkpoint (an entry whose offset does not suit its item size is viewed unaligned:
  numpy reads it, nothing is copied); a compressed entry is decompressed whole (size and
  CRC-32 checked by the store).
* A remote leaf stored as it is: a :class:`~._preview_ranged.RangedView` read by byte
  ranges; otherwise read whole.
* A nested (ragged) leaf: its packed elements, one after the other (1-d), sized by its
  int64 ``[N, D]`` sizes file.

Each dtype is stored as numpy holds its bytes and :class:`Display` turns a block read
into the values sent (``display_dtype``): float32, float64 and the integer dtypes as they
are; float16 to float32; bfloat16 (numpy has none) from its bits, shifted into float32's
upper half; the float8 dtypes by a table of their 256 values; complex dtypes by their
magnitude ``|z|``; bool as one byte 0/1. The others (float4, quantized, bit and
sub-byte dtypes) have no preview.
"""

from __future__ import annotations

import mmap
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import LeafDataError, PreviewUnsupportedError
from ..index import Node, Tree, refusal, show_path, size_problems
from ._preview_ranged import RangedView, read

__all__ = ["Display", "display_of", "leaf_values"]

_LIMIT = 2**62


@dataclass(frozen=True)
class Display:
    """How a leaf's stored elements (``stored``, a numpy dtype) are shown: ``decode``
    turns a block read into the values sent, of dtype ``name`` (a buffer dtype);
    ``kind`` is ``"float"``, ``"int"`` or ``"bool"`` (which statistics mean something)."""

    stored: np.dtype
    name: str
    kind: str
    decode: Callable[[np.ndarray], np.ndarray]


def _float8(exponent: int, mantissa: int, bias: int, style: str) -> np.ndarray:
    """The float32 value of each of the 256 bit patterns of a float8 dtype: ``"ieee"``
    (infinities and NaNs where the exponent is all ones), ``"fn"`` (no infinity, NaN
    where every bit but the sign is one), ``"fnuz"`` (no infinity, no negative zero: its
    pattern 0x80 is the NaN) or ``"e8m0"`` (no sign, no mantissa, 0xFF the NaN)."""
    bits = np.arange(256, dtype=np.int64)
    sign = np.where((bits >> (exponent + mantissa)) & 1 if style != "e8m0" else 0, -1.0, 1.0)
    e = (bits >> mantissa) & ((1 << exponent) - 1)
    m = bits & ((1 << mantissa) - 1)
    frac = m / float(1 << mantissa) if mantissa else np.zeros(256)
    normal = np.ldexp(1.0 + frac, e - bias)
    subnormal = np.ldexp(frac, 1 - bias)
    values = sign * np.where(e > 0, normal, subnormal if mantissa else normal)
    top = e == (1 << exponent) - 1
    if style == "ieee":
        values = np.where(top & (m == 0), sign * np.inf, np.where(top, np.nan, values))
    elif style == "fn":
        values = np.where(top & (m == (1 << mantissa) - 1), np.nan, values)
    elif style == "fnuz":
        values = np.where(bits == 0x80, np.nan, values)
    else:
        values = np.where(bits == 0xFF, np.nan, values)
    return values.astype(np.float32)


_FLOAT8 = {
    "float8_e4m3fn": (4, 3, 7, "fn"),
    "float8_e5m2": (5, 2, 15, "ieee"),
    "float8_e4m3fnuz": (4, 3, 8, "fnuz"),
    "float8_e5m2fnuz": (5, 2, 16, "fnuz"),
    "float8_e8m0fnu": (8, 0, 127, "e8m0"),
}
_AS_IS = frozenset(
    ("float32", "float64", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64")
)


def _bfloat16(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32)


def _complex32(raw: np.ndarray) -> np.ndarray:
    halves = np.ascontiguousarray(raw).view(np.float16).reshape(*raw.shape, 2)
    return np.hypot(halves[..., 0].astype(np.float32), halves[..., 1].astype(np.float32))


def display_of(name: str) -> Display:
    """The :class:`Display` of a torch dtype name (``"bfloat16"``).

    Raises
    ------
    PreviewUnsupportedError
        The dtype has no display form.

    Examples
    --------
    >>> bf16 = display_of("bfloat16")
    >>> bf16.decode(np.array([0x3F80, 0xC000], dtype=np.uint16)).tolist()
    [1.0, -2.0]
    """
    if name in _AS_IS:
        kind = "float" if name.startswith("float") else "int"
        return Display(np.dtype(name), name, kind, lambda raw: raw)
    if name == "float16":
        return Display(np.dtype(np.float16), "float32", "float", lambda r: r.astype(np.float32))
    if name == "bfloat16":
        return Display(np.dtype(np.uint16), "float32", "float", _bfloat16)
    if name in _FLOAT8:
        table = _float8(*_FLOAT8[name])
        return Display(np.dtype(np.uint8), "float32", "float", lambda raw: table[raw])
    if name == "bool":
        return Display(np.dtype(np.bool_), "bool", "bool", lambda r: r.astype(np.uint8))
    if name == "complex64":
        return Display(np.dtype(np.complex64), "float32", "float", np.abs)
    if name == "complex128":
        return Display(np.dtype(np.complex128), "float64", "float", np.abs)
    if name == "complex32":
        return Display(np.dtype(np.uint32), "float32", "float", _complex32)
    raise PreviewUnsupportedError(f"a leaf of dtype {name} cannot be previewed")


# Checkpoint -> the read-only mapping of its archive file, as uint8
_MAPPINGS: weakref.WeakKeyDictionary[Tree, np.ndarray] = weakref.WeakKeyDictionary()


def _mapped(fd: int, size: int) -> np.ndarray:
    """The first ``size`` bytes of the file open at ``fd``, mapped read-only."""
    return np.frombuffer(mmap.mmap(fd, size, access=mmap.ACCESS_READ), dtype=np.uint8)


def _archive(ckpt: Tree) -> np.ndarray:
    found = _MAPPINGS.get(ckpt)
    if found is None:
        fd, st, _ = ckpt.store.map("", write=False)  # the very file the index read
        try:
            found = _MAPPINGS[ckpt] = _mapped(fd, st.st_size)
        finally:
            os.close(fd)
    return found


def _flat(ckpt: Tree, key: str, dtype: np.dtype, count: int, exact: bool) -> Any:
    """The first ``count`` items of file ``key`` as a 1-d array (or a ranged view), its
    size checked (``exact``: an archive entry of exactly that size)."""
    store, need = ckpt.store, count * dtype.itemsize
    payload = store.locate(key)
    have = payload.size
    if have < need or (exact and payload.in_archive and have != need):
        raise LeafDataError(
            f"{payload.display} holds {have} bytes, but the leaf needs "
            f"{'exactly ' if exact and payload.in_archive else ''}{need} bytes "
            f"({count} items of {dtype.name}). tdview does not grow files: the file was "
            "truncated, or does not belong to this checkpoint."
        )
    if need == 0:
        return np.empty(0, dtype=dtype)
    as_stored = payload.compression == "stored" and payload.stored_size == payload.size
    if not store.mappable and as_stored:
        return RangedView.of_leaf(store, key, dtype, (count,))
    if not store.mappable or not as_stored:
        return store.decompress(key, max_size=have)[:need].view(dtype)
    if store.packed:
        span = store.stored_span(key)
        if span is None:
            if payload.offset is None:
                assert payload.error is not None
                raise payload.error
            span = (payload.offset, payload.size)
        mapping = _archive(ckpt)
        store.check_intact()
        return mapping[span[0] : span[0] + need].view(dtype)
    fd, st, _ = store.map(key, write=False)
    try:
        if st.st_size < need:
            raise LeafDataError(
                f"{payload.display} has {st.st_size} bytes, but the leaf needs {need} bytes. "
                "tdview does not grow files: the file was truncated, or does not belong to "
                "this checkpoint."
            )
        return _mapped(fd, need).view(dtype)
    finally:
        os.close(fd)


def _shaped(flat: Any, shape: tuple[int, ...]) -> Any:
    if isinstance(flat, RangedView):
        return RangedView.of_leaf(flat.leaf.store, flat.leaf.key, flat.dtype, shape)
    return flat.reshape(shape)


def leaf_values(ckpt: Tree, node: Node, display: Display) -> Any:
    """The stored elements of the leaf at ``node``, of its shape (a nested leaf: its
    packed elements, 1-d): a numpy array over the bytes where they lie, or a
    :class:`~._preview_ranged.RangedView` of a remote one (see the module docstring).

    Raises
    ------
    LeafDataError
        Its file is missing or too short, a nested leaf's sizes are missing or wrong.
    UnsafeCheckpointError
        The store refuses its file (a symlink out of the root that no rule trusts...).
    """
    record = node.record
    assert record is not None
    dtype = display.stored
    where = f"leaf {show_path(node.path)!r} of {ckpt.path}"
    if not record.is_nested and record.numel == 0:
        return np.empty(record.shape, dtype=dtype)
    if node.file is None:
        refused = refusal(node)
        if refused is not None:
            raise type(refused.error)(f"{where}: {refused}.") from refused.error
        if not (record.is_nested and node.sizes_file is not None):
            raise LeafDataError(f"{where}: {'; '.join(node.problems) or 'its file is missing'}.")
    if record.is_nested:
        return _nested(ckpt, node, dtype, where)
    problems = size_problems(ckpt.store, node)
    if problems:
        raise LeafDataError(f"{where}: {'; '.join(problems)}.")
    assert node.file is not None
    flat = _flat(ckpt, node.file, dtype, record.numel or 0, exact=True)
    return _shaped(flat, tuple(record.shape))


def _nested(ckpt: Tree, node: Node, dtype: np.dtype, where: str) -> Any:
    record = node.record
    assert record is not None
    if node.sizes_file is None:
        raise LeafDataError(
            f"nested {where} cannot be previewed: "
            + ("; ".join(node.problems) or "its sizes file is missing")
            + "."
        )
    n, d = record.shape
    sizes = read(_flat(ckpt, node.sizes_file, np.dtype(np.int64), n * d, exact=True))
    sizes = sizes.reshape(n, d)
    shown = ckpt.store.display(node.sizes_file)
    if sizes.size and int(sizes.min()) < 0:
        raise LeafDataError(f"{shown}: nested sizes must not be negative, got {sizes.min()}.")
    if sizes.size and float(sizes.astype(np.float64).prod(-1).sum()) >= _LIMIT:
        raise LeafDataError(f"{shown}: nested sizes describe more than 2**62 elements.")
    numel = int(sizes.prod(-1).sum()) if sizes.size else 0
    if numel == 0 or node.file is None:
        return np.empty(0, dtype=dtype)
    return _flat(ckpt, node.file, dtype, numel, exact=False)
