"""The index expression of a preview (which values of a leaf it describes) and the plane
of that selection that its table and heatmap show.

An index is written as Python and numpy write one, inside square brackets or not:
``[50000:50020, :8]``, ``50000:50020``, ``[-1]``, ``[::10, 3]``, ``[..., 0]``, ``[]``. It
is parsed here, never evaluated, by this grammar (white space allowed around every part)::

    index  := "[" parts "]" | parts
    parts  := (part ("," part)* ","?)?          -- at most 64 parts
    part   := int | [int] ":" [int] [":" [int]] | "..."
    int    := ["+" | "-"] digit{1,19}          -- ASCII digits, |value| < 2**63

One part per dim of the leaf, from dim 0; dims without one are shown whole (``:``). One
``...`` (at most) stands for as many whole dims as the other parts leave, so the parts
after it index the last dims (``[..., 0]`` is the first position of the last dim). A
slice's step, when given, is at least 1; its bounds are clipped to the dim as Python clips
them (``[50000:99999999]`` of 1,000 rows is empty, ``[-20:]`` the last 20). An integer
picks one position and drops the dim (``[-1]`` is the last row); past the dim's size it is
a :class:`~tdview.errors.PreviewIndexError` that names the part, the dim and the leaf's
shape, as is an index with more parts than the leaf has dims. Nothing else is taken: no
``None``, no lists, no expressions. The widget's in-memory data source parses with the
same grammar (``js/src/preview-index.ts``), checked against the same cases
(``tests/preview_index_cases.json``).

**The plane.** The statistics and histogram describe the whole selection. Its table and
heatmap show a plane of it (:func:`plane_of`): two of the dims it keeps, one as rows and
one as columns (a selection of one dim is one column of rows; of none, its one value),
and one position of each other dim it keeps (H5Web's dimension mapper: a slider each).
By default the rows and columns are the last two dims it keeps, the others at their first
position: a conv weight ``[64, 3, 7, 7]`` shows the 7 x 7 kernel ``[0, 0, :, :]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import EllipsisType
from typing import Any

from ..errors import PreviewIndexError, RequestError

#: Longest index text taken, and most parts (torch's most dims).
MAX_INDEX_TEXT = 256
MAX_PARTS = 64
_LIMIT = 2**63

Part = int | tuple[int | None, int | None, int | None] | EllipsisType

#: White space an index may hold (ASCII, as the JavaScript twin takes it).
_WS = " \t\n\r\f\v"
_INT = r"[+-]?[0-9]{1,19}"
_SLICE = re.compile(rf"\s*({_INT})?\s*:\s*({_INT})?\s*(?::\s*({_INT})?\s*)?", re.ASCII)
_ONE = re.compile(rf"\s*({_INT})\s*", re.ASCII)
_DOTS = re.compile(r"\s*\.\.\.\s*", re.ASCII)


def _int(text: str | None, where: str) -> int | None:
    if text is None:
        return None
    value = int(text)
    if not -_LIMIT < value < _LIMIT:
        raise RequestError(f"{where}: {text} is out of range (at most 19 digits, below 2**63)")
    return value


def parse_index(text: str, where: str = "preview params.index") -> tuple[Part, ...]:
    """The parts of an index expression (see the module docstring): an ``int``, a
    ``(start, stop, step)`` tuple (``None`` for an omitted bound) or ``...`` each.

    Raises
    ------
    RequestError
        The text does not follow the grammar; the message names the part.

    Examples
    --------
    >>> parse_index("[50000:50020, :8]")
    ((50000, 50020, None), (None, 8, None))
    >>> parse_index(" -1 , ::2 ,")
    (-1, (None, None, 2))
    >>> parse_index("[..., 0]")
    (Ellipsis, 0)
    """
    if len(text) > MAX_INDEX_TEXT:
        raise RequestError(f"{where}: longer than {MAX_INDEX_TEXT} characters")
    body = text.strip(_WS)
    if body.startswith("["):
        if not body.endswith("]"):
            raise RequestError(f"{where}: {text!r} opens a [ that no ] closes")
        body = body[1:-1]
    elif body.endswith("]"):
        raise RequestError(f"{where}: {text!r} closes a ] that no [ opens")
    if not body.strip(_WS):
        return ()
    pieces = body.split(",")
    if len(pieces) > 1 and not pieces[-1].strip(_WS):
        pieces.pop()  # one trailing comma, as Python allows
    if len(pieces) > MAX_PARTS:
        raise RequestError(f"{where}: more than {MAX_PARTS} parts")
    parts = tuple(_part(piece, f"{where} part {i}") for i, piece in enumerate(pieces))
    if parts.count(...) > 1:
        raise RequestError(f"{where}: {text.strip(_WS)!r} has more than one '...'")
    return parts


def _part(piece: str, where: str) -> Part:
    if _DOTS.fullmatch(piece):
        return ...
    one = _ONE.fullmatch(piece)
    if one is not None:
        value = _int(one.group(1), where)
        assert value is not None
        return value
    found = _SLICE.fullmatch(piece)
    if found is None:
        raise RequestError(
            f"{where}: {piece.strip(_WS)!r} is not an integer, a slice "
            "start:stop:step of integers or '...'"
        )
    start, stop, step = (_int(found.group(i), where) for i in (1, 2, 3))
    if step is not None and step < 1:
        raise RequestError(f"{where}: the step {step} must be at least 1")
    return start, stop, step


@dataclass(frozen=True)
class Dim:
    """What a preview shows of one dim of the leaf: ``range(start, stop, step)``;
    ``kept`` is False for a dim that an integer picked (and dropped)."""

    start: int
    stop: int
    step: int
    kept: bool

    @property
    def size(self) -> int:
        return len(range(self.start, self.stop, self.step))

    def as_json(self) -> dict[str, object]:
        return {"start": self.start, "stop": self.stop, "step": self.step, "kept": self.kept}


def _part_text(part: Part) -> str:
    if part is ...:
        return "..."
    if isinstance(part, int):
        return str(part)
    start, stop, step = ("" if v is None else str(v) for v in part)
    return f"{start}:{stop}" + (f":{step}" if step else "")


def _per_dim(parts: tuple[Part, ...], shape: tuple[int, ...]) -> list[tuple[int, Part]]:
    """``(which part, the part)`` for each dim of ``shape``: a ``...`` stands for the dims
    the other parts leave (a whole slice each)."""
    whole: Part = (None, None, None)
    if ... in parts:
        at = parts.index(...)
        before, after = parts[:at], parts[at + 1 :]
        fill = len(shape) - len(before) - len(after)
        return (
            list(enumerate(before))
            + [(at, whole)] * fill
            + [(at + 1 + i, p) for i, p in enumerate(after)]
        )
    return [(i, parts[i]) if i < len(parts) else (-1, whole) for i in range(len(shape))]


def select(
    parts: tuple[Part, ...], shape: tuple[int, ...] | list[int]
) -> tuple[tuple[int | slice, ...], list[Dim]]:
    """``(key, dims)``: the index of ``parts`` over ``shape`` (ints and slices, one per
    dim: indexing an array with it is a view, nothing read) and, per dim, what it shows.

    Raises
    ------
    PreviewIndexError
        More parts than dims, or an integer past its dim's size; the message names the
        part and the leaf's shape.

    Examples
    --------
    >>> key, dims = select(parse_index("[5:, -1]"), (8, 3))
    >>> key, [(d.start, d.stop, d.kept) for d in dims]
    ((slice(5, 8, 1), 2), [(5, 8, True), (2, 3, False)])
    >>> select(parse_index("[..., 0]"), (2, 3))[0]
    (slice(0, 2, 1), 0)
    """
    shape = tuple(shape)
    written = "[" + ", ".join(_part_text(p) for p in parts) + "]"
    named = sum(p is not ... for p in parts)
    if named > len(shape):
        dims = "dim" if len(shape) == 1 else "dims"
        raise PreviewIndexError(
            f"{written} has {named} parts but the leaf has {len(shape)} {dims}: "
            f"its shape is {list(shape)}"
        )
    key: list[int | slice] = []
    dims_out: list[Dim] = []
    for d, ((i, part), size) in enumerate(zip(_per_dim(parts, shape), shape, strict=True)):
        if isinstance(part, int):
            at = part + size if part < 0 else part
            if not 0 <= at < size:
                raise PreviewIndexError(
                    f"part {i} of {written}, {part}, is out of range for dim {d} of size "
                    f"{size} (from {-size} to {size - 1}): the leaf's shape is {list(shape)}"
                )
            key.append(at)
            dims_out.append(Dim(at, at + 1, 1, kept=False))
            continue
        assert isinstance(part, tuple)
        start, stop, step = slice(*part).indices(size)
        key.append(slice(start, stop, step))
        dims_out.append(Dim(start, max(stop, start), step, kept=True))
    return tuple(key), dims_out


def index_text(dims: list[Dim]) -> str:
    """The index that ``dims`` show, written back canonically (``[50000:50020, 0:8]``)."""
    parts = []
    for dim in dims:
        if not dim.kept:
            parts.append(str(dim.start))
        else:
            step = f":{dim.step}" if dim.step != 1 else ""
            parts.append(f"{dim.start}:{dim.stop}{step}")
    return "[" + ", ".join(parts) + "]"


@dataclass(frozen=True)
class Plane:
    """The plane of a selection that a table and a heatmap show: the leaf's dim shown as
    rows and as columns (None: none), and for each dim of the leaf the position within
    the selection of a dim kept but not shown (None for the others)."""

    rows: int | None
    cols: int | None
    at: tuple[int | None, ...]

    def as_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "cols": self.cols, "at": list(self.at)}

    def key(self, dims: list[Dim]) -> tuple[int | slice, ...]:
        """The index of the plane in the selection (one part per dim it keeps)."""
        return tuple(
            slice(None) if at is None else at
            for at, dim in zip(self.at, dims, strict=True)  # as long: see plane_of
            if dim.kept
        )

    @property
    def transposed(self) -> bool:
        """The rows are a later dim of the leaf than the columns."""
        return self.rows is not None and self.cols is not None and self.rows > self.cols


def plane_params(value: object, where: str = "preview params.plane") -> Plane | None:
    """The ``plane`` param: ``{rows, cols, at}`` (dims of the leaf, one position per dim
    of the leaf) or null.

    Raises
    ------
    RequestError
        Not that shape (the dims are checked against the leaf by :func:`plane_of`).
    """
    if value is None:
        return None

    def count(v: object) -> bool:
        return type(v) is int and 0 <= v < 2**53

    if (
        not isinstance(value, dict)
        or set(value) != {"rows", "cols", "at"}
        or not count(value["rows"])
        or not count(value["cols"])
        or not isinstance(value["at"], list)
        or len(value["at"]) > MAX_PARTS
        or not all(count(v) for v in value["at"])
    ):
        raise RequestError(
            f"{where}: expected {{rows, cols, at}} (dims of the leaf and a position per "
            f"dim, non-negative integers) or null, got {str(value)[:120]}"
        )
    return Plane(value["rows"], value["cols"], tuple(value["at"]))


def plane_of(dims: list[Dim], asked: Plane | None, shape: tuple[int, ...]) -> Plane:
    """The plane shown of the selection ``dims`` (of a leaf of ``shape``): ``asked``,
    checked, or by default the last two dims kept, the others at their first position.

    Raises
    ------
    PreviewIndexError
        ``asked`` names a dim the selection does not keep (or the same dim twice), or a
        position past the selection of its dim; the message names the dim and the shape.

    Examples
    --------
    >>> _, dims = select((), (64, 3, 7, 7))
    >>> plane_of(dims, None, (64, 3, 7, 7))
    Plane(rows=2, cols=3, at=(0, 0, None, None))
    """
    kept = [d for d, dim in enumerate(dims) if dim.kept]
    if asked is None or len(kept) < 2:
        rows: int | None = kept[-2] if len(kept) >= 2 else (kept[0] if kept else None)
        cols = kept[-1] if len(kept) >= 2 else None
        first = tuple(0 if d in kept and d not in (rows, cols) else None for d in range(len(dims)))
        return Plane(rows, cols, first)
    where = f"the leaf's shape is {list(shape)}, the selection {index_text(dims)}"
    for name, d in (("rows", asked.rows), ("cols", asked.cols)):
        if d not in kept:
            raise PreviewIndexError(
                f"plane {name}: dim {d} is not one the selection keeps ({kept}); {where}"
            )
    if asked.rows == asked.cols:
        raise PreviewIndexError(f"plane: dim {asked.rows} is both rows and columns; {where}")
    if len(asked.at) != len(dims):
        raise PreviewIndexError(
            f"plane at: {len(asked.at)} positions for a leaf of {len(dims)} dims; {where}"
        )
    at: list[int | None] = []
    for d, dim in enumerate(dims):
        if d not in kept or d in (asked.rows, asked.cols):
            at.append(None)
            continue
        position = asked.at[d] or 0
        if position >= dim.size:
            raise PreviewIndexError(
                f"plane at: position {position} of dim {d} is past the {dim.size} "
                f"positions selected; {where}"
            )
        at.append(position)
    return Plane(asked.rows, asked.cols, tuple(at))
