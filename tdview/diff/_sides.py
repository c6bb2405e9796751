"""The two sides of a diff: a checkpoint (opened here or given open) and the node to
compare from."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import SubpathError
from ..index import NestedPath, Node, Tree, is_folder, normalize_subpath, open_tree, show_path

Source = str | os.PathLike[str] | Tree


@dataclass
class Side:
    """One side: the checkpoint that owns the compared node, that node, and whether the
    diff opened the checkpoint (and so closes it)."""

    ckpt: Tree
    node: Node
    subpath: NestedPath
    label: str
    opened: Tree | None

    def close(self) -> None:
        if self.opened is not None:
            self.opened.close()


def open_side(source: Source, subpath: object) -> Side:
    """Open ``source`` (a checkpoint directory or archive, a :class:`Checkpoint`, or a
    folder of checkpoints with a ``subpath`` that reaches into one of them) at ``subpath``.

    Raises
    ------
    SubpathError
        ``subpath`` names nothing, or the node to compare is a folder of checkpoints (a
        :class:`~tdview.index.Collection`'s own node): diff compares checkpoints, so name
        one of its checkpoints in the subpath.
    """
    path = () if subpath is None or subpath == () or subpath == "" else normalize_subpath(subpath)
    opened = None
    if isinstance(source, Tree):
        ckpt = source
    else:
        ckpt = opened = open_tree(source)
    try:
        owner, _, inner = ckpt.locate(path)
        if is_folder(owner):  # a folder of checkpoints' own node
            raise SubpathError(
                f"cannot diff {show_path(path)!r} of {ckpt.path}: "
                f"{owner.not_loadable(inner)} Name one of its checkpoints in the subpath "
                "(diff compares checkpoints, or subtrees of them, not folders)."
            )
        node = owner.node(inner)
    except BaseException:
        if opened is not None:
            opened.close()
        raise
    return Side(owner, node, path, owner.path, opened)
