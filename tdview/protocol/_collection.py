"""Requests on a folder of checkpoints (:class:`~tdview.index.Collection`).

A path that reaches into a member is answered by that member's own checkpoint, with the
path cut to the member's part, and the reply's paths are put back under the member's
place in the collection: every method then works inside a member exactly as on a
checkpoint opened alone. Nodes of the collection's own tree (folders, members, side
files) are summarised here; a side ``.memmap`` is a tensor leaf of the collection's own
store, so that previews and leaf loads of it take the common path.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import SubpathError, TDViewError
from ..index import (
    FOLDER,
    JSON_FILE,
    LEAF,
    MEMBER,
    PICKLE_FILE,
    RAW_MEMMAP,
    Collection,
    Node,
    Tree,
    is_folder,
)
from . import _summaries
from ._json import bounded_value


def member_info(source: str, node: Node, coll: Collection) -> dict[str, Any]:
    """Where a member is, as the loader takes it: ``{source, depth, container}``.
    ``source`` joins the collection's path as the user spelled it and the member's
    folders (``<zip>::<key>`` in a zip of checkpoints, which ``open_store`` opens);
    ``depth`` is how many leading keys of a path name the member."""
    inside = coll.store.packed  # the member has no path of its own: named in the zip
    where = f"{source}::{'/'.join(node.path)}" if inside else os.path.join(source, *node.path)
    return {
        "source": where,
        "depth": len(node.path),
        "container": node.type_hint or "directory",
    }


def root_summary(ckpt: Tree, source: str) -> dict[str, Any]:
    """The root's ``NodeSummary`` as the widget's first paint sends it (no totals)."""
    if is_folder(ckpt):
        return summary(ckpt, ckpt.root, source, totals=False)
    return _summaries.summary(ckpt, ckpt.root, totals=False)


def summary(coll: Collection, node: Node, source: str, *, totals: bool) -> dict[str, Any]:
    """The ``NodeSummary`` of a node of the collection's own tree."""
    if node.kind == LEAF:  # a side .memmap: a tensor leaf of the collection's store
        result = _summaries.summary(coll, node, totals=totals)
        result["class_name"] = RAW_MEMMAP
        return result
    if node.kind == MEMBER:
        return _member_summary(coll, node, source, totals=totals)
    # a side file's total is its size (one stat): always sent, as a leaf's is
    cheap = node.kind in (JSON_FILE, PICKLE_FILE) or node.rollup_cache is not None
    total = coll.total(node) if totals or cheap else None
    n_children = 0 if node.kind in (JSON_FILE, PICKLE_FILE) else coll.count_children(node)
    if node.kind == JSON_FILE:
        coll.side_value(node)  # a problem reading it shows on the row
    return {
        "key": node.key,
        "path": list(node.path),
        "kind": node.kind,
        "class_name": {JSON_FILE: "JSON file", PICKLE_FILE: "pickle file"}.get(node.kind, ""),
        "has_children": n_children > 0,
        "n_children": n_children,
        "shape": None,
        "dtype": None,
        "batch_size": None,
        "stack_dim": None,
        "bytes": None if total is None else total.bytes,
        "numel": None if total is None or node.kind != FOLDER else total.numel,
        "pickled": node.kind == PICKLE_FILE,
        "problems": list(node.problems),
    }


def _member_summary(coll: Collection, node: Node, source: str, *, totals: bool) -> dict[str, Any]:
    try:
        member = coll.member(node)
    except (TDViewError, OSError):
        result = _summaries.unread_summary(node.path, MEMBER, list(node.problems))
    else:
        result = _summaries.summary(member, member.root, totals=totals)
        result.update(key=node.key, path=list(node.path), kind=MEMBER)
    result["member"] = member_info(source, node, coll)
    return result


def details(coll: Collection, node: Node, source: str, *, totals: bool) -> dict[str, Any]:
    """The ``NodeDetails`` of a node of the collection's own tree."""
    if node.kind == LEAF:
        result = _summaries.details(coll, node, totals=totals)
        result["class_name"] = RAW_MEMMAP
        return result
    if node.kind == MEMBER:
        result = _member_summary(coll, node, source, totals=totals)
        try:
            member = coll.member(node)
        except (TDViewError, OSError):
            result.update(
                names=None,
                device=None,
                subpath="",
                storage=None,
                value=None,
                pickle=None,
                rollup=None,
                rows=None,
            )
            return result
        inner = _summaries.details(member, member.root, totals=totals)
        inner.update(key=node.key, path=list(node.path), kind=MEMBER, member=result["member"])
        return inner
    result = summary(coll, node, source, totals=totals)
    problems = result["problems"]
    total = coll.total(node) if result["bytes"] is not None else None
    result.update(
        names=None,
        device=None,
        subpath="/".join(node.path),
        storage=_file_storage(coll, node),
        value=bounded_value(coll.side_value(node)) if node.kind == JSON_FILE else None,
        pickle=_pickle(coll, node, problems) if node.kind == PICKLE_FILE else None,
        rollup=None
        if total is None or node.kind != FOLDER and node.path
        else {
            "bytes": total.bytes,
            "numel": total.numel,
            "leaves": total.leaves,
            "by_dtype": {_summaries.dtype_name(k): v for k, v in total.by_dtype.items()},
        },
        rows=None,
    )
    return result


def _file_storage(coll: Collection, node: Node) -> dict[str, Any] | None:
    if node.file is None:
        return None
    try:
        entry = coll.store.entry(node.file)
    except (TDViewError, OSError):
        return None
    return {
        "location": entry.display,
        "offset": 0,
        "stored_bytes": entry.stored_size,
        "compression": entry.compression,
        "crc32": None,
        "cost": "copy",
    }


def _pickle(coll: Collection, node: Node, problems: list[str]) -> dict[str, Any] | None:
    try:
        info = coll.side_pickle(node)
    except (TDViewError, OSError, ValueError) as error:
        problems.append(str(error))
        return None
    if info.unknown is not None:
        problems.append(f"{coll.store.display(node.file or '')}: {info.unknown}")
    return {
        "bytes": coll.file_size(node),
        "globals": [[module, name] for module, name in info.globals],
        "stopped": info.unknown,
    }


def children_page(
    coll: Collection, node: Node, source: str, offset: int, limit: int, *, totals: bool
) -> dict[str, Any]:
    page = coll.page(node, offset, limit)
    return {
        "path": list(node.path),
        "offset": offset,
        "total": page.total,
        "children": [summary(coll, child, source, totals=totals) for child in page.items],
    }


def refuse_load(coll: Collection, node: Node) -> None:
    """A load of a folder or a side file of the collection: a clear SubpathError."""
    if node.kind != LEAF:
        raise SubpathError(coll.not_loadable(node.path))


def put_under(
    result: dict[str, Any], prefix: tuple[str, ...], member: dict[str, Any]
) -> dict[str, Any]:
    """A member's reply with its paths put under the member's place in the collection,
    and the member's facts (``member``) on each node it describes."""
    if isinstance(result.get("path"), list):
        result["path"] = list(prefix) + result["path"]
    if "kind" in result and "key" in result:  # a node: the loader's code names the member
        result["member"] = member
    for child in result.get("children", ()):
        child["path"] = list(prefix) + child["path"]
    if isinstance(result.get("same"), list):  # duplicates: the other leaves
        result["same"] = [list(prefix) + path for path in result["same"]]
    if isinstance(result.get("problems"), list):  # check: each problem's node
        for problem in result["problems"]:
            problem["path"] = list(prefix) + problem["path"]
    if "healthy" in result:  # check: the groups stored twice
        result["duplicates"] = [[list(prefix) + p for p in group] for group in result["duplicates"]]
    param = result.get("param")  # an optimizer state's parameter
    if isinstance(param, dict) and isinstance(param.get("path"), list):
        param["path"] = list(prefix) + param["path"]
    return result
