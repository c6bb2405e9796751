"""The text tree of a folder of checkpoints (``tdview tree`` on a :class:`Collection`).

The collection's own rows (folders, members, side files) are drawn like a checkpoint's,
and a member's rows below it are the member's own tree (:mod:`._tree`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator

from .._units import human_bytes
from ..errors import TDViewError
from ..index import (
    FOLDER,
    JSON_FILE,
    LEAF,
    MAX_DEPTH,
    MEMBER,
    PICKLE_FILE,
    Collection,
    Node,
    Tree,
    path_matcher,
)
from ._tree import (
    TreeOptions,
    TreeRow,
    _Filter,
    describe,
    draw_rows,
    matching,
    short_value,
    tree_rows,
)


class _Hit(enum.Enum):
    """A node whose own name matches (a member's tree then shows unfiltered)."""

    HIT = "hit"


# What a filter shows of a collection, by path: None for a folder on the way to a match,
# _Hit.HIT for a node whose own name matches, else a member's own filter (see matching()).
_Kept = dict[tuple[str, ...], "_Filter | _Hit | None"]


def holds_checkpoints(coll: Collection) -> bool:
    """Whether anything checkpoint-like lies in the collection: a member, or a raw
    ``.memmap`` side file (found within the walk's bounds)."""
    return any(node.kind in (MEMBER, LEAF) for node in coll.walk_own())


def nothing_found(coll: Collection) -> str:
    """The message of ``tdview tree`` on a folder holding no checkpoint."""
    return (
        f"{coll.path} is not a checkpoint and holds none: no meta.json in it or in any "
        f"folder below it (up to {MAX_DEPTH} levels down), and no .tdz or .zip archive."
    )


def describe_own(coll: Collection, node: Node, *, rollups: bool = True) -> str:
    """One line about a node of the collection's own tree."""
    if node.kind == MEMBER:
        head = f"checkpoint ({node.type_hint})"
        try:
            member = coll.member(node)
        except (TDViewError, OSError):
            return f"{head}  PROBLEM: " + "; ".join(node.problems)
        return f"{head}  {describe(member, member.root, rollups=rollups)}"
    if node.kind == LEAF:
        return f"raw .memmap  {describe(coll, node, rollups=rollups)}"
    parts: list[str] = []
    if node.kind == JSON_FILE:
        value = coll.side_value(node)
        parts += ["JSON", human_bytes(coll.file_size(node))]
        if not node.problems:
            parts.append(short_value(value))
    elif node.kind == PICKLE_FILE:
        parts += ["pickle file", human_bytes(coll.file_size(node)), _imports(coll, node)]
    else:
        members = sum(1 for n in coll.walk_own(node) if n.kind == MEMBER)
        parts += ["folder", f"{members} checkpoint{'' if members == 1 else 's'}"]
        if rollups:
            parts.append(human_bytes(coll.total(node).bytes))
    if node.problems:
        parts.append("PROBLEM: " + "; ".join(node.problems))
    return "  ".join(parts)


def _imports(coll: Collection, node: Node) -> str:
    try:
        info = coll.side_pickle(node)
    except (TDViewError, OSError, ValueError) as error:
        return f"(unreadable: {error})"
    if info.unknown is not None:
        return f"({info.unknown})"
    names = ", ".join(f"{m}.{n}" for m, n in info.globals) or "no imports"
    return f"({names}; never unpickled by tdview)"


def render_collection(coll: Collection, start: Node, options: TreeOptions) -> Iterator[str]:
    """Lines of the collection's tree below ``start`` (itself first); with a filter, a
    ``no matches`` line when nothing in it matches."""
    label = "/".join(start.path) or coll.path
    yield f"{label}  {describe_own(coll, start, rollups=options.rollups)}"
    kept = _matches(coll, start, options.pattern) if options.pattern else None
    if kept is not None and not kept:
        yield "no matches"
        return
    yield from draw_rows(_level(coll, start, 1, options, kept))


def _level(
    coll: Collection, node: Node, depth: int, options: TreeOptions, kept: _Kept | None
) -> Iterator[TreeRow]:
    if options.depth is not None and depth > options.depth and kept is None:
        return
    children = [c for c in coll.children(node) if kept is None or c.path in kept]
    shown = children[: options.limit]
    for i, child in enumerate(shown):
        last = i == len(shown) - 1 and len(children) <= options.limit
        yield depth, child.key, describe_own(coll, child, rollups=options.rollups), last
        if child.kind == FOLDER:
            yield from _level(coll, child, depth + 1, options, kept)
        elif child.kind == MEMBER:
            yield from _member_rows(coll, child, depth, options, kept)
    if len(children) > options.limit:
        yield depth, f"… {len(children) - options.limit} more", "", True


def _member_rows(
    coll: Collection, node: Node, depth: int, options: TreeOptions, kept: _Kept | None
) -> Iterator[TreeRow]:
    try:
        member = coll.member(node)
    except (TDViewError, OSError):
        return
    keep = None if kept is None else kept.get(node.path)
    if keep is _Hit.HIT:
        keep = None  # the member's own name matched: its tree is not filtered
    below = TreeOptions(
        depth=None if options.depth is None else options.depth - depth,
        pattern=options.pattern,
        limit=options.limit,
        rollups=options.rollups,
    )
    for row_depth, key, text, last in tree_rows(member, member.root, below, keep):
        yield depth + row_depth, key, text, last


def _matches(coll: Collection, start: Node, pattern: str) -> _Kept:
    """The collection paths a filter shows: matches among the collection's own names,
    members holding a match, and their ancestors (a member maps to its own filter)."""
    match = path_matcher(pattern)
    kept: _Kept = {}
    first = len(start.path) + 1
    for node in coll.walk_own(start):
        hit = match(node.path)
        keep: _Filter | _Hit = _Hit.HIT
        if node.kind == MEMBER and not hit:
            try:
                member: Tree = coll.member(node)
            except (TDViewError, OSError):
                continue
            found = matching(member, member.root, pattern)
            if not found.hits:
                continue
            keep = found
        elif not hit:
            continue
        for i in range(first, len(node.path)):
            kept.setdefault(node.path[:i], None)
        kept[node.path] = keep
    return kept
