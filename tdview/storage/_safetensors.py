"""The safetensors header: 8 bytes of length, then a JSON object, parsed and checked here.

A ``.safetensors`` file is ``<u64 little-endian n><n bytes of JSON><data>``. The JSON
maps each tensor name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets
into the data, which starts at byte ``8 + n``), plus an optional ``"__metadata__"``
object of strings. tdview reads this header itself, rather than through the safetensors
library, for two reasons: a remote file's tree then costs two ranged reads (the length,
then the header), never a payload byte; and every value is checked here before anything
trusts it, as safetensors' own ``read_metadata`` does (the model this follows): the
length bounded, the JSON an object of well-formed records, each dtype from a closed
table, each shape of non-negative sizes whose bytes equal its span, each span inside
the file and overlapping no other. The library is the tests' reference
(``safetensors.torch.load_file``, ``safe_open(...).keys()`` and ``.metadata()``).

A header of many tensors (a megabyte for 10,000) is read by orjson and checked by whole
columns, a few C-level passes over every record (:func:`_checked_at_once`); at any doubt
it is read again record by record (json, each record checked alone), which gives the
same header or names what is wrong. Nothing is made per tensor until it is asked for:
:class:`Header` keeps the records as parsed.

Examples
--------
>>> import json, struct
>>> body = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
>>> header = parse_header(body, "x.safetensors", len(body) + 16)
>>> header.describe("w"), header.span("w"), header.data_start
(('float32', [2]), (69, 77), 69)
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from itertools import chain
from math import prod
from operator import itemgetter
from typing import Any, NamedTuple, cast

import numpy as np

from ..errors import CheckpointFormatError, LimitExceededError, UnsafeCheckpointError
from ._fast_json import fast_loads

__all__ = [
    "DTYPES",
    "MAX_HEADER",
    "PREFIX",
    "Header",
    "Tensor",
    "header_length",
    "parse_header",
]

#: The length prefix: one little-endian u64.
PREFIX = 8
#: The largest header read (safetensors' own ``MAX_HEADER_SIZE``).
MAX_HEADER = 100_000_000
#: Dimensions of one tensor at most (torch's own limit is 64).
MAX_RANK = 64

#: safetensors dtype -> (torch dtype name, bytes per element): closed, anything else is
#: refused. Sub-byte dtypes (F4, F6_*) have no torch dtype of their own: refused too.
DTYPES: dict[str, tuple[str, int]] = {
    "BOOL": ("bool", 1),
    "U8": ("uint8", 1),
    "I8": ("int8", 1),
    "U16": ("uint16", 2),
    "I16": ("int16", 2),
    "F16": ("float16", 2),
    "BF16": ("bfloat16", 2),
    "U32": ("uint32", 4),
    "I32": ("int32", 4),
    "F32": ("float32", 4),
    "U64": ("uint64", 8),
    "I64": ("int64", 8),
    "F64": ("float64", 8),
    "C64": ("complex64", 8),
    "F8_E4M3": ("float8_e4m3fn", 1),
    "F8_E5M2": ("float8_e5m2", 1),
    "F8_E4M3FNUZ": ("float8_e4m3fnuz", 1),
    "F8_E5M2FNUZ": ("float8_e5m2fnuz", 1),
    "F8_E8M0": ("float8_e8m0fnu", 1),
}


_DTYPE, _SHAPE, _OFFSETS = itemgetter("dtype"), itemgetter("shape"), itemgetter("data_offsets")
_DTYPE_SIZES = {name: size for name, (_, size) in DTYPES.items()}
#: Elements of one tensor checked at once (past it, record by record: no overflow).
_MAX_NUMEL = 1 << 56


class Tensor(NamedTuple):
    """One tensor of a safetensors header.

    Attributes
    ----------
    name : str
        The real key (``"model.layers.0.mlp.up.weight"``).
    dtype : str
        The torch dtype name (``"float32"``), from :data:`DTYPES`.
    shape : tuple of int
    begin, end : int
        Its bytes ``[begin, end)`` in the whole file (the header's offsets plus
        :attr:`Header.data_start`).
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.begin


class Header:
    """A parsed, checked header: each tensor's JSON record by name, in the file's order
    (its values checked: read them through :meth:`span` and :meth:`describe`),
    ``__metadata__``, and where the data starts. Nothing is made per tensor until asked
    (a header of a million tensors is a dict of records, as parsed)."""

    __slots__ = ("_tensors", "data_start", "empty", "metadata", "records")

    def __init__(
        self,
        records: dict[str, dict[str, Any]],
        metadata: dict[str, str] | None,
        data_start: int,
        empty: frozenset[str],
    ) -> None:
        self.records = records
        self.metadata = metadata
        self.data_start = data_start
        #: the tensors of no element (no byte in the file)
        self.empty = empty
        self._tensors: list[Tensor] | None = None

    def span(self, name: str) -> tuple[int, int]:
        """``(begin, end)`` of tensor ``name``'s bytes in the whole file."""
        begin, end = self.records[name]["data_offsets"]
        return self.data_start + begin, self.data_start + end

    def describe(self, name: str) -> tuple[str, list[int]]:
        """``(torch dtype name, shape)`` of tensor ``name``."""
        record = self.records[name]
        return DTYPES[record["dtype"]][0], record["shape"]

    @property
    def tensors(self) -> list[Tensor]:
        """Every tensor as a :class:`Tensor`, in the file's order (made once, when asked)."""
        if self._tensors is None:
            start = self.data_start
            self._tensors = [
                Tensor(name, DTYPES[r["dtype"]][0], tuple(r["shape"]), *_shifted(r, start))
                for name, r in self.records.items()
            ]
        return self._tensors


def _shifted(record: dict[str, Any], start: int) -> tuple[int, int]:
    begin, end = record["data_offsets"]
    return start + begin, start + end


def header_length(prefix: bytes, where: str, file_size: int | None) -> int:
    """The header's length from the file's first 8 bytes, checked against the file's
    size (when known) and :data:`MAX_HEADER`.

    Raises
    ------
    NotACheckpointError
        Fewer than 8 bytes.
    LimitExceededError
        A header longer than :data:`MAX_HEADER`.
    UnsafeCheckpointError
        A header that runs past the end of the file.

    Examples
    --------
    >>> header_length((16).to_bytes(8, "little"), "x.safetensors", 100)
    16
    """
    if len(prefix) < PREFIX:
        raise CheckpointFormatError(
            f"{where} is not a safetensors file: it is {len(prefix)} bytes long, shorter "
            "than the 8-byte header length."
        )
    (n,) = struct.unpack("<Q", prefix[:PREFIX])
    if n > MAX_HEADER:
        raise LimitExceededError(
            f"{where}: the safetensors header declares {n:,} bytes, above the limit of "
            f"{MAX_HEADER:,} bytes."
        )
    if file_size is not None and PREFIX + n > file_size:
        raise UnsafeCheckpointError(
            f"{where}: the safetensors header declares {n:,} bytes, past the end of the "
            f"file ({file_size:,} bytes)."
        )
    return int(n)


def parse_header(body: bytes, where: str, file_size: int | None) -> Header:
    """Parse and check the JSON header ``body`` (the ``n`` bytes after the length).

    Parameters
    ----------
    body : bytes
        The header's bytes.
    where : str
        The file, named in errors.
    file_size : int or None
        The file's size: every tensor's bytes must lie inside it (None: not checked
        here, a remote file whose size is not known; its reads are checked).

    Raises
    ------
    CheckpointFormatError
        Not a JSON object of well-formed records, an unknown dtype, a shape whose bytes
        are not its span's.
    UnsafeCheckpointError
        A span past the end of the file, or overlapping another.

    Examples
    --------
    >>> parse_header(b'{"__metadata__": {"format": "pt"}}', "x", 8 + 34).metadata
    {'format': 'pt'}
    """
    data_start = PREFIX + len(body)
    header = _checked_at_once(body, data_start, file_size)
    if header is not None:
        return header
    # something the checks at once could not vouch for: record by record, each error
    # named (and what orjson reads otherwise than json, as a lone surrogate, read by json)
    raw = _json_object(body, where)
    metadata = _metadata(raw.pop("__metadata__", None), where)
    tensors = [_tensor(name, record, where, data_start) for name, record in raw.items()]
    _check_spans(tensors, where, file_size)
    empty = frozenset(t.name for t in tensors if not t.size)
    return Header(cast("dict[str, dict[str, Any]]", raw), metadata, data_start, empty)


def _checked_at_once(body: bytes, data_start: int, file_size: int | None) -> Header | None:
    """The header of ``body`` when it is plainly well formed, checked by whole columns
    (a few C-level passes rather than Python code per tensor); None at the first doubt,
    and :func:`parse_header` then checks it record by record, which names what is wrong.

    The checks are those of :func:`_tensor` and :func:`_check_spans`; a name given twice
    (orjson keeps the last) is ruled out by counting: with no escape in the text, each
    ``:`` is a member's or lies in a string, so the text holds no more members than
    were parsed exactly when its colons are as many as the parsed members and the colons
    of the parsed strings.
    """
    if b"\\" in body:
        return None
    raw = fast_loads(body, ints_checked=True)  # (each number is checked to be an int)
    if type(raw) is not dict:
        return None
    colons = len(raw)
    metadata = raw.pop("__metadata__", None)
    if metadata is not None:
        if type(metadata) is not dict or set(map(type, metadata.values())) - {str}:
            return None
        colons += len(metadata) + "".join(metadata).count(":")
        colons += "".join(metadata.values()).count(":")
    records = list(raw.values())
    try:
        sizes = _record_sizes(records)
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    colons += sum(map(len, records)) + "".join(raw).count(":")
    if sizes is None or colons != body.count(b":"):
        return None
    begins, ends = sizes
    if file_size is not None and len(ends) and int(ends.max()) + data_start > file_size:
        return None
    used = begins != ends
    order = np.argsort(begins[used], kind="stable")
    first, last = begins[used][order], ends[used][order]
    if (first[1:] < last[:-1]).any():  # overlapping spans
        return None
    names = list(raw)
    empty = frozenset(names[i] for i in np.flatnonzero(~used).tolist())
    return Header(raw, metadata, data_start, empty)


def _record_sizes(records: list[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(begins, ends)`` of the records' data offsets when each is a well-formed record
    (a dtype of the table, a shape of at most :data:`MAX_RANK` sizes >= 0, offsets
    ``0 <= begin <= end`` whose bytes are the shape's), else None; what is not a record
    raises ``KeyError`` or ``TypeError``, an integer past 64 bits ``OverflowError``."""
    dtypes = list(map(_DTYPE, records))
    shapes = list(map(_SHAPE, records))
    offsets = list(map(_OFFSETS, records))
    if not _DTYPE_SIZES.keys() >= set(dtypes) or set(map(type, shapes)) - {list}:
        return None
    if set(map(type, offsets)) - {list} or set(map(len, offsets)) - {2}:
        return None
    sizes_flat = list(chain.from_iterable(shapes))
    flat = list(chain.from_iterable(offsets))
    if set(map(type, sizes_flat)) - {int} or set(map(type, flat)) - {int}:
        return None  # bool is not int here, as in _tensor
    if max(map(len, shapes), default=0) > MAX_RANK or min(sizes_flat, default=0) < 0:
        return None
    numels = np.array(list(map(prod, shapes)), np.uint64)  # past 64 bits: OverflowError
    spans = np.array(flat, np.int64).reshape(-1, 2)
    begins, ends = spans[:, 0], spans[:, 1]
    if (numels > _MAX_NUMEL).any() or (begins < 0).any() or (begins > ends).any():
        return None
    itemsizes = np.array(list(map(_DTYPE_SIZES.__getitem__, dtypes)), np.int64)
    if ((ends - begins) != numels.astype(np.int64) * itemsizes).any():
        return None
    return begins, ends


def _json_object(body: bytes, where: str) -> dict[str, object]:
    def unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
        found = dict(pairs)
        if len(found) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise CheckpointFormatError(
                        f"{where}: the safetensors header names {_short(key)} twice."
                    )
                seen.add(key)
        return found

    try:
        raw = json.loads(body.decode("utf-8"), object_pairs_hook=unique)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        if isinstance(error, CheckpointFormatError):
            raise
        raise CheckpointFormatError(
            f"{where}: the safetensors header is not UTF-8 JSON ({_short(error)})."
        ) from None
    if not isinstance(raw, dict):
        raise CheckpointFormatError(
            f"{where}: the safetensors header is a JSON {type(raw).__name__}, not an object."
        )
    return raw


def _metadata(value: object, where: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise CheckpointFormatError(
            f"{where}: '__metadata__' must map strings to strings, got {_short(value)}."
        )
    return value


def _tensor(name: str, record: object, where: str, data_start: int) -> Tensor:
    if type(record) is dict:  # the common record, checked in a few tests
        dtype, shape, offsets = record.get("dtype"), record.get("shape"), record.get("data_offsets")
        found = DTYPES.get(dtype) if type(dtype) is str else None
        if (
            found is not None
            and type(shape) is list
            and len(shape) <= MAX_RANK
            and type(offsets) is list
            and len(offsets) == 2
        ):
            begin, end = offsets
            if (
                type(begin) is int
                and type(end) is int
                and 0 <= begin <= end
                and all(type(n) is int and n >= 0 for n in shape)
                and end - begin == prod(shape) * found[1]
            ):
                return Tensor(name, found[0], tuple(shape), data_start + begin, data_start + end)
    raise _bad_tensor(name, record, where)


def _bad_tensor(name: str, record: object, where: str) -> CheckpointFormatError:
    """What is wrong with a record :func:`_tensor` refused."""
    what = f"{where}: tensor {_short(name)}"
    if not isinstance(record, dict):
        return CheckpointFormatError(f"{what} is {_short(record)}, not a record.")
    dtype = record.get("dtype")
    found = DTYPES.get(dtype) if isinstance(dtype, str) else None
    if found is None:
        return CheckpointFormatError(
            f"{what} has dtype {_short(dtype)}, not one of tdview's: {', '.join(DTYPES)}."
        )
    shape = record.get("shape")
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_RANK
        or not all(type(n) is int and n >= 0 for n in shape)
    ):
        return CheckpointFormatError(
            f"{what} has shape {_short(shape)}: a list of at most {MAX_RANK} sizes >= 0 is "
            "expected."
        )
    offsets = record.get("data_offsets")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(type(n) is int and n >= 0 for n in offsets)
        or offsets[0] > offsets[1]
    ):
        return CheckpointFormatError(
            f"{what} has data_offsets {_short(offsets)}: [begin, end] with "
            "0 <= begin <= end is expected."
        )
    need = prod(shape) * found[1]
    return CheckpointFormatError(
        f"{what}: data_offsets {offsets} hold {offsets[1] - offsets[0]} bytes, but "
        f"shape {shape} of {dtype} needs {need} bytes."
    )


def _check_spans(tensors: Sequence[Tensor], where: str, file_size: int | None) -> None:
    """Every span inside the file, none overlapping another (empty ones take no byte)."""
    spans = sorted((t for t in tensors if t.size), key=lambda t: t.begin)
    last: Tensor | None = None
    for tensor in spans:
        if last is not None and tensor.begin < last.end:
            raise UnsafeCheckpointError(
                f"{where}: tensors {_short(last.name)} (bytes {last.begin}..{last.end}) and "
                f"{_short(tensor.name)} (bytes {tensor.begin}..{tensor.end}) overlap."
            )
        last = tensor
    if file_size is None:
        return
    for tensor in tensors:
        if tensor.end > file_size:
            raise UnsafeCheckpointError(
                f"{where}: tensor {_short(tensor.name)} ends at byte {tensor.end:,}, past the "
                f"end of the file ({file_size:,} bytes)."
            )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
