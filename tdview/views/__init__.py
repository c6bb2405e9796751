"""The static views of a checkpoint: the text tree (``tdview tree``, a saved output's
``text/plain``), a folder of checkpoints as text, and their HTML (a saved output's
``text/html``), from the index alone: :mod:`._tree`, :mod:`._collection`, :mod:`._html`.
"""

from __future__ import annotations

from ._collection import holds_checkpoints, nothing_found, render_collection
from ._html import STATE_HTML, Row, render_html, render_text, rows
from ._tree import TreeOptions, render_tree

__all__ = [
    "STATE_HTML",
    "Row",
    "TreeOptions",
    "holds_checkpoints",
    "nothing_found",
    "render_collection",
    "render_html",
    "render_text",
    "render_tree",
    "rows",
]
