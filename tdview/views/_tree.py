"""The text tree of a checkpoint, as ``tdview tree`` prints it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .._text import echo
from .._units import dtype_text, human_bytes, shape_text
from ..errors import TDViewError
from ..index import (
    LEAF,
    Node,
    Rollup,
    Tree,
    iter_matches,
    needs_unpickling,
    param_label,
    pickle_info,
    rollup,
    storage_rows,
)


@dataclass(frozen=True)
class TreeOptions:
    depth: int | None = 2
    pattern: str | None = None
    limit: int = 50
    rollups: bool = True


def describe(ckpt: Tree, node: Node, *, rollups: bool = True) -> str:
    """One line about a node: kind, shape/dtype or batch size, sizes, problems."""
    if not node.is_leaf:
        ckpt.count_children(node)  # a stack's or view's members are checked when read
    problems = list(node.problems)
    if node.kind == LEAF and node.record is not None:
        record = node.record
        shape = shape_text(record.shape)
        shape = f"nested{shape}" if record.is_nested else shape
        parts = [dtype_text(record.dtype.name), shape, human_bytes(record.nbytes)]
    else:
        parts = [node.class_name or node.kind]
        batch = ckpt.batch_size(node)
        if batch is not None:
            parts.append(f"batch {shape_text(batch)}")
        try:  # a torchrl replay-buffer storage
            rows = storage_rows(ckpt, node)
        except (TDViewError, OSError) as error:
            problems.append(str(error))
        else:
            if rows is not None:
                parts.append(f"{rows.written:,} of {rows.capacity:,} rows written")
        if node.has_value:
            parts.append(short_value(node.value))
        elif needs_unpickling(ckpt.store, node):
            parts.append(_pickled(ckpt, node))
        elif rollups:
            total = rollup(ckpt, node)
            parts.append(f"{human_bytes(total.bytes)} in {_contents(total)}")
    if problems:
        parts.append("PROBLEM: " + "; ".join(problems))
    return "  ".join(parts)


def _contents(total: Rollup) -> str:
    """What a subtree's size is made of: ``"3 leaves"``, ``"1 pickled value"``,
    ``"3 leaves and 1 pickled value"`` (a pickle is no leaf: see :class:`Rollup`)."""
    made = [_count(total.leaves, "leaf")] if total.leaves or not total.pickles else []
    if total.pickles:
        made.append(_count(total.pickles, "pickled value"))
    return " and ".join(made)


def _count(n: int, one: str) -> str:
    """``_count(1, "leaf")`` -> ``"1 leaf"``; ``_count(3, "leaf")`` -> ``"3 leaves"``."""
    return f"1 {one}" if n == 1 else f"{n:,} {_PLURALS.get(one, one + 's')}"


_PLURALS = {"leaf": "leaves"}


def _pickled(ckpt: Tree, node: Node) -> str:
    try:
        info = pickle_info(ckpt.store, node)
    except (TDViewError, OSError) as error:
        return f"pickled (unreadable: {error})"
    if info is None:
        return "pickled"
    imports = info.unknown or imports_text(info.globals)
    return f"pickled {human_bytes(info.size)} ({imports}): {PICKLE_POLICY}"


#: When a pickled value is unpickled (tdview's loader and tensordict's alike); the widget
#: says the same (``PICKLE_PROBLEM`` in the protocol, the lock box of its details).
PICKLE_POLICY = "unpickled only on load with allow_pickle=True, or None with a warning"


def imports_text(names: Iterable[tuple[str, str]], most: int = 3) -> str:
    """``"imports collections.OrderedDict"``: the first ``most`` globals a pickle names."""
    found = [f"{module}.{name}" for module, name in names]
    if not found:
        return "imports nothing"
    more = f" and {len(found) - most} more" if len(found) > most else ""
    return "imports " + ", ".join(found[:most]) + more


def short_value(value: object, width: int = 60) -> str:
    """An inline value in at most about ``width`` characters (:func:`~tdview._text.echo`:
    a long string is cut before it is copied, control characters are escaped)."""
    return echo(value, width)


# One row of a drawn tree: (depth from 1, key, text, whether it is the last sibling).
TreeRow = tuple[int, str, str, bool]


def draw_rows(rows: Iterable[TreeRow]) -> Iterator[str]:
    """Draw rows as ``tdview tree`` does (``├──``, ``└──``, ``│``), one line per row, as
    they come (a slow walk shows its lines while it goes on).

    Examples
    --------
    >>> for line in draw_rows([(1, "a", "x", False), (2, "b", "y", True), (1, "c", "", True)]):
    ...     print(line)
    ├── a  x
    │   └── b  y
    └── c
    """
    open_levels: list[bool] = []  # per depth above the row: whether more siblings follow
    for depth, key, text, last in rows:
        del open_levels[depth - 1 :]
        indent = "".join("│   " if more else "    " for more in open_levels)
        yield f"{indent}{'└── ' if last else '├── '}{key}" + (f"  {text}" if text else "")
        open_levels.append(not last)


def render_tree(ckpt: Tree, start: Node, options: TreeOptions) -> Iterator[str]:
    """Lines of the tree below ``start`` (itself first); with a filter, a ``no matches``
    line when nothing below ``start`` matches."""
    label = "/".join(start.path) or ckpt.path
    yield f"{label}  {describe(ckpt, start, rollups=options.rollups)}"
    keep = matching(ckpt, start, options.pattern) if options.pattern else None
    if keep is not None and not keep.hits:
        yield "no matches"
        return
    yield from draw_rows(tree_rows(ckpt, start, options, keep))


def tree_rows(
    ckpt: Tree, start: Node, options: TreeOptions, keep: _Filter | None = None
) -> Iterator[TreeRow]:
    """The rows below ``start``, from depth 1 (``keep``: what a filter shows)."""
    return _level(ckpt, start, 1, options, keep)


def _level(
    ckpt: Tree, node: Node, depth: int, options: TreeOptions, keep: _Filter | None
) -> Iterator[TreeRow]:
    # A filter shows the way to every match, at any depth; --depth bounds the rest.
    if options.depth is not None and depth > options.depth and keep is None:
        return
    children = [c for c in ckpt.children(node) if keep is None or c.path in keep.shown]
    shown = children[: options.limit]
    for i, child in enumerate(shown):
        last = i == len(shown) - 1 and len(children) <= options.limit
        yield depth, _key(ckpt, child), describe(ckpt, child, rollups=options.rollups), last
        if not child.is_leaf:
            # Below a match, show everything: a filter finds a module, then shows it.
            below = None if keep is None or child.path in keep.hits else keep
            yield from _level(ckpt, child, depth + 1, options, below)
    if len(children) > options.limit:
        yield depth, f"… {len(children) - options.limit} more", "", True


def _key(ckpt: Tree, node: Node) -> str:
    """A row's key; an optimizer's ``state/<i>`` with its parameter: ``0 → embed.weight``."""
    label = param_label(ckpt, node)
    return node.key if label is None or label.name is None else f"{node.key} → {label.name}"


@dataclass(frozen=True)
class _Filter:
    hits: set[tuple[str, ...]]  # paths that match
    shown: set[tuple[str, ...]]  # matches and their ancestors


def matching(ckpt: Tree, start: Node, pattern: str) -> _Filter:
    """The paths that match ``pattern`` (as :func:`tdview.index.search` matches: a
    subpath, a state_dict key, part of a key or a glob), and their ancestors, so that
    the tree shows the way to each match."""
    found = _Filter(set(), set())
    first = len(start.path) + 1
    for path in iter_matches(ckpt, pattern, under=start.path):
        found.hits.add(path)
        found.shown.update(path[:i] for i in range(first, len(path) + 1))
    return found
