"""The answers of the methods on one checkpoint, and on a folder of checkpoints' own
nodes: the ``answer`` and ``own`` columns of the table of methods (:mod:`._methods`).
The compare view's answers are in :mod:`._compare`."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from ..index import Collection, Node, Tree
from . import _collection, _load, _preview, _search, _sizes, _summaries
from ._check import check_result
from ._duplicates import duplicates_result

Reply = tuple[dict[str, Any] | None, list[bytes]]
ProgressFn = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Call:
    """One request to answer on one checkpoint: the checkpoint (a member's, in a folder
    of checkpoints) and the source that names it in code lines, the checked params, the
    cancel check, the progress report (which checks too), and where a load binds (the
    session's namespace and ``on_load``)."""

    ckpt: Tree
    source: str
    params: dict[str, Any]
    check: Callable[[], None]
    report: ProgressFn
    namespace: MutableMapping[str, Any] | None
    bind: Callable[[Any], None] | None


def children(call: Call) -> Reply:
    p = call.params
    return _summaries.children_page(
        call.ckpt, p["path"], p["offset"], p["limit"], totals=p["totals"]
    ), []


def node(call: Call) -> Reply:
    p = call.params
    return _summaries.details(call.ckpt, call.ckpt.node(p["path"]), totals=p["totals"]), []


def search(call: Call) -> Reply:
    p = call.params
    return _search.search_result(
        call.ckpt,
        p["pattern"],
        p["limit"],
        offset=p["offset"],
        source=call.source,
        count=p["count"],
    ), []


def sizes(call: Call) -> Reply:
    p = call.params
    return _sizes.sizes_result(call.ckpt, p["path"], p["limit"], p["duplicates"], call.report), []


def duplicates(call: Call) -> Reply:
    p = call.params
    return duplicates_result(call.ckpt, p["path"], p["read"], call.report), []


def check(call: Call) -> Reply:
    p = call.params
    return check_result(call.ckpt, p["path"], p["values"], call.report, call.check), []


def devices(call: object) -> Reply:
    """The device list (a compare view answers it too, for its load form)."""
    return _load.devices(), []


def preview(call: Call) -> Reply:
    p = call.params
    return _preview.preview(
        call.ckpt,
        p["path"],
        p["rows"],
        call.check,
        rows_scope=p["rows_scope"],
        index=p["index"],
        offset=p["offset"],
        stats=p["stats"],
        heatmap=p["heatmap"],
        plane=p["plane"],
        col_offset=p["col_offset"],
    )


def load(call: Call) -> Reply:
    c = call
    return _load.load(
        c.ckpt, c.source, c.params, c.namespace, c.report, bind=c.bind, check=c.check
    ), []


# -- a folder of checkpoints' own nodes (the ``own`` column) ----------------------------


def children_own(coll: Collection, node: Node, call: Call) -> Reply:
    p = call.params
    return _collection.children_page(
        coll, node, call.source, p["offset"], p["limit"], totals=p["totals"]
    ), []


def node_own(coll: Collection, node: Node, call: Call) -> Reply:
    return _collection.details(coll, node, call.source, totals=call.params["totals"]), []


def load_own(coll: Collection, node: Node, call: Call) -> Reply:
    _collection.refuse_load(coll, node)  # a folder or a side file: a clear SubpathError
    return load(call)
