"""The params of the methods on one checkpoint, checked before anything runs (the
table of methods, :mod:`._methods`, names each method's check).

Unknown keys are ignored (the protocol lets objects gain keys without a version bump);
a missing or mistyped key is a :class:`~tdview.errors.RequestError` naming the key and
the value (:mod:`._checks`).
"""

from __future__ import annotations

from typing import Any

from ._checks import MAX_PAGE, MAX_ROWS, count, fail, flag, load_options, path, text
from ._selection import parse_index, plane_params

#: ``rows_scope`` of ``preview``: the written rows of a torchrl storage, or all its rows.
ROWS_SCOPES = ("written", "all")
#: Most cells per side of a preview's heatmap.
MAX_HEATMAP_CELLS = 1024


def _totals(params: dict[str, Any], method: str) -> bool:
    """``totals`` of ``children`` and ``node`` (optional, default true): false leaves the
    bytes/numel (and rollup) of a collection whose totals are not cached yet null, so
    that a first paint walks nothing."""
    return flag(params, "totals", method, default=True)


def _rows_scope(params: dict[str, Any]) -> str:
    """``rows_scope`` of ``preview`` (optional, default ``"written"``): below a torchrl
    storage, ``"written"`` previews the rows its ``storage_metadata.json`` says were
    written and ``"all"`` every row (elsewhere both preview every row)."""
    value = params.get("rows_scope", "written")
    if not isinstance(value, str) or value not in ROWS_SCOPES:
        raise fail("preview params.rows_scope", '"written" or "all"', value)
    return value


def _preview_view(params: dict[str, Any]) -> dict[str, Any]:
    """The optional view params of ``preview``: ``index`` (an index expression, see
    :mod:`._selection`; null: none), ``plane`` (the dims shown, see
    :func:`._selection.plane_params`; null: the default), ``offset`` and ``col_offset``
    (the table's first row and column of the plane), ``stats`` (default true: false
    sends the statistics only when known already) and ``heatmap`` (``{rows, cols}``, each 1 to
    :data:`MAX_HEATMAP_CELLS`; null: none)."""
    where = "preview params"
    index = text(params, "index", "preview", nullable=True) if "index" in params else None
    heatmap = params.get("heatmap")
    if heatmap is not None:
        if not isinstance(heatmap, dict):
            raise fail(f"{where}.heatmap", "an object {rows, cols} or null", heatmap)
        sides = tuple(count(heatmap, side, "preview heatmap") for side in ("rows", "cols"))
        if not all(1 <= n <= MAX_HEATMAP_CELLS for n in sides):
            raise fail(f"{where}.heatmap", f"rows and cols from 1 to {MAX_HEATMAP_CELLS}", heatmap)
        heatmap = sides
    return {
        "index": None if index is None else parse_index(index),
        "offset": count(params, "offset", "preview") if "offset" in params else None,
        "stats": flag(params, "stats", "preview", default=True),
        "heatmap": heatmap,
        "plane": plane_params(params.get("plane")),
        "col_offset": count(params, "col_offset", "preview") if "col_offset" in params else 0,
    }


def children_params(params: dict[str, Any]) -> dict[str, Any]:
    method = "children"
    return {
        "path": path(params, method),
        "offset": count(params, "offset", method),
        "limit": min(count(params, "limit", method), MAX_PAGE),
        "totals": _totals(params, method),
    }


def node_params(params: dict[str, Any]) -> dict[str, Any]:
    return {"path": path(params, "node"), "totals": _totals(params, "node")}


def search_params(params: dict[str, Any]) -> dict[str, Any]:
    method = "search"
    return {
        "pattern": text(params, "pattern", method),
        "limit": min(count(params, "limit", method), MAX_PAGE),
        "offset": count(params, "offset", method) if "offset" in params else 0,
        "count": flag(params, "count", method, default=True),
    }


def preview_params(params: dict[str, Any]) -> dict[str, Any]:
    method = "preview"
    return {
        "path": path(params, method),
        "rows": min(count(params, "rows", method), MAX_ROWS),
        "rows_scope": _rows_scope(params),
        **_preview_view(params),
    }


def devices_params(params: dict[str, Any]) -> dict[str, Any]:
    return {}


def load_params(params: dict[str, Any]) -> dict[str, Any]:
    return load_options(params, "load")
