"""The ``search`` method: one page of the nodes whose path matches a pattern, the number
of all of them (or, asked not to count, a lower bound: the first page of a huge fresh
checkpoint then answers without waiting for the whole walk), and a summary of each node
of the page.

The rules of a pattern (a subpath, a state_dict key, part of a key, a glob) are those of
:mod:`tdview.index._match`; the order is the checkpoint's, depth-first in load order
(:mod:`tdview.index._search`). On a folder of checkpoints the matches span its own names
and every member's keys, and a node inside a member carries ``member`` as in a
``children`` reply.
"""

from __future__ import annotations

from typing import Any

from ..errors import TDViewError
from ..index import Tree, is_folder, search_page
from . import _collection, _summaries


def _summary(ckpt: Tree, path: tuple[str, ...], source: str) -> dict[str, Any]:
    """The ``NodeSummary`` of a match without totals (a match's subtree is not walked:
    its ``bytes``/``numel`` are there when cached, and a leaf's always)."""
    if not is_folder(ckpt):
        return _summaries.summary(ckpt, ckpt.node(path), totals=False)
    owner, prefix, inner = ckpt.locate(path)
    if owner is ckpt:
        node = ckpt.own_node(inner)
        assert node is not None
        return _collection.summary(ckpt, node, source, totals=False)
    mount = ckpt.own_node(prefix)
    assert mount is not None
    if not inner:  # the member itself: a "checkpoint" row, as in its folder's children
        return _collection.summary(ckpt, mount, source, totals=False)
    result = _summaries.summary(owner, owner.node(inner), totals=False)
    member = _collection.member_info(source, mount, ckpt)
    result.update(key=path[-1], path=list(path), member=member)
    return result


def search_result(
    ckpt: Tree,
    pattern: str,
    limit: int,
    *,
    offset: int = 0,
    source: str = "",
    count: bool = True,
) -> dict[str, Any]:
    """``SearchResult``: matches ``offset`` to ``offset + limit`` of ``pattern``.

    Returns
    -------
    dict
        ``pattern``, ``offset``, ``total`` (every match, not only this page's),
        ``counted``, ``matches`` (their paths), ``nodes`` (a ``NodeSummary`` of each, in
        the same order, without subtree totals not yet cached) and ``truncated``
        (matches follow this page), ``notes`` (how the pattern was read: a pasted key,
        a ``module.`` prefix dropped; see :mod:`tdview.index._pasted`). ``limit=0``
        only counts. With ``count=False`` the walk stops at the first match after the
        page: then ``counted`` is false, ``total`` is
        ``offset + limit + 1`` (a lower bound) and ``truncated`` true; a walk that ends
        before gives the exact count and ``counted`` true (see
        :func:`~tdview.index.search_page`).

    Examples
    --------
    >>> result = search_result(Checkpoint("demo_ckpt"), "*.bias", 2)   # doctest: +SKIP
    >>> result["total"], result["nodes"][0]["shape"]                    # doctest: +SKIP
    (8, [64])
    """
    page = search_page(ckpt, pattern, offset=offset, limit=limit, count=count)
    nodes = []
    for path in page.matches:
        try:
            nodes.append(_summary(ckpt, path, source))
        except (TDViewError, OSError) as error:  # a node changed since it was found
            nodes.append(_summaries.unread_summary(path, "leaf", [str(error)]))
    return {
        "pattern": pattern,
        "offset": page.offset,
        "total": page.total,
        "counted": page.counted,
        "matches": [list(path) for path in page.matches],
        "nodes": nodes,
        "truncated": page.truncated,
        "notes": list(page.notes),
    }
