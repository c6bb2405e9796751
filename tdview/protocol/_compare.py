"""The compare view's requests: a :class:`Comparison` is what a
:class:`~._session.Session` holds (``session.diff``) when its widget compares two
checkpoints (``TDView(a, compare=b)``).

The table of methods (:mod:`._methods`) sends a compare view's requests to the answers
here (and ``devices``, for the load form, to the one checkpoint's). Pages, details and
previews come from :mod:`._diff`; ``diff_load`` loads a subtree of one side as ``load``
does (its code line names that side's checkpoint, as the user spelled it). Requests read
the rows under the view's lock, so a page asked while a refine replaces rows sees them
before or after.
"""

from __future__ import annotations

import os
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..index import Tree, is_folder
from . import _collection, _diff, _load

if TYPE_CHECKING:
    from ._diff import DiffView

Reply = tuple[dict[str, Any] | None, list[bytes]]
ProgressFn = Callable[[int, int, str], None]


@dataclass
class Comparison:
    """An open compare view, the two sources as the user spelled them (for code lines),
    and who hears of a refined diff (the widget updates its ``compare`` trait)."""

    view: DiffView
    source_a: str
    source_b: str
    on_refine: Callable[[dict[str, Any]], None] | None = None

    def state(self) -> dict[str, Any]:
        """``CompareState``: the sources, the ``DiffSummary`` and the root's ``DiffItem``
        (small: the widget's ``compare`` trait holds it)."""
        with self.view.lock:
            return {
                "source_a": self.source_a,
                "source_b": self.source_b,
                "summary": _diff.summary(self.view),
                "root": _diff.details(self.view, ()),
            }

    def close(self) -> None:
        self.view.close()


@dataclass(frozen=True)
class CompareCall:
    """One request to answer on a compare view: the comparison, the checked params, the
    cancel check, the progress report (which checks too), and where a load binds."""

    comparison: Comparison
    params: dict[str, Any]
    check: Callable[[], None]
    report: ProgressFn
    namespace: MutableMapping[str, Any] | None
    bind: Callable[[Any], None] | None


# -- the answers (the ``compare`` column of the table of methods, :mod:`._methods`) ----


def children(call: CompareCall) -> Reply:
    p, view = call.params, call.comparison.view
    with view.lock:
        return _diff.children_page(view, p["path"], p["offset"], p["limit"], p["only_changed"]), []


def node(call: CompareCall) -> Reply:
    view = call.comparison.view
    with view.lock:
        return _diff.details(view, call.params["path"]), []


def preview(call: CompareCall) -> Reply:
    p = call.params
    return _diff.preview_pair(call.comparison.view, p["path"], p["rows"], call.check)


def refine(call: CompareCall) -> Reply:
    p, comparison = call.params, call.comparison
    result = _diff.refine(
        comparison.view,
        p["path"],
        p["level"],
        rtol=p["rtol"],
        atol=p["atol"],
        allow_pickle=p["allow_pickle"],
        progress=call.report,
        check=call.check,
    )
    if comparison.on_refine is not None:
        comparison.on_refine(comparison.state())
    return result, []


def load(call: CompareCall) -> Reply:
    c = call
    return _load_side(c.comparison, c.params, c.namespace, c.report, c.bind, c.check), []


def _load_side(
    comparison: Comparison,
    params: dict[str, Any],
    namespace: MutableMapping[str, Any] | None,
    report: ProgressFn,
    bind: Callable[[Any], None] | None,
    check: Callable[[], None],
) -> dict[str, Any]:
    """``diff_load``: the ``load`` of a subtree of side ``a`` or ``b``."""
    view = comparison.view
    ckpt: Tree = view.a if params["side"] == "a" else view.b
    source = comparison.source_a if params["side"] == "a" else comparison.source_b
    path = params["path"]
    owner, prefix, inner = ckpt.locate(path)
    if is_folder(owner):  # a folder of checkpoints' own node: only a raw array of it loads
        _collection.refuse_load(owner, owner.node(inner))
    else:  # the checkpoint, or the member of a folder of them, that holds the path
        ckpt, source, path = owner, os.path.join(source, *prefix), inner
    inside = {**params, "path": path}
    return _load.load(ckpt, source, inside, namespace, report, bind=bind, check=check)
