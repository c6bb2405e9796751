"""Static renderings of a checkpoint's top levels for ``text/plain`` and ``text/html``.

A saved notebook keeps these beside the live widget, so GitHub, nbviewer and a
terminal still show the tree. Both say what ``tdview tree`` says about each node
(metadata only: kind, shape and dtype or batch size, bytes, inline values, pickles,
problems); the HTML escapes everything that comes from the checkpoint.
"""

from __future__ import annotations

import html
from collections.abc import Iterator

from ._tree_text import TreeOptions, describe, render_tree
from .index import Checkpoint, Node

#: Levels shown below the root, and children shown per level.
DEPTH = 2
MAX_CHILDREN = 30

Row = tuple[int, str, str]  # depth, key, description


def rows(ckpt: Checkpoint, depth: int = DEPTH, limit: int = MAX_CHILDREN) -> Iterator[Row]:
    """The rows of the static tree: the root, then ``depth`` levels of at most ``limit``
    children each (a ``"… n more"`` row stands for the rest of a level)."""

    def level(node: Node, at: int) -> Iterator[Row]:
        page = ckpt.page(node, 0, limit)
        for child in page.items:
            yield at, child.key, describe(ckpt, child, rollups=False)
            if at < depth and not child.is_leaf:
                yield from level(child, at + 1)
        if page.total > len(page.items):
            yield at, f"… {page.total - len(page.items):,} more", ""

    yield 0, "", describe(ckpt, ckpt.root, rollups=False)
    yield from level(ckpt.root, 1)


def render_text(source: str, ckpt: Checkpoint | None, error: str = "") -> str:
    """The ``text/plain`` rendering: the tree as ``tdview tree`` prints it, two levels
    deep and :data:`MAX_CHILDREN` children per level, or the error.

    Examples
    --------
    >>> render_text("missing.tdz", None, "NotACheckpointError: missing.tdz")
    'tdview: missing.tdz: NotACheckpointError: missing.tdz'
    """
    if ckpt is None:
        return f"tdview: {source}: {error}"
    # No subtree totals: they walk the whole tree, and display must stay cheap.
    options = TreeOptions(depth=DEPTH, limit=MAX_CHILDREN, rollups=False)
    return "\n".join(render_tree(ckpt, ckpt.root, options))


def render_html(source: str, table: list[Row], error: str = "") -> str:
    """The ``text/html`` rendering: a two-column table (key, description), escaped, with
    inline styles only (GitHub's and nbviewer's sanitizers keep those, not classes).

    Examples
    --------
    >>> "&lt;b&gt;" in render_html("<b>", [(1, "<b>", "x")])
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
        parts.append('<table style="border-collapse:collapse;font-family:monospace">'
                     "<thead><tr><th>key</th><th>contents</th></tr></thead><tbody>")
        for depth, key, text in table:
            pad = f"padding-left:{depth * 1.5}em;text-align:left"
            parts.append(f'<tr><td style="{pad}">{esc(key or "(root)")}</td>'
                         f'<td style="text-align:left">{esc(text)}</td></tr>')
        parts.append("</tbody></table>")
    parts.append("</div>")
    return "".join(parts)
