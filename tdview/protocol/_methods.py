"""The protocol's methods in one table, and the three things read from it: a request's
checked params (:func:`parse_request`), its lane (:func:`lane`) and its answer
(:func:`answer`). The dispatcher (:mod:`._dispatch`) asks these and nothing else.

A :class:`Method` has

* ``parse``: the checked, typed params (:mod:`._params`, :mod:`._diff_params`), raising
  :class:`~tdview.errors.RequestError` that names the key and the value;
* ``lane(params)``: the lane (:data:`LANES`) from the message's raw params, before they
  are checked (a bad one is answered at once, in ``browse``);
* ``answer(call)``: the reply on one checkpoint (:mod:`._answers`), or None for the
  compare view's methods; ``compare(call)``: the reply on a compare view
  (:mod:`._compare`), or None for a method a compare view refuses;
* in a folder of checkpoints (:class:`~tdview.index.Collection`), a method without a
  ``path`` param is answered by the folder as a whole; otherwise the node's owner
  answers, the member with its own path; ``own(coll, node, call)`` answers a node of
  the folder itself (None: ``answer`` on the folder), ``at_mount`` says the folder
  answers a member's own root (a ``checkpoint`` row, as its children page shows it),
  and ``whole`` that the folder answers every path over all its members.

The names are the wire contract of ``js/src/protocol.ts`` (``METHODS``): a test holds
the two lists equal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import NoCheckpointError
from ..index import Collection, Node, Tree, is_folder
from . import _answers, _collection, _compare
from ._answers import Call
from ._check import check_params
from ._checks import fail
from ._diff_params import diff_params
from ._duplicates import duplicates_params
from ._messages import REQUEST, Request, check_bounds, envelope
from ._params import (
    children_params,
    devices_params,
    load_params,
    node_params,
    preview_params,
    search_params,
)
from ._session import Session
from ._sizes import sizes_params

__all__ = ["DIFF_METHODS", "LANES", "METHODS", "TABLE", "Method", "answer", "lane"]

Reply = tuple[dict[str, Any] | None, list[bytes]]
ProgressFn = Callable[[int, int, str], None]
#: Worker threads per lane. ``browse``: children and node without totals (a click);
#: ``walk``: search, and children and node with totals (a subtree's walk); ``preview``;
#: ``load``. Two walks and a slow click (a pickle scan of a few seconds) leave a thread
#: for the next click.
LANES = {"browse": 2, "walk": 2, "preview": 1, "load": 1}


@dataclass(frozen=True)
class Method:
    """One method of the protocol (see the module)."""

    name: str
    parse: Callable[[dict[str, Any]], dict[str, Any]]
    lane: Callable[[object], str]  # of the params as they came: maybe no object
    answer: Callable[[Call], Reply] | None = None
    own: Callable[[Collection, Node, Call], Reply] | None = None
    at_mount: bool = False
    compare: Callable[[_compare.CompareCall], Reply] | None = None
    #: a folder of checkpoints answers it itself at every path, over all its members
    #: (``duplicates``: the same bytes saved in two steps), paths from its root
    whole: bool = False


def _by_totals(params: object) -> str:
    """A click (no totals) browses; a subtree's totals walk it (params not an object:
    answered at once, in ``browse``)."""
    if not isinstance(params, dict):
        return "browse"
    return "browse" if params.get("totals", True) is False else "walk"


def _lane(name: str) -> Callable[[object], str]:
    return lambda params: name


def _diff(name: str, lane: str, compare: Callable[[_compare.CompareCall], Reply]) -> Method:
    return Method(name, lambda params: diff_params(name, params), _lane(lane), compare=compare)


TABLE: dict[str, Method] = {
    m.name: m
    for m in (
        Method("children", children_params, _by_totals, _answers.children, _answers.children_own),
        Method("node", node_params, _by_totals, _answers.node, _answers.node_own, at_mount=True),
        Method("search", search_params, _lane("walk"), _answers.search),
        Method("preview", preview_params, _lane("preview"), _answers.preview),
        Method(
            "devices", devices_params, _lane("browse"), _answers.devices, compare=_answers.devices
        ),
        Method("load", load_params, _lane("load"), _answers.load, _answers.load_own),
        Method("duplicates", duplicates_params, _lane("walk"), _answers.duplicates, whole=True),
        Method("sizes", sizes_params, _lane("walk"), _answers.sizes),
        Method("check", check_params, _lane("walk"), _answers.check),
        # the compare view's: clicks browse, payloads read in the preview and load lanes
        _diff("diff_children", "browse", _compare.children),
        _diff("diff_node", "browse", _compare.node),
        _diff("diff_refine", "load", _compare.refine),
        _diff("diff_preview", "preview", _compare.preview),
        _diff("diff_load", "load", _compare.load),
    )
}
METHODS = tuple(TABLE)
#: The compare view's methods (params checked in :mod:`._diff_params`).
DIFF_METHODS = tuple(name for name, m in TABLE.items() if m.answer is None)
assert all(TABLE[name].compare is not None for name in DIFF_METHODS)


def parse_request(message: object) -> Request:
    """Check a ``tdview:request`` message and return its typed parameters.

    Parameters
    ----------
    message : object
        The JSON content of a custom message.

    Returns
    -------
    Request
        ``id``, ``method`` and ``params`` (paths as tuples; limits clamped to the caps).

    Raises
    ------
    RequestError
        The message is nested too deep or too large (:func:`~._messages.check_bounds`),
        or the envelope, the method or a parameter is wrong; the message says which.

    Examples
    --------
    >>> parse_request({"kind": "tdview:request", "v": 1, "id": 7, "method": "node",
    ...                "params": {"path": ["obs"]}})
    Request(id=7, method='node', params={'path': ('obs',), 'totals': True})
    """
    check_bounds(message)
    found = envelope(message, REQUEST)
    method = found.get("method")
    if method not in METHODS:  # a tuple: a method of any type (a list) is refused
        raise fail("message.method", f"one of {', '.join(METHODS)}", method)
    params = found.get("params")
    if not isinstance(params, dict):
        raise fail(f"{method} params", "an object", params)
    return Request(int(found["id"]), method, TABLE[method].parse(params))


def lane(message: object) -> str:
    """The lane (:data:`LANES`) a message is answered in; one not yet checked goes to
    ``browse``, which answers its error at once.

    Examples
    --------
    >>> lane({"method": "node", "params": {"path": [], "totals": False}})
    'browse'
    >>> lane({"method": "children", "params": {"path": []}})   # totals by default
    'walk'
    """
    if not isinstance(message, dict):
        return "browse"
    method = message.get("method")
    found = TABLE.get(method) if isinstance(method, str) else None
    return "browse" if found is None else found.lane(message.get("params"))


def answer(session: Session, request: Request, progress_fn: ProgressFn | None) -> Reply:
    """The reply to a checked request: from the compare view, a folder of checkpoints
    (routed to the node's owner) or the one checkpoint."""
    if session.diff is not None or request.method.startswith("diff_"):
        return _on_comparison(session, request, progress_fn)
    ckpt = session.ckpt
    assert ckpt is not None
    if is_folder(ckpt):
        return _on_collection(session, ckpt, request, progress_fn)
    return _on(session, ckpt, session.source, request, progress_fn)


def _on_comparison(session: Session, request: Request, progress_fn: ProgressFn | None) -> Reply:
    """A request of a session that compares checkpoints: the method's ``compare`` answer
    (the ``diff_*`` methods and ``devices``; the others are refused).

    Raises
    ------
    NoCheckpointError
        A ``diff_*`` request to a view of one checkpoint, or another request to a
        compare view (which has no one checkpoint to browse).
    """
    method, comparison = request.method, session.diff
    if comparison is None:
        raise NoCheckpointError(
            f"{method}: this view compares no checkpoints (open one with TDView(a, compare=b))"
        )
    compare = TABLE[method].compare
    if compare is None:
        raise NoCheckpointError(f"{method}: a compare view answers the diff_* methods only")

    check, report = _check_and_report(session, request, progress_fn)
    call = _compare.CompareCall(
        comparison, request.params, check, report, session.namespace, session.on_load
    )
    return compare(call)


def _on_collection(
    session: Session, coll: Collection, request: Request, progress_fn: ProgressFn | None
) -> Reply:
    """A request on a folder of checkpoints: its own nodes answered here, a member's
    by the member (see :mod:`._collection` and the table's ``own``/``at_mount``)."""
    method, params = TABLE[request.method], request.params
    if "path" not in params or method.whole:  # search, devices, duplicates: all members
        return _on(session, coll, session.source, request, progress_fn)
    owner, prefix, inner = coll.locate(params["path"])
    if owner is coll:
        if method.own is None:
            return _on(session, coll, session.source, request, progress_fn)
        call = _call(session, coll, session.source, request, progress_fn)
        return method.own(coll, coll.node(inner), call)
    mount = coll.own_node(prefix)
    assert mount is not None
    if method.at_mount and not inner:
        return _collection.details(coll, mount, session.source, totals=params["totals"]), []
    member = _collection.member_info(session.source, mount, coll)
    inside = Request(request.id, request.method, {**params, "path": inner})
    result, out = _on(session, owner, member["source"], inside, progress_fn)
    assert result is not None
    return _collection.put_under(result, prefix, member), out


def _call(
    session: Session,
    ckpt: Tree,
    source: str,
    request: Request,
    progress_fn: ProgressFn | None,
) -> Call:
    check, report = _check_and_report(session, request, progress_fn)
    return Call(ckpt, source, request.params, check, report, session.namespace, session.on_load)


def _check_and_report(
    session: Session, request: Request, progress_fn: ProgressFn | None
) -> tuple[Callable[[], None], ProgressFn]:
    """The request's cancel check, and its progress report, which checks first (a load
    or a refine stops at its next step once the request is cancelled)."""

    def check() -> None:
        session.check(request.id)

    def report(done: int, total: int, label: str) -> None:
        check()
        if progress_fn is not None:
            progress_fn(done, total, label)

    return check, report


def _on(
    session: Session,
    ckpt: Tree,
    source: str,
    request: Request,
    progress_fn: ProgressFn | None,
) -> Reply:
    answer_on = TABLE[request.method].answer
    assert answer_on is not None  # the compare view's methods went to _on_comparison
    return answer_on(_call(session, ckpt, source, request, progress_fn))
