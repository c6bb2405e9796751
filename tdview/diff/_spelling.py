"""Keys paired across two spellings of one module: a ``/`` tree and dotted names.

``TensorDict.from_module(m).memmap(d)`` nests ``layers/0/weight``; a safetensors file
of ``m.state_dict()`` is grouped by ``.`` into the same folders; a flat
``TensorDict(m.state_dict())`` keeps ``layers.0.weight`` as one key. The metadata tier
pairs keys of one level by name; where a key of one side has no partner, the keys of
the other side that spell its subtree in their names (``layers.0.weight`` under a node
``layers``) are gathered in a :class:`Group` that stands for the missing node. The
pairing uses :func:`dotted`, the dotted form of a path, and nothing else; rows keep each
side's real path (:attr:`~tdview.diff.Row.path_a`, :attr:`~tdview.diff.Row.path_b`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..index import NestedPath

#: A key of one level: ``(key it pairs by, its real key, the index item)``.
Keyed = tuple[str, str, Any]


def dotted(path: NestedPath) -> str:
    """The dotted form of a path, which pairs keys across spellings (never shown).

    Examples
    --------
    >>> dotted(("layers", "0", "weight")) == dotted(("layers.0", "weight"))
    True
    """
    return ".".join(path)


@dataclass(slots=True)
class Group:
    """The keys of one side that spell, in their names, a node the other side has.

    ``real`` is the real path of the level that holds them, ``members`` each key's
    part after the group's prefix, its real key and its item.
    """

    real: NestedPath
    members: list[Keyed]
    is_leaf: bool = False


def regroup(
    keyed_a: list[Keyed], keyed_b: list[Keyed], real_a: NestedPath, real_b: NestedPath
) -> tuple[list[Keyed], list[Keyed]]:
    """Both levels with the keys that spell a node of the other side in a :class:`Group`.

    A key only on one side whose dotted form starts with a key only on the other side,
    where that key is a node (``layers.0.weight`` and a node ``layers``), goes into a
    group in place of its first member; a level without such keys comes back as it is.
    """
    only_a = {key for key, _, _ in keyed_a} - {key for key, _, _ in keyed_b}
    only_b = {key for key, _, _ in keyed_b} - {key for key, _, _ in keyed_a}
    if not only_a or not only_b:
        return keyed_a, keyed_b
    nodes_a = {key for key, _, item in keyed_a if key in only_a and not _is_leaf(item)}
    nodes_b = {key for key, _, item in keyed_b if key in only_b and not _is_leaf(item)}
    return _gathered(keyed_a, nodes_b, real_a), _gathered(keyed_b, nodes_a, real_b)


def _gathered(keyed: list[Keyed], holders: set[str], real: NestedPath) -> list[Keyed]:
    """``keyed`` with its keys under a dotted prefix in ``holders`` gathered in groups."""
    if not holders:
        return keyed
    out: list[Keyed] = []
    groups: dict[str, Group] = {}
    for key, real_key, item in keyed:
        prefix = _holder(key, holders)
        if prefix is None:
            out.append((key, real_key, item))
            continue
        group = groups.get(prefix)
        if group is None:
            group = groups[prefix] = Group(real, [])
            out.append((prefix, prefix, group))
        group.members.append((key[len(prefix) + 1 :], real_key, item))
    return out


def _holder(key: str, holders: set[str]) -> str | None:
    """The longest of ``holders`` that is a dotted prefix of ``key``, or None."""
    cut = key.rfind(".")
    while cut > 0:
        if key[:cut] in holders:
            return key[:cut]
        cut = key.rfind(".", 0, cut)
    return None


def _is_leaf(item: Any) -> bool:
    return bool(getattr(item, "is_leaf", True))
