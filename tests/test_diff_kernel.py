"""The compiled kernel of value diffs (``tdview/diff/_stats.py``): the same statistics as
the torch path, on checkpoints written by tensordict; NaN and infinity handed to torch;
tolerances counted with torch's rounding; a machine without a compiler still diffs."""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict, pack_memmap

import tdview
from tdview.diff import _stats
from tdview.diff._records import ValueStats

from ._optional import require
from .corpus import write_at as _write


@pytest.fixture
def c_kernel() -> None:
    """The kernel, built by the system's C compiler: a skip without one (a failure under
    ``CI=true``), a plain skip where TDVIEW_NO_KERNEL turns it off."""
    if os.environ.get(_stats.NO_KERNEL_ENV, "0") != "0":
        pytest.skip(f"{_stats.NO_KERNEL_ENV} is set: the kernel is off")
    require(_stats.kernel() is not None, "diff's C kernel did not build: no C compiler (cc)")


needs_kernel = pytest.mark.usefixtures("c_kernel")

CHUNK, SMALL = _stats.CHUNK, _stats.KERNEL_MIN
COUNTS = (
    "numel",
    "equal",
    "differing",
    "nan_a",
    "nan_b",
    "nan_appeared",
    "nan_disappeared",
    "inf_a",
    "inf_b",
    "inf_appeared",
    "inf_disappeared",
)


def _values(a: Path, b: Path, **options: object) -> dict[str, ValueStats]:
    result = tdview.diff(a, b, level="values", **options)
    out = {}
    for row in result:
        if row.is_leaf and row.values is not None:
            out[row.key] = row.values
    return out


def _both(a: Path, b: Path, monkeypatch: pytest.MonkeyPatch, **options: object):
    """The statistics with the kernel (which took some chunks), then through torch alone."""
    from tdview.diff import _pool

    calls = []

    def counted(*args: object) -> bool:
        calls.append(args[4])
        return _stats.kernel_values(*args)  # type: ignore[arg-type]

    with monkeypatch.context() as m:
        m.setattr(_pool, "kernel_values", counted)
        with_kernel = _values(a, b, **options)
    assert calls
    with monkeypatch.context() as m:
        m.setattr(_stats, "_kernel_state", [None])
        without = _values(a, b, **options)
    return with_kernel, without


def _agree(mine: ValueStats, ref: ValueStats, rel: float = 1e-12) -> None:
    for name in COUNTS:
        assert getattr(mine, name) == getattr(ref, name), name
    assert mine.max_abs == ref.max_abs  # a maximum of exact differences: no rounding
    for name in ("mean_abs", "rel_l2", "cosine"):
        got, want = getattr(mine, name), getattr(ref, name)
        if want is None or got is None:
            assert got == want, name
        else:
            assert got == pytest.approx(want, rel=rel, abs=1e-300), name


def _exact(old: torch.Tensor, new: torch.Tensor) -> dict[str, float]:
    """Correctly rounded sums (``math.fsum``) of float64 terms, exact for float32."""
    x, y = old.double().flatten(), new.double().flatten()
    d = (x - y).abs()
    a2, b2, d2 = (math.fsum((v * v).tolist()) for v in (x, y, d))
    return {
        "max_abs": float(d.max()),
        "mean_abs": math.fsum(d.tolist()) / d.numel(),
        "rel_l2": math.sqrt(d2) / math.sqrt(a2),
        "a2": a2,
        "b2": b2,
    }


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_kernel_agrees_with_torch_on_an_optimizer_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype
) -> None:
    """Leaves of several sizes (the kernel's threshold, a tail past its 32 lanes, many
    chunks), one step of noise: the kernel's answer is the torch path's to 1e-12 (both
    sum in float64), and the exact answer to 1e-12 too."""
    gen = torch.Generator().manual_seed(7)
    sizes = {"small": SMALL - 1, "edge": SMALL, "tail": SMALL + 37, "long": 3 * CHUNK + 1001}
    before = TensorDict({k: torch.randn(n, generator=gen).to(dtype) for k, n in sizes.items()})
    after = TensorDict(
        {k: (v + 1e-3 * torch.randn(v.shape, generator=gen).to(dtype)) for k, v in before.items()}
    )
    after["long"][5:CHUNK:3] = before["long"][5:CHUNK:3]  # some elements unchanged
    after["long"][2 * CHUNK : 2 * CHUNK + 50] = 0.0
    a = _write(before, tmp_path / "a")
    b = _write(after, tmp_path / "b")
    mine, ref = _both(a, b, monkeypatch)
    for key in sizes:
        _agree(mine[key], ref[key])
        old, new = before[key], after[key]
        exact = _exact(old, new)
        assert mine[key].differing == int((old != new).sum())
        assert mine[key].max_abs == exact["max_abs"]
        assert mine[key].mean_abs == pytest.approx(exact["mean_abs"], rel=1e-12)
        assert mine[key].rel_l2 == pytest.approx(exact["rel_l2"], rel=1e-12)


@needs_kernel
def test_kernel_on_equal_chunks_and_signed_zeros(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Equal bytes go through the kernel too (no comparison first): the same norms on
    both sides, so a cosine of 1 and a relative norm of 0; -0.0 against 0.0 differs in
    its bytes, not in its value."""
    gen = torch.Generator().manual_seed(8)
    x = torch.randn(2 * CHUNK, generator=gen)
    zeros = torch.zeros(CHUNK)
    a = _write(TensorDict(x=x, z=zeros, tiny=x * 1e-30, huge=x * 1e30), tmp_path / "a")
    b = _write(TensorDict(x=x.clone(), z=-zeros, tiny=x * 1e-30, huge=x * 1e30), tmp_path / "b")
    mine, ref = _both(a, b, monkeypatch)
    for key in ("x", "tiny", "huge"):
        stats = mine[key]
        assert stats.equal and stats.differing == 0 and stats.max_abs == 0.0
        assert stats.cosine == 1.0 and stats.rel_l2 == 0.0
        _agree(stats, ref[key])
    assert mine["z"].equal and mine["z"].differing == 0 and mine["z"].max_abs == 0.0
    assert mine["z"].rel_l2 == 0.0 and mine["z"].cosine is None  # no norm: no angle
    _agree(mine["z"], ref["z"])


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nan_and_infinity_in_a_kernel_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype
) -> None:
    """A chunk with NaN or infinity is handed back to torch (masked there); the chunks
    around it stay in the kernel: every count and statistic as without the kernel."""
    gen = torch.Generator().manual_seed(9)
    old = torch.randn(3 * CHUNK + 10, generator=gen).to(dtype)
    new = old + 1e-3 * torch.randn(old.shape, generator=gen).to(dtype)
    new[CHUNK + 5] = float("nan")  # appears
    old[CHUNK + 6] = new[CHUNK + 6] = float("nan")  # on both sides: no difference
    old[2 * CHUNK + 1] = float("inf")  # disappears
    new[2 * CHUNK + 2] = float("-inf")  # appears
    old[2 * CHUNK + 3] = new[2 * CHUNK + 3] = float("inf")  # the same on both sides
    a = _write(TensorDict(x=old), tmp_path / "a")
    b = _write(TensorDict(x=new), tmp_path / "b")
    mine, ref = _both(a, b, monkeypatch)
    _agree(mine["x"], ref["x"])
    stats = mine["x"]
    assert (stats.nan_a, stats.nan_b, stats.nan_appeared, stats.nan_disappeared) == (1, 2, 1, 0)
    assert (stats.inf_a, stats.inf_b, stats.inf_appeared, stats.inf_disappeared) == (2, 2, 1, 1)
    fin = old.isfinite() & new.isfinite()
    exact = _exact(old[fin], new[fin])
    assert stats.max_abs == exact["max_abs"]
    assert stats.mean_abs == pytest.approx(exact["mean_abs"], rel=1e-12)
    assert stats.rel_l2 == pytest.approx(exact["rel_l2"], rel=1e-12)
    same = (old == new) | (old.isnan() & new.isnan())
    assert stats.differing == int((~same).sum())


@needs_kernel
@pytest.mark.parametrize(("rtol", "atol"), [(0.0, 1e-3), (1e-3, 0.0), (1e-4, 1e-4)])
def test_kernel_counts_tolerances_as_torch_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rtol: float, atol: float
) -> None:
    """``|a - b| > |a| * rtol + atol``, rounded as torch rounds it (a product, then a
    sum): differences on either side of the bound, and on it, count alike."""
    gen = torch.Generator().manual_seed(10)
    old = torch.randn(2 * CHUNK + 77, generator=gen)
    bound = old.double().abs() * rtol + atol
    scale = torch.rand(old.shape, generator=gen).double() * 2  # half within, half past
    new = (old.double() + bound * scale).float()
    new[::5] = (old[::5].double() + bound[::5]).float()  # on the bound, as float32 allows
    a = _write(TensorDict(x=old), tmp_path / "a")
    b = _write(TensorDict(x=new), tmp_path / "b")
    mine, ref = _both(a, b, monkeypatch, rtol=rtol, atol=atol)
    _agree(mine["x"], ref["x"])
    d = (old.double() - new.double()).abs()
    assert mine["x"].differing == int((d > old.double().abs() * rtol + atol).sum())
    assert 0 < mine["x"].differing < old.numel()


@needs_kernel
def test_kernel_on_real_checkpoints_and_archives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Directories and the archives tensordict packs of them, a leaf split among threads:
    float32 statistics within 1e-12 of the float64 reference (well inside 1e-6)."""
    from tdview.diff import _pool

    gen = torch.Generator().manual_seed(11)
    before = TensorDict(
        w=torch.randn(4, CHUNK // 2 + 3, generator=gen),
        b=torch.randn(SMALL * 3, generator=gen),
        d=torch.randn(CHUNK + 5, generator=gen, dtype=torch.float64),
    )
    after = TensorDict(
        {k: v - 1e-2 * torch.randn(v.shape, generator=gen) for k, v in before.items()}
    )
    a = _write(before, tmp_path / "a")
    b = _write(after, tmp_path / "b")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pack_memmap(a, tmp_path / "a.tdz")
        pack_memmap(b, tmp_path / "b.tdz")
    monkeypatch.setattr(_pool, "SEGMENT", 5 * SMALL * 4)  # pieces that are not chunk-sized
    for left, right in ((a, b), (tmp_path / "a.tdz", tmp_path / "b.tdz"), (a, tmp_path / "b.tdz")):
        mine, ref = _both(left, right, monkeypatch, num_threads=3)
        for key in ("w", "b", "d"):
            _agree(mine[key], ref[key])
            exact = _exact(before[key], after[key])
            assert mine[key].max_abs == exact["max_abs"]
            assert mine[key].mean_abs == pytest.approx(exact["mean_abs"], rel=1e-12)
            assert mine[key].rel_l2 == pytest.approx(exact["rel_l2"], rel=1e-12)


def test_without_a_compiler_the_torch_path_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No C compiler (or ``TDVIEW_NO_KERNEL=1``): no kernel, the same statistics."""
    monkeypatch.setattr(_stats, "_kernel_state", [])
    monkeypatch.setattr(_stats.shutil, "which", lambda name: None)
    assert _stats.kernel() is None
    monkeypatch.setattr(_stats, "_kernel_state", [])
    monkeypatch.setenv(_stats.NO_KERNEL_ENV, "1")
    assert _stats.kernel() is None
    x = torch.randn(2 * CHUNK)
    a = _write(TensorDict(x=x), tmp_path / "a")
    b = _write(TensorDict(x=x + 1), tmp_path / "b")
    stats = _values(a, b)["x"]
    assert stats.differing == x.numel() and stats.max_abs == pytest.approx(1.0)


@needs_kernel
def test_kernel_build_is_cached_privately(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built once into ``$XDG_CACHE_HOME/tdview`` (this user's, nobody else writes there),
    loaded from there after; a cache others can write is not used (a build of this
    process's own instead)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(_stats, "_kernel_state", [])
    assert _stats.kernel() is not None
    folder = tmp_path / "cache" / "tdview"
    built = list(folder.glob("diff-*.so"))
    assert len(built) == 1 and not (folder.stat().st_mode & 0o077)
    assert [p.name for p in folder.iterdir()] == [built[0].name]  # no build folder left
    stamp = built[0].stat().st_mtime_ns
    monkeypatch.setattr(_stats, "_kernel_state", [])
    assert _stats.kernel() is not None and built[0].stat().st_mtime_ns == stamp

    os.chmod(folder, 0o777)
    assert _stats._cache_dir() is None
    monkeypatch.setattr(_stats, "_kernel_state", [])
    assert _stats.kernel() is not None  # built in a folder of its own, then removed
    os.chmod(folder, 0o700)
    os.chmod(built[0], 0o666)
    assert not _stats._owned_file(built[0])


@needs_kernel
def test_a_cached_library_that_does_not_load_is_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build cut short left a file that is no library: it is built again. (The file
    is put in a cache of its own: a library loaded once stays loaded under its path.)"""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "first"))
    monkeypatch.setattr(_stats, "_kernel_state", [])
    assert _stats.kernel() is not None
    (built,) = (tmp_path / "first" / "tdview").glob("diff-*.so")
    broken = tmp_path / "second" / "tdview" / built.name
    broken.parent.mkdir(parents=True, mode=0o700)
    broken.write_bytes(b"not a library")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "second"))
    monkeypatch.setattr(_stats, "_kernel_state", [])
    assert _stats.kernel() is not None
    assert broken.read_bytes() != b"not a library"
