"""Decoding ``meta.json`` bytes into a Python dict, with bounds.

The reference reads each ``meta.json`` with ``json.loads`` on the whole file, so a
reader must accept any valid JSON plus the ``NaN``/``Infinity``/``-Infinity``
tokens that Python's encoder writes, integers of any width, ``\\uXXXX`` escapes
(including surrogate pairs) and raw UTF-8. tdview adds what the reference lacks:
a check of the root type and a nesting-depth bound that is enforced before the
recursive decoder runs.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Callable
from itertools import accumulate
from typing import Any

from ..errors import CheckpointFormatError, LimitExceededError

__all__ = ["DEFAULT_MAX_DEPTH", "MAX_META_BYTES", "json_depth", "parse_meta_json"]

#: The largest ``meta.json`` (or ``json_types.json``) a caller should read, in bytes.
#: Enforcing it is the caller's job (the storage layer knows the entry size).
MAX_META_BYTES = 64 * 1024 * 1024

#: Default bound on the nesting depth of a ``meta.json`` (the root object is depth 1).
DEFAULT_MAX_DEPTH = 64

_BOM = b"\xef\xbb\xbf"
# Openers count +1 and closers -1 (0xFF as a signed byte); everything else 0.
_DEPTH_TABLE = bytes(1 if c in b"[{" else 0xFF if c in b"]}" else 0 for c in range(256))
_NOT_QUOTES_OR_BRACKETS = bytes(c for c in range(256) if c not in b'"[]{}')
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
# Braces as brackets: the depth counts both alike.
_SQUARE = bytes.maketrans(b"{}", b"[]")
# Passes of pair removal tried before the linear count (json_depth).
_PASSES = 8
# A string literal once escapes are gone: a quote, anything but a quote, a quote.
_QUOTED = re.compile(rb'"[^"]*"')
_decode = json.JSONDecoder().decode  # what json.loads(text) uses, without its checks

_fast_loads: Callable[[bytes], Any] | None
try:  # orjson decodes a meta.json 2-3 times faster: used where it reads as json does
    from orjson import JSONDecodeError as _FastError
    from orjson import loads as _fast_loads
except ImportError:  # not installed (an optional speed-up): json alone
    _fast_loads = None
# Digits to "0", every other byte to a space: orjson reads an integer beyond 64 bits
# as a float, json as an int, so a text with 19 digits in a row goes to json alone.
_DIGITS_ONLY = bytes(0x30 if 0x30 <= c <= 0x39 else 0x20 for c in range(256))
_LONG_NUMBER = b"0" * 19
_UNSET = object()


def json_depth(data: bytes) -> int:
    """Return the deepest bracket nesting of JSON text, without parsing it.

    Brackets inside string literals are ignored. Time and memory are linear in the
    size of the text (a few C-level passes), whatever it holds: millions of ``[``, or
    a string that never closes.

    Parameters
    ----------
    data : bytes
        UTF-8 JSON text (multi-byte sequences never contain ASCII bytes).

    Returns
    -------
    int
        The maximum depth; ``0`` for a scalar document.

    Examples
    --------
    >>> json_depth(b'{"a": [1, {"b": "[[[\\\\\\"]"}]}')
    3
    """
    if b"\\" in data:
        # Backslashes only occur in strings. Read left to right, as a decoder does, an
        # escaped backslash and then an escaped quote are no delimiters: without them,
        # every quote left opens or closes a string.
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    # the quotes and brackets only. When every string closes, two quotes side by side
    # hold no bracket between them, whether they open and close a string or close one
    # and open the next: dropped, the others pair up as before, and most files are left
    # without a quote (a regex pass over thousands of quotes was most of the time). Then
    # the strings' pairs of quotes and what they hold; then the brackets only, as [ and ].
    skeleton = data.translate(None, _NOT_QUOTES_OR_BRACKETS)
    if skeleton.count(b'"') % 2 == 0:
        skeleton = skeleton.replace(b'""', b"")
    if b'"' in skeleton:
        skeleton = _QUOTED.sub(b"", skeleton)
    skeleton = skeleton.translate(_SQUARE, _NOT_BRACKETS)
    if not skeleton:
        return 0
    # Balanced brackets lose their innermost pairs at each pass: as many passes as they
    # nest deep. A few passes answer a common file; else (deeper, or unbalanced) the
    # running sum of the steps, linear whatever the text. Nested at most _PASSES deep,
    # a pass removes at least 1/_PASSES of what is left (each pair is on a path of at
    # most _PASSES to an innermost one): less tells a deep text after one pass.
    rest = skeleton
    for depth in range(1, _PASSES + 1):
        shorter = rest.replace(b"[]", b"")
        if not shorter:
            return depth
        if (len(rest) - len(shorter)) * _PASSES < len(rest):
            break
        rest = shorter
    steps = array("b")
    steps.frombytes(skeleton.translate(_DEPTH_TABLE))
    return max(0, max(accumulate(steps)))


def parse_meta_json(data: bytes, where: str, *, max_depth: int = DEFAULT_MAX_DEPTH) -> dict:
    """Decode the bytes of a ``meta.json`` into a dict.

    Parameters
    ----------
    data : bytes
        The whole file. UTF-8, optionally with a byte-order mark.
    where : str
        The file's location for error messages, e.g. ``"/ckpt/sub/meta.json"`` or
        ``"/x.tdz::sub/meta.json"``.
    max_depth : int, optional
        Largest nesting depth accepted; the root object is depth 1.

    Returns
    -------
    dict
        The decoded object, keys in file order (a repeated key keeps its last
        value at its first position, as ``json.loads`` does).

    Raises
    ------
    CheckpointFormatError
        Not UTF-8, not JSON (the message gives line, column and offset), or a root
        that is not an object.
    LimitExceededError
        Nested deeper than ``max_depth``.

    Examples
    --------
    >>> parse_meta_json(b'{"x": NaN, "n": 123456789012345678901234}', "m.json")["n"]
    123456789012345678901234
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"parse_meta_json expects bytes, got {type(data).__name__}")
    if type(data) is not bytes:
        data = bytes(data)
    if data[:3] == _BOM:
        data = data[len(_BOM) :]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointFormatError(
            f"{where}: not valid UTF-8 at byte {exc.start} "
            f"(got {data[exc.start : exc.start + 4]!r})"
        ) from None
    # the depth is at most the number of openers: most files need no scan at all
    if data.count(b"[") + data.count(b"{") <= max_depth:
        depth = 0
    else:
        depth = json_depth(data)
    if depth > max_depth:
        raise LimitExceededError(
            f"{where}: JSON nested {depth} levels deep, more than the limit of {max_depth}"
        )
    obj = _UNSET
    if _fast_loads is not None and data.translate(_DIGITS_ONLY).find(_LONG_NUMBER) < 0:
        # orjson rejects what json reads differently (NaN and Infinity tokens, a lone
        # surrogate escape, 1e400) and what is not JSON: json then decides, and tells
        # what is wrong
        try:
            obj = _fast_loads(data)
        except _FastError:
            pass
    if obj is _UNSET:
        obj = _decode_text(text, where)
    if not isinstance(obj, dict):
        raise CheckpointFormatError(
            f"{where}: the root of the JSON document must be an object, got {_json_type_name(obj)}"
        )
    return obj


def _decode_text(text: str, where: str) -> object:
    """``json.loads(text)``, its errors as CheckpointFormatError naming ``where``."""
    try:
        return _decode(text)
    except json.JSONDecodeError as exc:
        raise CheckpointFormatError(
            f"{where}: invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} "
            f"(char {exc.pos})"
        ) from None
    except (ValueError, RecursionError) as exc:
        # e.g. an integer literal longer than Python's int-conversion limit
        raise CheckpointFormatError(f"{where}: invalid JSON: {exc}") from None


def _json_type_name(obj: object) -> str:
    """Name a decoded JSON value's type the way JSON does."""
    if obj is None:
        return "null"
    if isinstance(obj, bool):
        return "a boolean"
    if isinstance(obj, (int, float)):
        return "a number"
    if isinstance(obj, str):
        return "a string"
    if isinstance(obj, list):
        return "an array"
    return type(obj).__name__
