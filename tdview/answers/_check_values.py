"""What ``check --values`` counts in a leaf's bytes: NaN, ±Inf, and whether all are zero.

Counted from the bits, chunk by chunk, with numpy over unsigned integers: the same code
for float16, bfloat16 (which numpy has no type for), float32, float64, the float8 kinds
and the parts of complex numbers. A float is NaN when its exponent bits are all set and
its mantissa is not zero, ±Inf when the mantissa is zero; zero when every bit but the
sign is clear (``-0.0`` is zero). Other dtypes are only checked for all-zero bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..format import DTypeInfo


@dataclass(frozen=True)
class FloatBits:
    """The bit layout of one float dtype: its unsigned word, the exponent mask, whether
    it has infinities, and the NaN rule of the float8 kinds without them."""

    word: type[np.unsignedinteger]
    exponent: int
    has_inf: bool = True
    nan_is_all_ones: bool = False  # e4m3fn: NaN is only S.1111.111


_U16, _U32, _U64 = np.uint16, np.uint32, np.uint64
#: dtype name (without ``torch.``) -> layout; a complex dtype is two of its part's.
FLOATS: dict[str, FloatBits] = {
    "float16": FloatBits(_U16, 0x7C00),
    "bfloat16": FloatBits(_U16, 0x7F80),
    "float32": FloatBits(_U32, 0x7F80_0000),
    "float64": FloatBits(_U64, 0x7FF0_0000_0000_0000),
    "float8_e5m2": FloatBits(np.uint8, 0x7C),
    "float8_e4m3fn": FloatBits(np.uint8, 0x78, has_inf=False, nan_is_all_ones=True),
}
COMPLEX_PARTS = {"complex32": "float16", "complex64": "float32", "complex128": "float64"}


@dataclass
class ValueCounts:
    """NaN and ±Inf counts of the elements read, and whether one was not zero."""

    elements: int = 0
    nan: int = 0
    inf: int = 0
    nonzero: bool = False


def layout(dtype: DTypeInfo) -> tuple[FloatBits | None, int]:
    """``(the float layout, parts per element)``: ``(None, 1)`` for a dtype whose
    values are checked for zeros only.

    Examples
    --------
    >>> from tdview.format import DTYPES
    >>> layout(DTYPES["torch.complex64"])[1]
    2
    >>> layout(DTYPES["torch.int64"])
    (None, 1)
    """
    name = dtype.torch_name
    part = COMPLEX_PARTS.get(name)
    if part is not None:
        return FLOATS[part], 2
    return FLOATS.get(name), 1


def count_chunk(counts: ValueCounts, chunk: memoryview, dtype: DTypeInfo) -> None:
    """Add the counts of ``chunk`` (whole elements of ``dtype``) to ``counts``.

    Examples
    --------
    >>> import numpy as np
    >>> from tdview.format import DTYPES
    >>> counts = ValueCounts()
    >>> data = np.array([1.0, np.nan, -np.inf, 0.0], np.float32)
    >>> count_chunk(counts, memoryview(data.tobytes()), DTYPES["torch.float32"])
    >>> counts.nan, counts.inf, counts.nonzero
    (1, 1, True)
    """
    bits, parts = layout(dtype)
    counts.elements += len(chunk) // dtype.itemsize
    if bits is None:
        if not counts.nonzero:
            counts.nonzero = bool(np.frombuffer(chunk, np.uint8).any())
        return
    words = np.frombuffer(chunk, bits.word)
    sign = bits.word(1) << bits.word(8 * words.itemsize - 1)
    magnitude = words & ~sign
    exponent = bits.word(bits.exponent)
    largest = magnitude.max() if len(magnitude) else bits.word(0)
    counts.nonzero = counts.nonzero or bool(largest)
    if largest < exponent:  # every value finite (the usual chunk): one pass, no counts
        return
    if bits.nan_is_all_ones:
        nan = magnitude == ~sign
        inf = None
    else:
        nan = magnitude > exponent
        inf = magnitude == exponent if bits.has_inf else None
    if parts == 2:  # an element is NaN (Inf) when a part is
        nan = nan.reshape(-1, 2).any(axis=1)
        inf = None if inf is None else inf.reshape(-1, 2).any(axis=1) & ~nan
    counts.nan += int(np.count_nonzero(nan))
    if inf is not None:
        counts.inf += int(np.count_nonzero(inf))
