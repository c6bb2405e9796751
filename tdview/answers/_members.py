"""The checkpoints an answer walks below a node.

A node of a checkpoint is answered in that checkpoint. A folder of checkpoints' own node
(its root, a sub-folder: ``tdview check run/``) is answered member by member: each
checkpoint below it is checked, sized or searched for duplicates from its own root, and
its paths are put under the member's place in the folder. A member that cannot be opened
(a truncated archive, a ``meta.json`` that does not parse) is no error of the answer: it
is an :class:`Unopened` the answer reports, as ``tdview check`` reports any damage.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import SubpathError, TDViewError
from ..index import MEMBER, NestedPath, Node, Tree, is_folder, show_path


@dataclass(frozen=True)
class Part:
    """A checkpoint to answer in: ``tree``, the node ``inner`` in it, and ``prefix``,
    the path of ``tree``'s root in the tree asked (``()`` for a checkpoint opened
    alone)."""

    tree: Tree
    prefix: NestedPath
    inner: NestedPath

    def outer(self, path: NestedPath) -> NestedPath:
        """A path of ``tree`` as the tree asked names it."""
        return self.prefix + tuple(path)


@dataclass(frozen=True)
class Unopened:
    """A member of a folder of checkpoints that could not be opened: its path in the
    folder, what opening it raised, and its store key in the folder (its file or
    folder)."""

    path: NestedPath
    error: TDViewError | OSError
    key: str | None


def parts_below(tree: Tree, path: NestedPath) -> Iterator[Part | Unopened]:
    """The checkpoints to answer the node at ``path`` of ``tree`` in: its own checkpoint,
    or each member below a folder of checkpoints' own node, in the folder's order.

    Raises
    ------
    SubpathError
        ``path`` names nothing (from :meth:`~tdview.index.Tree.locate`).

    Examples
    --------
    >>> [p.prefix for p in parts_below(open_tree("run"), ())]      # doctest: +SKIP
    [('step_1000.tdz',), ('step_2000.tdz',)]
    """
    owner, prefix, inner = tree.locate(path)
    if not is_folder(owner):
        yield Part(owner, prefix, inner)
        return
    start = owner.own_node(inner)
    assert start is not None
    below = [start] if start.kind == MEMBER else owner.walk_own(start)
    for node in below:
        if node.kind != MEMBER:
            continue
        try:
            member = owner.member(node)
        except (TDViewError, OSError) as error:
            yield Unopened(node.path, error, node.dirkey if node.dirkey is not None else node.file)
        else:
            yield Part(member, node.path, ())


def own_nodes(tree: Tree, path: NestedPath) -> Iterator[Node]:
    """The folder's own nodes below a folder of checkpoints' own node at ``path``
    (folders and side files, members not entered); nothing below a checkpoint's node."""
    owner, _, inner = tree.locate(path)
    if is_folder(owner):
        start = owner.own_node(inner)
        assert start is not None
        if start.kind != MEMBER:
            yield start
            yield from (node for node in owner.walk_own(start) if node.kind != MEMBER)


def nothing_below(tree: Tree, path: NestedPath) -> SubpathError:
    """The error of an answer on a folder's node that holds no checkpoint."""
    where = show_path(path) if path else tree.path
    return SubpathError(
        f"nothing to answer in {where!r} of {tree.path}: no checkpoint (a folder with a "
        "meta.json, a .tdz or .zip archive) was found below it."
    )
