"""What ``TDView(a, compare=b)`` adds to the widget: the comparison it opens, and the
static text a saved notebook shows of it (the lines of ``tdview diff --only-changed``,
at most :data:`MAX_LINES`)."""

from __future__ import annotations

import html
import os
from typing import Any

from ._text import error_text, printable
from .protocol import Comparison, open_view

#: Lines of the static text of a comparison (the differing keys first seen).
MAX_LINES = 60


def open_comparison(
    a: str,
    b: str | os.PathLike[str],
    *,
    level: str = "auto",
    subpath_a: object = None,
    subpath_b: object = None,
    rtol: float = 0.0,
    atol: float = 0.0,
) -> tuple[Comparison | None, str]:
    """``(comparison, "")``, or ``(None, why)`` when a side cannot be opened or diffed
    (the widget shows why instead of raising)."""
    source_b = os.fspath(b)
    try:
        view = open_view(
            a, source_b, level=level, subpath_a=subpath_a, subpath_b=subpath_b, rtol=rtol, atol=atol
        )
    except Exception as error:  # noqa: BLE001 - shown in the widget, not raised
        message = error_text(error)
        where = (
            ""
            if a in message or source_b in message
            else (f"{printable(a)} against {printable(source_b)}: ")
        )
        return None, f"{type(error).__name__}: {where}{message}"
    return Comparison(view, a, source_b), ""


def static_text(
    comparison: Comparison | None, source_a: str, source_b: str, error: str = ""
) -> str:
    """``text/plain`` of a compare view: the differing keys as ``tdview diff`` says them."""
    head = f"tdview: {source_a} -> {source_b}"
    if comparison is None:
        return "\n".join(printable(text, limit=2000) for text in (head, error))
    from .diff import line, summary

    with comparison.view.lock:
        result = comparison.view.result
        changed = result.changed()
        lines = [head, summary(result)]
        lines += [line(row) for row in changed[:MAX_LINES]]
    if len(changed) > MAX_LINES:
        lines.append(f"… {len(changed) - MAX_LINES:,} more differences (open the widget)")
    return "\n".join(printable(text, limit=2000) for text in lines)


def static_html(text: str) -> str:
    """``text/html`` of a compare view: its text, escaped."""
    return f'<pre class="tdview-static tdview-compare-static">{html.escape(text)}</pre>'


def compare_state(comparison: Comparison | None) -> dict[str, Any] | None:
    """The ``compare`` trait: ``CompareState`` (see :meth:`Comparison.state`)."""
    return None if comparison is None else comparison.state()
