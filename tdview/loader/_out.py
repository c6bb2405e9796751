"""Loading into an existing tensordict (``out=``), as tensordict's loader does.

* The nested tensordicts of ``out`` are reused (loaded into), its leaves are replaced by
  the loaded tensors, and its keys that the checkpoint lacks are deleted.
* If ``out`` has a device, the data is loaded there; another ``device`` is a ValueError
  (a device type without an index matches any index of that type).
* A tensorclass ``out`` is reused only when it is of the saved class (compared by name);
  a TensorDict saved node loaded into a tensorclass goes into its ``_tensordict``.
* A lazy stack is loaded member by member into ``out`` unbound along the stack dim; the
  number of members must match.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase, is_tensor_collection, is_tensorclass
from tensordict._td import _SubTensorDict

__all__ = [
    "check_out",
    "delete_stale",
    "member_outs",
    "out_device",
    "reusable",
    "sub_out",
    "tensorclass_out",
]


def check_out(out: object) -> None:
    """Raise ``TypeError`` unless ``out`` is None, a tensordict or a tensorclass.

    Examples
    --------
    >>> check_out(3)
    Traceback (most recent call last):
    ...
    TypeError: out must be a tensordict or a tensorclass instance, got int.
    """
    if out is not None and not is_tensor_collection(type(out)):
        raise TypeError(
            f"out must be a tensordict or a tensorclass instance, got {type(out).__name__}."
        )


def out_device(out: Any, device: torch.device | None) -> torch.device | None:
    """The device to load on when loading into ``out``.

    Raises
    ------
    ValueError
        ``out`` has a device and ``device`` names another one.

    Examples
    --------
    >>> from tensordict import TensorDict
    >>> out_device(TensorDict(device="cpu"), None)
    device(type='cpu')
    """
    current = out.device
    if current is None:
        return device
    if device is not None and (
        device.type != current.type
        or (
            device.index is not None and current.index is not None and device.index != current.index
        )
    ):
        raise ValueError(
            f"Cannot load a tensordict on device {device} into a tensordict on device {current}."
        )
    return current


def reusable(result: TensorDictBase, key: str) -> Any:
    """The collection at ``key`` of ``result`` to load into, or None (a leaf is replaced)."""
    existing = result._get_str(key, default=None)
    if existing is not None and not is_tensor_collection(type(existing)):
        return None
    return existing


def delete_stale(result: TensorDictBase, loaded: set[str]) -> None:
    """Delete the keys of ``result`` that the load did not produce."""
    for key in list(result.keys()):
        if key not in loaded:
            result.del_(key)


def tensorclass_out(out: Any, cls: type) -> tuple[Any, Any]:
    """``(tensorclass to reuse or None, tensordict to load the fields into or None)``.

    A tensorclass ``out`` is reused when its class has the saved class's name; any other
    tensor collection receives the fields directly.
    """
    if out is None or not is_tensorclass(out):
        return None, out
    if str(type(out)) != str(cls):
        return None, None
    return out, out._tensordict


def member_outs(out: Any, stack_dim: int, count: int) -> list[Any]:
    """``out`` unbound along ``stack_dim``, one per saved member.

    Raises
    ------
    ValueError
        The number of saved members differs from ``out``'s.
    """
    if out is None:
        return [None] * count
    members = out.unbind(stack_dim)
    if len(members) != count:
        raise ValueError(
            f"Cannot load {count} stacked tensordicts into a stack of {len(members)} tensordicts."
        )
    return list(members)


def sub_out(out: Any) -> Any:
    """The source of a ``_SubTensorDict`` ``out`` (the only kind that can receive one).

    Raises
    ------
    TypeError
        ``out`` is not a ``_SubTensorDict``.
    """
    if not isinstance(out, _SubTensorDict):
        raise TypeError(
            f"Loading a _SubTensorDict into a {type(out).__name__} output is not supported. "
            "Provide a _SubTensorDict as `out` or None."
        )
    return out._source
