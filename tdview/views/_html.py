"""Static renderings of a checkpoint's top levels for ``text/plain`` and ``text/html``.

A saved notebook keeps these beside the live widget, so GitHub, nbviewer and a
terminal still show the tree. Both say what ``tdview tree`` says about each node
(metadata only: kind, shape and dtype or batch size, bytes, inline values, pickles,
problems); the HTML escapes everything that comes from the checkpoint.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator

from .._text import printable
from ..format import CollectionRecord, TensorDictNode
from ..index import FOLDER, MEMBER, Collection, Node, Tree, is_folder
from ._tree import TreeRow, describe, draw_rows

#: Levels shown below the root, and children shown per level.
DEPTH = 2
MAX_CHILDREN = 30
#: ``meta.json`` bytes the static renderings may parse. Past it, collections are named
#: by their recorded type alone, so that displaying the widget stays fast on any tree (a
#: level of 10,000 leaves is a 650 kB ``meta.json``).
META_BUDGET = 512 << 10
#: Characters of one key or line the static renderings show.
MAX_SHOWN = 2000
#: Characters of the static HTML kept in the widget's state (``TDView._static_html``):
#: the saved state holds it beside the output's own copy, so it stays small.
STATE_HTML = 64 << 10

Row = tuple[int, str, str]  # depth, key, description


def rows(
    ckpt: Tree, depth: int = DEPTH, limit: int = MAX_CHILDREN, budget: int = META_BUDGET
) -> Iterator[Row]:
    """The rows of the static tree: the root, then ``depth`` levels of at most ``limit``
    children each (a ``"… n more"`` row stands for the rest of a level), reading at most
    about ``budget`` bytes of ``meta.json`` beyond the root's."""
    if is_folder(ckpt):
        yield from _collection_rows(ckpt, depth, limit, budget)
        return
    start = ckpt.meta_bytes_read

    def affordable() -> bool:
        return ckpt.meta_bytes_read - start < budget

    def level(node: Node, at: int) -> Iterator[Row]:
        items, total = _first_children(ckpt, node, limit, affordable)
        shown = 0
        for key, child, hint in items:  # read lazily: a subtree is shown before its sibling
            shown += 1
            if child is None:
                yield at, key, f"{hint or 'TensorDict'}  (not read here: open the widget)"
                continue
            yield at, key, describe(ckpt, child, rollups=False)
            if at < depth and not child.is_leaf and affordable():
                yield from level(child, at + 1)
        if total > shown:
            yield at, f"… {total - shown:,} more", ""

    yield 0, "", describe(ckpt, ckpt.root, rollups=False)
    yield from level(ckpt.root, 1)


def _collection_rows(coll: Collection, depth: int, limit: int, budget: int) -> Iterator[Row]:
    """The static rows of a folder of checkpoints: its own levels, and below a member
    that member's first levels (each member with its own metadata budget)."""
    from ._collection import describe_own

    def level(node: Node, at: int) -> Iterator[Row]:
        children = coll.children(node)
        for child in children[:limit]:
            yield at, child.key, describe_own(coll, child, rollups=False)
            if at >= depth:
                continue
            if child.kind == FOLDER:
                yield from level(child, at + 1)
            elif child.kind == MEMBER and not child.problems:
                member = coll.member(child)
                below = rows(member, depth - at, limit, budget // 4)
                next(below)  # the member's root: the row above
                yield from ((at + d, key, text) for d, key, text in below)
        if len(children) > limit:
            yield at, f"… {len(children) - limit:,} more", ""

    yield 0, "", describe_own(coll, coll.root, rollups=False)
    yield from level(coll.root, 1)


Item = tuple[str, "Node | None", "str | None"]  # key, node (None: not read), type hint


def _first_children(
    ckpt: Tree, node: Node, limit: int, affordable: Callable[[], bool]
) -> tuple[Iterator[Item], int]:
    """The first ``limit`` children of ``node`` (read as they are taken), and how many
    there are. A TensorDict's children are read one by one (its other children and their
    ``meta.json`` untouched); a collection is left unread (None) once the budget is
    spent. Other kinds, which are small, are read whole while the budget lasts."""
    meta = node.meta
    if (
        node.children_cache is None
        and type(meta) is TensorDictNode
        and not meta.legacy_no_collection_records
    ):

        def one_by_one() -> Iterator[Item]:
            for record in meta.load_order[:limit]:
                if isinstance(record, CollectionRecord) and not affordable():
                    yield record.key, None, record.type_hint
                    continue
                child = ckpt.lookup(node, record.key)
                if child is not None:
                    yield record.key, child, None

        return one_by_one(), len(meta.entries)
    if not affordable() and node.children_cache is None:
        return iter(()), 0
    page = ckpt.page(node, 0, limit)
    return ((child.key, child, None) for child in page.items), page.total


def render_text(source: str, table: list[Row], error: str = "") -> str:
    """The ``text/plain`` rendering: the rows of :func:`rows` drawn as ``tdview tree``
    draws a tree, or the error.

    Examples
    --------
    >>> render_text("missing.tdz", [], "NotACheckpointError: missing.tdz")
    'tdview: missing.tdz: NotACheckpointError: missing.tdz'
    >>> print(render_text("c", [(0, "", "TensorDict"), (1, "a", "x"), (2, "b", "y"),
    ...                         (1, "c", "z")]))
    c  TensorDict
    ├── a  x
    │   └── b  y
    └── c  z
    """
    if error or not table:
        return _shown(f"tdview: {source}: {error}")
    return "\n".join(map(_shown, [f"{source}  {table[0][2]}", *draw_rows(_with_last(table[1:]))]))


def _shown(text: str) -> str:
    """A key, value or line as the static renderings show it: control and bidirectional
    characters escaped (keys are data, never terminal commands), at most
    :data:`MAX_SHOWN` characters (a saved notebook must not grow by a hostile key)."""
    return printable(text, limit=MAX_SHOWN)


def _with_last(table: list[Row]) -> list[TreeRow]:
    """The rows with their last-sibling flags, found in one backward pass: a row is the
    last of its level when the nearest later row at its depth or above is above it (or
    there is none)."""
    rows: list[TreeRow] = []
    later: list[int] = []  # depths of the nearest later row at each level, rising
    for depth, key, text in reversed(table):
        while later and later[-1] > depth:
            later.pop()
        rows.append((depth, key, text, not later or later[-1] < depth))
        if later and later[-1] == depth:
            later.pop()
        later.append(depth)
    rows.reverse()
    return rows


def render_html(source: str, table: list[Row], error: str = "", limit: int | None = None) -> str:
    """The ``text/html`` rendering: a two-column table (key, description), escaped, with
    inline styles only (GitHub's and nbviewer's sanitizers keep those, not classes). With
    ``limit``, rows past about ``limit`` characters are left out and counted.

    Examples
    --------
    >>> "&lt;b&gt;" in render_html("<b>", [(1, "<b>", "x")])
    True
    >>> "3 more rows" in render_html("c", [(1, "a" * 50, "x")] * 4, limit=100)
    True
    """

    def esc(text: str) -> str:
        return html.escape(_shown(text))

    parts = [
        '<div class="tdview-static">',
        f"<p><strong>tdview</strong> <code>{esc(source)}</code></p>",
    ]
    if error:
        parts.append(f'<p style="color:#b00020">{esc(error)}</p>')
    if table:
        parts.append(
            '<table style="border-collapse:collapse;font-family:monospace">'
            "<thead><tr><th>key</th><th>contents</th></tr></thead><tbody>"
        )
        used = 0
        for at, (depth, key, text) in enumerate(table):
            pad = f"padding-left:{depth * 1.5}em;text-align:left"
            row = (
                f'<tr><td style="{pad}">{esc(key or "(root)")}</td>'
                f'<td style="text-align:left">{esc(text)}</td></tr>'
            )
            used += len(row)
            if limit is not None and used > limit and at > 0:
                parts.append(
                    f'<tr><td colspan="2">… {len(table) - at:,} more rows '
                    "(run the cell to browse)</td></tr>"
                )
                break
            parts.append(row)
        parts.append("</tbody></table>")
    parts.append("</div>")
    return "".join(parts)
