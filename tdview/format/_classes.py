"""Which kind of node a ``meta.json`` describes, from its class strings.

A node names its class twice: ``"_type"`` is Python's ``str(cls)``
(``"<class 'tensordict._td.TensorDict'>"``) and, since format version 1 and only
on non-tensorclass nodes, ``"_class"`` is ``"module:qualname"`` with the public
``tensordict`` module for exported classes (``"tensordict:TensorDict"``). Nothing
named here is ever imported: the class is matched by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .._cache import BoundedCache
from ..errors import CheckpointFormatError
from ._fields import short_repr

__all__ = ["ClassRef", "NodeKind", "builtin_kind", "classify", "parse_class_id", "parse_type_name"]


class NodeKind:
    """The node kinds, as plain strings (also each node class's ``kind``)."""

    TENSORDICT = "tensordict"
    TENSORCLASS = "tensorclass"
    NON_TENSOR_DATA = "non_tensor_data"
    NON_TENSOR_STACK = "non_tensor_stack"
    LAZY_STACK = "lazy_stack"
    VIEW = "view"
    SUB_TENSORDICT = "sub_tensordict"


# tensordict's own classes (any module under ``tensordict``), by qualname.
_BUILTIN: dict[str, str] = {
    **dict.fromkeys(
        (
            "TensorDict",
            "TensorDictBase",
            "TensorDictParams",
            "PersistentTensorDict",
            "TensorDictStore",
            "LazyStackedTensorDictStore",
            "TypedTensorDict",
        ),
        NodeKind.TENSORDICT,
    ),
    "LazyStackedTensorDict": NodeKind.LAZY_STACK,
    "NonTensorStack": NodeKind.NON_TENSOR_STACK,
    "NonTensorData": NodeKind.NON_TENSOR_DATA,
    "NonTensorDataBase": NodeKind.NON_TENSOR_DATA,
    "MetaData": NodeKind.NON_TENSOR_DATA,
    "_SubTensorDict": NodeKind.SUB_TENSORDICT,
    **dict.fromkeys(
        (
            "_CustomOpTensorDict",
            "_PermutedTensorDict",
            "_TransposedTensorDict",
            "_UnsqueezedTensorDict",
            "_SqueezedTensorDict",
            "_ViewedTensorDict",
        ),
        NodeKind.VIEW,
    ),
}

# (type name, class id) -> classify()'s answer, for tensordict's own classes only (a
# user class's kind also depends on the node's layout). Bounded: hostile checkpoints
# may name many classes.
_BUILTIN_CACHE: BoundedCache[tuple[str, str | None], tuple[str, ClassRef, bool]]
# (type name, class id) -> the two names parsed (parse_class_id, parse_type_name): what a
# user class's look-up repeats on every load of a tensorclass. Bounded in the same way.
_REF_CACHE: BoundedCache[tuple[str, str | None], tuple[ClassRef | None, ClassRef | None]]
_CACHE_SIZE = 256
_BUILTIN_CACHE, _REF_CACHE = BoundedCache(_CACHE_SIZE), BoundedCache(_CACHE_SIZE)

_TYPE_NAME = re.compile(r"<class '(.+)'>", re.DOTALL)
_SUBSCRIPT = re.compile(r"^(NonTensorData|MetaData)\[.*\]$", re.DOTALL)


@dataclass(frozen=True)
class ClassRef:
    """A class as the checkpoint names it (never imported).

    Attributes
    ----------
    module : str
        E.g. ``"tensordict._td"`` or ``"__main__"``.
    qualname : str
        E.g. ``"TensorDict"``, ``"MetaData[str]"``, ``"f.<locals>.TC"``.
    """

    module: str
    qualname: str

    @property
    def dotted(self) -> str:
        """``module.qualname``, as in ``str(cls)``."""
        return f"{self.module}.{self.qualname}" if self.module else self.qualname

    @property
    def name(self) -> str:
        """The last component of the qualname (``"TC"`` for ``"f.<locals>.TC"``)."""
        return _split_dotted(self.qualname)[-1]

    @property
    def in_tensordict(self) -> bool:
        """Whether the module is ``tensordict`` or one of its submodules."""
        return self.module == "tensordict" or self.module.startswith("tensordict.")


def parse_type_name(type_name: str) -> ClassRef | None:
    """Split ``"<class 'pkg.mod.Name'>"`` into module and qualname.

    The split is at the last dot outside brackets, or before the function that
    holds ``<locals>``. A nested class (``pkg.mod.Outer.Inner``) cannot be told
    from a module path, and reads as module ``pkg.mod.Outer``.

    Returns
    -------
    ClassRef or None
        None if the string is not of the ``<class '...'>`` form.

    Examples
    --------
    >>> parse_type_name("<class 'tensordict.tensorclass.MetaData[str]'>")
    ClassRef(module='tensordict.tensorclass', qualname='MetaData[str]')
    >>> parse_type_name("<class '__main__.f.<locals>.TC'>")
    ClassRef(module='__main__', qualname='f.<locals>.TC')
    """
    match = _TYPE_NAME.fullmatch(type_name)
    if match is None:
        return None
    parts = _split_dotted(match.group(1))
    if "<locals>" in parts[1:]:
        start = max(parts.index("<locals>") - 1, 1)
    else:
        start = len(parts) - 1
    return ClassRef(".".join(parts[:start]), ".".join(parts[start:]))


def parse_class_id(class_id: str) -> ClassRef | None:
    """Split ``"module:qualname"``; None if it has not exactly that form.

    Examples
    --------
    >>> parse_class_id("tensordict._lazy:_PermutedTensorDict")
    ClassRef(module='tensordict._lazy', qualname='_PermutedTensorDict')
    """
    module, sep, qualname = class_id.partition(":")
    if not sep or not module or not qualname or ":" in qualname:
        return None
    return ClassRef(module, qualname)


def builtin_kind(ref: ClassRef) -> str | None:
    """The node kind of one of tensordict's own classes, else None."""
    if not ref.in_tensordict:
        return None
    kind = _BUILTIN.get(ref.qualname)
    if kind is None and _SUBSCRIPT.match(ref.qualname):
        kind = NodeKind.NON_TENSOR_DATA
    return kind


def classify(meta: dict, where: str) -> tuple[str, ClassRef, bool]:
    """Decide the node kind of a decoded ``meta.json``.

    Dispatch follows the reference: ``"_class"`` first, then ``"_type"``. A class
    that is not tensordict's own is a user class; its kind follows the layout
    (``"_class"`` is only written on non-tensorclass nodes):

    * with ``"_class"``: a lazy stack if ``"stack_dim"`` is an integer and there
      is no ``"shape"``, else a TensorDict subclass;
    * without: a TensorDict subclass if ``"shape"`` is a list and ``"device"`` is
      present (an older TensorDict subclass), a NonTensorData subclass if
      ``"_is_non_tensor"`` is true, else a tensorclass.

    Returns
    -------
    (kind, class_ref, builtin)

    Raises
    ------
    CheckpointFormatError
        ``"_type"`` is missing or not a string, or no class can be read from it.
    """
    if "_type" not in meta:
        raise CheckpointFormatError(f'{where}: no "_type" field (every node names its class there)')
    type_name = meta["_type"]
    if not isinstance(type_name, str):
        raise CheckpointFormatError(
            f'{where}: field "_type": expected a string, got {short_repr(type_name)}'
        )
    class_id = meta.get("_class")
    if not isinstance(class_id, str):
        class_id = None
    cache_key = (type_name, class_id)
    found = _BUILTIN_CACHE.get(cache_key)
    if found is not None:
        return found
    refs = _REF_CACHE.get(cache_key)
    if refs is None:
        # a user class: its kind depends on the layout too, but its names do not
        refs = (
            parse_class_id(class_id) if class_id is not None else None,
            parse_type_name(type_name),
        )
        _REF_CACHE.put(cache_key, refs)
    id_ref, type_ref = refs
    for ref in (id_ref, type_ref):
        if ref is not None and (kind := builtin_kind(ref)) is not None:
            # tensordict's own classes depend on the two strings alone: remember them
            return _BUILTIN_CACHE.put(cache_key, (kind, ref, True))
    if id_ref is not None:
        if type(meta.get("stack_dim")) is int and "shape" not in meta:
            return NodeKind.LAZY_STACK, id_ref, False
        return NodeKind.TENSORDICT, id_ref, False
    if type_ref is None:
        raise CheckpointFormatError(
            f'{where}: field "_type": cannot read a class from {short_repr(type_name)} '
            "(expected \"<class 'module.Name'>\")"
        )
    if isinstance(meta.get("shape"), list) and "device" in meta:
        return NodeKind.TENSORDICT, type_ref, False
    if meta.get("_is_non_tensor") is True:
        return NodeKind.NON_TENSOR_DATA, type_ref, False
    return NodeKind.TENSORCLASS, type_ref, False


def _split_dotted(name: str) -> list[str]:
    """Split a dotted name at the dots that are outside brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(name):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(depth - 1, 0)
        elif char == "." and depth == 0:
            parts.append(name[start:i])
            start = i + 1
    parts.append(name[start:])
    return parts
