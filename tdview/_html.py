"""Static renderings of a checkpoint's top levels for ``text/plain`` and ``text/html``.

A saved notebook keeps these beside the live widget, so GitHub, nbviewer and a
terminal still show the tree. They are built from node summaries (metadata only) and
everything that comes from the checkpoint is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from typing import Any

from .index import Checkpoint, Node
from .protocol import summary as node_summary

#: Levels shown below the root, and children shown per level.
DEPTH = 2
MAX_CHILDREN = 30
_UNITS = ("B", "KB", "MB", "GB", "TB", "PB")
_KINDS = {"tensordict": "TD", "tensorclass": "TC", "lazy_stack": "stack",
          "non_tensor": "data", "non_tensor_stack": "data stack", "view": "view",
          "leaf": "tensor"}


def human_bytes(size: int | None) -> str:
    """Bytes in powers of 1000 with three significant digits (as the widget shows them).

    Examples
    --------
    >>> human_bytes(1536), human_bytes(999), human_bytes(None)
    ('1.54 KB', '999 B', '')
    """
    if size is None:
        return ""
    value, unit = float(size), 0
    while value >= 1000 and unit < len(_UNITS) - 1:
        value /= 1000
        unit += 1
    if unit == 0:
        return f"{size} B"
    digits = 0 if value >= 100 else 1 if value >= 10 else 2
    return f"{value:.{digits}f} {_UNITS[unit]}"


def _shape(values: list[int] | None) -> str:
    return "" if values is None else "[" + ", ".join(str(v) for v in values) + "]"


def describe(summary: dict[str, Any]) -> str:
    """``"[1000, 8] float32"`` for a leaf, ``"batch [1000]"`` for a node."""
    if summary["kind"] == "leaf":
        return f"{_shape(summary['shape'])} {summary['dtype'] or ''}".strip()
    batch = summary["batch_size"]
    return "" if batch is None else f"batch {_shape(batch)}"


Row = tuple[int, str, dict[str, Any] | None]  # depth, label, summary (None: "… n more")


def rows(ckpt: Checkpoint, depth: int = DEPTH, limit: int = MAX_CHILDREN,
         summarize: Callable[[Checkpoint, Node], dict[str, Any]] = node_summary,
         ) -> Iterator[Row]:
    """The rows of the static tree: the root, then ``depth`` levels of at most ``limit``
    children each (a ``"… n more"`` row stands for the rest)."""

    def level(node: Node, at: int) -> Iterator[Row]:
        page = ckpt.page(node, 0, limit)
        for child in page.items:
            info = summarize(ckpt, child)
            yield at, child.key, info
            if at < depth and info["has_children"]:
                yield from level(child, at + 1)
        if page.total > len(page.items):
            yield at, f"… {page.total - len(page.items):,} more", None

    yield 0, "", summarize(ckpt, ckpt.root)
    yield from level(ckpt.root, 1)


def _cells(label: str, info: dict[str, Any] | None) -> tuple[str, str, str, str]:
    if info is None:
        return label, "", "", ""
    problems = " ⚠" if info["problems"] else ""
    return (label, _KINDS.get(info["kind"], info["kind"]), describe(info),
            human_bytes(info["bytes"]) + problems)


def render_text(source: str, table: list[Row], error: str = "") -> str:
    """The ``text/plain`` rendering: one indented line per row.

    Examples
    --------
    >>> root = {"kind": "tensordict", "batch_size": [], "bytes": 10, "problems": []}
    >>> print(render_text("ckpt", [(0, "", root)]))
    tdview: ckpt  TD  batch []  10 B
    """
    lines = []
    for depth, label, info in table:
        key, kind, shape, size = _cells(label or source, info)
        text = "  ".join(part for part in (kind, shape, size) if part)
        if depth == 0:
            lines.append(f"tdview: {key}  {text}".rstrip())
        else:
            lines.append(f"{'  ' * depth}{key}  {text}".rstrip())
    if error:
        lines.append(f"tdview: {source}: {error}" if not lines else f"error: {error}")
    return "\n".join(lines)


def render_html(source: str, table: list[Row], error: str = "") -> str:
    """The ``text/html`` rendering: a small table (escaped; inline styles only, which
    survive GitHub's and nbviewer's sanitizers better than classes).

    Examples
    --------
    >>> "&lt;b&gt;" in render_html("<b>", [])
    True
    """
    esc = html.escape
    parts = [
        '<div class="tdview-static">',
        f"<p><strong>tdview</strong> <code>{esc(source)}</code></p>",
    ]
    if error:
        parts.append(f'<p style="color:#b00020">{esc(error)}</p>')
    if table:
        parts.append('<table style="border-collapse:collapse;font-family:monospace">')
        parts.append("<thead><tr><th>key</th><th>kind</th><th>shape / batch</th>"
                     "<th>bytes</th></tr></thead><tbody>")
        for depth, label, info in table:
            cells = _cells(label or "(root)", info)
            pad = f"padding-left:{depth * 1.5}em;text-align:left"
            parts.append(
                f'<tr><td style="{pad}">{esc(cells[0])}</td>'
                + "".join(f'<td style="text-align:left">{esc(c)}</td>' for c in cells[1:])
                + "</tr>"
            )
        parts.append("</tbody></table>")
    parts.append("</div>")
    return "".join(parts)
