"""Numbers of a node checked against the batch dims they apply to.

A ``meta.json`` alone cannot say whether a lazy stack's ``stack_dim`` fits its members,
whether a lazy view's dims fit its source or whether a ``_SubTensorDict``'s index stays
inside its source's batch: that needs the batch size of another folder. The index
checks them when it reads the node's members or source (its children), and records what
is wrong as a problem of the node; the loader raises the same text as a
:class:`~tdview.errors.CheckpointFormatError` before it builds anything (tensordict would
end in an ``OverflowError`` or ``IndexError`` naming no file, or build a view that fails
on first use). Each message names the ``meta.json``, the key, the field and its value.
"""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

from ..format import (
    LazyStackNode,
    NonTensorStackNode,
    SubTensorDictNode,
    TensorDictNode,
    ViewNode,
    index_problem,
)
from ._paths import join_key, show_path

if TYPE_CHECKING:
    from ._loading import Indexed as Checkpoint  # typed by what it reads: no circle
    from ._node import Node

__all__ = ["nested_batch_problems", "range_problem"]


def range_problem(ckpt: Checkpoint, node: Node) -> str | None:
    """What is wrong with the node's dims, stack dim or index against the batch sizes of
    its members or source, or None (also when those are unknown).

    Examples
    --------
    >>> range_problem(ckpt, ckpt.node("episodes"))                   # doctest: +SKIP
    "/ck/episodes/meta.json: 'episodes': field \\"stack_dim\\" is 5, out of range for ..."
    """
    meta = node.meta
    if isinstance(meta, (LazyStackNode, NonTensorStackNode)):
        problem = _stack_problem(ckpt, node, meta)
    elif isinstance(meta, ViewNode):
        problem = _view_problem(meta, _source_batch(ckpt, node))
    elif isinstance(meta, SubTensorDictNode):
        batch = _source_batch(ckpt, node)
        problem = None if batch is None else _sub_problem(meta, batch)
    else:
        return None
    if problem is None:
        return None
    where = ckpt.store.display(join_key(node.dirkey or "", "meta.json"))
    return f"{where}: {show_path(node.path)!r}: {problem}"


def nested_batch_problems(ckpt: Checkpoint, node: Node, children: list[Node]) -> None:
    """Add a problem to each child TensorDict (or lazy view) of a TensorDict whose batch
    size does not
    start with the parent's (the loader refuses it, tensordict's ``_set_str`` too). Only
    children whose ``meta.json`` says their batch size are looked at: nothing more is
    read."""
    meta = node.meta
    if type(meta) is not TensorDictNode or not meta.batch_size:
        return
    batch, dims = meta.batch_size, len(meta.batch_size)
    for child in children:
        child_meta = child.meta
        if (
            isinstance(child_meta, (TensorDictNode, ViewNode))
            and child_meta.batch_size is not None
            and child_meta.batch_size[:dims] != batch
        ):
            where = ckpt.store.display(join_key(child.dirkey or "", "meta.json"))
            child.problems.append(
                f'{where}: {show_path(child.path)!r}: field "shape" is '
                f"{list(child_meta.batch_size)}, which does not start with the batch size "
                f"{list(batch)} of its parent {show_path(node.path)!r}"
            )


def _stack_problem(
    ckpt: Checkpoint, node: Node, meta: LazyStackNode | NonTensorStackNode
) -> str | None:
    if meta.stack_dim is None or (isinstance(meta, NonTensorStackNode) and not meta.members_lazy):
        return None  # rebuilt from its values with stack_dim 0 (tensordict ignores it)
    members = ckpt.children(node)
    if not members:
        return None
    batch = ckpt.batch_size(members[0])
    if batch is None:
        return None
    dims = len(batch)
    if -(dims + 1) <= meta.stack_dim <= dims:
        return None
    return (
        f'field "stack_dim" is {meta.stack_dim}, out of range for members of {dims} '
        f"batch dim{'' if dims == 1 else 's'} (from {-(dims + 1)} to {dims})"
    )


def _source_batch(ckpt: Checkpoint, node: Node) -> tuple[int, ...] | None:
    children = ckpt.children(node)
    return ckpt.batch_size(children[0]) if children else None


def _in(dim: int, dims: int) -> bool:
    return -dims <= dim < dims


def _view_problem(meta: ViewNode, batch: tuple[int, ...] | None) -> str | None:
    """The lazy view's operation against its source's batch ``batch`` (as tensordict's
    ``_UnsqueezedTensorDict``... replay it), and its recorded batch size against the
    result."""
    if batch is None:
        return None
    op, kwargs, n = meta.custom_op, meta.custom_op_kwargs, len(batch)
    field = f'field "custom_op_kwargs" of {op}'
    result: tuple[int, ...] | None = None
    if op == "unsqueeze":
        dim = kwargs["dim"]
        if not -(n + 1) <= dim <= n:
            return f"{field}: dim {dim} is out of range for a source of {n} batch dims"
        dim = dim if dim >= 0 else dim + n + 1
        result = batch[:dim] + (1,) + batch[dim:]
    elif op == "squeeze":
        dims = kwargs.get("dim", ())
        dims = dims if isinstance(dims, tuple) else (dims,)
        bad = [d for d in dims if not _in(d, n)]
        if bad:
            return f"{field}: dim {bad[0]} is out of range for a source of {n} batch dims"
        gone = {d % n for d in dims} if dims else {i for i, s in enumerate(batch) if s == 1}
        result = tuple(s for i, s in enumerate(batch) if i not in gone or s != 1)
    elif op == "transpose":
        d0, d1 = kwargs["dim0"], kwargs["dim1"]
        for dim in (d0, d1):
            if not _in(dim, n):
                return f"{field}: dim {dim} is out of range for a source of {n} batch dims"
        swapped = list(batch)
        swapped[d0 % n], swapped[d1 % n] = swapped[d1 % n], swapped[d0 % n]
        result = tuple(swapped)
    elif op == "permute":
        dims = kwargs["dims"]
        if len(dims) != n or not all(_in(d, n) for d in dims) or len({d % n for d in dims}) != n:
            return f"{field}: dims {list(dims)} are no permutation of {n} batch dims"
        result = tuple(batch[d % n] for d in dims)
    elif op == "view":
        size = kwargs["size"]
        numel = prod(batch)
        free = [s for s in size if s == -1]
        known = prod(s for s in size if s != -1)
        if (
            any(s < -1 for s in size)
            or len(free) > 1
            or (known != numel if not free else known == 0 or numel % known)
        ):
            return f"{field}: size {list(size)} does not hold the {numel} items of {list(batch)}"
        result = tuple(numel // known if s == -1 else s for s in size)
    if -1 in batch or result is None or meta.batch_size is None or meta.batch_size == result:
        return None
    return (
        f'field "shape" is {list(meta.batch_size)}, but {op} of its source\'s batch '
        f"{list(batch)} is {list(result)}"
    )


def _sub_problem(meta: SubTensorDictNode, batch: tuple[int, ...]) -> str | None:
    problem = index_problem(meta.index, batch)
    if problem is None:
        return None
    return f'field "index": {problem} (its source\'s batch size is {list(batch)})'
