"""The index expression of a preview: which rows and columns of a leaf are shown.

An index is written as Python and numpy write one, inside square brackets or not:
``[50000:50020, :8]``, ``50000:50020``, ``[-1]``, ``[::10, 3]``, ``[]``. It is parsed
here, never evaluated, by this grammar (white space allowed around every part)::

    index  := "[" parts "]" | parts
    parts  := (part ("," part)* ","?)?          -- at most 64 parts
    part   := int | [int] ":" [int] [":" [int]]
    int    := ["+" | "-"] digit{1,19}          -- ASCII digits, |value| < 2**63

One part per dim of the leaf, from dim 0; dims without one are shown whole (``:``). A
slice's step, when given, is at least 1; its bounds are clipped to the dim as Python
clips them (``[50000:99999999]`` of 1,000 rows is empty, ``[-20:]`` the last 20). An
integer picks one position and drops the dim (``[-1]`` is the last row); past the dim's
size it is a :class:`~tdview.errors.PreviewIndexError`, as is an index with more parts
than the leaf has dims. Nothing else is taken: no ``...``, no ``None``, no lists, no
expressions. The widget's in-memory data source parses with the same grammar
(``js/src/preview-index.ts``), checked against the same cases
(``tests/preview_index_cases.json``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import PreviewIndexError, RequestError

#: Longest index text taken, and most parts (torch's most dims).
MAX_INDEX_TEXT = 256
MAX_PARTS = 64
_LIMIT = 2**63

Part = int | tuple[int | None, int | None, int | None]

#: White space an index may hold (ASCII, as the JavaScript twin takes it).
_WS = " \t\n\r\f\v"
_INT = r"[+-]?[0-9]{1,19}"
_SLICE = re.compile(rf"\s*({_INT})?\s*:\s*({_INT})?\s*(?::\s*({_INT})?\s*)?", re.ASCII)
_ONE = re.compile(rf"\s*({_INT})\s*", re.ASCII)


def _int(text: str | None, where: str) -> int | None:
    if text is None:
        return None
    value = int(text)
    if not -_LIMIT < value < _LIMIT:
        raise RequestError(f"{where}: {text} is out of range (at most 19 digits, below 2**63)")
    return value


def parse_index(text: str, where: str = "preview params.index") -> tuple[Part, ...]:
    """The parts of an index expression (see the module docstring): an ``int`` or a
    ``(start, stop, step)`` tuple each, ``None`` for an omitted bound.

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
    return tuple(_part(piece, f"{where} part {i}") for i, piece in enumerate(pieces))


def _part(piece: str, where: str) -> Part:
    one = _ONE.fullmatch(piece)
    if one is not None:
        value = _int(one.group(1), where)
        assert value is not None
        return value
    found = _SLICE.fullmatch(piece)
    if found is None:
        raise RequestError(
            f"{where}: {piece.strip(_WS)!r} is not an integer or a slice "
            "start:stop:step of integers"
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


def select(
    parts: tuple[Part, ...], shape: tuple[int, ...] | list[int]
) -> tuple[tuple[int | slice, ...], list[Dim]]:
    """``(key, dims)``: the torch index of ``parts`` over ``shape`` (ints and slices:
    indexing a tensor with it is a view, nothing read) and, per dim, what it shows.

    Raises
    ------
    PreviewIndexError
        More parts than dims, or an integer past its dim's size.

    Examples
    --------
    >>> key, dims = select(parse_index("[5:, -1]"), (8, 3))
    >>> key, [(d.start, d.stop, d.kept) for d in dims]
    ((slice(5, 8, 1), 2), [(5, 8, True), (2, 3, False)])
    """
    if len(parts) > len(shape):
        raise PreviewIndexError(
            f"the index has {len(parts)} parts but the leaf has {len(shape)} dims {list(shape)}"
        )
    key: list[int | slice] = []
    dims: list[Dim] = []
    for d, size in enumerate(shape):
        part = parts[d] if d < len(parts) else (None, None, None)
        if isinstance(part, int):
            at = part + size if part < 0 else part
            if not 0 <= at < size:
                raise PreviewIndexError(f"index {part} is out of range for dim {d} of size {size}")
            key.append(at)
            dims.append(Dim(at, at + 1, 1, kept=False))
            continue
        start, stop, step = slice(*part).indices(size)
        key.append(slice(start, stop, step))
        dims.append(Dim(start, max(stop, start), step, kept=True))
    return tuple(key), dims


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
