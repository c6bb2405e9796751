"""JSON-safe values: what ``json.dumps(allow_nan=False)`` accepts, bounded in size."""

from __future__ import annotations

import json
import math
from typing import Any

#: Longest inline value sent in node details (characters of JSON).
MAX_VALUE_CHARS = 100_000
_MAX_DEPTH = 64


def finite_or_none(value: float | int | None) -> float | None:
    """A float, or None when the value is missing, NaN or infinite."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def json_safe(value: Any, depth: int = 0) -> Any:
    """A copy of a JSON-like value that ``json.dumps(allow_nan=False)`` accepts.

    NaN and the infinities become the strings ``"NaN"``, ``"Infinity"`` and
    ``"-Infinity"`` (so a user still sees them); tuples become lists, non-string keys
    strings, and anything else its ``repr``. Nesting deeper than 64 levels is cut.

    Examples
    --------
    >>> json_safe({"lr": float("nan"), "betas": (0.9, float("inf"))})
    {'lr': 'NaN', 'betas': [0.9, 'Infinity']}
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if depth >= _MAX_DEPTH:
        return "…"
    if isinstance(value, dict):
        return {str(k): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, depth + 1) for v in value]
    return repr(value)


def bounded_value(value: Any, limit: int = MAX_VALUE_CHARS) -> Any:
    """:func:`json_safe` of ``value``; when its JSON is longer than ``limit`` characters,
    the first ``limit`` characters of that JSON as a string ending in ``…``."""
    safe = json_safe(value)
    text = json.dumps(safe, allow_nan=False, ensure_ascii=False)
    return safe if len(text) <= limit else text[:limit] + "…"
