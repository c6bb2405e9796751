"""The merged schema of a lazy stack: each key with its dtype and a shape that has -1
where the members differ, as tensordict's ``LazyStackedTensorDict`` sees its members.

Read from the members' metadata alone, like the rest of the index; a member's keys are
walked depth-first without recursion (a deep member cannot exhaust the stack).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..format import LazyStackNode, TensorclassNode
from ._children import has_members
from ._node import LAZY_STACK, LEAF, NON_TENSOR, TENSORCLASS, TENSORDICT, Node
from ._paths import NestedPath
from ._tree import Tree

#: Lazy stacks of lazy stacks read as stacks, this deep (deeper: as their members).
_MAX_STACK_DEPTH = 32

# What one member says of a key: (kind, class name, dtype name or None, shape or None).
_Fact = tuple[str, str, "str | None", "tuple[int, ...] | None"]


@dataclass(frozen=True, slots=True)
class SchemaEntry:
    """One key of a lazy stack's merged schema.

    Attributes
    ----------
    key : tuple of str
        The nested key below the stack (``("next", "obs")``).
    kind : str
        ``"leaf"`` for a tensor, else the node kind (``"tensordict"``, ``"non_tensor"``...).
    class_name : str
        ``"Tensor"`` for a tensor, else the saved class (the first member's).
    dtype : str or None
        The tensor's dtype (``"torch.float32"``); None for no tensor, or when the members'
        dtypes differ.
    shape : tuple of int or None
        The key's shape in one member (a tensor's shape, a collection's batch size; a
        ``NonTensorData`` has its parent's), with -1 in every dim where the members that
        hold it differ, and ``(-1,)`` when their numbers of dims differ
        (``ranks_differ``). None when unknown (a nested tensor). The stack's shape of
        the key inserts the number of members at the stack dim: :meth:`stacked_shape`.
    members : int
        How many members hold the key: fewer than all for a key that only some hold
        (tensordict's ``exclusive_fields``).
    ranks_differ : bool
        The members' shapes of the key have different numbers of dims.
    """

    key: NestedPath
    kind: str
    class_name: str
    dtype: str | None
    shape: tuple[int, ...] | None
    members: int
    ranks_differ: bool = False

    def stacked_shape(self, count: int, stack_dim: int) -> tuple[int, ...] | None:
        """The key's shape in the stack of ``count`` members, as tensordict's
        ``get_item_shape`` gives it (``(-1,)`` when the ranks differ, as there)."""
        shape = self.shape
        if shape is None or self.ranks_differ:
            return shape
        dim = stack_dim if stack_dim >= 0 else stack_dim + len(shape) + 1
        return shape[:dim] + (count,) + shape[dim:]

    def text(self) -> str:
        """``"next/obs: float32[-1, 4]"``; ``" (2 of 3 members)"`` for an exclusive key
        (``total`` members) is added by :func:`schema_lines`."""
        what = (
            self.dtype.removeprefix("torch.")
            if self.dtype is not None
            else "mixed dtypes"
            if self.kind == LEAF
            else self.class_name
        )
        shape = "[?]" if self.shape is None else "[" + ", ".join(map(str, self.shape)) + "]"
        return f"{'/'.join(self.key)}: {what}{shape}"


def stack_members(ckpt: Tree, node: Node) -> tuple[list[Node], int] | None:
    """The members of a lazy stack, or of a tensorclass over one (a stacked torchrl
    ``History``), and the stack dim; None for any other node."""
    meta = node.meta
    if isinstance(meta, TensorclassNode):
        inner = ckpt._loading.inner(node)
        if inner is None or not isinstance(inner.meta, LazyStackNode):
            return None
        members = [c for c in ckpt.children(node) if c.dirkey is not None]
        return members, inner.meta.stack_dim
    if isinstance(meta, LazyStackNode) and has_members(meta):
        return ckpt.children(node), meta.stack_dim
    return None


def stack_schema(ckpt: Tree, node: Node, *, _depth: int = 0) -> list[SchemaEntry] | None:
    """The merged schema of a lazy stack (or of a tensorclass over one), keys in the
    order the members first hold them; None for any other node.

    Examples
    --------
    >>> ckpt = Checkpoint("episodes.tdz")                               # doctest: +SKIP
    >>> [e.text() for e in stack_schema(ckpt, ckpt.root)]              # doctest: +SKIP
    ['obs: float32[-1, 4]', 'reward: float32[-1, 1]']
    """
    found = stack_members(ckpt, node)
    if found is None:
        return None
    # key -> [kind, class, dtype, shape, members, ranks differ]
    merged: dict[NestedPath, list] = {}
    for member in found[0]:
        for key, (kind, class_name, dtype, shape) in _member_facts(ckpt, member, _depth):
            entry = merged.get(key)
            if entry is None:
                merged[key] = [kind, class_name, dtype, shape, 1, False]
                continue
            if entry[2] != dtype:
                entry[2] = None
            before = entry[3]
            if shape is None or before is None:
                entry[3] = None  # unknown in one member: unknown
            elif entry[5] or len(before) != len(shape):
                entry[3], entry[5] = (-1,), True
            else:
                entry[3] = tuple(x if x == y else -1 for x, y in zip(before, shape, strict=True))
            entry[4] += 1
    return [SchemaEntry(key, *facts) for key, facts in merged.items()]


def schema_lines(entries: list[SchemaEntry], total: int) -> list[str]:
    """One line per entry; an exclusive key says how many of the ``total`` members
    hold it."""
    return [
        entry.text() + ("" if entry.members == total else f" ({entry.members} of {total} members)")
        for entry in entries
    ]


def _member_facts(ckpt: Tree, member: Node, depth: int) -> Iterator[tuple[NestedPath, _Fact]]:
    """Every key below one member, depth-first in load order, with what it is there. A
    lazy stack (the member, or a node below it) gives its own schema's keys, stacked."""
    if depth < _MAX_STACK_DEPTH and stack_members(ckpt, member) is not None:
        yield from _stacked_facts(ckpt, member, (), depth)
        return
    base = len(member.path)
    stack = [(iter(ckpt.children(member)), ckpt.batch_size(member))]
    while stack:
        child = next(stack[-1][0], None)
        if child is None:
            stack.pop()
            continue
        key = child.path[base:]
        parent_batch = stack[-1][1]
        record = child.record
        if child.is_leaf and record is not None:
            shape = None if record.is_nested else tuple(record.shape)
            yield key, (LEAF, "Tensor", record.dtype.name, shape)
            continue
        if child.kind == NON_TENSOR:  # broadcast to its parent's batch size on load
            yield key, (NON_TENSOR, child.class_name, None, parent_batch)
            continue
        batch = ckpt.batch_size(child)
        yield key, (child.kind, child.class_name, None, batch)
        if child.kind not in (TENSORDICT, TENSORCLASS, LAZY_STACK):
            continue
        if stack_members(ckpt, child) is None:
            stack.append((iter(ckpt.children(child)), batch))
        elif depth < _MAX_STACK_DEPTH:
            yield from _stacked_facts(ckpt, child, key, depth)


def _stacked_facts(
    ckpt: Tree, node: Node, prefix: NestedPath, depth: int
) -> Iterator[tuple[NestedPath, _Fact]]:
    """The keys of a lazy stack's schema under ``prefix``, with their stacked shapes."""
    found = stack_members(ckpt, node)
    assert found is not None
    count, dim = len(found[0]), found[1]
    for entry in stack_schema(ckpt, node, _depth=depth + 1) or ():
        yield (
            prefix + entry.key,
            (entry.kind, entry.class_name, entry.dtype, entry.stacked_shape(count, dim)),
        )
