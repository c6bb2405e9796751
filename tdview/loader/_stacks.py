"""NonTensorStack nodes that keep their values as nested lists (JSON or ``pickle.pkl``).

The values are rebuilt as tensordict rebuilds them: a list level in which every item is a
list, all of the same length, becomes one more stack dimension; any other list level
becomes a stack of NonTensorData (batch ``[]``, the node's saved device). Every rebuilt
stack has ``stack_dim=0``. As in tensordict, a stack whose values are themselves lists of
equal length therefore comes back with one more dimension.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from tensordict import NonTensorData, NonTensorStack

from ..errors import CheckpointFormatError
from ..format import NonTensorStackNode
from ..index import Node
from ._context import LoadContext
from ._pickles import unpickle_file

__all__ = ["from_lists", "stack_values"]

# Values NonTensorStack(*values) wraps as NonTensorData itself, on its fast path.
_FLAT = frozenset({str, int, float, bool, bytes, type(None)})
_EMPTY = torch.Size([])


def stack_values(ctx: LoadContext, node: Node, meta: NonTensorStackNode) -> NonTensorStack:
    """The NonTensorStack of a node whose values are stored as lists.

    Raises
    ------
    PickleRefusedError
        The values are in ``pickle.pkl`` and ``allow_pickle`` is False.
    CheckpointFormatError
        ``pickle.pkl`` does not hold a list.
    """
    if meta.pickled:
        key = f"{node.dirkey}/pickle.pkl" if node.dirkey else "pickle.pkl"
        values = unpickle_file(ctx.store, key, ctx.allow_pickle)
        if not isinstance(values, (list, tuple)):
            raise CheckpointFormatError(
                f"{ctx.store.display(key)}: expected a pickled list of values, got "
                f"{type(values).__name__}"
            )
    else:
        values = copy.deepcopy(meta.data)  # the index's cache must not reach the user
    device = torch.device(meta.device) if meta.device is not None else None
    return from_lists(values, device)


def from_lists(values: Any, device: torch.device | None) -> NonTensorStack:
    """Rebuild a NonTensorStack from nested lists of values.

    Examples
    --------
    >>> from_lists([["a", "b"], ["c", "d"]], None).batch_size
    torch.Size([2, 2])
    >>> from_lists([[1], [2, 3]], None).tolist()
    [[1], [2, 3]]
    """
    if all(isinstance(item, list) for item in values) and all(
        len(item) == len(values[0]) for item in values
    ):
        return NonTensorStack(*(from_lists(item, device) for item in values), stack_dim=0)
    if device is None:
        # plain values take NonTensorStack's fast path, which wraps them itself
        members = [item if type(item) in _FLAT else _element(item, None) for item in values]
    else:
        members = [_element(item, device) for item in values]
    return NonTensorStack(*members, stack_dim=0)


def _element(value: Any, device: torch.device | None) -> NonTensorData:
    return NonTensorData(data=value, device=device, batch_size=_EMPTY)
