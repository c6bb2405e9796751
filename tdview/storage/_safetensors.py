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

Examples
--------
>>> import json, struct
>>> body = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
>>> header = parse_header(body, "x.safetensors", len(body) + 16)
>>> header.tensors[0].name, header.tensors[0].dtype, header.data_start
('w', 'float32', 8)
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod
from typing import NamedTuple

from ..errors import CheckpointFormatError, LimitExceededError, UnsafeCheckpointError

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


@dataclass(frozen=True)
class Header:
    """A parsed, checked header: the tensors in the file's order, ``__metadata__``, and
    where the data starts."""

    tensors: list[Tensor]
    metadata: dict[str, str] | None
    data_start: int
    names: dict[str, Tensor] = field(repr=False, default_factory=dict)


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
    raw = _json_object(body, where)
    metadata = _metadata(raw.pop("__metadata__", None), where)
    tensors = [_tensor(name, record, where, data_start) for name, record in raw.items()]
    _check_spans(tensors, where, file_size)
    return Header(tensors, metadata, data_start, {t.name: t for t in tensors})


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
