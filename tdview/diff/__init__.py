"""Diff two checkpoints: what changed, from metadata first, from bytes or values when asked.

:func:`diff` walks both indexes in step, by key, in load order, and makes one
:class:`Row` per key of the union; the fingerprint and value tiers then read payloads,
streamed in bounded memory over a pool of threads. It stands on the index and the
stores, never loads a whole tree, and unpickles only with ``allow_pickle=True``.

Modules: :mod:`._api` (the entry point), :mod:`._sides` (opening each side),
:mod:`._walk` (the metadata tier), :mod:`._spelling` (keys paired across a ``/`` tree
and dotted names), :mod:`._tiers` (fingerprints and values per row),
:mod:`._renames`, :mod:`._jobs` (what a payload job is), :mod:`._pool` (payload jobs on
threads), :mod:`._stream` (a leaf's bytes in chunks), :mod:`._stats` (float64
statistics), :mod:`._values` (Python values), :mod:`._result` (rows, rollups,
serialization), :mod:`._scalars` (the numbers of one-element leaves), :mod:`._text` and
:mod:`._cli` (``tdview diff``).

This module imports the index only when a diff runs (``import tdview`` stays light), and
torch only for the fingerprint and value tiers.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._cli import ProgressBar, add_parser
    from ._jobs import COMPARE, CRC, Job, Span
    from ._pool import run_jobs
    from ._result import (
        ADDED,
        AUTO,
        CHANGED,
        CRC_EQUAL,
        DIFFERS,
        EQUAL,
        LEVELS,
        REMOVED,
        RENAMED,
        SAME,
        Diff,
        DiffRollup,
        Facts,
        Row,
        ValueStats,
    )
    from ._sides import Side, Source, open_side
    from ._stream import open_source
    from ._text import line, summary
    from ._tiers import stored_crc

__all__ = [
    "ADDED",
    "AUTO",
    "CHANGED",
    "COMPARE",
    "CRC",
    "CRC_EQUAL",
    "DIFFERS",
    "EQUAL",
    "LEVELS",
    "REMOVED",
    "RENAMED",
    "SAME",
    "Diff",
    "DiffRollup",
    "Facts",
    "Job",
    "ProgressBar",
    "Row",
    "Side",
    "Span",
    "ValueStats",
    "add_parser",
    "diff",
    "line",
    "open_side",
    "open_source",
    "run_jobs",
    "stored_crc",
    "summary",
]

#: The face's names other than ``diff``, each imported from its module on first use.
_LAZY = {
    **{name: "._result" for name in __all__ if name[0].isupper()},  # the result types
    "add_parser": "._cli",  # ``tdview diff`` on the command line
    "ProgressBar": "._cli",  # the bar on stderr, for every command that reads payloads
    "line": "._text",  # a row as ``tdview diff`` prints it
    "summary": "._text",  # a Diff's one-line summary, as ``tdview diff`` ends
    # the payload jobs and a side, for the answers' walks (duplicates, check)
    **{name: "._jobs" for name in ("COMPARE", "CRC", "Job", "Span")},
    "run_jobs": "._pool",  # jobs on threads, in bounded memory (imports torch)
    "Side": "._sides",
    "open_side": "._sides",
    "open_source": "._stream",  # a leaf's bytes in chunks (tdview check's values)
    "stored_crc": "._tiers",  # an archive entry's CRC-32, no payload byte read
}
Progress = Callable[[int, int, str], object]


def diff(
    a: Source,
    b: Source,
    *,
    level: str = "metadata",
    rtol: float = 0.0,
    atol: float = 0.0,
    subpath: object = None,
    subpath_a: object = None,
    subpath_b: object = None,
    allow_pickle: bool = False,
    progress: Progress | None = None,
    num_threads: int | None = None,
) -> Diff:
    """Compare two checkpoints key by key: structure first, then bytes or values if asked.

    Both sides may be checkpoint directories or ``.tdz`` archives in any mix (or open
    :class:`~tdview.Checkpoint` objects, left open). Every key of the union gets a
    :class:`~tdview.diff.Row`: added, removed, renamed, changed or same. Keys pair
    across spellings of one module: ``layers/0/weight`` (a ``from_module`` dump, a
    safetensors file's grouped keys) with ``layers.0.weight`` (a flat
    ``TensorDict(state_dict)``), each row keeping each side's real path
    (``Row.path_a``, ``Row.path_b``).

    Parameters
    ----------
    a, b : str, os.PathLike or Checkpoint
        The old and the new checkpoint. A folder of checkpoints (no ``meta.json``) is
        accepted when the subpath reaches into one of its checkpoints
        (``subpath="step_1000/model"``); the folder itself is refused.
    level : {"metadata", "fingerprint", "values", "auto"}
        ``"metadata"`` reads no payload byte: keys, kinds, classes, batch sizes, names,
        dtypes, shapes, sizes, and non-tensor values kept in ``meta.json``.
        ``"fingerprint"`` adds, for leaves and pickles of the same dtype and shape, the
        stored size and CRC-32 of two archive entries (no payload byte read: a different
        CRC proves a difference, an equal one is strong evidence, reported
        ``"crc_equal"``), the CRC-32 of a file's bytes against an archive entry's, or a
        byte comparison of two files (``"equal"`` or ``"differs"``); and it reports a
        removed and an added leaf of the same dtype, shape and fingerprint as a rename.
        ``"values"`` reads both payloads, streamed in bounded memory, and compares
        tensors element by element in float64 (:class:`~tdview.diff.ValueStats`) and
        non-tensor values as values. ``"auto"`` (what ``TDView(a, compare=b)`` and
        ``tdview diff`` start with) is the most that reads no tensor's payload:
        ``"fingerprint"`` when both sides are archives, else ``"metadata"``; the
        :class:`Diff`'s ``level`` says which. Every level but ``"metadata"`` also reads
        the few bytes of each one-element leaf (``Row.scalars``: a step count shows as
        ``1000 -> 2000``, and two different numbers make the row changed). A row the
        same by metadata alone (``Row.unverified``) had its values not compared.
    rtol, atol : float
        Elements differ where ``|a - b| > atol + rtol * |a|`` (default: exactly;
        ``a`` is the reference).
    subpath : nested key or "a/b" path, optional
        Compare from this node on both sides; ``subpath_a`` and ``subpath_b`` set one side
        each (they win over ``subpath``). The node may be a leaf.
    allow_pickle : bool
        At the value tier, unpickle pickled non-tensor values to compare them as values
        (unpickling runs code: only for trusted checkpoints). Without it they are compared
        as bytes, and the row's ``note`` says so.
    progress : callable, optional
        ``progress(done_bytes, total_bytes, label)`` as the fingerprint and value tiers
        read payloads.
    num_threads : int, optional
        Threads reading and comparing leaves (default: up to 4, one per CPU).

    Returns
    -------
    Diff

    Raises
    ------
    SubpathError
        A subpath names nothing, or names a folder of checkpoints.
    ValueError
        An unknown level, or a negative tolerance.

    Examples
    --------
    >>> d = tdview.diff("step_1000", "step_2000.tdz", level="values")  # doctest: +SKIP
    >>> d.equal                                                         # doctest: +SKIP
    False
    >>> for row in d.changed():                                         # doctest: +SKIP
    ...     print(row.path, row.status, row.values and row.values.max_abs)
    """
    arguments = dict(locals())  # the arguments above, by name: written once, here
    from ._api import run_diff

    return run_diff(arguments)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tdview.diff' has no attribute {name!r}")
