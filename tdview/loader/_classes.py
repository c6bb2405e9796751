"""Which Python class a saved node becomes, found by name among the classes already defined.

A node names its class as ``"_type"`` (``str(cls)``) and, since format version 1,
``"_class"`` (``"module:qualname"``, with ``tensordict`` for the classes tensordict
exports). The class is looked up among those tensordict registered in this process
(``tensordict.base._ACCEPTED_CLASSES``: its own classes, and every tensorclass defined so
far), first by ``"_class"`` and then by ``"_type"``, as tensordict's loader does. A module
named in a checkpoint is never imported: a class that is not defined yet is an error that
says which module to import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensordict
import tensordict.base
from tensordict import (
    LazyStackedTensorDict,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
    is_tensorclass,
)
from tensordict._lazy import _CustomOpTensorDict
from tensordict._td import _SubTensorDict

from .._cache import BoundedCache
from ..errors import CheckpointFormatError
from ..format import NodeMeta, TensorDictNode

__all__ = ["Loader", "class_id", "loader_kind", "resolve_class", "saved_as_tensordict"]

# The loader kinds: how a node of a given class is rebuilt.
Loader = str
TENSORDICT, TENSORCLASS, NON_TENSOR_STACK, LAZY_STACK, VIEW, SUB = (
    "tensordict",
    "tensorclass",
    "non_tensor_stack",
    "lazy_stack",
    "view",
    "sub_tensordict",
)

_TD_NAME = str(TensorDict)
_TD_ID = "tensordict:TensorDict"

# (registry tuple, {class id: cls}, {str(cls): cls}); rebuilt when the registry changes,
# which tensordict does by rebinding the tuple each time a class is registered.
_lookup: tuple[Any, dict[str, type], dict[str, type]] = ((), {}, {})


def class_id(cls: type) -> str:
    """The ``"_class"`` string of a class: ``"module:qualname"``.

    The module is ``tensordict`` when the top-level package exports the class.

    Examples
    --------
    >>> class_id(TensorDict)
    'tensordict:TensorDict'
    """
    module = cls.__module__
    if getattr(tensordict, cls.__qualname__, None) is cls:
        module = "tensordict"
    return f"{module}:{cls.__qualname__}"


def _tables() -> tuple[dict[str, type], dict[str, type]]:
    """The registry as two dicts; the first class in registry order wins, as in a scan."""
    global _lookup
    registry = tensordict.base._ACCEPTED_CLASSES
    if _lookup[0] is not registry:
        by_id: dict[str, type] = {}
        by_name: dict[str, type] = {}
        for cls in registry:
            by_id.setdefault(class_id(cls), cls)
            by_name.setdefault(str(cls), cls)
        _lookup = (registry, by_id, by_name)
    return _lookup[1], _lookup[2]


def saved_as_tensordict(meta: NodeMeta) -> bool:
    """Whether a node is a plain TensorDict saved as one: its class and loader are known
    without a look-up (nearly every node of a checkpoint)."""
    return type(meta) is TensorDictNode and (meta.type_name == _TD_NAME or meta.class_id == _TD_ID)


def resolve_class(meta: NodeMeta, where: str) -> type:
    """Return the class a node was saved as, among the classes defined in this process.

    Parameters
    ----------
    meta : NodeMeta
        The parsed ``meta.json`` (its ``type_name`` and ``class_id``).
    where : str
        The node's folder, named in the error.

    Raises
    ------
    RuntimeError
        No registered class matches (the class's module was not imported, or the class
        was defined in a script that is not running).

    Examples
    --------
    >>> from tdview.format import parse_node
    >>> meta = parse_node({"_type": "<class 'tensordict._td.TensorDict'>"}, "m")
    >>> resolve_class(meta, "/ckpt").__name__
    'TensorDict'
    """
    type_name, saved_id = meta.type_name, meta.class_id
    if type_name == _TD_NAME or saved_id == _TD_ID:
        return TensorDict
    by_id, by_name = _tables()
    found = by_id.get(saved_id) if saved_id is not None else None
    if found is None:
        found = by_name.get(type_name)
    if found is not None:
        return found
    # Saved under another module path (an old one, or a script's __main__): accept
    # TensorDict by its qualname, but never a __main__-nested or <locals> class.
    saved = type_name.removeprefix("<class '").removesuffix("'>")
    module = saved.removesuffix(".TensorDict")
    if module != saved and not module.startswith("__main__.") and "<locals>" not in module:
        return TensorDict
    raise RuntimeError(
        f"Could not find the class {saved} saved in {where}. Import the module that "
        f"defines it (or run the code that defines {saved.rpartition('.')[2]}) before "
        "loading: tdview never imports a module named in a checkpoint."
    )


def loader_kind(cls: type, meta: NodeMeta, where: str) -> tuple[Loader, Callable | None]:
    """How a node of class ``cls`` is rebuilt: ``(kind, wrap)``.

    ``wrap`` post-processes the TensorDict of a ``TypedTensorDict`` subclass, else None.

    Raises
    ------
    CheckpointFormatError
        The class is not a tensor collection, or the node's layout does not fit it.
    """
    found = _KINDS.get((cls, meta.kind))
    if found is not None:
        return found
    found = _loader_kind(cls, meta, where)
    return _KINDS.put((cls, meta.kind), found)


# (class, node layout) -> loader_kind(): the answer depends on these two alone.
_KINDS: BoundedCache[tuple[type, str], tuple[Loader, Callable | None]] = BoundedCache(1024)


def _loader_kind(cls: type, meta: NodeMeta, where: str) -> tuple[Loader, Callable | None]:
    if is_tensorclass(cls):
        kind = TENSORCLASS
    elif issubclass(cls, NonTensorStack):
        kind = NON_TENSOR_STACK
    elif issubclass(cls, LazyStackedTensorDict):
        kind = LAZY_STACK
    elif issubclass(cls, _CustomOpTensorDict):
        kind = VIEW
    elif issubclass(cls, _SubTensorDict):
        kind = SUB
    elif isinstance(cls, type) and issubclass(cls, TensorDictBase):
        kind = TENSORDICT
    else:
        raise CheckpointFormatError(
            f"{where}: the saved class {cls} is not a tensor collection tdview can rebuild."
        )
    expected = _LAYOUTS[kind]
    if meta.kind not in expected:
        raise CheckpointFormatError(
            f"{where}: the node is laid out as a {meta.kind.replace('_', ' ')} node, which "
            f"does not fit its class {cls.__qualname__}."
        )
    wrap = None
    if kind == TENSORDICT and not issubclass(cls, TensorDict):
        wrap = getattr(cls, "_wrap_td", None)  # TypedTensorDict wraps a loaded TensorDict
    return kind, wrap


# The node layouts (format kinds) each loader accepts.
_LAYOUTS = {
    TENSORDICT: ("tensordict",),
    TENSORCLASS: ("tensorclass", "non_tensor_data"),
    NON_TENSOR_STACK: ("non_tensor_stack", "lazy_stack"),
    LAZY_STACK: ("lazy_stack", "non_tensor_stack"),
    VIEW: ("view",),
    SUB: ("sub_tensordict",),
}
