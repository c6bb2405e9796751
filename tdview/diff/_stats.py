"""Element-wise statistics of two tensors, accumulated chunk by chunk in float64.

Two float32 (or two float64) chunks go through one compiled loop (:func:`kernel`: a
few lines of C built with the system's C compiler on first use and kept in the user's
cache): every statistic in one pass, each element taken to float64, the sums in float64.
Everything else, and every chunk with NaN or infinity, goes through torch: each thread
keeps one :class:`Workspace` (float64 buffers of :data:`CHUNK` elements), so a chunk costs
no allocation and its passes stay in the cache. A chunk whose bytes are equal on both
sides costs one comparison and its norm (for the cosine and the relative norm; of a
float32 chunk in float32 without the kernel, see :func:`_equal_norm2`); a chunk without
NaN or infinity takes a fast path of a few vectorized passes (a finite sum of ``|a - b|``
proves every element finite); only a chunk with NaN or infinity is masked.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import platform
import shutil
import stat
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

import torch

from ._records import ValueStats

#: Elements compared per chunk.
CHUNK = 1 << 17
_F64, _C128 = torch.float64, torch.complex128
_NUMERIC: dict[torch.dtype, bool] = {}
_local = threading.local()


def numeric(dtype: torch.dtype) -> bool:
    """Whether ``dtype`` converts to float64 (or complex128) and compares: not the
    quantized, bit and sub-byte dtypes."""
    found = _NUMERIC.get(dtype)
    if found is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                probe = torch.zeros(2, dtype=dtype)
                target = _C128 if probe.is_complex() else _F64
                torch.empty(2, dtype=target).copy_(probe)
                bool((probe != probe).any())
            found = True
        except (RuntimeError, TypeError, NotImplementedError):
            found = False
        _NUMERIC[dtype] = found
    return found


class Workspace:
    """One thread's buffers: float64 (or complex128) ``x``, ``y``, ``d`` and a scratch."""

    def __init__(self, complex_: bool) -> None:
        kind = _C128 if complex_ else _F64
        self.x = torch.empty(CHUNK, dtype=kind)
        self.y = torch.empty(CHUNK, dtype=kind)
        self.d = torch.empty(CHUNK, dtype=kind)
        self.t = torch.empty(CHUNK, dtype=_F64)


def workspace(complex_: bool) -> Workspace:
    name = "complex" if complex_ else "real"
    found = getattr(_local, name, None)
    if found is None:
        found = Workspace(complex_)
        setattr(_local, name, found)
    return found


class Acc:
    """Running sums of one leaf (or one segment of it); :meth:`merge` adds another's."""

    __slots__ = (
        "a2",
        "b2",
        "d2",
        "differing",
        "finite",
        "inf_a",
        "inf_app",
        "inf_b",
        "inf_dis",
        "max_abs",
        "n",
        "nan_a",
        "nan_app",
        "nan_b",
        "nan_dis",
        "sum_abs",
    )

    def __init__(self) -> None:
        self.n = self.differing = self.finite = 0
        self.nan_a = self.nan_b = self.nan_app = self.nan_dis = 0
        self.inf_a = self.inf_b = self.inf_app = self.inf_dis = 0
        self.sum_abs = self.d2 = self.a2 = self.b2 = self.max_abs = 0.0

    def merge(self, other: Acc) -> None:
        for name in self.__slots__:
            if name == "max_abs":
                self.max_abs = _max(self.max_abs, other.max_abs)
            else:
                setattr(self, name, getattr(self, name) + getattr(other, name))

    def result(self) -> ValueStats:
        finite = self.finite
        a2, b2 = float(self.a2), float(self.b2)
        rel = None
        if a2 > 0:
            rel = math.sqrt(self.d2) / math.sqrt(a2)
        elif finite and self.d2 == 0:
            rel = 0.0
        cosine = None
        if a2 > 0 and b2 > 0:
            norms = a2 * b2
            norm = math.sqrt(norms) if math.isfinite(norms) else math.sqrt(a2) * math.sqrt(b2)
            # <a, b> from the norms: sum (a-b)^2 = sum a^2 + sum b^2 - 2 <a, b>, which keeps
            # 1 - cosine accurate for nearly equal tensors (a dot product would cancel)
            inner = (a2 + b2 - float(self.d2)) / 2
            cosine = max(-1.0, min(1.0, inner / norm))
        return ValueStats(
            numel=self.n,
            equal=self.differing == 0,
            differing=self.differing,
            max_abs=float(self.max_abs) if finite else None,
            mean_abs=float(self.sum_abs) / finite if finite else None,
            rel_l2=rel,
            cosine=cosine,
            nan_a=self.nan_a,
            nan_b=self.nan_b,
            nan_appeared=self.nan_app,
            nan_disappeared=self.nan_dis,
            inf_a=self.inf_a,
            inf_b=self.inf_b,
            inf_appeared=self.inf_app,
            inf_disappeared=self.inf_dis,
        )


def _max(a: float, b: float) -> float:
    if a != a or b != b:  # NaN
        return math.nan
    return a if a >= b else b


def compare_chunk(
    acc: Acc,
    ta: torch.Tensor,
    tb: torch.Tensor,
    same_bytes: bool,
    rtol: float,
    atol: float,
    *,
    use_kernel: bool = True,
) -> None:
    """Add one chunk (1-D tensors of equal length, any numeric dtypes) to ``acc``.

    ``same_bytes``: the chunk's bytes are equal on both sides (and so are the dtypes).
    ``use_kernel=False``: the kernel was tried on this chunk already (see
    :func:`kernel_values`).
    """
    k = ta.numel()
    if use_kernel and k >= KERNEL_MIN and ta.is_contiguous() and tb.is_contiguous():
        found = kernel_for(ta.dtype, tb.dtype)
        if found is not None and kernel_values(
            acc, found, ta.dtype, ta.data_ptr(), tb.data_ptr(), k, rtol, atol
        ):
            return
    complex_ = ta.is_complex() or tb.is_complex()
    ws = workspace(complex_)
    x, y, d = ws.x[:k], ws.y[:k], ws.d[:k]
    acc.n += k
    if same_bytes and ta.dtype == torch.float32:
        s = _equal_norm2(ta, ws.t)
        if s is not None:
            acc.a2 += s
            acc.b2 += s
            acc.finite += k
            return
    x.copy_(ta)
    if same_bytes:
        s = _norm2(x)
        if math.isfinite(s):
            acc.a2 += s
            acc.b2 += s
            acc.finite += k
            return
        y.copy_(x)
    else:
        y.copy_(tb)
    if complex_:
        _slow(acc, ta, tb, x, y, rtol, atol, complex_=True)
        return
    torch.sub(x, y, out=d)
    d.abs_()
    s1 = float(d.sum())
    if not math.isfinite(s1):  # a NaN or an infinity on a side (or an overflow)
        _slow(acc, ta, tb, x, y, rtol, atol, complex_=False)
        return
    acc.max_abs = _max(acc.max_abs, float(torch.amax(d)))
    acc.sum_abs += s1
    acc.d2 += float(torch.dot(d, d))  # torch's: numpy's BLAS threads spin against the pool
    acc.a2 += float(torch.dot(x, x))
    acc.b2 += float(torch.dot(y, y))
    acc.finite += k
    acc.differing += _differing(ta, tb, x, d, ws.t[:k], rtol, atol)


def _equal_norm2(ta: torch.Tensor, scratch: torch.Tensor) -> float | None:
    """``sum(a**2)`` of a float32 chunk equal on both sides, in float32: twice as fast as
    through float64 (the conversion is half the cost). It adds the same to both norms,
    so an equal leaf's cosine is still 1 and its relative norm 0; in a leaf that is only
    partly equal, the relative norm is within 1e-7 (rounded squares and sum), and the
    cosine barely moves (both norms move alike). None if it underflows or overflows
    (tiny values, NaN, infinity): the caller takes the float64 path."""
    squares = scratch.view(torch.float32)[: ta.numel()]
    s = float(torch.mul(ta, ta, out=squares).sum())
    return s if _TINY < s < math.inf else None


#: Below this, a float32 sum of squares may have lost digits to underflow.
_TINY = 2.0**-100


def _norm2(x: torch.Tensor) -> float:
    if x.is_complex():
        return float(torch.vdot(x, x).real)
    return float(torch.dot(x, x))


def _differing(
    ta: torch.Tensor,
    tb: torch.Tensor,
    x: torch.Tensor,
    d: torch.Tensor,
    scratch: torch.Tensor,
    rtol: float,
    atol: float,
) -> int:
    """Finite elements outside the tolerance (``d`` holds ``|a - b|``)."""
    if rtol == 0 and atol == 0:
        if ta.is_floating_point() or tb.is_floating_point():
            return int(torch.count_nonzero(d))  # exact: a float64 difference is 0 only if equal
        return int(torch.count_nonzero(ta != tb))  # int64 past 2**53: compare as they are
    torch.abs(x, out=scratch)
    scratch.mul_(rtol).add_(atol)
    return int(torch.count_nonzero(d > scratch))


def _slow(
    acc: Acc,
    ta: torch.Tensor,
    tb: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    rtol: float,
    atol: float,
    *,
    complex_: bool,
) -> None:
    """A chunk with NaN or infinity (or complex): masks, then the statistics of the
    positions finite on both sides."""
    nan_x, nan_y = torch.isnan(x), torch.isnan(y)
    inf_x, inf_y = torch.isinf(x), torch.isinf(y)
    acc.nan_a += int(nan_x.sum())
    acc.nan_b += int(nan_y.sum())
    acc.nan_app += int((nan_y & ~nan_x).sum())
    acc.nan_dis += int((nan_x & ~nan_y).sum())
    acc.inf_a += int(inf_x.sum())
    acc.inf_b += int(inf_y.sum())
    acc.inf_app += int((inf_y & ~inf_x).sum())
    acc.inf_dis += int((inf_x & ~inf_y).sum())
    fin = ~(nan_x | nan_y | inf_x | inf_y)
    n_fin = int(fin.sum())
    if n_fin < x.numel():
        # a NaN against a NaN, or an infinity against the same one, is no difference
        odd = ~fin
        same = (nan_x & nan_y) | (x == y)
        acc.differing += int((odd & ~same).sum())
        xf, yf = x[fin], y[fin]
        fa, fb = ta[fin], tb[fin]
    else:
        xf, yf, fa, fb = x, y, ta, tb
    if not n_fin:
        return
    df = xf - yf
    ad = df.abs()
    acc.a2 += _norm2(xf)
    acc.b2 += _norm2(yf)
    acc.d2 += float(torch.dot(ad, ad))
    acc.sum_abs += float(ad.sum())
    acc.max_abs = _max(acc.max_abs, float(ad.max()))
    acc.finite += n_fin
    if rtol == 0 and atol == 0:
        if complex_ or fa.is_floating_point() or fb.is_floating_point():
            acc.differing += int(torch.count_nonzero(ad))
        else:
            acc.differing += int(torch.count_nonzero(fa != fb))
    else:
        acc.differing += int(torch.count_nonzero(ad > atol + rtol * xf.abs()))


def bytes_only_stats(numel: int, equal: bool) -> ValueStats:
    """The statistics of a dtype without numbers: only whether the bytes are equal."""
    return ValueStats(numel=numel, equal=equal, differing=None, bytes_only=True)


def as_tensor(raw: Any, dtype: torch.dtype) -> torch.Tensor:
    """A 1-D tensor over a chunk's bytes (a writable buffer: no copy, no warning)."""
    return torch.frombuffer(raw, dtype=dtype)


# -- the compiled kernel --------------------------------------------------------------

#: One pass over two chunks of one dtype: ``out`` gets ``sum |a-b|``, ``sum (a-b)^2``,
#: ``sum a^2``, ``sum b^2``, ``max |a-b|`` and the count of differing elements (``|a-b|
#: > |a| * rtol + atol``, or ``a != b`` without a tolerance), each element taken to
#: float64 as the torch path takes it, the sums in float64 in :data:`_LANES` partial sums
#: (the torch path's order differs: the last digits may too). A NaN or an infinity makes
#: ``sum |a-b|`` non-finite: the caller then takes the torch path. ``-ffp-contract=off``
#: keeps the tolerance's rounding that of torch's (a product, then a sum); the squares
#: use ``fma``.
_KERNEL_C = r"""
#include <stdint.h>
#include <math.h>
#define L 32
#define STEP(TOL)                                                                  \
    for (int j = 0; j < L; j++) {                                                  \
        double x = a[i + j], y = b[i + j], d = fabs(x - y);                        \
        s1[j] += d; d2[j] = fma(d, d, d2[j]);                                      \
        a2[j] = fma(x, x, a2[j]); b2[j] = fma(y, y, b2[j]);                        \
        mx[j] = d > mx[j] ? d : mx[j]; cnt[j] += (TOL) ? 1.0 : 0.0;                \
    }
#define STATS(NAME, T)                                                             \
void NAME(const T *a, const T *b, int64_t n, double rtol, double atol,            \
          double *out) {                                                           \
    double s1[L] = {0}, d2[L] = {0}, a2[L] = {0}, b2[L] = {0}, mx[L] = {0};        \
    double cnt[L] = {0};                                                           \
    int64_t i = 0;                                                                 \
    if (rtol == 0 && atol == 0) {                                                  \
        for (; i + L <= n; i += L) STEP(d != 0)                                    \
    } else {                                                                       \
        for (; i + L <= n; i += L) STEP(d > fabs(x) * rtol + atol)                 \
    }                                                                              \
    for (; i < n; i++) {                                                           \
        double x = a[i], y = b[i], d = fabs(x - y);                                \
        s1[0] += d; d2[0] = fma(d, d, d2[0]);                                      \
        a2[0] = fma(x, x, a2[0]); b2[0] = fma(y, y, b2[0]);                        \
        mx[0] = d > mx[0] ? d : mx[0];                                             \
        cnt[0] += (rtol == 0 && atol == 0 ? d != 0 : d > fabs(x) * rtol + atol);   \
    }                                                                              \
    for (int j = 1; j < L; j++) {                                                  \
        s1[0] += s1[j]; d2[0] += d2[j]; a2[0] += a2[j]; b2[0] += b2[j];            \
        cnt[0] += cnt[j]; mx[0] = mx[j] > mx[0] ? mx[j] : mx[0];                   \
    }                                                                              \
    out[0] = s1[0]; out[1] = d2[0]; out[2] = a2[0]; out[3] = b2[0];                \
    out[4] = mx[0]; out[5] = cnt[0];                                               \
}
STATS(tdv_stats_f32, float)
STATS(tdv_stats_f64, double)
"""
_LANES = 32
_FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC")
_PORTABLE = tuple(flag for flag in _FLAGS if flag != "-march=native")
#: Set (to anything but ``0``) to leave the kernel out: every chunk goes through torch.
NO_KERNEL_ENV = "TDVIEW_NO_KERNEL"
_KERNEL_DTYPES = (torch.float32, torch.float64)
#: Smaller chunks go through torch, as before the kernel: its sums are as accurate, but
#: in another order, and the golden replies (``tests/protocol``) pin the last digits of
#: small leaves' statistics.
KERNEL_MIN = 4096
_kernel_lock = threading.Lock()
_kernel_state: list[Any] = []  # [] until tried, then [Kernel or None]


class Kernel:
    """The compiled functions, by dtype."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        pointer, i64, f64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double
        self.stats: dict[torch.dtype, Any] = {}
        for dtype, suffix in ((torch.float32, "f32"), (torch.float64, "f64")):
            stats = getattr(lib, f"tdv_stats_{suffix}")
            stats.argtypes = [pointer, pointer, i64, f64, f64, pointer]
            stats.restype = None
            self.stats[dtype] = stats


def kernel() -> Kernel | None:
    """The compiled kernel (built once, then loaded from the cache), or None: no C
    compiler, a build that failed, or ``TDVIEW_NO_KERNEL`` set."""
    if _kernel_state:
        return _kernel_state[0]
    with _kernel_lock:
        if not _kernel_state:
            found = None
            if os.environ.get(NO_KERNEL_ENV, "0") == "0":
                try:
                    found = _load_kernel()
                except (OSError, subprocess.SubprocessError, AttributeError, ValueError):
                    found = None
            _kernel_state.append(found)
    return _kernel_state[0]


def _load_kernel() -> Kernel | None:
    compiler = shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc")
    if compiler is None:
        return None
    flags = _FLAGS + (
        ("-mprefer-vector-width=512",) if platform.machine() in ("x86_64", "AMD64") else ()
    )
    key = hashlib.sha256(
        "\0".join((_KERNEL_C, compiler, *flags, platform.machine(), _cpu_identity())).encode()
    ).hexdigest()[:24]
    cache = _cache_dir()
    if cache is not None:
        path = cache / f"diff-{key}.so"
        for _ in range(2):  # a library that does not load (a build cut short): once more
            if not _owned_file(path):
                _build(compiler, flags, cache, path)
            if not _owned_file(path):
                return None
            try:
                return Kernel(ctypes.CDLL(str(path)))
            except (OSError, AttributeError):
                path.unlink(missing_ok=True)
        return None
    with tempfile.TemporaryDirectory(prefix="tdview-kernel-") as tmp:  # no cache: this process
        path = Path(tmp) / "diff.so"
        _build(compiler, flags, Path(tmp), path)
        return Kernel(ctypes.CDLL(str(path))) if path.is_file() else None


def _build(compiler: str, flags: tuple[str, ...], folder: Path, path: Path) -> None:
    """Compile :data:`_KERNEL_C` to ``path`` (through a file of its own in ``folder``, then
    renamed: a concurrent build or a crash never leaves half a library)."""
    work = Path(tempfile.mkdtemp(prefix="build-", dir=folder))
    try:
        source, built = work / "diff.c", work / "diff.so"
        source.write_text(_KERNEL_C)
        for attempt in (flags, _PORTABLE):  # without -march=native where it is refused
            done = subprocess.run(
                [compiler, *attempt, "-o", str(built), str(source)],
                capture_output=True,
                timeout=120,
                check=False,
            )
            if done.returncode == 0 and built.is_file():
                os.replace(built, path)
                return
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _cache_dir() -> Path | None:
    """``$XDG_CACHE_HOME/tdview`` (or ``~/.cache/tdview``), if this user owns it and nobody
    else can write it."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(base) / "tdview"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError:
        return None
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None
    return path


def _owned_file(path: Path) -> bool:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _cpu_identity() -> str:
    """What ``-march=native`` depends on: a cache shared between machines keeps one build
    per kind of processor."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [line for line in f if line.startswith(("model name", "flags", "Features"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.processor()


def kernel_for(dtype_a: torch.dtype, dtype_b: torch.dtype) -> Kernel | None:
    """The kernel if it takes chunks of these dtypes (both float32, or both float64)."""
    if dtype_a != dtype_b or dtype_a not in _KERNEL_DTYPES:
        return None
    return kernel()


def kernel_values(
    acc: Acc,
    found: Kernel,
    dtype: torch.dtype,
    address_a: int,
    address_b: int,
    k: int,
    rtol: float,
    atol: float,
) -> bool:
    """Add the ``k`` elements at two addresses through the kernel; False (``acc``
    untouched) if they hold NaN or infinity: the torch path (:func:`compare_chunk`) then
    takes them. Equal bytes need no shortcut here: one pass costs what a comparison and a
    norm would, and gives the same sums."""
    out = getattr(_local, "out", None)
    if out is None:
        out = _local.out = (ctypes.c_double * 6)()
    found.stats[dtype](address_a, address_b, k, rtol, atol, out)
    s1, d2, a2, b2, top, count = out
    if not math.isfinite(s1):
        return False
    acc.n += k
    acc.sum_abs += s1
    acc.d2 += d2
    acc.a2 += a2
    acc.b2 += b2
    acc.max_abs = _max(acc.max_abs, top)
    acc.finite += k
    acc.differing += int(count)
    return True
