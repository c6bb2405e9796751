"""The params of the compare view's requests, checked before anything runs (as
:func:`~._messages.parse_request` checks the others).

- ``diff_children`` ``{path, offset, limit, only_changed?}`` (``limit`` clamped to
  :data:`~._messages.MAX_PAGE`; ``only_changed`` false by default);
- ``diff_node`` ``{path}``;
- ``diff_refine`` ``{path, level, rtol?, atol?, allow_pickle?}`` (``level`` one of
  ``metadata``, ``fingerprint``, ``values``; tolerances finite and non-negative, 0 by
  default);
- ``diff_preview`` ``{path, rows}`` (``rows`` clamped to :data:`~._messages.MAX_ROWS`);
- ``diff_load`` ``{side, path, device, mode, allow_pickle, variable, replace}``: a ``load`` of one
  side's checkpoint (``side`` ``"a"`` or ``"b"``; ``path`` is that side's own nested key,
  not the diff's), answered as ``load`` is.

``path`` of the others is a path of the diff (relative to the compared roots; the new
path of a renamed key).
"""

from __future__ import annotations

import math
from typing import Any

from ._messages import (
    MAX_PAGE,
    MAX_ROWS,
    MODES,
    _bool,
    _count,
    _fail,
    _field,
    _path,
    _text,
    _variable,
    replace_param,
)

#: The compare view's methods (:mod:`._diff` answers the first four).
DIFF_REQUESTS = ("diff_children", "diff_node", "diff_refine", "diff_preview", "diff_load")
LEVELS = ("metadata", "fingerprint", "values")
SIDES = ("a", "b")


def _tolerance(params: dict[str, Any], key: str) -> float:
    value = params.get(key, 0.0)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and value >= 0)
    ):
        raise _fail(f"diff_refine params.{key}", "a finite non-negative number", value)
    return float(value)


def _optional_bool(params: dict[str, Any], key: str, method: str) -> bool:
    return _bool(params, key, method) if key in params else False


def diff_params(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The checked params of a compare-view request (``method`` in :data:`DIFF_REQUESTS`).

    Raises
    ------
    RequestError
        A missing or mistyped param, naming it and the value.

    Examples
    --------
    >>> diff_params("diff_children", {"path": ["model"], "offset": 0, "limit": 10**9})
    {'path': ('model',), 'offset': 0, 'limit': 10000, 'only_changed': False}
    >>> diff_params("diff_refine", {"path": [], "level": "values", "atol": 1e-6})
    {'path': (), 'level': 'values', 'rtol': 0.0, 'atol': 1e-06, 'allow_pickle': False}
    """
    if method == "diff_load":
        return _load_params(params)
    path = _path(params, method)
    if method == "diff_children":
        return {
            "path": path,
            "offset": _count(params, "offset", method),
            "limit": min(_count(params, "limit", method), MAX_PAGE),
            "only_changed": _optional_bool(params, "only_changed", method),
        }
    if method == "diff_node":
        return {"path": path}
    if method == "diff_preview":
        return {"path": path, "rows": min(_count(params, "rows", method), MAX_ROWS)}
    level = _field(params, "level", method)
    if not isinstance(level, str) or level not in LEVELS:
        raise _fail("diff_refine params.level", f"one of {', '.join(LEVELS)}", level)
    return {
        "path": path,
        "level": level,
        "rtol": _tolerance(params, "rtol"),
        "atol": _tolerance(params, "atol"),
        "allow_pickle": _optional_bool(params, "allow_pickle", method),
    }


def _load_params(params: dict[str, Any]) -> dict[str, Any]:
    method = "diff_load"
    side = _field(params, "side", method)
    if not isinstance(side, str) or side not in SIDES:
        raise _fail("diff_load params.side", '"a" or "b"', side)
    mode = _field(params, "mode", method)
    if mode not in MODES or isinstance(mode, bool):
        raise _fail("diff_load params.mode", '"r", "r+" or null', mode)
    return {
        "side": side,
        "path": _path(params, method),
        "device": _text(params, "device", method),
        "mode": mode,
        "allow_pickle": _bool(params, "allow_pickle", method),
        "variable": _variable(params),
        "replace": replace_param(params, method),
    }
