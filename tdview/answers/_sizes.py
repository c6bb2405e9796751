"""Where the bytes of a checkpoint go: bytes per child, per dtype and per section.

Every number comes from the index's rollups (:func:`tdview.index.rollup`): no payload
byte is read. A level's entries are its children, largest first; the view gathers the
small ones into an "other" cell (:meth:`SizeReport.gathered`).

Each byte is also given a section (the model, the optimizer, buffers, the rest: the
rules are in :mod:`._sections`). A node whose subtree spans several sections is
``mixed``; its bytes are split by its children down to
:data:`~._sections.SECTION_DEPTH` keys below the root. In a folder of checkpoints each
member is judged from its own root; side files are ``rest``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import TDViewError
from ..index import (
    FOLDER,
    MAX_DEPTH,
    Node,
    Rollup,
    Tree,
    cancel_point,
    normalize_subpath,
    open_tree,
    rollup,
)
from ._duplicates import Progress, find_duplicates
from ._sections import REST, SECTION_DEPTH, SECTIONS, SectionRules

__all__ = ["MIXED", "SECTIONS", "SizeEntry", "SizeReport", "dtype_bytes", "sizes", "walk_sizes"]

#: The section of a subtree whose bytes span more than one.
MIXED = "mixed"
#: Entries shown however small they are (the largest, when the level has that many).
ALWAYS_SHOWN = 8
#: The "dtype" of bytes that are no tensor's: a pickle a load would unpickle, and the
#: side files of a folder of checkpoints.
PICKLE, FILES = "pickle", "files"


@dataclass(frozen=True)
class SizeEntry:
    """One child of the level: its full path, bytes (of its whole subtree), tensors,
    its one dtype (``"mixed"``; None without bytes), its section (``"mixed"`` when its
    bytes span several) and whether it can be zoomed into."""

    key: str
    path: tuple[str, ...]
    kind: str
    bytes: int
    leaves: int
    dtype: str | None
    section: str
    has_children: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "path": list(self.path),
            "kind": self.kind,
            "bytes": self.bytes,
            "leaves": self.leaves,
            "dtype": self.dtype,
            "section": self.section,
            "has_children": self.has_children,
        }


@dataclass(frozen=True)
class SizeReport:
    """The sizes of one subtree: its totals, and its children largest first.

    ``by_dtype`` and ``by_section`` add up to ``bytes`` (bytes that are no tensor's are
    ``"pickle"`` or ``"files"`` in ``by_dtype``). ``problems`` counts the nodes below
    whose metadata could not be read (their bytes are not counted: ``tdview check``
    says what is wrong). ``duplicates_bytes`` is None until duplicates are looked for.
    """

    path: tuple[str, ...]
    kind: str
    bytes: int
    leaves: int
    section: str
    by_dtype: dict[str, int]
    by_section: dict[str, int]
    entries: list[SizeEntry]
    problems: int = 0
    duplicates_bytes: int | None = None

    def gathered(self, limit: int, min_fraction: float = 0.005) -> tuple[list[SizeEntry], int, int]:
        """``(shown, other_count, other_bytes)``: the ``limit`` largest entries, less
        those under ``min_fraction`` of the total beyond the eight largest, and what is
        left, gathered.

        Examples
        --------
        >>> report = sizes("ckpt")                                      # doctest: +SKIP
        >>> shown, count, nbytes = report.gathered(30)                  # doctest: +SKIP
        """
        floor = self.bytes * min_fraction
        shown: list[SizeEntry] = []
        for entry in self.entries[: max(limit, 0)]:  # largest first: the rest are smaller
            if len(shown) >= ALWAYS_SHOWN and entry.bytes < floor:
                break
            shown.append(entry)
        rest = self.entries[len(shown) :]
        return shown, len(rest), sum(e.bytes for e in rest)


@dataclass
class _Sizer:
    """One walk's memo: the section rules of each checkpoint met, each node's split."""

    tree: Tree
    rules: dict[int, SectionRules] = field(default_factory=dict)
    splits: dict[tuple[int, tuple[str, ...]], dict[str, int]] = field(default_factory=dict)

    def report(self, path: tuple[str, ...]) -> SizeReport:
        owner, prefix, inner = self.tree.locate(path)
        node = owner.node(inner)
        total = rollup(owner, node)
        entries = [self.entry(owner, prefix, child) for child in _children(owner, node)]
        entries.sort(key=lambda e: (-e.bytes, e.key))
        split = self.split(owner, node)
        return SizeReport(
            path=tuple(path),
            kind=node.kind,
            bytes=total.bytes,
            leaves=total.leaves,
            section=_section_of(split),
            by_dtype=_sorted(dtype_bytes(total)),
            by_section=_sorted(split),
            entries=entries,
            problems=total.problems,
        )

    def entry(self, owner: Tree, prefix: tuple[str, ...], node: Node) -> SizeEntry:
        cancel_point()
        total = rollup(owner, node)
        split = self.split(owner, node)
        has_children = not node.is_leaf and _count(owner, node) > 0
        return SizeEntry(
            key=node.key,
            path=prefix + node.path,
            kind=node.kind,
            bytes=total.bytes,
            leaves=total.leaves,
            dtype=_one(dtype_bytes(total)) or (MIXED if total.bytes else None),
            section=_section_of(split),
            has_children=has_children,
        )

    def split(self, owner: Tree, node: Node) -> dict[str, int]:
        """The bytes of ``node``'s subtree by section (adding up to its rollup)."""
        memo = (id(owner), node.path)
        found = self.splits.get(memo)
        if found is not None:
            return found
        if owner.is_folder:
            member, _, inner = owner.locate(node.path)
            if member is not owner:  # a member of a folder: judged from its own root
                return self.split(member, member.node(inner))
        total = rollup(owner, node).bytes
        if owner.is_folder:
            split = self._folder_split(owner, node)
        else:
            split = self._checkpoint_split(owner, node, total)
        rest = total - sum(split.values())
        if rest > 0:
            split[REST] = split.get(REST, 0) + rest
        split = {k: v for k, v in split.items() if v > 0}
        if not node.is_leaf:  # a leaf is asked once
            self.splits[memo] = split
        return split

    def _checkpoint_split(self, owner: Tree, node: Node, total: int) -> dict[str, int]:
        section = self.section(owner, node)
        if section is not None:
            return {section: total}
        if node.is_leaf or len(node.path) >= SECTION_DEPTH:
            return {REST: total}
        split: dict[str, int] = {}
        for child in _children(owner, node):
            cancel_point()
            _add(split, self.split(owner, child))
        return split

    def _folder_split(self, coll: Tree, node: Node) -> dict[str, int]:
        """A folder of checkpoints' own node: its members judged from their roots, its
        side files the rest."""
        split: dict[str, int] = {}
        for child in _children(coll, node):
            cancel_point()
            if child.kind == FOLDER and len(child.path) >= MAX_DEPTH:
                continue  # not counted by the folder's total either
            _add(split, self.split(coll, child))
        return split

    def section(self, owner: Tree, node: Node) -> str | None:
        rules = self.rules.get(id(owner))
        if rules is None:
            rules = self.rules[id(owner)] = SectionRules(owner)
        return rules.section(node)


def _children(owner: Tree, node: Node) -> list[Node]:
    if node.is_leaf:
        return []
    try:
        return owner.children(node)
    except (TDViewError, OSError):
        return []  # the node's details say why; its bytes stay in its rollup


def _count(owner: Tree, node: Node) -> int:
    try:
        return owner.count_children(node)
    except (TDViewError, OSError):
        return 0


def dtype_bytes(total: Rollup) -> dict[str, int]:
    """A rollup's bytes by dtype, its pickles as ``"pickle"`` and the bytes of no
    tensor (a folder of checkpoints' side files) as ``"files"``: they add up."""
    found: dict[str, int] = {}
    for name, size in total.by_dtype.items():
        if size > 0:  # "float32", as a leaf's summary names it
            short = name.removeprefix("torch.")
            found[short] = found.get(short, 0) + size
    if total.pickle_bytes:
        found[PICKLE] = total.pickle_bytes
    files = total.bytes - sum(found.values())
    if files > 0:
        found[FILES] = files
    return found


def _one(split: dict[str, int]) -> str | None:
    return next(iter(split)) if len(split) == 1 else None


def _section_of(split: dict[str, int]) -> str:
    return _one(split) or (MIXED if len(split) > 1 else REST)


def _add(into: dict[str, int], other: dict[str, int]) -> None:
    for key, value in other.items():
        into[key] = into.get(key, 0) + value


def _sorted(found: dict[str, int]) -> dict[str, int]:
    return dict(sorted(found.items(), key=lambda kv: (-kv[1], kv[0])))


def sizes(
    tree: Tree | str | os.PathLike[str],
    subpath: object = (),
    *,
    duplicates: bool = False,
    progress: Progress | None = None,
) -> SizeReport:
    """Where the bytes of the subtree at ``subpath`` go, from metadata alone.

    Parameters
    ----------
    tree : Tree or path
        An open checkpoint or folder of checkpoints, or a path to open (and close).
    subpath : nested key, optional
        The subtree (a key tuple, or ``"a/b"``); the root by default.
    duplicates : bool
        Also the bytes stored twice below it (``duplicates_bytes``): this reads the
        payloads of the leaves that share a size and dtype (an archive's CRC-32s first),
        as :func:`~tdview.answers.find_duplicates` does, reporting to ``progress``.

    Returns
    -------
    SizeReport
        Its bytes by dtype and by section (see the module for the rules), and each
        child's bytes, dtype and section, largest first.

    Examples
    --------
    >>> report = sizes("step_1000.tdz")                                 # doctest: +SKIP
    >>> report.by_section                                               # doctest: +SKIP
    {'optimizer': 23928, 'model': 12200, 'rest': 8}
    >>> [(e.key, e.bytes) for e in report.entries][:2]                  # doctest: +SKIP
    [('optimizer', 23928), ('model', 12200)]
    """
    if isinstance(tree, (str, os.PathLike)):
        with open_tree(tree) as opened:
            return sizes(opened, subpath, duplicates=duplicates, progress=progress)
    path = _path(subpath)
    report = _Sizer(tree).report(path)
    if duplicates:
        report = replace(report, duplicates_bytes=wasted_bytes(tree, path, progress))
    return report


def wasted_bytes(tree: Tree, path: tuple[str, ...], progress: Progress | None = None) -> int:
    """The bytes that one copy per group of identical leaves below ``path`` would save
    (below a folder of checkpoints' own node: across its members).

    Examples
    --------
    >>> wasted_bytes(open_tree("tied.tdz"), ("model",))                 # doctest: +SKIP
    262144
    """
    return find_duplicates(tree, path or None, progress).wasted_bytes


def walk_sizes(tree: Tree, subpath: object = (), depth: int = 1) -> Iterator[SizeEntry]:
    """Every entry down to ``depth`` levels below ``subpath`` (``du -d``): each level
    largest first, an entry followed by its own entries.

    Examples
    --------
    >>> [e.path for e in walk_sizes(open_tree("step_1000.tdz"), depth=1)]  # doctest: +SKIP
    [('optimizer',), ('model',), ('step',), ('lr',)]
    """
    sizer = _Sizer(tree)
    stack = [iter(sizer.report(_path(subpath)).entries)]
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        yield entry
        if entry.has_children and len(stack) < depth:
            stack.append(iter(sizer.report(entry.path).entries))


def _path(subpath: object) -> tuple[str, ...]:
    return () if subpath == () else normalize_subpath(subpath)
