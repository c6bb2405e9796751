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
from ._result import ADDED, REMOVED, SAME, Facts, Row, Spelling
from ._sides import Side
from ._spelling import Group, Keyed, dotted, regroup

#: An item of a walk: a node, or the LeafFile of a plain leaf.
Item = LoadItem

_LEAF_FACTS_SIZE = 4096
_LEAF_FACTS: BoundedCache[tuple[str, tuple[int, ...]], Facts] = BoundedCache(_LEAF_FACTS_SIZE)


def item_key(item: Item) -> str:
    return item.record.key if isinstance(item, LeafFile) else item.path[-1]


def is_leaf_item(item: Item | Group) -> bool:
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


#: A pair of items at a path, with each side's real path where a side spells it
#: otherwise (None: both sides' real paths are the path; see :mod:`._spelling`).
Pair = tuple[Item | Group | None, Item | Group | None, NestedPath, Spelling | None]


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
        self._row(a.node, b.node, (), None)
        stack: list[Iterator[Pair]] = [self._merged(a.node, b.node, (), None)]
        while stack:
            for ia, ib, path, spelling in stack[-1]:
                if isinstance(ia, LeafFile) and isinstance(ib, LeafFile) and spelling is None:
                    ra, rb = ia.record, ib.record
                    if ra.dtype is rb.dtype and ra.shape == rb.shape:  # the common row
                        append(Row(path, SAME, None, None, ia, ib))
                        continue
                self._row(ia, ib, path, spelling)
                if not (ia is None or is_leaf_item(ia)) or not (ib is None or is_leaf_item(ib)):
                    stack.append(self._merged(ia, ib, path, spelling))
                    break
            else:
                stack.pop()
        return rows

    def _row(self, ia: Any, ib: Any, path: NestedPath, spelling: Spelling | None) -> None:
        fa, pa = self._facts(self.a, ia)
        fb, pb = self._facts(self.b, ib)
        status = REMOVED if ib is None else ADDED if ia is None else SAME
        row = Row(path, status, fa, fb, _item(ia), _item(ib), spelling=spelling)
        if fa is not None and fb is not None:
            compare_facts(row, fa, fb)
        if pa or pb:
            row.problem = "; ".join(f"{side}: {p}" for side, p in (("a", pa), ("b", pb)) if p)
        for side, item in (("a", ia), ("b", ib)):
            if isinstance(item, Group):
                row.note = f"{side}: keys named {dotted(path)}.…"
        self.rows.append(row)

    @staticmethod
    def _facts(side: Side, item: Any) -> tuple[Facts | None, str]:
        if item is None or isinstance(item, Group):
            return None, ""
        return facts(side.ckpt, item)

    def _merged(
        self, ia: Any, ib: Any, path: NestedPath, spelling: Spelling | None
    ) -> Iterator[Pair]:
        """The children of both in ``a``'s order; a key only in ``b`` comes after the key
        that comes before it in ``b`` (first when none does). Keys that spell a node of
        the other side in their names pair with its children (:func:`regroup`)."""
        plain = spelling is None and not isinstance(ia, Group) and not isinstance(ib, Group)
        if plain:
            items_a, items_b = children(self.a.ckpt, ia), children(self.b.ckpt, ib)
            keys_a = [item_key(item) for item in items_a]
            keys_b = [item_key(item) for item in items_b]
            if keys_a == keys_b:  # the same keys in the same order: the common folder
                for key, item_a, item_b in zip(keys_a, items_a, items_b, strict=True):
                    yield item_a, item_b, (*path, key), None
                return
            kids_a = list(zip(keys_a, keys_a, items_a, strict=True))
            kids_b = list(zip(keys_b, keys_b, items_b, strict=True))
            real_a = real_b = path
        else:
            kids_a, real_a = _keyed(self.a.ckpt, ia, spelling[0] if spelling else path)
            kids_b, real_b = _keyed(self.b.ckpt, ib, spelling[1] if spelling else path)
        grouped_a, grouped_b = regroup(kids_a, kids_b, real_a, real_b)
        if plain and grouped_a is kids_a and grouped_b is kids_b:
            spelled = _same_spelling  # keys added or removed, all spelled alike: no paths
        else:
            spelled, kids_a, kids_b = _spelled, grouped_a, grouped_b
        by_key_b = {key: (real, item) for key, real, item in kids_b}
        shared = {key for key, _, _ in kids_a}
        # b's extra keys, placed after the shared key before them in b (None: first)
        after: dict[str | None, list[Keyed]] = {}
        last: str | None = None
        for key, real, item in kids_b:
            if key in shared:
                last = key
            else:
                after.setdefault(last, []).append((key, real, item))
        for key, real, item in after.pop(None, ()):
            yield None, item, (*path, key), spelled(path, key, None, (real_b, real, item))
        for key, real, item in kids_a:
            real_key_b, paired = by_key_b.get(key, (None, None))
            side_b = (real_b, real_key_b, paired)
            yield item, paired, (*path, key), spelled(path, key, (real_a, real, item), side_b)
            for extra, real_extra, found in after.pop(key, ()) if after else ():
                yield (
                    None,
                    found,
                    (*path, extra),
                    spelled(path, extra, None, (real_b, real_extra, found)),
                )


def _item(item: Any) -> Any:
    """The index item a row keeps (a group stands for no item of its side)."""
    return None if isinstance(item, Group) else item


def _keyed(ckpt: Tree, item: Any, real: NestedPath | None) -> tuple[list[Keyed], NestedPath]:
    """The children of ``item`` as ``(key, real key, item)`` and the real path of their level."""
    if isinstance(item, Group):
        return item.members, item.real
    kids = children(ckpt, item)
    return [(key, key, kid) for kid in kids for key in (item_key(kid),)], real or ()


def _spelled(
    path: NestedPath,
    key: str,
    side_a: tuple[NestedPath, str | None, Any] | None,
    side_b: tuple[NestedPath, str | None, Any] | None,
) -> Spelling | None:
    """Each side's real path of the child ``key`` of ``path``, from ``(real path of the
    level, real key, item)`` (None for a side without it, or whose group stands for it),
    or None when each side that has it has it at ``(*path, key)``."""
    child = (*path, key)
    real_a, real_b = _real(side_a), _real(side_b)
    if real_a in (child, None) and real_b in (child, None):
        return None
    return real_a, real_b


def _same_spelling(
    path: NestedPath,
    key: str,
    side_a: tuple[NestedPath, str | None, Any] | None,
    side_b: tuple[NestedPath, str | None, Any] | None,
) -> Spelling | None:
    """:func:`_spelled` of a level whose keys both sides spell alike."""
    return None


def _real(side: tuple[NestedPath, str | None, Any] | None) -> NestedPath | None:
    if side is None or side[1] is None or side[2] is None or isinstance(side[2], Group):
        return None
    return (*side[0], side[1])
