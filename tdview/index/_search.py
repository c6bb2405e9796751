"""Search: the nodes whose path matches a pattern (the rules of :mod:`._match`), paged,
and counted in full unless the caller asks for the page alone.

Order: depth-first, in load order (a node, then its subtree, then its next sibling), the
root excluded; the same order as :func:`~tdview.index.walk` and ``tdview tree``. There is
no other ranking: a result's place says where it is in the checkpoint.

A plain TensorDict folder is searched from its parsed ``meta.json`` alone: its keys are
lower-cased once per parsed file and tested a level at a time, no node is made for any
key, and a path is built only for the matches of the page asked for. Other nodes
(tensorclasses, lazy stacks, views, non-tensor data, 0.3-era folders) are searched
through the index's children. What a search learns of each folder (its keys and where
its sub-folders are) is kept per checkpoint, so a second search of a large tree reads
nothing: it walks memory only. Like every walk of the index it reads no payload byte,
and it stops at the next folder once the request is cancelled
(:func:`~tdview.index.cancel_point`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeGuard

from .._gc import gc_paused
from ..errors import TDViewError
from ..format import LeafRecord, NodeMeta, TensorDictNode
from ._cancel import cancel_point
from ._children import _names, collection_dir
from ._loading import Indexed as Checkpoint  # typed by what it reads: no circle
from ._match import Keys, Matcher, spellings
from ._node import Node
from ._optimizer import STATE, state_labels
from ._paths import NestedPath, join_key

__all__ = ["SearchPage", "iter_matches", "search", "search_page"]

#: Matches of one page when the caller names no limit.
DEFAULT_LIMIT = 50

# A run of matches: the path of their parent, its children's keys and the indices of the
# matches among them, in order (a key is looked up only for a page that shows it).
Batch = tuple[NestedPath, "tuple[str, ...]", "list[int] | range"]


@dataclass(frozen=True)
class SearchPage:
    """One page of a search: ``matches[i]`` is match ``offset + i``; ``total`` counts
    every match (not only this page's) when ``counted``. Otherwise the walk stopped at
    the first match after the page, and ``total`` is ``offset + len(matches) + 1``, a
    lower bound (``truncated`` is then exact and true)."""

    pattern: str
    offset: int
    total: int
    matches: list[NestedPath]
    counted: bool = True
    #: How the pattern was read (a pasted key, a prefix dropped: :mod:`._pasted`).
    notes: tuple[str, ...] = ()

    @property
    def truncated(self) -> bool:
        """Whether matches follow this page."""
        return self.offset + len(self.matches) < self.total


@dataclass(eq=False, slots=True)
class _Level:
    """The children of one node as a search needs them: their keys (and lower-cased,
    :class:`~._match.Keys`), the indices of those that may have children (``subs``,
    ascending) and, resolved on first descent, what is below each (``below[j]`` for
    ``subs[j]``; None: nothing)."""

    keys: tuple[str, ...]
    lower: Keys
    subs: tuple[int, ...]
    dirkey: str | None = None  # a plain TensorDict folder's: its sub-folders are records
    meta: TensorDictNode | None = None
    nodes: tuple[Node, ...] = ()  # any other node's: its children
    below: list[_Level | None] = field(default_factory=list)
    #: an optimizer's ``state`` level: each key's parameter name (:mod:`._optimizer`),
    #: which a search matches too
    labels: Keys | None = None


# Per checkpoint: plain folder -> its level, node id -> (node, its level), and id of a
# parsed meta.json -> (it, its keys, lower-cased, its subs): identical meta.json files
# (the layers of a model) share one parsed node, and so these tuples.
_Shared = tuple[TensorDictNode, tuple[str, ...], Keys, tuple[int, ...]]
_Caches = tuple[dict[str, _Level], dict[int, tuple[Node, _Level]], dict[int, _Shared]]
_CACHES: weakref.WeakKeyDictionary[Checkpoint, _Caches] = weakref.WeakKeyDictionary()
_UNRESOLVED = _Level((), Keys(()), ())  # what is below a sub not looked at yet


def _caches(ckpt: Checkpoint) -> _Caches:
    found = _CACHES.get(ckpt)
    if found is None:
        found = _CACHES[ckpt] = ({}, {}, {})
    return found


def _plain(meta: object) -> TypeGuard[TensorDictNode]:
    """Whether a folder's node is a TensorDict whose children its ``meta.json`` lists."""
    return type(meta) is TensorDictNode and not meta.legacy_no_collection_records


def _folder_level(ckpt: Checkpoint, dirkey: str, meta: TensorDictNode) -> _Level:
    folders, _, lowered = _caches(ckpt)
    level = folders.get(dirkey)
    if level is None:
        known = lowered.get(id(meta))
        if known is None or known[0] is not meta:
            order = meta.load_order
            keys = tuple(record.key for record in order)
            subs = tuple(i for i, record in enumerate(order) if not isinstance(record, LeafRecord))
            known = lowered[id(meta)] = (meta, keys, Keys([k.lower() for k in keys]), subs)
        _, keys, lower, subs = known
        if subs:
            ckpt.read_ahead(dirkey, meta, probes=False)  # on a slow file system
        level = folders[dirkey] = _Level(
            keys, lower, subs, dirkey=dirkey, meta=meta, below=[_UNRESOLVED] * len(subs)
        )
    return level


def _node_level(ckpt: Checkpoint, node: Node) -> _Level:
    """The level of any node: a plain folder's from its records, others' from the
    index's children."""
    if node.dirkey is not None and _plain(node.meta):
        return _folder_level(ckpt, node.dirkey, node.meta)
    _, by_node, _ = _caches(ckpt)
    known = by_node.get(id(node))
    if known is not None and known[0] is node:
        return known[1]
    children = tuple(ckpt.children(node)) if not node.is_leaf else ()
    keys = tuple(child.key for child in children)
    subs = tuple(i for i, child in enumerate(children) if not child.is_leaf)
    level = _Level(
        keys,
        Keys([key.lower() for key in keys]),
        subs,
        nodes=children,
        below=[_UNRESOLVED] * len(subs),
    )
    by_node[id(node)] = (node, level)
    return level


def _sub_folder(ckpt: Checkpoint, dirkey: str, key: str) -> tuple[str, NodeMeta] | None:
    """The folder of collection ``key`` of folder ``dirkey`` and its parsed ``meta.json``,
    as the index finds them (:func:`~._children.collection_dir`), or None when it has no
    folder or no readable ``meta.json``. The first name tried is read at once: a folder
    whose ``meta.json`` is there is that name's (no folder is listed, nothing probed)."""
    names = _names(key, robust=ckpt.robust, collection=True)
    if names:
        first = join_key(dirkey, names[0])
        try:
            return first, ckpt.read_meta(first)
        except (TDViewError, OSError):
            pass  # not there, or not readable: as the index would find it
    store = ckpt.store
    folder = collection_dir(
        store, dirkey, key, robust=ckpt.robust, dirs=store.plain_dirs(dirkey) or ()
    )
    if folder is None:
        return None
    try:
        return folder, ckpt.read_meta(folder, walking=True)
    except (TDViewError, OSError):
        return None


def _resolve(ckpt: Checkpoint, level: _Level, i: int, path: NestedPath) -> _Level | None:
    found = _resolved(ckpt, level, i, path)
    if found is not None and path[-1] == STATE and found.labels is None:
        names = state_labels(ckpt, path, found.keys)
        found.labels = Keys([name.lower() for name in names]) if names else None
    return found


def _hits(
    test: Callable[[Keys, str, str], list[int]], level: _Level, slash: str, dot: str
) -> list[int]:
    """The matches of a level: its keys, and its parameter names where it has them."""
    found = test(level.lower, slash, dot)
    if level.labels is None:
        return found
    named = test(level.labels, slash, dot)
    return sorted(set(found).union(named)) if named else found


def _resolved(ckpt: Checkpoint, level: _Level, i: int, path: NestedPath) -> _Level | None:
    if level.dirkey is None:
        return _node_level(ckpt, level.nodes[i])
    found = _sub_folder(ckpt, level.dirkey, level.keys[i])
    if found is None:
        return None  # its node says what is wrong (a missing folder...): nothing below
    folder, meta = found
    if _plain(meta):
        return _folder_level(ckpt, folder, meta)
    try:
        node = ckpt.node(path)  # the index's own node (a tensorclass, a lazy stack...)
    except (TDViewError, OSError):
        node = ckpt._loading.make_collection(path, folder, None)
    return _node_level(ckpt, node)


@dataclass(eq=False, slots=True)
class _Frame:
    """One level of the walk: its path in the checkpoint, its two spellings (as
    :meth:`Matcher.keys` takes them), the indices of its matches, and how far the walk
    got: the next match to yield and the next sub to descend into."""

    level: _Level
    path: NestedPath
    slash: str
    dot: str
    hits: list[int]
    hit: int = 0
    sub: int = 0


def tree_batches(
    ckpt: Checkpoint, matcher: Matcher, start: Node, outer: NestedPath = ()
) -> Iterator[Batch]:
    """The matches below ``start`` (a node of ``ckpt``) in runs, their paths put under
    ``outer`` (a collection's path of the member ``ckpt``), depth-first in load order.

    A frame is pushed for a level with sub-levels only; a level of leaves (most of a
    model's folders) yields its matches from its parent's loop."""
    if start.is_leaf or matcher.empty:
        return
    slash, dot = spellings(outer + start.path)
    level = _node_level(ckpt, start)
    stack = [_Frame(level, start.path, slash, dot, matcher.keys(level.lower, slash, dot))]
    test = matcher.keys
    while stack:
        frame = stack[-1]
        level, path, hits, h, s = frame.level, frame.path, frame.hits, frame.hit, frame.sub
        keys, subs, below_of, lower = level.keys, level.subs, level.below, level.lower.lower
        pushed = False
        while s < len(subs):
            upto = subs[s]
            j = h
            while j < len(hits) and hits[j] <= upto:  # the matches up to this sub
                j += 1
            if j > h:
                yield outer + path, keys, hits[h:j]
                h = j
            below = below_of[s]
            if below is _UNRESOLVED:
                cancel_point()  # before each folder read: a wide level of folders too
                below = below_of[s] = _resolve(ckpt, level, upto, (*path, keys[upto]))
            s += 1
            if below is None or not below.keys:
                continue
            key = lower[upto]
            child_slash, child_dot = f"{frame.slash}{key}/", f"{frame.dot}{key}."
            found = _hits(test, below, child_slash, child_dot)
            if below.subs:
                cancel_point()  # a cancelled search stops here
                frame.hit, frame.sub = h, s
                stack.append(_Frame(below, (*path, keys[upto]), child_slash, child_dot, found))
                pushed = True
                break
            if found:  # leaves only: their matches, nothing below them
                yield (*outer, *path, keys[upto]), below.keys, found
        if pushed:
            continue
        if h < len(hits):
            yield outer + path, keys, hits[h:]
        stack.pop()


def _batches(ckpt: Checkpoint, matcher: Matcher, under: object = ()) -> Iterator[Batch]:
    """Every match below ``under``: on a folder of checkpoints, its own names and each
    member's keys (paths from the collection's root: ``Collection._search_batches``)."""
    if matcher.empty:
        return
    yield from ckpt._search_batches(matcher, under)


def search_page(
    ckpt: Checkpoint,
    pattern: str,
    *,
    offset: int = 0,
    limit: int = DEFAULT_LIMIT,
    under: object = (),
    count: bool = True,
) -> SearchPage:
    """Matches ``offset`` to ``offset + limit`` of ``pattern`` below ``under``, and the
    number of all matches (or, with ``count=False``, a lower bound of it).

    Parameters
    ----------
    ckpt : Checkpoint
        A checkpoint, or a folder of checkpoints (:class:`~tdview.index.Collection`):
        then its own names and every member's keys, the member's name first.
    pattern : str
        See :mod:`tdview.index._match` (a subpath, a state_dict key, part of a key, a
        glob).
    offset, limit : int
        The page: ``limit=0`` only counts (whatever ``count`` says).
    under : path, optional
        The node whose subtree is searched (the root by default; itself excluded).
    count : bool
        False: stop at the first match after the page, so that a page of a huge fresh
        checkpoint does not wait for the whole walk. The page is then ``counted=False``
        with ``total = offset + limit + 1`` (a lower bound) when a match follows it;
        a walk that ends first gives the exact count, ``counted=True``.

    Examples
    --------
    >>> ckpt = Checkpoint("demo_ckpt")                                    # doctest: +SKIP
    >>> page = search_page(ckpt, "*.bias", limit=2)                       # doctest: +SKIP
    >>> page.total, page.matches                                          # doctest: +SKIP
    (8, [('model', 'layers', '0', 'attn', 'bias'), ('model', 'layers', '0', 'mlp', 'bias')])
    >>> page = search_page(ckpt, "*.bias", limit=2, count=False)          # doctest: +SKIP
    >>> page.total, page.counted, page.truncated                          # doctest: +SKIP
    (3, False, True)
    """
    matcher = Matcher(pattern)
    offset, stop = max(offset, 0), max(offset, 0) + max(limit, 0)
    early = not count and limit > 0  # stop once match ``stop + 1`` is seen
    seen = 0
    page: list[NestedPath] = []
    with gc_paused():
        for base, keys, hits in _batches(ckpt, matcher, under):
            n = len(hits)
            if seen < stop and seen + n > offset:
                page.extend((*base, keys[i]) for i in hits[max(offset - seen, 0) : stop - seen])
            seen += n
            if early and seen > stop:
                return SearchPage(pattern, offset, stop + 1, page, False, matcher.notes)
    return SearchPage(pattern, offset, seen, page, True, matcher.notes)


def iter_matches(
    ckpt: Checkpoint, pattern: str | Matcher, under: object = ()
) -> Iterator[NestedPath]:
    """The path of every match, in order (see :func:`search_page`), as they are found."""
    matcher = pattern if isinstance(pattern, Matcher) else Matcher(pattern)
    for base, keys, hits in _batches(ckpt, matcher, under):
        for i in hits:
            yield (*base, keys[i])


def walk(ckpt: Checkpoint, node: Node) -> Iterator[Node]:
    """Every node below ``node`` (not ``node`` itself), depth-first, in load order."""
    stack = [iter(ckpt.children(node))]
    while stack:
        cancel_point()  # a cancelled request's walk (a search) stops here
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
            continue
        yield child
        if not child.is_leaf:
            stack.append(iter(ckpt.children(child)))


def search(
    ckpt: Checkpoint, pattern: str, *, limit: int = 1000, under: object = ()
) -> tuple[list[NestedPath], bool]:
    """Paths whose node matches ``pattern``: ``(matches, truncated)``.

    A pattern is a subpath (``model/layers/0``), a state_dict key (``linear1.weight``),
    part of a key (``norm``), a glob (``*.bias``, ``layers/*/norm1/*``,
    ``**/exp_avg``) or a key pasted as a tuple or from code (``("model", "layers")``,
    ``sd['layers.0.w']``; a ``module.`` prefix dropped), case ignored: the rules are in
    :mod:`tdview.index._match` and :mod:`tdview.index._pasted`. Matches
    come depth-first, in load order; at most ``limit``, ``truncated`` when there are
    more (it stops at the first match past ``limit``; :func:`search_page` counts them
    all and pages). On a folder of checkpoints (a :class:`~tdview.index.Collection`) it
    searches its own names and every member's keys.
    """
    found: list[NestedPath] = []
    for path in iter_matches(ckpt, pattern, under):
        if len(found) == limit:
            return found, True
        found.append(path)
    return found, False
