"""The metadata tier: both indexes walked in step, by key, in load order.

A plain TensorDict folder is read through :meth:`~tdview.index.LoadAccess.load_items`, so
a plain leaf is its :class:`~tdview.index.LeafFile` and no node is built for it. Nothing
here reads a payload byte: facts come from ``meta.json`` and the store's entries (a nested
leaf's data size, a pickle's size).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from .._cache import BoundedCache
from .._gc import gc_paused
from ..errors import TDViewError
from ..format import LeafRecord
from ..index import (
    LEAF,
    LeafFile,
    LoadItem,
    NestedPath,
    Node,
    Tree,
    leaf_entry,
    load_access,
    needs_unpickling,
    pickle_key,
)
from ._result import ADDED, REMOVED, SAME, Facts, Row
from ._sides import Side

#: An item of a walk: a node, or the LeafFile of a plain leaf.
Item = LoadItem

_LEAF_FACTS_SIZE = 4096
_LEAF_FACTS: BoundedCache[tuple[str, tuple[int, ...]], Facts] = BoundedCache(_LEAF_FACTS_SIZE)


def item_key(item: Item) -> str:
    return item.record.key if isinstance(item, LeafFile) else item.path[-1]


def is_leaf_item(item: Item) -> bool:
    return isinstance(item, LeafFile) or item.is_leaf


def leaf_parts(item: Item) -> tuple[LeafRecord, str | None, str | None]:
    """``(record, data file key, sizes file key)`` of a leaf item."""
    if isinstance(item, LeafFile):
        return item.record, item.file, None
    assert item.record is not None
    return item.record, item.file, item.sizes_file


def _record_facts(record: LeafRecord) -> Facts:
    """Facts of a plain leaf, shared by every leaf of one dtype and shape (read-only)."""
    key = (record.dtype.name, record.shape)
    found = _LEAF_FACTS.get(key)
    if found is None:
        found = _LEAF_FACTS.put(
            key, Facts(LEAF, "Tensor", record.dtype.name, record.shape, record.nbytes)
        )
    return found


def facts(ckpt: Tree, item: Item) -> tuple[Facts, str]:
    """The facts of an item and its problems (``""`` when none)."""
    if isinstance(item, LeafFile):
        return _record_facts(item.record), ""
    node: Node = item
    problem = "; ".join(node.problems)
    if node.is_leaf:
        record = node.record
        assert record is not None
        if not record.is_nested:
            return _record_facts(record), problem
        try:
            entry = leaf_entry(ckpt.store, node)
        except (TDViewError, OSError) as error:
            entry, problem = None, problem or str(error)
        return Facts(
            LEAF,
            "Tensor",
            record.dtype.name,
            record.shape,
            entry.size if entry is not None else 0,
            nested=True,
        ), problem
    found = Facts(node.kind, node.class_name or node.kind)
    try:
        found.batch_size = ckpt.batch_size(node)
        found.names = ckpt.names(node)
        if node.has_value:
            found.value, found.has_value = node.value, True
        key = pickle_key(node)
        if key is not None and ckpt.store.is_file(key):
            found.pickled = needs_unpickling(ckpt.store, node)
            found.nbytes = ckpt.store.entry(key).size
    except (TDViewError, OSError) as error:
        problem = problem or str(error)
    return found, problem


def children(ckpt: Tree, item: Item | None) -> list[Item]:
    if item is None or isinstance(item, LeafFile) or item.is_leaf:
        return []
    return list(load_access(ckpt).load_items(item))


def compare_facts(row: Row, fa: Facts, fb: Facts) -> None:
    """Mark on ``row`` what differs between two sides' metadata."""
    if fa is fb:
        return
    if fa.kind != fb.kind:
        row.mark("kind")
    if fa.class_name != fb.class_name:
        row.mark("class")
    if fa.kind == LEAF and fb.kind == LEAF:
        if fa.dtype != fb.dtype:
            row.mark("dtype")
        if fa.shape != fb.shape or fa.nested != fb.nested:
            row.mark("shape")
        if fa.nested and fb.nested and fa.nbytes != fb.nbytes:
            row.mark("bytes")
        return
    if fa.kind == LEAF or fb.kind == LEAF:
        return  # a tensor against a node: the kind says it all
    if fa.batch_size != fb.batch_size:
        row.mark("batch_size")
    if fa.names != fb.names:
        row.mark("names")
    if fa.has_value or fb.has_value:
        if fa.has_value != fb.has_value or not same_json(fa.value, fb.value):
            row.mark("value")
    elif fa.pickled and fb.pickled and fa.nbytes != fb.nbytes:
        row.mark("bytes")
    elif fa.pickled != fb.pickled:
        row.mark("value")


def same_json(a: Any, b: Any) -> bool:
    """Equality of JSON values where NaN equals NaN and ``1`` differs from ``True``."""
    if type(a) is not type(b):
        if isinstance(a, bool) or isinstance(b, bool):
            return False
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return a == b
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            return len(a) == len(b) and all(map(same_json, a, b))
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same_json, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    return bool(a == b)


class PairWalk:
    """Walks two sides in step and makes one row per key of the union."""

    def __init__(self, a: Side, b: Side) -> None:
        self.a, self.b = a, b
        self.rows: list[Row] = []

    def run(self) -> list[Row]:
        a, b = self.a, self.b
        for side in (a, b):
            if side.node.dirkey is not None:
                side.ckpt.store.prepare(side.node.dirkey, payloads=False)
        with gc_paused():  # 10^5 rows: no collection pass over them while they are made
            return self._walk()

    def _walk(self) -> list[Row]:
        a, b = self.a, self.b
        rows = self.rows
        append = rows.append
        self._row(a.node, b.node, ())
        stack: list[Iterator[tuple[Item | None, Item | None, NestedPath]]] = [
            self._merged(a.node, b.node, ())
        ]
        while stack:
            for ia, ib, path in stack[-1]:
                if isinstance(ia, LeafFile) and isinstance(ib, LeafFile):  # the common row
                    ra, rb = ia.record, ib.record
                    if ra.dtype is rb.dtype and ra.shape == rb.shape:
                        append(Row(path, SAME, None, None, ia, ib))
                        continue
                self._row(ia, ib, path)
                if not (ia is None or is_leaf_item(ia)) or not (ib is None or is_leaf_item(ib)):
                    stack.append(self._merged(ia, ib, path))
                    break
            else:
                stack.pop()
        return rows

    def _row(self, ia: Item | None, ib: Item | None, path: NestedPath) -> None:
        fa, pa = facts(self.a.ckpt, ia) if ia is not None else (None, "")
        fb, pb = facts(self.b.ckpt, ib) if ib is not None else (None, "")
        status = REMOVED if ib is None else ADDED if ia is None else SAME
        row = Row(path, status, fa, fb, ia, ib)
        if fa is not None and fb is not None:
            compare_facts(row, fa, fb)
        if pa or pb:
            row.problem = "; ".join(f"{side}: {p}" for side, p in (("a", pa), ("b", pb)) if p)
        self.rows.append(row)

    def _merged(
        self, ia: Item | None, ib: Item | None, path: NestedPath
    ) -> Iterator[tuple[Item | None, Item | None, NestedPath]]:
        """The children of both in ``a``'s order; a key only in ``b`` comes after the key
        that comes before it in ``b`` (first when none does)."""
        kids_a = children(self.a.ckpt, ia)
        kids_b = children(self.b.ckpt, ib)
        keys_a = [item_key(item) for item in kids_a]
        keys_b = [item_key(item) for item in kids_b]
        if keys_a == keys_b:  # the same keys in the same order: the common folder
            for key, item_a, item_b in zip(keys_a, kids_a, kids_b, strict=True):
                yield item_a, item_b, (*path, key)
            return
        by_key_b = dict(zip(keys_b, kids_b, strict=True))
        shared = set(keys_a)
        # b's extra keys, placed after the shared key before them in b (None: first)
        after: dict[str | None, list[tuple[str, Item]]] = {}
        last: str | None = None
        for key, item in by_key_b.items():
            if key in shared:
                last = key
            else:
                after.setdefault(last, []).append((key, item))
        for key, item in after.pop(None, ()):
            yield None, item, (*path, key)
        for key, item in zip(keys_a, kids_a, strict=True):
            yield item, by_key_b.get(key), (*path, key)
            extra = after.pop(key, None) if after else None
            if extra:
                for other, found in extra:
                    yield None, found, (*path, other)
