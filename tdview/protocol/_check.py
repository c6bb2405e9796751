"""The ``check`` method: is the subtree at ``path`` healthy (:func:`tdview.answers.check`).

A request ``{path, values}`` runs the check of that node (a leaf too) on the open
checkpoint, with ``tdview:progress`` messages while payloads are read (archive entries'
CRC-32s; every value with ``values: true``) and stops once cancelled. The reply is a
``CheckResult`` ``{path, healthy, problems, more, duplicates, checked, values}``: each
problem ``{path, kind, message}`` with its keys from the checkpoint's root (the widget
selects that node when one is clicked), at most :data:`MAX_PROBLEMS` of them (``more``:
how many were left out). Lane ``walk``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..answers import check
from ..index import Tree, cancellable
from ._checks import flag, path

#: Problems a reply lists at most (a checkpoint of a million damaged leaves says how
#: many more there are).
MAX_PROBLEMS = 500
#: Groups of duplicates a reply lists at most.
MAX_GROUPS = 100


def check_params(params: dict[str, Any]) -> dict[str, Any]:
    """``{path, values}``: ``values`` optional, false by default (integrity only).

    Examples
    --------
    >>> check_params({"path": ["model"], "values": True})
    {'path': ('model',), 'values': True}
    """
    return {"path": path(params, "check"), "values": flag(params, "values", "check", False)}


def check_result(
    ckpt: Tree,
    subpath: tuple[str, ...],
    values: bool,
    progress: Callable[[int, int, str], None],
    cancel: Callable[[], None],
) -> dict[str, Any]:
    """The ``CheckResult`` of the node at ``subpath`` (see the module).

    Examples
    --------
    >>> check_result(Checkpoint("ckpt.tdz"), (), False, print, lambda: None)
    ... # doctest: +SKIP
    {'path': [], 'healthy': True, 'problems': [], 'more': 0, ...}
    """
    with cancellable(cancel):
        report = check(ckpt, subpath, values=values, progress=progress)
    problems = [problem.to_dict() for problem in report.problems]
    groups = [[list(p) for p in group] for group in report.duplicates]
    return {
        "path": list(subpath),
        "healthy": report.healthy,
        "problems": problems[:MAX_PROBLEMS],
        "more": max(0, len(problems) - MAX_PROBLEMS),
        "duplicates": groups[:MAX_GROUPS],
        "checked": dict(report.checked),
        "values": values,
    }
