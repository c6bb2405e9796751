"""The ``sizes`` method: one level of where a subtree's bytes go, for the treemap.

A request ``{path, limit?}`` is answered with the subtree's totals (by dtype and by
section, see :mod:`tdview.answers`) and its children largest first, the ``limit``
largest (at most :data:`MAX_SIZES`, :data:`DEFAULT_SIZES` by default) less the tiny
ones, the rest gathered in ``other``. The view zooms by asking the next level.
Nothing but metadata is read; the walk runs in the ``walk`` lane and stops at its next
node once the request is cancelled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..answers import sizes
from ..index import Tree
from ._checks import count, flag, path

ProgressFn = Callable[[int, int, str], None]

#: Children sent when the request names no ``limit``, and the most it may name.
DEFAULT_SIZES, MAX_SIZES = 40, 200
#: A child under this fraction of the level's total goes to ``other`` (beyond the
#: largest eight): too small a cell to see.
MIN_FRACTION = 0.002


def sizes_params(params: dict[str, Any]) -> dict[str, Any]:
    """``{path, limit, duplicates}``: ``limit`` optional, clamped to :data:`MAX_SIZES`;
    ``duplicates`` optional, false by default (true: look for the bytes stored twice,
    reading payloads, with progress)."""
    limit = count(params, "limit", "sizes") if "limit" in params else DEFAULT_SIZES
    return {
        "path": path(params, "sizes"),
        "limit": min(limit, MAX_SIZES),
        "duplicates": flag(params, "duplicates", "sizes", default=False),
    }


def sizes_result(
    ckpt: Tree,
    subpath: tuple[str, ...],
    limit: int,
    duplicates: bool = False,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """``SizesResult``: the level at ``subpath``.

    Returns
    -------
    dict
        ``path``, ``kind``, ``bytes``, ``leaves``, ``section`` (``"mixed"`` when its
        bytes span several), ``by_dtype`` and ``by_section`` (each adding up to
        ``bytes``, largest first), ``children`` (each ``{key, path, kind, bytes, leaves,
        dtype, section, has_children}``), ``other`` (``{count, bytes}`` of the children
        not sent), ``problems`` (nodes below whose metadata could not be read: not
        counted) and ``duplicates_bytes`` (null: not looked for; on a folder of
        checkpoints' own node, across its members).

    Examples
    --------
    >>> result = sizes_result(open_tree("step_1000.tdz"), (), 40)        # doctest: +SKIP
    >>> [(c["key"], c["section"]) for c in result["children"]][:2]       # doctest: +SKIP
    [('optimizer', 'optimizer'), ('model', 'model')]
    """
    report = sizes(ckpt, subpath, duplicates=duplicates, progress=progress)
    shown, other_count, other_bytes = report.gathered(limit, MIN_FRACTION)
    return {
        "path": list(subpath),
        "kind": report.kind,
        "bytes": report.bytes,
        "leaves": report.leaves,
        "section": report.section,
        "by_dtype": report.by_dtype,
        "by_section": report.by_section,
        "children": [entry.to_json() for entry in shown],
        "other": {"count": other_count, "bytes": other_bytes},
        "problems": report.problems,
        "duplicates_bytes": report.duplicates_bytes,
    }
