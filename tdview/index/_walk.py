"""Whole-subtree questions: rollups (bytes, numel, leaves, bytes per dtype) and search.

Both walk the tree depth-first through the index, so they parse every ``meta.json``
of the subtree once (cached) and never read a payload byte.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from math import prod

from .._gc import gc_paused
from ..format import LeafRecord
from ._checkpoint import Checkpoint
from ._facts import leaf_entry
from ._node import LEAF, Node
from ._paths import NestedPath

_GLOB = set("*?[")


@dataclass
class Rollup:
    """Totals of a subtree. Nested leaves count the bytes of their data file."""

    bytes: int = 0
    numel: int = 0
    leaves: int = 0
    by_dtype: dict[str, int] = field(default_factory=dict)
    problems: int = 0

    def add(self, other: Rollup) -> None:
        self.bytes += other.bytes
        self.numel += other.numel
        self.leaves += other.leaves
        self.problems += other.problems
        for dtype, size in other.by_dtype.items():
            self.by_dtype[dtype] = self.by_dtype.get(dtype, 0) + size


def walk(ckpt: Checkpoint, node: Node) -> Iterator[Node]:
    """Every node below ``node`` (not ``node`` itself), depth-first, in load order."""
    stack = [iter(ckpt.children(node))]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
            continue
        yield child
        if not child.is_leaf:
            stack.append(iter(ckpt.children(child)))


def rollup(ckpt: Checkpoint, node: Node) -> Rollup:
    """The cached totals of ``node``'s subtree.

    The walk is iterative (a deep tree cannot exhaust the stack) and adds each plain leaf
    in place; only collection nodes keep a cached rollup (a leaf's is computed on demand).
    """
    cached = node.rollup_cache
    if cached is not None:
        return cached
    if node.is_leaf:
        total = Rollup(problems=len(node.problems))
        total.add(_leaf_rollup(ckpt, node))
        node.rollup_cache = total
        return total
    with gc_paused():
        _rollup_tree(ckpt, node)
    return node.rollup_cache


def _rollup_tree(ckpt: Checkpoint, top: Node) -> None:
    """Fill ``rollup_cache`` of ``top`` and of every collection below it (post-order).

    Plain leaves come as their records (:meth:`Checkpoint.totals_entries`): no leaf node
    is built for them.
    """
    entries = ckpt.totals_entries
    stack: list[tuple[Node, Iterator[Node | LeafRecord], Rollup]] = [
        (top, iter(entries(top)), Rollup(problems=len(top.problems)))]
    while stack:
        parent, pending, total = stack[-1]
        by_dtype = total.by_dtype
        for child in pending:
            if isinstance(child, LeafRecord):
                record = child
            elif child.kind == LEAF:
                if child.record is None or child.record.is_nested:
                    total.add(rollup(ckpt, child))
                    continue
                record = child.record
                if child.problems:
                    total.problems += len(child.problems)
            elif child.rollup_cache is not None:
                total.add(child.rollup_cache)
                continue
            else:  # descend; this level resumes from ``pending`` afterwards
                stack.append((child, iter(entries(child)), Rollup(problems=len(child.problems))))
                break
            numel = prod(record.shape)
            dtype = record.dtype
            nbytes = numel * dtype.itemsize
            total.bytes += nbytes
            total.numel += numel
            total.leaves += 1
            name = dtype.name
            by_dtype[name] = by_dtype.get(name, 0) + nbytes
        else:
            stack.pop()
            parent.rollup_cache = total
            if stack:
                stack[-1][2].add(total)


def _leaf_rollup(ckpt: Checkpoint, node: Node) -> Rollup:
    record = node.record
    assert record is not None
    nbytes = record.nbytes
    if nbytes is None:  # nested: the size of the packed data file
        entry = leaf_entry(ckpt.store, node)
        nbytes = entry.size if entry is not None else 0
    numel = record.numel if record.numel is not None else nbytes // record.dtype.itemsize
    return Rollup(nbytes, numel, 1, {record.dtype.name: nbytes})


def path_matcher(pattern: str) -> Callable[[NestedPath], bool]:
    """The test :func:`search` applies to each path (see there)."""
    if _GLOB & set(pattern):
        def match(path: NestedPath) -> bool:
            return fnmatch.fnmatchcase("/".join(path), pattern) or fnmatch.fnmatchcase(
                path[-1], pattern)
        return match
    needle = pattern.casefold()
    return lambda path: needle in path[-1].casefold()


def search(
    ckpt: Checkpoint, pattern: str, *, limit: int = 1000, under: object = ()
) -> tuple[list[NestedPath], bool]:
    """Paths whose nested key matches ``pattern``: ``(matches, truncated)``.

    A pattern with ``*``, ``?`` or ``[`` is a glob matched against the whole
    ``"a/b/c"`` path and against the last key; anything else is a case-insensitive
    substring of the last key. Matches come depth-first, in load order.
    """
    if not pattern:
        return [], False
    match = path_matcher(pattern)
    found: list[NestedPath] = []
    for child in walk(ckpt, ckpt.node(under)):
        if match(child.path):
            if len(found) == limit:
                return found, True
            found.append(child.path)
    return found, False
