"""The params of the compare view's requests, checked before anything runs (as
:mod:`._params` checks the others, with the same :mod:`._checks`).

- ``diff_children`` ``{path, offset, limit, only_changed?}`` (``limit`` clamped to
  :data:`~._checks.MAX_PAGE`; ``only_changed`` false by default);
- ``diff_node`` ``{path}``;
- ``diff_refine`` ``{path, level, rtol?, atol?, allow_pickle?}`` (``level`` one of
  ``metadata``, ``fingerprint``, ``values``; tolerances finite and non-negative, 0 by
  default);
- ``diff_preview`` ``{path, rows}`` (``rows`` clamped to :data:`~._checks.MAX_ROWS`);
- ``diff_load`` ``{side, path, device, mode, allow_pickle, variable, replace}``: a ``load`` of one
  side's checkpoint (``side`` ``"a"`` or ``"b"``; ``path`` is that side's own nested key,
  not the diff's), answered as ``load`` is.

``path`` of the others is a path of the diff (relative to the compared roots; the new
path of a renamed key).
"""

from __future__ import annotations

import math
from typing import Any

from ..diff import LEVELS
from ._checks import MAX_PAGE, MAX_ROWS, count, fail, field, flag, load_options, path

SIDES = ("a", "b")


def _tolerance(params: dict[str, Any], key: str) -> float:
    value = params.get(key, 0.0)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and value >= 0)
    ):
        raise fail(f"diff_refine params.{key}", "a finite non-negative number", value)
    return float(value)


def diff_params(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The checked params of a compare-view request (a ``diff_*`` method).

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
    checked = path(params, method)
    if method == "diff_children":
        return {
            "path": checked,
            "offset": count(params, "offset", method),
            "limit": min(count(params, "limit", method), MAX_PAGE),
            "only_changed": flag(params, "only_changed", method, default=False),
        }
    if method == "diff_node":
        return {"path": checked}
    if method == "diff_preview":
        return {"path": checked, "rows": min(count(params, "rows", method), MAX_ROWS)}
    level = field(params, "level", method)
    if not isinstance(level, str) or level not in LEVELS:
        raise fail("diff_refine params.level", f"one of {', '.join(LEVELS)}", level)
    return {
        "path": checked,
        "level": level,
        "rtol": _tolerance(params, "rtol"),
        "atol": _tolerance(params, "atol"),
        "allow_pickle": flag(params, "allow_pickle", method, default=False),
    }


def _load_params(params: dict[str, Any]) -> dict[str, Any]:
    method = "diff_load"
    side = field(params, "side", method)
    if not isinstance(side, str) or side not in SIDES:
        raise fail("diff_load params.side", '"a" or "b"', side)
    return {"side": side, **load_options(params, method)}
