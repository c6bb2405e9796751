"""Statistics and histogram of a leaf, read in chunks of :data:`CHUNK` elements (memory
stays bounded whatever the leaf's size; the leaf is read twice: statistics, then the
histogram over their range). A remote leaf is a ``meta`` tensor and ``read`` reads each
chunk by byte ranges (:class:`tdview.loader._ranged.RangedLeaf`): one range per chunk, so
the same bound holds for its memory, and its requests are one per 8 MiB.

What is sent for each kind of dtype (a statistic that means nothing for it is None):

============  =====  =====  ======  =====  =====  =====  =====
kind          count  min    max     mean   std    nan    inf
============  =====  =====  ======  =====  =====  =====  =====
float         yes    yes    yes     yes    yes    yes    yes
integer       yes    yes    yes     yes    yes    None   None
bool          yes    yes    yes     None   None   None   None
============  =====  =====  ======  =====  =====  =====  =====

float covers the floating dtypes and the magnitude of complex ones; min, max, mean and
std (sample, ``correction=1``) are over the finite values. A histogram has 64 equal bins
over ``[min, max]`` of the finite values, except that integers and booleans with at most
:data:`BINS` distinct values get one bar per value: ``values`` holds them (ascending),
``counts`` how many elements equal each, and ``edges`` the midpoints between them (and
half a unit beyond the ends), so that 989 ``True`` among 100,000 is a bar of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ._json import finite_or_none

#: The values of a view of a leaf: the view itself in memory, ranged reads for a remote one.
Read = Callable[[torch.Tensor], torch.Tensor]

CHUNK = 1 << 22
BINS = 64
#: Integer spans counted with ``bincount`` (one counter per integer of the span).
_COUNTED_SPAN = 1 << 16

_COMPLEX = {
    torch.complex32: torch.float32,
    torch.complex64: torch.float32,
    torch.complex128: torch.float64,
}


def _values64(chunk: torch.Tensor) -> torch.Tensor:
    if chunk.dtype in _COMPLEX:
        chunk = (chunk.to(torch.complex64) if chunk.dtype == torch.complex32 else chunk).abs()
    return chunk.to(torch.float64)


def as_is(tensor: torch.Tensor) -> torch.Tensor:
    """The ``read`` of a tensor in memory (or mapped): itself."""
    return tensor


def chunks(
    flat: torch.Tensor, check: Callable[[], None], read: Read = as_is
) -> Iterator[torch.Tensor]:
    """``flat`` as float64 chunks of :data:`CHUNK` elements (each read by ``read``);
    ``check`` before each."""
    for start in range(0, flat.numel(), CHUNK):
        check()
        yield _values64(read(flat[start : start + CHUNK]))


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


def statistics(
    tensor: torch.Tensor, check: Callable[[], None] = lambda: None, read: Read = as_is
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Statistics and histogram of a tensor (see the module docstring).

    Parameters
    ----------
    tensor : torch.Tensor
        Any previewable dtype (complex: of the magnitude).
    check : callable, optional
        Called before each chunk; raise from it to stop (cancellation).
    read : callable, optional
        The values of a chunk of ``tensor`` (a remote leaf's ``meta`` tensor: ranged
        reads).

    Returns
    -------
    (stats, histogram)
        ``stats`` as in ``PreviewStats``; ``histogram`` as ``{"edges": float64 tensor,
        "counts": int64 tensor, "values": float64 tensor or None}``, None when there is
        no finite value.

    Examples
    --------
    >>> stats, hist = statistics(torch.tensor([1.0, 2.0, float("nan")]))
    >>> stats["mean"], stats["nan"], int(hist["counts"].sum())
    (1.5, 1, 2)
    >>> stats, hist = statistics(torch.arange(100_000) < 989)
    >>> stats["mean"], hist["values"].tolist(), hist["counts"].tolist()
    (None, [0.0, 1.0], [99011, 989])
    """
    flat = tensor.reshape(-1)
    boolean = tensor.dtype == torch.bool
    exact = not (tensor.dtype.is_floating_point or tensor.dtype.is_complex)
    moments, nan, inf = _Moments(), 0, 0
    for values in chunks(flat, check, read):
        if exact:
            moments.add(values)
            continue
        nan += int(values.isnan().sum())
        inf += int(values.isinf().sum())
        moments.add(values[values.isfinite()])
    some = moments.n > 0
    stats = {
        "min": finite_or_none(moments.lo) if some else None,
        "max": finite_or_none(moments.hi) if some else None,
        "mean": finite_or_none(moments.mean) if some and not boolean else None,
        "std": None if boolean else finite_or_none(moments.std()),
        "nan": None if exact else nan,
        "inf": None if exact else inf,
        "count": flat.numel(),
    }
    if not some:
        return stats, None
    if exact:
        return stats, _exact_histogram(flat, moments.lo, moments.hi, check, read)
    return stats, _histogram(flat, moments.lo, moments.hi, check, read)


def _histogram(
    flat: torch.Tensor, lo: float, hi: float, check: Callable[[], None], read: Read
) -> dict[str, Any]:
    """:data:`BINS` equal bins over ``[lo, hi]`` of the finite values."""
    span = hi - lo
    # values from near -1.8e308 to near 1.8e308 have a span of inf: bin them halved (a
    # power of two: the edges scale back exactly)
    scale = 1.0 if math.isfinite(span) else 0.5
    if span == 0:
        lo, hi = lo - 0.5, hi + 0.5
    counts = torch.zeros(BINS, dtype=torch.int64)
    for values in chunks(flat, check, read):
        finite = values[values.isfinite()]
        counts += torch.histc(finite * scale, bins=BINS, min=lo * scale, max=hi * scale).to(
            torch.int64
        )
    edges = torch.linspace(lo * scale, hi * scale, BINS + 1, dtype=torch.float64) / scale
    return {"edges": edges, "counts": counts, "values": None}


def _exact_histogram(
    flat: torch.Tensor, lo: float, hi: float, check: Callable[[], None], read: Read
) -> dict[str, Any]:
    """A bar per value when there are at most :data:`BINS` distinct values, else
    :data:`BINS` equal bins: an integer's bin is ``floor((v - lo) * BINS / span)``
    (the last bin holds ``hi``)."""
    span = hi - lo
    if span + 1 <= _COUNTED_SPAN:
        per = torch.zeros(int(span) + 1, dtype=torch.int64)
        for values in chunks(flat, check, read):
            per += torch.bincount((values - lo).to(torch.int64), minlength=per.numel())
        present = per.nonzero().reshape(-1)
        if present.numel() <= BINS:
            return _per_value(present.to(torch.float64) + lo, per[present])
        bins = torch.clamp(
            (torch.arange(per.numel(), dtype=torch.float64) * BINS / span).floor().to(torch.int64),
            max=BINS - 1,
        )
        counts = torch.zeros(BINS, dtype=torch.int64).index_add_(0, bins, per)
        return {
            "edges": torch.linspace(lo, hi, BINS + 1, dtype=torch.float64),
            "counts": counts,
            "values": None,
        }
    return _wide_histogram(flat, lo, hi, check, read)


def _wide_histogram(
    flat: torch.Tensor, lo: float, hi: float, check: Callable[[], None], read: Read
) -> dict[str, Any]:
    """Integers over a wide span: the distinct values are followed while there are at
    most :data:`BINS` of them (a sorted search per chunk), the bins meanwhile."""
    span = hi - lo
    known: torch.Tensor | None = torch.empty(0, dtype=torch.float64)
    per = torch.zeros(0, dtype=torch.int64)  # the count of each known value
    counts = torch.zeros(BINS, dtype=torch.int64)
    for values in chunks(flat, check, read):
        bins = torch.clamp(((values - lo) * BINS / span).floor().to(torch.int64), max=BINS - 1)
        counts += torch.bincount(bins, minlength=BINS)
        if known is None:
            continue
        new = values
        if known.numel():
            at = torch.searchsorted(known, values).clamp(max=known.numel() - 1)
            new = values[known[at] != values]
        if new.numel():
            grown = torch.unique(torch.cat([known, torch.unique(new)]))
            if grown.numel() > BINS:
                known = None
                continue
            moved = torch.zeros(grown.numel(), dtype=torch.int64)
            moved[torch.searchsorted(grown, known)] = per
            known, per = grown, moved
        per += torch.bincount(torch.searchsorted(known, values), minlength=known.numel())
    if known is not None:
        return _per_value(known, per)
    return {
        "edges": torch.linspace(lo, hi, BINS + 1, dtype=torch.float64),
        "counts": counts,
        "values": None,
    }


def _per_value(values: torch.Tensor, counts: torch.Tensor) -> dict[str, Any]:
    """One bar per value; the edges are the midpoints (and half a unit beyond the ends)."""
    mids = (values[1:] + values[:-1]) / 2
    edges = torch.cat([values[:1] - 0.5, mids, values[-1:] + 0.5])
    return {"edges": edges, "counts": counts.to(torch.int64), "values": values}
