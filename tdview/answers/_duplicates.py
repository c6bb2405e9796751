"""What is stored twice: groups of tensor leaves whose payloads are the same bytes.

Found as the diff's fingerprint tier finds equal leaves, in three steps that each read
less than the next:

1. **Size and dtype** (metadata only): only leaves of the same number of bytes and the
   same dtype can be one group.
2. **CRC-32**: an archive's central directory records each entry's CRC-32 (free: no
   payload byte read); a file of a directory is hashed on demand, and only when another
   leaf of its size and dtype exists (:data:`~tdview.diff.CRC` jobs).
3. **Byte by byte** (``confirm``): the members of a CRC group are compared with its
   first member (:data:`~tdview.diff.COMPARE` jobs), so a CRC collision is never a group.

Steps 2 and 3 run on the diff's pool (:func:`~tdview.diff.run_jobs`: chunked reads in
bounded memory, a large leaf split among threads). A leaf that cannot be read (missing,
truncated, refused) is in no group: ``tdview check`` says what is wrong with it.
Nested (ragged) tensors and pickled values are not compared. On a folder of
checkpoints' own node, the leaves of every member below it are grouped together (the
same weights saved at two steps), each read through its own member's store.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from importlib import import_module
from itertools import count
from typing import Any

from ..errors import TDViewError
from ..index import (
    NestedPath,
    Node,
    Tree,
    cancel_point,
    cancellable,
    normalize_subpath,
    open_tree,
)
from ..index import walk as walk_below
from ..storage import Store
from ._members import Part, parts_below

Progress = Callable[[int, int, str], object]

__all__ = ["Duplicates", "duplicates_of", "find_duplicates"]


def _diff() -> Any:
    """The diff's face (its payload jobs): ``tdview.diff`` the attribute is the function."""
    return import_module("tdview.diff")


@dataclass(frozen=True)
class Duplicates:
    """Groups of leaves stored twice or more, each a list of paths (tuples of keys) in
    load order, largest payloads first.

    ``confirmed`` is False when a group rests on archive CRC-32s alone (``read=False``):
    strong evidence, not proof. ``unread`` counts the leaves of a directory that share
    a size and dtype with another and were not hashed (``read=False``)."""

    groups: list[list[NestedPath]]
    nbytes: list[int]  # the payload size of each group's leaves
    confirmed: bool = True
    unread: int = 0
    skipped: list[tuple[NestedPath, str]] = field(default_factory=list)

    @property
    def wasted_bytes(self) -> int:
        """Bytes that one copy per group would save (``N MB in duplicates``)."""
        pairs = zip(self.groups, self.nbytes, strict=True)
        return sum(size * (len(group) - 1) for group, size in pairs)

    def group_of(self, path: object) -> list[NestedPath]:
        """The group holding ``path`` (empty when it is in none)."""
        wanted = normalize_subpath(path)
        return next((group for group in self.groups if wanted in group), [])


#: The walk's order of each leaf met (increasing across members: groups keep it).
_ORDER = count()


@dataclass
class _Leaf:
    path: NestedPath  # from the root of the tree asked (a folder's: the member's first)
    store: Store  # its checkpoint's store
    key: str  # its store key (file or archive entry)
    nbytes: int
    dtype: str
    order: int  # its place in the walk (load order)
    crc: int | None = None


def find_duplicates(
    ckpt_or_path: Any,
    subpath: object = None,
    progress: Progress | None = None,
    cancel: Callable[[], None] | None = None,
    *,
    read: bool = True,
    confirm: bool = True,
    min_bytes: int = 1,
    num_threads: int | None = None,
) -> Duplicates:
    """Groups of leaves below ``subpath`` whose payloads are the same bytes.

    Parameters
    ----------
    ckpt_or_path : str, os.PathLike or Checkpoint
        A checkpoint directory or archive, or a folder of checkpoints (opened and
        closed here), or an open :class:`~tdview.Checkpoint` (left open).
    subpath : nested key or "a/b" path, optional
        Look below this node only (default: the whole checkpoint). Below a folder of
        checkpoints' own node, the leaves of all its members are grouped together
        (paths from the folder, the member's first; a member that cannot be opened is
        in ``skipped``).
    progress : callable, optional
        ``progress(done_bytes, total_bytes, label)`` while payloads are read (labels
        ``"hashing"`` and ``"confirming"``).
    cancel : callable, optional
        Called between leaves and chunks; raising (``Cancelled``) stops the search.
    read : bool
        ``False`` reads no payload byte: groups come from archive CRC-32s only, and a
        directory's files are not grouped (``Duplicates.unread`` counts them).
    confirm : bool
        Compare the members of each CRC group byte by byte (default). Without it, an
        archive's groups rest on the CRC-32 its central directory records.
    min_bytes : int
        Leaves smaller than this are left out (default 1: empty leaves are).
    num_threads : int, optional
        Threads reading payloads (default: up to 4, one per CPU).

    Returns
    -------
    Duplicates

    Examples
    --------
    >>> found = find_duplicates("tied.tdz")                      # doctest: +SKIP
    >>> found.groups                                             # doctest: +SKIP
    [[('model', 'embed', 'weight'), ('model', 'head', 'weight')]]
    """
    keys = () if subpath is None or subpath in ((), "") else normalize_subpath(subpath)
    opened = None if isinstance(ckpt_or_path, Tree) else open_tree(ckpt_or_path)
    tree = ckpt_or_path if opened is None else opened
    try:
        with cancellable(cancel) if cancel is not None else nullcontext():
            skipped: list[tuple[NestedPath, str]] = []
            leaves: list[_Leaf] = []
            for part in parts_below(tree, keys):
                if isinstance(part, Part):
                    leaves += _leaves(part, min_bytes)
                else:  # a member that cannot be opened: tdview check says why
                    skipped.append((part.path, str(part.error)))
            found = _search(leaves, progress, read, confirm, num_threads)
            return replace(found, skipped=skipped + found.skipped)
    finally:
        if opened is not None:
            opened.close()


def duplicates_of(
    ckpt: Tree,
    path: object,
    *,
    read: bool = True,
    progress: Progress | None = None,
) -> Duplicates:
    """The leaves of the whole checkpoint with the same bytes as the leaf at ``path``: a
    :class:`Duplicates` of at most one group (holding ``path``). Only the leaves of its
    size and dtype are read; ``read=False`` answers from archive CRC-32s only (what
    browsing may ask: no payload byte read). In a folder of checkpoints, the leaves of
    every member are candidates (paths from the folder's root).

    Examples
    --------
    >>> duplicates_of(Checkpoint("tied.tdz"), "model/head/weight").groups  # doctest: +SKIP
    [[('model', 'embed', 'weight'), ('model', 'head', 'weight')]]
    >>> duplicates_of(Checkpoint("run"), "step_2/model/norm/weight").groups  # doctest: +SKIP
    [[('step_1', 'model', 'norm', 'weight'), ('step_2', 'model', 'norm', 'weight')]]
    """
    wanted = () if path in ((), "", None) else normalize_subpath(path)
    owner, _, inner = ckpt.locate(wanted)
    mine = _leaf(owner.store, owner.node(inner), 0)
    if mine is None:
        return Duplicates([], [])
    same_kind = [
        replace(leaf, crc=None)  # a fresh CRC each
        for leaf in _kinds(ckpt).get((mine.nbytes, mine.dtype), ())
    ]
    found = _search(same_kind, progress, read, read, None)
    groups = [group for group in found.groups if wanted in group]
    return Duplicates(groups, found.nbytes[:1] if groups else [], found.confirmed, found.unread)


#: Per checkpoint (or folder of them: every member's): its leaves by size and dtype,
#: walked once (a click asks for one leaf's group: a second click walks nothing). Made
#: of the index's nodes, as stale as they are.
_KINDS: weakref.WeakKeyDictionary[Tree, dict[tuple[int, str], list[_Leaf]]] = (
    weakref.WeakKeyDictionary()
)


def _kinds(ckpt: Tree) -> dict[tuple[int, str], list[_Leaf]]:
    found = _KINDS.get(ckpt)
    if found is None:
        found = {}
        parts = (part for part in parts_below(ckpt, ()) if isinstance(part, Part))
        for leaf in (leaf for part in parts for leaf in _leaves(part, 1)):
            found.setdefault(_size_and_dtype(leaf), []).append(leaf)
        _KINDS[ckpt] = found  # kept only once whole: a cancelled walk keeps nothing
    return found


def _leaf(
    store: Store, node: Node, min_bytes: int, order: int = 0, prefix: NestedPath = ()
) -> _Leaf | None:
    """A plain tensor leaf with a data file and at least ``min_bytes`` of payload."""
    record = node.record
    if not node.is_leaf or record is None or record.is_nested or node.file is None:
        return None
    nbytes = record.nbytes or 0
    if nbytes < max(min_bytes, 1):
        return None
    path = prefix + node.path if prefix else node.path  # from the tree asked
    return _Leaf(path, store, node.file, nbytes, record.dtype.name, order)


def _leaves(part: Part, min_bytes: int) -> Iterator[_Leaf]:
    """The leaves below ``part``'s node, their paths from the tree asked."""
    ckpt = part.tree
    node = ckpt.node(part.inner)
    nodes: Iterable[Node] = [node] if node.is_leaf else walk_below(ckpt, node)
    for each in nodes:
        leaf = _leaf(ckpt.store, each, min_bytes, next(_ORDER), part.prefix)
        if leaf is not None:
            yield leaf


def _by(leaves: Iterable[_Leaf], key: Callable[[_Leaf], object]) -> list[list[_Leaf]]:
    """``leaves`` grouped by ``key``, groups of one dropped (first-seen order kept)."""
    groups: dict[object, list[_Leaf]] = {}
    for leaf in leaves:
        groups.setdefault(key(leaf), []).append(leaf)
    return [group for group in groups.values() if len(group) > 1]


def _search(
    leaves: list[_Leaf],
    progress: Progress | None,
    read: bool,
    confirm: bool,
    num_threads: int | None,
) -> Duplicates:
    candidates = [leaf for group in _by(leaves, _size_and_dtype) for leaf in group]
    skipped: list[tuple[NestedPath, str]] = []
    to_hash = _stored_crcs(candidates, skipped)
    unread = 0 if read else len(to_hash)
    runner = _Runner(progress, num_threads)
    if read:
        runner.hash(to_hash, skipped)
    hashed = [leaf for leaf in candidates if leaf.crc is not None]
    groups = _by(hashed, lambda leaf: (leaf.nbytes, leaf.dtype, leaf.crc))
    if read and confirm:
        groups = runner.confirm(groups, skipped)
    groups.sort(key=lambda group: (-group[0].nbytes, group[0].order))  # the largest first
    return Duplicates(
        [[leaf.path for leaf in group] for group in groups],
        [group[0].nbytes for group in groups],
        confirmed=read and confirm,
        unread=unread,
        skipped=skipped,
    )


def _size_and_dtype(leaf: _Leaf) -> tuple[int, str]:
    return leaf.nbytes, leaf.dtype


def _stored_crcs(leaves: list[_Leaf], skipped: list[tuple[NestedPath, str]]) -> list[_Leaf]:
    """Fill each leaf's CRC-32 an archive records; the leaves left to hash."""
    stored_crc = _diff().stored_crc
    left = []
    for leaf in leaves:
        cancel_point()
        try:
            leaf.crc = stored_crc(leaf.store, leaf.key, leaf.nbytes)
        except (TDViewError, OSError) as error:
            skipped.append((leaf.path, str(error)))
            continue
        if leaf.crc is None:
            left.append(leaf)
    return left


class _Runner:
    """The diff's payload jobs over the leaves' stores, progress and cancel passed."""

    def __init__(self, progress: Progress | None, num_threads: int | None):
        self.progress = progress
        self.threads = num_threads or max(1, min(4, os.cpu_count() or 1))

    def _report(self, done: int, total: int, label: str) -> None:
        cancel_point()  # called in this thread between tasks: a cancel stops the pool
        if self.progress is not None:
            self.progress(done, total, label)

    def _run(self, jobs: list[Any], label: str) -> None:
        if jobs:
            _diff().run_jobs(jobs, self.threads, self._report, label)

    def hash(self, leaves: list[_Leaf], skipped: list[tuple[NestedPath, str]]) -> None:
        diff = _diff()

        def hashed(leaf: _Leaf) -> Callable[[Any], None]:
            def done(job: Any) -> None:
                if job.error is not None:
                    skipped.append((leaf.path, str(job.error)))
                else:
                    leaf.crc = job.crc

            return done

        jobs = [
            diff.Job(diff.CRC, diff.Span(leaf.store, leaf.key, leaf.nbytes), None, hashed(leaf))
            for leaf in leaves
        ]
        self._run(jobs, "hashing")

    def confirm(
        self, groups: list[list[_Leaf]], skipped: list[tuple[NestedPath, str]]
    ) -> list[list[_Leaf]]:
        """Each group split by byte comparison with its first member (rounds until no
        member is left unsettled: a CRC collision makes two groups, or none)."""
        diff = _diff()
        settled: list[list[_Leaf]] = []
        pending = groups
        while pending:
            rounds: list[tuple[list[_Leaf], list[_Leaf]]] = []
            jobs = []
            for group in pending:
                first, same = group[0], [group[0]]
                other: list[_Leaf] = []
                rounds.append((same, other))
                for leaf in group[1:]:
                    jobs.append(
                        diff.Job(
                            diff.COMPARE,
                            diff.Span(first.store, first.key, first.nbytes),
                            diff.Span(leaf.store, leaf.key, leaf.nbytes),
                            _compared(leaf, same, other, skipped),
                        )
                    )
            self._run(jobs, "confirming")
            pending = [other for _, other in rounds if len(other) > 1]
            settled += [same for same, _ in rounds if len(same) > 1]
        return [sorted(group, key=_in_order) for group in settled]


def _in_order(leaf: _Leaf) -> int:
    return leaf.order


def _compared(
    leaf: _Leaf, same: list[_Leaf], other: list[_Leaf], skipped: list[tuple[NestedPath, str]]
) -> Callable[[Any], None]:
    def done(job: Any) -> None:
        if job.error is not None:
            skipped.append((leaf.path, str(job.error)))
        elif job.differs:
            other.append(leaf)
        else:
            same.append(leaf)

    return done
