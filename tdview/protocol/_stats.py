"""Statistics and histogram of a preview's selection, read in blocks of at most
:data:`CHUNK` elements (memory stays bounded whatever the selection's size; it is read
twice: statistics, then the histogram over their range). Each block is read by ``read``
(a remote leaf's by byte ranges, :mod:`._preview_ranged`: one range per run of the
block) and turned into the values shown by ``decode`` (:mod:`._preview_source`); numpy
only.

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

import numpy as np

from ._json import finite_or_none
from ._preview_ranged import RangedView
from ._preview_ranged import read as read_view

#: The values of a view of a leaf as an array: a ranged read of a remote one.
Read = Callable[[Any], np.ndarray]

CHUNK = 1 << 22
BINS = 64
#: Integer spans counted with ``bincount`` (one counter per integer of the span).
_COUNTED_SPAN = 1 << 16


def as_read(values: np.ndarray) -> np.ndarray:
    """The default ``decode``: the values as read (a dtype numpy holds)."""
    return values


def blocks(view: Any, limit: int) -> Iterator[Any]:
    """``view`` (an array or a ranged view) cut along its first dims into views of at
    most ``limit`` elements each, in C order."""
    size = math.prod(view.shape)
    if size <= limit or not view.shape:
        yield view
        return
    n = view.shape[0]
    row = math.prod(view.shape[1:])
    if row <= limit:
        step = max(1, limit // max(row, 1))
        for start in range(0, n, step):
            yield view[start : start + step]
        return
    for i in range(n):
        yield from blocks(view[i, ...], limit)


def chunks(
    view: Any,
    check: Callable[[], None],
    read: Read = read_view,
    decode: Callable[[np.ndarray], np.ndarray] = as_read,
) -> Iterator[np.ndarray]:
    """``view``'s values as flat float64 chunks of at most :data:`CHUNK` elements (each
    read by ``read``, shown by ``decode``); ``check`` before each."""
    for block in blocks(view, CHUNK):
        check()
        with np.errstate(invalid="ignore"):  # a signalling NaN widened stays a NaN
            yield np.asarray(decode(read(block)), dtype=np.float64).reshape(-1)


class _Moments:
    """Count, mean and sum of squared deviations, merged chunk by chunk (Chan et al.).

    The squared deviations are kept in units of ``scale``, a power of two at least the
    largest magnitude met, so that values near 1e200 or 1e308 do not overflow to inf."""

    def __init__(self) -> None:
        self.n, self.mean, self.m2, self.scale = 0, 0.0, 0.0, 1.0
        self.lo, self.hi = math.inf, -math.inf

    def add(self, finite: np.ndarray) -> None:
        n_b = finite.size
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
    values: Any,
    check: Callable[[], None] = lambda: None,
    read: Read = read_view,
    *,
    kind: str | None = None,
    decode: Callable[[np.ndarray], np.ndarray] = as_read,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Statistics and histogram of an array, a view of one or a ranged view.

    Parameters
    ----------
    values : array-like
        What is described (its elements as ``decode`` shows them).
    check : callable, optional
        Called before each chunk; raise from it to stop (cancellation).
    read : callable, optional
        The values of a block of ``values`` (a remote leaf's: ranged reads).
    kind : {"float", "int", "bool"}, optional
        Which statistics mean something; by default from ``values.dtype``.
    decode : callable, optional
        A block read to the values shown (bfloat16 bits to float32...).

    Returns
    -------
    (stats, histogram)
        ``stats`` as in ``PreviewStats``; ``histogram`` as ``{"edges": float64 array,
        "counts": int64 array, "values": float64 array or None}``, None when there is
        no finite value.

    Examples
    --------
    >>> stats, hist = statistics(np.array([1.0, 2.0, float("nan")]))
    >>> stats["mean"], stats["nan"], int(hist["counts"].sum())
    (1.5, 1, 2)
    >>> stats, hist = statistics(np.arange(100_000) < 989)
    >>> stats["mean"], hist["values"].tolist(), hist["counts"].tolist()
    (None, [0.0, 1.0], [99011, 989])
    """
    if not isinstance(values, (np.ndarray, RangedView)):
        values = np.asarray(values)  # a list, a CPU tensor (tests compare with torch)
    if kind is None:
        dtype = np.dtype(values.dtype)
        kind = "bool" if dtype == np.bool_ else "float" if dtype.kind in "fc" else "int"
    boolean, exact = kind == "bool", kind != "float"
    moments, nan, inf = _Moments(), 0, 0
    for chunk in chunks(values, check, read, decode):
        if exact:
            moments.add(chunk)
            continue
        finite = np.isfinite(chunk)
        nans = int(np.isnan(chunk).sum())
        nan += nans
        inf += chunk.size - int(finite.sum()) - nans
        moments.add(chunk[finite])
    some = moments.n > 0
    stats = {
        "min": finite_or_none(moments.lo) if some else None,
        "max": finite_or_none(moments.hi) if some else None,
        "mean": finite_or_none(moments.mean) if some and not boolean else None,
        "std": None if boolean else finite_or_none(moments.std()),
        "nan": None if exact else nan,
        "inf": None if exact else inf,
        "count": math.prod(values.shape),
    }
    if not some:
        return stats, None
    again = lambda: chunks(values, check, read, decode)  # noqa: E731
    if exact:
        return stats, _exact_histogram(again, moments.lo, moments.hi)
    return stats, _histogram(again, moments.lo, moments.hi)


def _histogram(again: Callable[[], Iterator[np.ndarray]], lo: float, hi: float) -> dict:
    """:data:`BINS` equal bins over ``[lo, hi]`` of the finite values."""
    span = hi - lo
    # values from near -1.8e308 to near 1.8e308 have a span of inf: bin them halved (a
    # power of two: the edges scale back exactly)
    scale = 1.0 if math.isfinite(span) else 0.5
    if span == 0:
        lo, hi = lo - 0.5, hi + 0.5
    counts = np.zeros(BINS, dtype=np.int64)
    low, width = lo * scale, hi * scale - lo * scale
    for chunk in again():
        finite = chunk[np.isfinite(chunk)] * scale
        if width > 0:  # 1e200 +- 0.5 is 1e200: no width, one bin
            at = np.floor((finite - low) / width * BINS)
            finite = np.clip(at, 0, BINS - 1)
        counts += np.bincount(finite.astype(np.int64) * (width > 0), minlength=BINS)
    edges = np.linspace(lo * scale, hi * scale, BINS + 1, dtype=np.float64) / scale
    return {"edges": edges, "counts": counts, "values": None}


def _exact_histogram(again: Callable[[], Iterator[np.ndarray]], lo: float, hi: float) -> dict:
    """A bar per value when there are at most :data:`BINS` distinct values, else
    :data:`BINS` equal bins: an integer's bin is ``floor((v - lo) * BINS / span)``
    (the last bin holds ``hi``)."""
    span = hi - lo
    if span + 1 <= _COUNTED_SPAN:
        per = np.zeros(int(span) + 1, dtype=np.int64)
        for chunk in again():
            per += np.bincount((chunk - lo).astype(np.int64), minlength=per.size)
        present = np.flatnonzero(per)
        if present.size <= BINS:
            return _per_value(present.astype(np.float64) + lo, per[present])
        bins = np.minimum(
            np.floor(np.arange(per.size, dtype=np.float64) * BINS / span).astype(np.int64),
            BINS - 1,
        )
        counts = np.bincount(bins, weights=per, minlength=BINS).astype(np.int64)
        return {"edges": np.linspace(lo, hi, BINS + 1), "counts": counts, "values": None}
    return _wide_histogram(again, lo, hi)


def _wide_histogram(again: Callable[[], Iterator[np.ndarray]], lo: float, hi: float) -> dict:
    """Integers over a wide span: the distinct values are followed while there are at
    most :data:`BINS` of them (a sorted search per chunk), the bins meanwhile."""
    span = hi - lo
    known: np.ndarray | None = np.empty(0, dtype=np.float64)
    per = np.zeros(0, dtype=np.int64)  # the count of each known value
    counts = np.zeros(BINS, dtype=np.int64)
    for chunk in again():
        bins = np.minimum(np.floor((chunk - lo) * BINS / span).astype(np.int64), BINS - 1)
        counts += np.bincount(bins, minlength=BINS)
        if known is None:
            continue
        new = chunk
        if known.size:
            at = np.minimum(np.searchsorted(known, chunk), known.size - 1)
            new = chunk[known[at] != chunk]
        if new.size:
            grown = np.union1d(known, new)
            if grown.size > BINS:
                known = None
                continue
            moved = np.zeros(grown.size, dtype=np.int64)
            moved[np.searchsorted(grown, known)] = per
            known, per = grown, moved
        per += np.bincount(np.searchsorted(known, chunk), minlength=known.size)
    if known is not None:
        return _per_value(known, per)
    return {"edges": np.linspace(lo, hi, BINS + 1), "counts": counts, "values": None}


def _per_value(values: np.ndarray, counts: np.ndarray) -> dict[str, Any]:
    """One bar per value; the edges are the midpoints (and half a unit beyond the ends)."""
    mids = (values[1:] + values[:-1]) / 2
    edges = np.concatenate([values[:1] - 0.5, mids, values[-1:] + 0.5])
    return {"edges": edges, "counts": counts.astype(np.int64), "values": values}
