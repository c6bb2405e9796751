"""Side-by-side timing: interleaved repetitions, min/median per side, median of ratios.

The machine is shared and noisy, so the two sides run alternately inside each
repetition (their order flipped every other repetition), and the ratio reported is the
median of the per-repetition ratios rather than a ratio of medians.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

Side = Callable[[], object]


def evict(paths: Iterable[Path]) -> None:
    """Drop the page-cache pages of every file under ``paths`` (cold-cache runs)."""
    for root in paths:
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for path in files:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd) if os.access(path, os.W_OK) else None
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


@dataclass
class Result:
    case: str
    variant: str
    cache: str  # "warm" | "cold"
    times: dict[str, list[float]]
    baseline: str
    per: int = 1  # divide times by this to report a per-item cost (e.g. per leaf)
    floor: dict[str, float] = field(default_factory=dict)
    note: str = ""

    def stats(self) -> dict[str, dict[str, float]]:
        return {
            side: {"min": min(ts), "median": statistics.median(ts)}
            for side, ts in self.times.items()
        }

    def ratios(self) -> dict[str, float]:
        """Median over repetitions of ``side / baseline`` for every non-baseline side."""
        base = self.times[self.baseline]
        return {
            side: statistics.median(t / b for t, b in zip(ts, base, strict=True))
            for side, ts in self.times.items()
            if side != self.baseline
        }

    def as_json(self) -> dict[str, object]:
        out = asdict(self)
        out["stats"], out["ratios"] = self.stats(), self.ratios()
        return out


def compare(
    case: str,
    variant: str,
    sides: dict[str, Side],
    *,
    baseline: str,
    reps: int = 5,
    warmup: int = 1,
    cold: Iterable[Path] | None = None,
    per: int = 1,
    floor: dict[str, Side] | None = None,
    note: str = "",
) -> Result:
    """Time every side ``reps`` times, interleaved, after ``warmup`` untimed rounds."""
    cold_paths = list(cold) if cold is not None else None
    names = list(sides)
    times: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(warmup + reps):
        order = names if rep % 2 == 0 else names[::-1]
        for name in order:
            elapsed = _time_once(sides[name], cold_paths)
            if rep >= warmup:
                times[name].append(elapsed)
    floors = {
        name: min(_time_once(fn, cold_paths) for _ in range(max(3, reps // 2)))
        for name, fn in (floor or {}).items()
    }
    return Result(
        case,
        variant,
        "cold" if cold_paths is not None else "warm",
        times,
        baseline,
        per,
        floors,
        note,
    )


def _time_once(fn: Side, cold: list[Path] | None) -> float:
    if cold is not None:
        evict(cold)
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    del result
    return elapsed
