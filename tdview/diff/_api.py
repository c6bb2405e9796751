"""The entry point of ``tdview.diff``: both sides opened, walked, then read if asked."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .._gc import gc_paused
from ..index import show_path
from ._result import AUTO, LEVELS, Diff
from ._sides import Side, open_side
from ._walk import PairWalk

Progress = Callable[[int, int, str], object]


def run_diff(arguments: dict[str, Any]) -> Diff:
    """The implementation of :func:`tdview.diff.diff`, given its ``arguments`` by name
    (``locals()`` of its call): its signature is the one place they and their defaults
    are written (and documented)."""
    a, b, level = arguments["a"], arguments["b"], arguments["level"]
    rtol, atol, subpath = arguments["rtol"], arguments["atol"], arguments["subpath"]
    subpath_a, subpath_b = arguments["subpath_a"], arguments["subpath_b"]
    allow_pickle, progress = arguments["allow_pickle"], arguments["progress"]
    num_threads = arguments["num_threads"]
    if level not in LEVELS and level != AUTO:
        raise ValueError(f"level must be one of {', '.join(LEVELS)} or {AUTO}; got {level!r}.")
    if not (rtol >= 0 and atol >= 0):
        raise ValueError(f"rtol and atol must be non-negative numbers; got {rtol!r}, {atol!r}.")
    threads = _threads(num_threads)
    side_a = open_side(a, subpath_a if subpath_a is not None else subpath)
    try:
        side_b = open_side(b, subpath_b if subpath_b is not None else subpath)
    except BaseException:
        side_a.close()
        raise
    try:
        numbers = level != "metadata"  # every level but metadata reads scalars
        if level == AUTO:
            level = free_level(side_a, side_b)
        with gc_paused():  # the rows are 10^5 objects or more: see _walk
            rows = PairWalk(side_a, side_b).run()
            if level != "metadata":
                from ._tiers import payload_tiers

                payload_tiers(
                    rows,
                    side_a,
                    side_b,
                    level=level,
                    rtol=float(rtol),
                    atol=float(atol),
                    allow_pickle=allow_pickle,
                    progress=progress,
                    threads=threads,
                )
            if numbers:
                from ._scalars import read_scalars

                read_scalars(rows, side_a, side_b)
            return Diff(
                _label(side_a),
                _label(side_b),
                side_a.subpath,
                side_b.subpath,
                level,
                float(rtol),
                float(atol),
                rows,
            )
    finally:
        side_a.close()
        side_b.close()


def free_level(a: Side, b: Side) -> str:
    """What :data:`AUTO` means for two sides: ``"fingerprint"`` when both are archives
    (each entry's size and CRC-32 are in the central directory, read with the index: no
    payload byte is read), else ``"metadata"``."""
    return "fingerprint" if a.ckpt.store.crc_recorded and b.ckpt.store.crc_recorded else "metadata"


def _label(side: Side) -> str:
    return side.label if not side.subpath else f"{side.label}::{show_path(side.subpath)}"


def _threads(num_threads: Any) -> int:
    if num_threads is None:
        return max(1, min(4, os.cpu_count() or 1))
    if type(num_threads) is not int or num_threads < 1:
        raise ValueError(f"num_threads must be a positive int, got {num_threads!r}.")
    return num_threads
