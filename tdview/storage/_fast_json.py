"""The JSON the stores parse themselves (a safetensors header, a consolidated file's
footer: megabytes for a large model), read by orjson where it reads it as ``json`` does:
two to three times faster, and the one step no reader of the file can skip.

orjson reads an integer past 64 bits as a float where ``json`` keeps it whole, so a
text with a run of 19 digits goes to ``json``; so does what orjson refuses (``NaN``, a
lone surrogate escape, anything not JSON), where ``json`` then decides and says what is
wrong. (``format/_json.py`` makes the same choice for ``meta.json``; storage imports no
format.)

Examples
--------
>>> fast_loads(b'{"a": [1, 2]}')
{'a': [1, 2]}
>>> fast_loads(b'{"n": 12345678901234567890123}') is NOT_READ
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["NOT_READ", "fast_loads"]

#: what :func:`fast_loads` returns for a text it leaves to ``json``
NOT_READ: Any = object()

_loads: Callable[[bytes], Any] | None
try:
    from orjson import JSONDecodeError as _Refused
    from orjson import loads as _loads
except ImportError:  # an optional speed-up (a dependency of tdview's): json alone
    _loads = None
# digits to "0", every other byte to a space: a run of 19 is an integer orjson may not
# read as json does
_DIGITS_ONLY = bytes(0x30 if 0x30 <= c <= 0x39 else 0x20 for c in range(256))
_LONG_NUMBER = b"0" * 19


def fast_loads(data: bytes, *, ints_checked: bool = False) -> Any:
    """The value of the JSON text ``data`` as ``json.loads`` reads it, read by orjson;
    :data:`NOT_READ` where orjson is missing, refuses it, or might read it otherwise
    (the caller then reads it with ``json``). ``ints_checked``: the caller refuses a
    float wherever it reads an integer (so the run of digits is not looked for: an
    integer orjson reads as a float is refused there, then read by ``json``)."""
    if _loads is None:
        return NOT_READ
    if not ints_checked and data.translate(_DIGITS_ONLY).find(_LONG_NUMBER) >= 0:
        return NOT_READ
    try:
        return _loads(data)
    except _Refused:
        return NOT_READ
