"""One node of the index: what a level or a leaf of the checkpoint is, from metadata alone."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..format import CollectionRecord, LeafRecord, NodeMeta, TensorDictNode
from ._paths import NestedPath

# Node kinds as the index and the widget name them.
TENSORDICT = "tensordict"
TENSORCLASS = "tensorclass"
LAZY_STACK = "lazy_stack"
NON_TENSOR = "non_tensor"
NON_TENSOR_STACK = "non_tensor_stack"
VIEW = "view"
LEAF = "leaf"

_FORMAT_KINDS = {
    "tensordict": TENSORDICT,
    "tensorclass": TENSORCLASS,
    "lazy_stack": LAZY_STACK,
    "non_tensor_data": NON_TENSOR,
    "non_tensor_stack": NON_TENSOR_STACK,
    "view": VIEW,
    "sub_tensordict": VIEW,
}


def index_kind(meta: NodeMeta) -> str:
    """The index kind of a parsed node."""
    return _FORMAT_KINDS[meta.kind]


@dataclass(eq=False, slots=True)
class Node:
    """A node of the checkpoint tree.

    A *collection* node has ``dirkey`` (its folder in the store) and, once read, ``meta``;
    a *leaf* has ``record`` and ``file`` (the store key of its ``.memmap``, or ``None``
    when no file exists). A tensorclass's JSON fields appear as ``non_tensor`` children
    with ``value`` set and no folder. ``problems`` collects what is wrong with this node
    alone, so that one bad node never hides the rest of the tree.
    """

    path: NestedPath
    kind: str
    dirkey: str | None = None
    meta: NodeMeta | None = None
    record: LeafRecord | None = None
    file: str | None = None
    sizes_file: str | None = None
    value: Any = None
    has_value: bool = False
    type_hint: str | None = None
    problems: list[str] = field(default_factory=list)
    # Filled on first use by the checkpoint.
    children_cache: dict[str, Node] | None = None
    children_order: tuple[Node, ...] = ()  # the same children, to page through by index
    rollup_cache: Any = None
    # Children found one by one (``Checkpoint.lookup``) before the whole list was read,
    # and the ``_tensordict`` node of a tensorclass (``LoadAccess.inner``; None: none).
    lookup_cache: dict[str, Node] = field(default_factory=dict)
    inner_cache: Node | None = None
    inner_known: bool = False

    @property
    def key(self) -> str:
        return self.path[-1] if self.path else ""

    @property
    def is_leaf(self) -> bool:
        return self.kind == LEAF

    @property
    def class_name(self) -> str:
        if self.meta is not None:
            return self.meta.class_name
        if self.record is not None:
            return "Tensor"
        return self.type_hint or ""


class LeafFile(NamedTuple):
    """A plain (not nested) leaf whose file exists, as a loader or a walk takes it: no
    node is built for it (a load of 10,000 leaves builds none)."""

    record: LeafRecord
    file: str  # the store key of its ``.memmap``

    @property
    def key(self) -> str:
        return self.record.key


class SubFolder(NamedTuple):
    """A collection child of a plain TensorDict, not made into a node yet (a rollup
    totals it by its folder)."""

    path: NestedPath
    dirkey: str | None  # None when its folder is missing
    type_hint: str | None


class PlainFolder(NamedTuple):
    """A collection child whose folder holds a TensorDict node (its ``meta.json`` read and
    parsed), as a loader takes it: recursed into without a node (a load of 10,000
    folders builds none)."""

    record: CollectionRecord
    dirkey: str  # its folder's store key
    meta: TensorDictNode
    #: its ``meta.json`` was read from inside the root (no link out of it to ask about)
    inside: bool = False


#: A child as :meth:`~tdview.index.LoadAccess.load_items` gives it (and a
#: :class:`PlainFolder`, where asked for).
LoadItem = Node | LeafFile
