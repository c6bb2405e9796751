"""The compare view's kernel side: a diff of two checkpoints served as protocol replies.

A :class:`DiffView` keeps both checkpoints open and the current :class:`~tdview.diff.Diff`
(at the level that reads no payload byte first: it opens at once); the view asks for
pages of the union tree, one key's details, a deeper level for a subtree, and a
side-by-side preview. Methods, in the v1 request envelope
(``{"kind": "tdview:request", "v": 1, "id", "method", "params"}``):

- ``diff_children`` ``{path, offset, limit, only_changed?}`` -> ``DiffPage``
  ``{path, offset, total, items: [DiffItem]}``: the keys below ``path`` in the diff's
  order (``only_changed``: those that differ, or hold a difference below them);
- ``diff_node`` ``{path}`` -> ``DiffItem`` (with its ``rollup``, also for a leaf);
- ``diff_refine`` ``{path, level, rtol?, atol?, allow_pickle?}`` -> ``DiffSummary``: the
  subtree at ``path`` compared again at ``level`` (its rows replace the old ones), with
  ``tdview:progress`` messages (bytes read) and cancel between chunks;
- ``diff_preview`` ``{path, rows}`` -> ``{path, a, b}``: a ``PreviewResult`` of each side
  (``null`` where the side lacks the leaf), buffers numbered across both.

A ``DiffItem`` is ``{key, path, status, changes, renamed_from, path_a, path_b, kind, a, b,
fingerprint, values, value_equal, note, problem, has_children, rollup, unverified,
scalars}`` (``path_a``/``path_b``: each side's real path of the key, ``null`` where the
side has no node for it: keys pair across spellings, ``layers.0.w`` against
``layers/0/w``; ``a``/``b``: each side's facts or ``null``; ``rollup``: counts and bytes
of the subtree, ``null`` for a leaf in a page; ``unverified``: the same by metadata
alone, its values not compared; ``scalars``: ``[a, b]``, the number a one-element leaf
holds on each side, ``null`` for other keys or at the metadata level). Every number is
finite: a statistic without a finite value is ``null``. The table of methods
(:mod:`._methods`) checks their params (:mod:`._diff_params`) and answers them through
:mod:`._compare`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..diff import LEVELS, Diff, DiffRollup, Row, ValueStats, diff
from ..errors import RequestError, SubpathError
from ..index import NestedPath, Tree, open_tree, show_path
from ._checks import MAX_PAGE, MAX_ROWS
from ._json import bounded_value

Progress = Callable[[int, int, str], None]


@dataclass
class DiffView:
    """Both checkpoints (open for the view's life), their subpaths and the diff."""

    a: Tree
    b: Tree
    result: Diff
    subpath_a: NestedPath = ()
    subpath_b: NestedPath = ()
    #: Held while the rows change (:func:`refine`) and by whoever reads them from another
    #: thread (the widget's dispatcher answers pages while a refine runs).
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _children: dict[NestedPath, list[Row]] | None = field(default=None, repr=False)
    _changed: dict[NestedPath, list[Row]] = field(default_factory=dict, repr=False)

    def close(self) -> None:
        self.a.close()
        self.b.close()

    def children_of(self, path: NestedPath, only_changed: bool = False) -> list[Row]:
        if self._children is None:
            index: dict[NestedPath, list[Row]] = {}
            for row in self.result.rows:
                if row.path:
                    index.setdefault(row.path[:-1], []).append(row)
            self._children = index
        rows = self._children.get(path, [])
        if not only_changed:
            return rows
        found = self._changed.get(path)
        if found is None:
            found = self._changed[path] = [row for row in rows if _differs(self, row)]
        return found

    def replaced(self) -> None:
        """Forget what was derived from the rows (after :func:`refine`)."""
        self._children = None
        self._changed.clear()


def open_view(
    a: Any,
    b: Any,
    *,
    level: str = "auto",
    subpath_a: object = None,
    subpath_b: object = None,
    rtol: float = 0.0,
    atol: float = 0.0,
    allow_pickle: bool = False,
) -> DiffView:
    """Open both checkpoints and diff them (``"auto"`` by default: no payload byte read;
    two archives by the sizes and CRC-32s their central directories record).

    Examples
    --------
    >>> view = open_view("step_1000", "step_2000.tdz")             # doctest: +SKIP
    >>> summary(view)["summary"]["changed"]                         # doctest: +SKIP
    3
    """
    ckpt_a = a if isinstance(a, Tree) else open_tree(a)
    try:
        ckpt_b = b if isinstance(b, Tree) else open_tree(b)
    except BaseException:
        if ckpt_a is not a:
            ckpt_a.close()
        raise
    result = diff(
        ckpt_a,
        ckpt_b,
        level=level,
        subpath_a=subpath_a,
        subpath_b=subpath_b,
        rtol=rtol,
        atol=atol,
        allow_pickle=allow_pickle,
    )
    return DiffView(ckpt_a, ckpt_b, result, result.subpath_a, result.subpath_b)


def summary(view: DiffView) -> dict[str, Any]:
    """``DiffSummary``: the sides, the options, whether equal, and the totals (small: a
    trait can hold it, so that a saved notebook still says what was compared)."""
    result = view.result
    return {
        "a": result.a,
        "b": result.b,
        "subpath_a": list(view.subpath_a),
        "subpath_b": list(view.subpath_b),
        "level": result.level,
        "rtol": result.rtol,
        "atol": result.atol,
        "equal": result.equal,
        "summary": _rollup(result.rollup()),
    }


def children_page(
    view: DiffView, path: NestedPath, offset: int, limit: int, only_changed: bool = False
) -> dict[str, Any]:
    """``DiffPage``: a page of the keys below ``path``."""
    _row(view, path)
    rows = view.children_of(path, only_changed)
    stop = offset + min(limit, MAX_PAGE)
    return {
        "path": list(path),
        "offset": offset,
        "total": len(rows),
        "items": [item(view, row) for row in rows[offset:stop]],
    }


def details(view: DiffView, path: NestedPath) -> dict[str, Any]:
    """``DiffItem`` of one key, with its rollup."""
    row = _row(view, path)
    found = item(view, row)
    found["rollup"] = _rollup(view.result.rollup(path))
    return found


def item(view: DiffView, row: Row) -> dict[str, Any]:
    facts = row.b if row.b is not None else row.a
    has_children = bool(view.children_of(row.path)) if not row.is_leaf else False
    return {
        "key": row.key,
        "path": list(row.path),
        "status": row.status,
        "changes": list(row.changes),
        "renamed_from": None if row.renamed_from is None else list(row.renamed_from),
        "path_a": None if row.path_a is None else list(row.path_a),
        "path_b": None if row.path_b is None else list(row.path_b),
        "kind": None if facts is None else facts.kind,
        "a": _facts(row.a),
        "b": _facts(row.b),
        "fingerprint": row.fingerprint,
        "values": _stats(row.values),
        "value_equal": row.value_equal,
        "note": row.note or None,
        "problem": row.problem or None,
        "has_children": has_children,
        "rollup": None if row.is_leaf else _rollup(view.result.rollup(row.path)),
        "unverified": row.unverified,
        "scalars": None if row.scalars is None else [bounded_value(v) for v in row.scalars],
    }


def refine(
    view: DiffView,
    path: NestedPath,
    level: str,
    *,
    rtol: float = 0.0,
    atol: float = 0.0,
    allow_pickle: bool = False,
    progress: Progress | None = None,
    check: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Compare the subtree at ``path`` again at ``level``; its rows replace the old ones.

    A rename across the subtree's edge (a leaf moved in or out of it) is found again only
    when a subtree holding both ends is refined.
    """
    if level not in LEVELS:
        raise RequestError(
            f"diff_refine params.level: expected one of {', '.join(LEVELS)}, got {level!r}"
        )
    row = _row(view, path)
    if row.status in ("added", "removed"):
        return summary(view)  # only on one side: nothing more to compare
    while row.path_a is None or row.path_b is None:  # a side spells it in its keys' names
        path = path[:-1]
        row = _row(view, path)
    path_a, path_b = row.path_a, row.path_b

    def report(done: int, total: int, label: str) -> None:
        check()
        if progress is not None:
            progress(done, total, label)

    check()
    sub = diff(
        view.a,
        view.b,
        level=level,
        subpath_a=view.subpath_a + path_a,
        subpath_b=view.subpath_b + path_b,
        rtol=rtol,
        atol=atol,
        allow_pickle=allow_pickle,
        progress=report,
    )
    for new in sub.rows:
        new.moved_under(path, path_a, path_b)
    with view.lock:
        view.result.splice(path, sub.rows, level)
        if not path:  # the whole diff was compared again: at that level and tolerances
            view.result.level = level
            view.result.rtol, view.result.atol = rtol, atol
        view.replaced()
        return summary(view)


def preview_pair(
    view: DiffView, path: NestedPath, rows: int, check: Callable[[], None] = lambda: None
) -> tuple[dict[str, Any], list[bytes]]:
    """``{path, a, b}``: the preview of the leaf on each side (``null`` where absent);
    ``b``'s buffer numbers follow ``a``'s."""
    from ._preview import preview

    with view.lock:
        row = _row(view, path)
    buffers: list[bytes] = []
    out: dict[str, Any] = {"path": list(path), "a": None, "b": None}
    for side, ckpt, own, subpath in (
        ("a", view.a, row.path_a, view.subpath_a),
        ("b", view.b, row.path_b, view.subpath_b),
    ):
        if own is None:
            continue
        owner, inner = _owner(ckpt, subpath + own)
        result, more = preview(owner, inner, min(rows, MAX_ROWS), check)
        out[side] = _renumber(result, len(buffers))
        buffers.extend(more)
    return out, buffers


def _row(view: DiffView, path: NestedPath) -> Row:
    try:
        return view.result.row(path)
    except KeyError:
        raise SubpathError(
            f"no key {show_path(path)!r} in the diff of {view.result.a} and {view.result.b}"
        ) from None


def _owner(ckpt: Tree, path: NestedPath) -> tuple[Tree, NestedPath]:
    """The checkpoint that owns ``path`` (a folder of checkpoints routes it to a member)."""
    owner, _, inner = ckpt.locate(path)
    return owner, inner


def _differs(view: DiffView, row: Row) -> bool:
    if row.status != "same" or row.problem:
        return True
    return not row.is_leaf and bool(
        view.result.rollup(row.path).differences or view.result.rollup(row.path).problems
    )


def _facts(facts: Any) -> dict[str, Any] | None:
    if facts is None:
        return None
    out = facts.to_dict()
    if "value" in out:
        out["value"] = bounded_value(facts.value)
    return out


def _stats(stats: ValueStats | None) -> dict[str, Any] | None:
    if stats is None:
        return None
    out = stats.to_dict()
    for name in ("max_abs", "mean_abs", "rel_l2", "cosine"):
        value = getattr(stats, name)
        out[name] = value if value is not None and math.isfinite(value) else None
    return out


def _rollup(total: DiffRollup) -> dict[str, int]:
    return total.to_dict()


def _renumber(value: Any, shift: int) -> Any:
    """A preview result with every ``{"buffer": n}`` reference moved by ``shift``."""
    if isinstance(value, dict):
        return {
            k: (v + shift if k == "buffer" and isinstance(v, int) else _renumber(v, shift))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_renumber(v, shift) for v in value]
    return value
