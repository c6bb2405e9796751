"""The ``preview`` method: a bounded slice, statistics and a histogram of one leaf.

The leaf is loaded memory-mapped (``mode="r"``) and read in chunks of
:data:`CHUNK` elements, so memory stays bounded whatever the leaf's size; the whole
leaf is read twice (statistics, then the histogram over their range).

What is sent for each dtype (``display_dtype``):

- float32, float64, the integer dtypes: as they are;
- bfloat16, float16 and the float8 dtypes: converted to float32;
- complex dtypes: their magnitude ``|z|`` (float32, float64 for complex128): slice,
  statistics and histogram all describe the magnitude;
- bool: one byte per element (0/1), buffer dtype ``"bool"``;
- the others (quantized, bit and sub-byte dtypes): not previewed (an error reply).

The slice is the first ``rows`` (at most 100) rows of a table: a 0-d leaf is its single
value, a 1-d leaf its first ``rows`` values, and an n-d leaf (n >= 2) a table with dim 0
as rows and the remaining dims flattened in C order as columns (at most 50). A nested
(ragged) leaf is previewed as the concatenation of its flattened components (1-d; the
reply's ``shape`` is then that of the concatenation).
Statistics: ``min``, ``max``, ``mean`` and ``std`` (sample, ``correction=1``) over the
finite values, ``nan`` and ``inf`` counts, ``count`` = all elements. The histogram has
64 equal bins over ``[min, max]`` of the finite values (one bin per value for integer
data spanning at most 64 values).

Below a torchrl replay-buffer storage (:func:`tdview.index.rows_of_leaf`), slice,
statistics and histogram cover the rows written (``rows_scope="written"``, the default:
the others hold zeros or uninitialised memory) or every row (``"all"``); the reply's
``rows`` says ``{written, capacity, scope}`` then, and is None elsewhere. ``shape`` is
always the leaf's own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ..errors import LimitExceededError, PreviewUnsupportedError
from ..index import Checkpoint, Node, leaf_storage, rows_of_leaf
from ..index._facts import COPY, DECOMPRESS
from ._json import finite_or_none
from ._load import host_memory
from ._nodes import dtype_name

CHUNK = 1 << 22
MAX_COLS = 50
BINS = 64

_TO_FLOAT32 = {torch.float16, torch.bfloat16}
_TO_FLOAT32.update(
    getattr(torch, name) for name in (
        "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu")
    if hasattr(torch, name)
)
_AS_IS = {torch.float32, torch.float64, torch.uint8, torch.int8, torch.int16, torch.int32,
          torch.int64, torch.uint16, torch.uint32, torch.uint64}
_COMPLEX = {torch.complex32: torch.float32, torch.complex64: torch.float32,
            torch.complex128: torch.float64}


def _display(tensor: torch.Tensor) -> tuple[torch.Tensor, str]:
    """``tensor`` converted for display, and the buffer dtype name."""
    dtype = tensor.dtype
    if dtype in _AS_IS:
        return tensor, dtype_name(str(dtype))
    if dtype in _TO_FLOAT32:
        return tensor.to(torch.float32), "float32"
    if dtype == torch.bool:
        return tensor.to(torch.uint8), "bool"
    if dtype in _COMPLEX:
        wide = tensor.to(torch.complex64) if dtype == torch.complex32 else tensor
        return wide.abs().to(_COMPLEX[dtype]), dtype_name(str(_COMPLEX[dtype]))
    raise PreviewUnsupportedError(f"a leaf of dtype {dtype_name(str(dtype))} cannot be previewed")


def _table(tensor: torch.Tensor, rows: int) -> torch.Tensor:
    if tensor.dim() == 0:
        return tensor.reshape(())
    if tensor.dim() == 1:
        return tensor[:rows]
    width = math.prod(tensor.shape[1:])
    return tensor.reshape(tensor.shape[0], width)[:rows, :MAX_COLS]


def _values64(chunk: torch.Tensor) -> torch.Tensor:
    if chunk.dtype in _COMPLEX:
        chunk = (chunk.to(torch.complex64) if chunk.dtype == torch.complex32 else chunk).abs()
    return chunk.to(torch.float64)


class _Moments:
    """Count, mean and sum of squared deviations, merged chunk by chunk (Chan et al.).

    The squared deviations are kept in units of ``scale``, a power of two at least the
    largest magnitude met, so that values near 1e200 or 1e308 do not overflow to inf."""

    def __init__(self) -> None:
        self.n, self.mean, self.m2, self.scale = 0, 0.0, 0.0, 1.0
        self.lo, self.hi = math.inf, -math.inf

    def add(self, finite: torch.Tensor) -> None:
        n_b = finite.numel()
        if n_b == 0:
            return
        lo, hi = float(finite.min()), float(finite.max())
        self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)
        scale = max(self.scale, 2.0 ** min(math.frexp(max(-lo, hi))[1], 1023))
        self.m2 *= (self.scale / scale) ** 2
        self.scale = scale
        mean_b = float((finite / scale).mean()) * scale
        m2_b = float((((finite - mean_b) / scale) ** 2).sum())
        if self.n == 0:
            self.n, self.mean, self.m2 = n_b, mean_b, m2_b
            return
        n = self.n + n_b
        delta = mean_b / scale - self.mean / scale
        self.mean += delta * n_b / n * scale
        self.m2 += m2_b + delta * delta * (self.n * n_b / n)
        self.n = n

    def std(self) -> float | None:
        """The sample standard deviation (None for fewer than two values)."""
        return math.sqrt(self.m2 / (self.n - 1)) * self.scale if self.n > 1 else None


def _chunks(flat: torch.Tensor, check: Callable[[], None]):
    for start in range(0, flat.numel(), CHUNK):
        check()
        yield _values64(flat[start : start + CHUNK])


def _flat(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.reshape(-1)


def statistics(
    tensor: torch.Tensor, check: Callable[[], None] = lambda: None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Statistics and histogram of a tensor, read in chunks of :data:`CHUNK` elements.

    Parameters
    ----------
    tensor : torch.Tensor
        Any previewable dtype (complex: of the magnitude).
    check : callable, optional
        Called before each chunk; raise from it to stop (cancellation).

    Returns
    -------
    (stats, histogram)
        ``stats`` as in ``PreviewStats``; ``histogram`` as ``{"edges": float64 tensor,
        "counts": int64 tensor}``, None when there is no finite value.

    Examples
    --------
    >>> stats, hist = statistics(torch.tensor([1.0, 2.0, float("nan")]))
    >>> stats["mean"], stats["nan"], int(hist["counts"].sum())
    (1.5, 1, 2)
    """
    flat = _flat(tensor)
    exact = not (tensor.dtype.is_floating_point or tensor.dtype.is_complex)
    moments, nan, inf = _Moments(), 0, 0
    for values in _chunks(flat, check):
        if exact:
            moments.add(values)
            continue
        nan += int(values.isnan().sum())
        inf += int(values.isinf().sum())
        moments.add(values[values.isfinite()])
    std = moments.std()
    stats = {
        "min": finite_or_none(moments.lo) if moments.n else None,
        "max": finite_or_none(moments.hi) if moments.n else None,
        "mean": finite_or_none(moments.mean) if moments.n else None,
        "std": finite_or_none(std),
        "nan": nan, "inf": inf, "count": flat.numel(),
    }
    if moments.n == 0:
        return stats, None
    return stats, _histogram(flat, moments.lo, moments.hi, exact, check)


def _histogram(flat: torch.Tensor, lo: float, hi: float, exact: bool,
               check: Callable[[], None]) -> dict[str, torch.Tensor]:
    span = hi - lo
    # values from near -1.8e308 to near 1.8e308 have a span of inf: bin them halved (a
    # power of two: the edges scale back exactly)
    scale = 1.0 if math.isfinite(span) else 0.5
    if exact and span + 1 <= BINS:
        bins, lo, hi = int(span) + 1, lo - 0.5, hi + 0.5
    else:
        bins = BINS
        if span == 0:
            lo, hi = lo - 0.5, hi + 0.5
    counts = torch.zeros(bins, dtype=torch.int64)
    for values in _chunks(flat, check):
        finite = values if exact else values[values.isfinite()]
        counts += torch.histc(finite * scale, bins=bins, min=lo * scale,
                              max=hi * scale).to(torch.int64)
    edges = torch.linspace(lo * scale, hi * scale, bins + 1, dtype=torch.float64) / scale
    return {"edges": edges, "counts": counts}


def _ref(tensor: torch.Tensor, dtype: str, buffers: list[bytes]) -> dict[str, Any]:
    data = tensor.contiguous().reshape(-1)
    buffers.append(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return {"dtype": dtype, "shape": list(tensor.shape), "buffer": len(buffers) - 1}


def _check_room(ckpt: Checkpoint, node: Node) -> None:
    """Refuse to preview a leaf that must be decompressed (or copied) whole into more
    than half the memory available now: a small hostile archive can declare gigabytes,
    and one click must not get the kernel killed. A mapped leaf reads only its pages."""
    facts = leaf_storage(ckpt.store, node)
    if facts.cost not in (DECOMPRESS, COPY):
        return
    free = host_memory()["free_bytes"]
    if free is not None and facts.size > free // 2:
        raise LimitExceededError(
            f"{facts.location}: a preview of this leaf would {facts.cost} all {facts.size:,} "
            f"bytes of it into memory, more than half of the {free:,} bytes available now. "
            "Load it where it fits instead (the Load form shows what it takes)."
        )


def _packed(nested: torch.Tensor) -> torch.Tensor:
    """The elements of a nested (strided) tensor, component after component, as one 1-d
    tensor: a view of its storage when the components lie packed in it from its start
    (as tdview's loader lays them out), a copy otherwise."""
    sizes = nested._nested_tensor_size()
    strides, offsets = torch._nested_compute_contiguous_strides_offsets(sizes)
    if (torch.equal(nested._nested_tensor_strides(), strides)
            and torch.equal(nested._nested_tensor_storage_offsets(), offsets)):
        numel = int(sizes.prod(-1).sum()) if sizes.numel() else 0
        return torch.empty(0, dtype=nested.dtype).set_(nested.untyped_storage(), 0, (numel,),
                                                       (1,))
    parts = [t.reshape(-1) for t in nested.unbind(0)]
    return torch.cat(parts) if parts else torch.empty(0, dtype=nested.dtype)


def preview(
    ckpt: Checkpoint, path: tuple[str, ...], rows: int,
    check: Callable[[], None] = lambda: None, *, rows_scope: str = "written",
) -> tuple[dict[str, Any], list[bytes]]:
    """``PreviewResult`` of the leaf at ``path`` and its buffers: ``[slice, edges, counts]``.

    Parameters
    ----------
    ckpt : Checkpoint
        Must provide ``load_leaf(path, mode="r")`` (tdview's loader).
    path : tuple of str
    rows : int
        Rows of the slice (the caller caps it).
    check : callable, optional
        Called between chunks; raise from it to cancel.
    rows_scope : {"written", "all"}
        Below a torchrl storage: only its written rows, or all of them.

    Raises
    ------
    SubpathError
        No node at ``path``.
    PreviewUnsupportedError
        The node is not a tensor leaf, or its dtype has no display form.

    Examples
    --------
    >>> result, buffers = preview(ckpt, ("replay", "reward"), 4)      # doctest: +SKIP
    >>> result["display_dtype"], result["slice"]["shape"]            # doctest: +SKIP
    ('float32', [4])
    """
    node = ckpt.node(path)
    if not node.is_leaf or node.record is None:
        raise PreviewUnsupportedError(f"{'/'.join(path) or '<root>'} is a {node.kind}, "
                                      "not a tensor: only tensor leaves have a preview")
    _check_room(ckpt, node)
    tensor = ckpt.load_leaf(path, mode="r")  # type: ignore[attr-defined]
    if tensor.is_nested:
        tensor = _packed(tensor)
    shape = list(tensor.shape)
    written = rows_of_leaf(ckpt, path)
    if written is not None and rows_scope == "written" and tensor.dim():
        tensor = tensor[: written.written]
    shown, display_dtype = _display(_table(tensor, rows))
    stats, histogram = statistics(tensor, check)
    buffers: list[bytes] = []
    result = {
        "path": list(path),
        "dtype": dtype_name(node.record.dtype.name),
        "shape": shape,
        "display_dtype": display_dtype,
        "slice": _ref(shown, display_dtype, buffers),
        "stats": stats,
        "histogram": None if histogram is None else {
            "edges": _ref(histogram["edges"], "float64", buffers),
            "counts": _ref(histogram["counts"], "int64", buffers),
        },
        "rows": None if written is None else {
            "written": written.written, "capacity": written.capacity, "scope": rows_scope},
    }
    return result, buffers
