"""The ``duplicates`` method: the leaves stored with the same bytes as one leaf, and the
optimizer's parameter of a node's details.

A request ``{path, read}`` is answered with the other leaves of the checkpoint whose
payload is the same bytes as the leaf at ``path`` (:func:`tdview.answers.duplicates_of`).
``read: false`` is what browsing asks: it reads no payload byte, and answers from the
CRC-32s an archive records (``confirmed: false``); in a directory it says ``searched:
false`` when leaves of the same size and dtype exist, whose bytes would have to be read
(the widget then offers to). ``read: true`` hashes the candidates and confirms byte by
byte, reporting progress and stopping once cancelled. Lane ``walk``.
"""

from __future__ import annotations

from typing import Any

from ..answers import duplicates_of
from ..index import Node, Tree, param_label
from ._checks import flag, path

Progress = Any  # (done, total, label) -> None


def duplicates_params(params: dict[str, Any]) -> dict[str, Any]:
    """``{path, read}``: ``read`` optional, false by default (no payload byte read)."""
    return {"path": path(params, "duplicates"), "read": flag(params, "read", "duplicates", False)}


def duplicates_result(
    ckpt: Tree, subpath: tuple[str, ...], read: bool, progress: Progress = None
) -> dict[str, Any]:
    """``DuplicatesResult`` of the leaf at ``subpath``.

    Returns
    -------
    dict
        ``path``; ``same``, the other leaves with its bytes (paths, in load order);
        ``bytes``, the payload size of each (null when none); ``confirmed``, whether
        they were compared byte by byte (else they share the archive's CRC-32 and
        size); ``searched``, false when a directory's candidates were not read
        (``read: false``: ask again with ``read: true``).

    Examples
    --------
    >>> duplicates_result(Checkpoint("tied.tdz"), ("model", "head", "weight"), False)
    ... # doctest: +SKIP
    {'path': ['model', 'head', 'weight'], 'same': [['model', 'embed', 'weight']],
     'bytes': 4096, 'confirmed': False, 'searched': True}
    """
    found = duplicates_of(ckpt, subpath, read=read, progress=progress)
    group = found.groups[0] if found.groups else []
    return {
        "path": list(subpath),
        "same": [list(other) for other in group if other != tuple(subpath)],
        "bytes": found.nbytes[0] if found.nbytes else None,
        "confirmed": bool(group) and found.confirmed,
        "searched": found.unread == 0,
    }


def param_field(ckpt: Tree, node: Node) -> dict[str, Any] | None:
    """The ``param`` of a node's details: ``{name, path, reason}`` for an optimizer's
    ``state/<i>`` (the parameter it belongs to, or why that is not known), else None
    (the details then have no ``param``)."""
    label = param_label(ckpt, node)
    if label is None:
        return None
    return {
        "name": label.name,
        "path": None if label.path is None else list(label.path),
        "reason": label.reason,
    }
