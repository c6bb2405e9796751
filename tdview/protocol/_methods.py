"""The protocol's methods in one table: for each, how its params are checked, the lane
the dispatcher answers it in, how it is answered on one checkpoint, and how a folder of
checkpoints routes it.

A :class:`Method` has

* ``parse``: the checked, typed params (:mod:`._messages`, :mod:`._diff_params`), raising
  :class:`~tdview.errors.RequestError` that names the key and the value;
* ``lane(params)``: the lane (:data:`~._dispatch.LANES`) from the message's raw params,
  before they are checked (a bad one is answered at once, in ``browse``);
* ``answer(call)``: the reply on one checkpoint, or None for the compare view's
  methods; ``compare(call)``: the reply on a compare view (:mod:`._compare`), or None
  for a method a compare view refuses;
* in a folder of checkpoints (:class:`~tdview.index.Collection`), a method without a
  ``path`` param is answered by the folder as a whole; otherwise the node's owner
  answers, the member with its own path; ``own(coll, node, call)`` answers a node of
  the folder itself (None: ``answer`` on the folder), and ``at_mount`` says the folder
  answers a member's own root (a ``checkpoint`` row, as its children page shows it).

The names are the wire contract of ``js/src/protocol.ts`` (``METHODS``): a test holds
the two lists equal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..index import Checkpoint, Collection, Node
from . import _collection, _compare, _load, _preview, _search, _summaries
from ._diff_params import diff_params
from ._messages import (
    DIFF_METHODS,
    METHODS,
    children_params,
    devices_params,
    load_params,
    node_params,
    preview_params,
    search_params,
)

if TYPE_CHECKING:
    from ._dispatch import Session

__all__ = ["TABLE", "Call", "Method"]

Reply = tuple[dict[str, Any] | None, list[bytes]]
ProgressFn = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Call:
    """One request to answer on one checkpoint: its session, the checkpoint (a member's,
    in a folder of checkpoints) and the source that names it in code lines, the checked
    params, the cancel check and the progress callback."""

    session: Session
    ckpt: Checkpoint
    source: str
    params: dict[str, Any]
    check: Callable[[], None]
    progress: ProgressFn | None


@dataclass(frozen=True)
class Method:
    """One method of the protocol (see the module)."""

    name: str
    parse: Callable[[dict[str, Any]], dict[str, Any]]
    lane: Callable[[dict[str, Any]], str]
    answer: Callable[[Call], Reply] | None = None
    own: Callable[[Collection, Node, Call], Reply] | None = None
    at_mount: bool = False
    compare: Callable[[_compare.CompareCall], Reply] | None = None


def _by_totals(params: dict[str, Any]) -> str:
    """A click (no totals) browses; a subtree's totals walk it (params not an object:
    answered at once, in ``browse``)."""
    if not isinstance(params, dict):
        return "browse"
    return "browse" if params.get("totals", True) is False else "walk"


def _lane(name: str) -> Callable[[dict[str, Any]], str]:
    return lambda params: name


# -- answers on one checkpoint ----------------------------------------------------------


def _children(call: Call) -> Reply:
    p = call.params
    return _summaries.children_page(
        call.ckpt, p["path"], p["offset"], p["limit"], totals=p["totals"]
    ), []


def _node(call: Call) -> Reply:
    p = call.params
    return _summaries.details(call.ckpt, call.ckpt.node(p["path"]), totals=p["totals"]), []


def _search_answer(call: Call) -> Reply:
    p = call.params
    return _search.search_result(
        call.ckpt,
        p["pattern"],
        p["limit"],
        offset=p["offset"],
        source=call.source,
        count=p["count"],
    ), []


def _devices(call: Call) -> Reply:
    return _load.devices(), []


def _preview_answer(call: Call) -> Reply:
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


def _load_answer(call: Call) -> Reply:
    check, progress = call.check, call.progress

    def report(done: int, total: int, label: str) -> None:
        check()
        if progress is not None:
            progress(done, total, label)

    session = call.session
    return _load.load(
        call.ckpt,
        call.source,
        call.params,
        session.namespace,
        report,
        bind=session.on_load,
        check=check,
    ), []


# -- a folder of checkpoints' own nodes -------------------------------------------------


def _children_own(coll: Collection, node: Node, call: Call) -> Reply:
    p = call.params
    return _collection.children_page(
        coll, node, call.source, p["offset"], p["limit"], totals=p["totals"]
    ), []


def _node_own(coll: Collection, node: Node, call: Call) -> Reply:
    return _collection.details(coll, node, call.source, totals=call.params["totals"]), []


def _load_own(coll: Collection, node: Node, call: Call) -> Reply:
    _collection.refuse_load(coll, node)  # a folder or a side file: a clear SubpathError
    return _load_answer(call)


def _diff(name: str, lane: str, compare: Callable[[_compare.CompareCall], Reply]) -> Method:
    return Method(name, lambda params: diff_params(name, params), _lane(lane), compare=compare)


TABLE: dict[str, Method] = {
    m.name: m
    for m in (
        Method("children", children_params, _by_totals, _children, _children_own),
        Method("node", node_params, _by_totals, _node, _node_own, at_mount=True),
        Method("search", search_params, _lane("walk"), _search_answer),
        Method("preview", preview_params, _lane("preview"), _preview_answer),
        Method("devices", devices_params, _lane("browse"), _devices, compare=_compare.devices),
        Method("load", load_params, _lane("load"), _load_answer, _load_own),
        # the compare view's: clicks browse, payloads read in the preview and load lanes
        _diff("diff_children", "browse", _compare.children),
        _diff("diff_node", "browse", _compare.node),
        _diff("diff_refine", "load", _compare.refine),
        _diff("diff_preview", "preview", _compare.preview),
        _diff("diff_load", "load", _compare.load),
    )
}
assert tuple(TABLE) == METHODS and all(
    TABLE[m].answer is None and TABLE[m].compare is not None for m in DIFF_METHODS
)
