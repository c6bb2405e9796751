"""The checks every method's params share: each raises a
:class:`~tdview.errors.RequestError` that names the method, the key and the value.

The params of one checkpoint's methods (:mod:`._params`) and of the compare view's
(:mod:`._diff_params`) are built from these; the envelope (:mod:`._messages`) uses
:func:`is_count` and :func:`fail` too.
"""

from __future__ import annotations

import keyword
import re
import unicodedata
from typing import Any

from .._text import echo
from ..errors import RequestError

#: Largest ``limit`` honoured by ``children`` and ``search`` (bigger ones are clamped).
MAX_PAGE = 10_000
#: Largest ``rows`` honoured by ``preview``.
MAX_ROWS = 100
#: The ``mode`` of a load: read-only, writable, or tensordict's default.
MODES = ("r", "r+", None)
#: Largest integer JavaScript holds exactly.
MAX_SAFE_INT = 2**53 - 1
_MAX_TEXT = 4096
# Dunders (``__builtins__``...), IPython's input and output history and its own names.
_RESERVED = re.compile(r"__\w*__|_+|_i+|_i\d+|_\d+|_[oid]h|In|Out|get_ipython|exit|quit")


def is_count(value: object) -> bool:
    """An ``int`` (not a bool) from 0 to :data:`MAX_SAFE_INT`."""
    return type(value) is int and 0 <= value <= MAX_SAFE_INT


def fail(where: str, expected: str, value: object) -> RequestError:
    """The error of a wrong value: ``"<where>: expected <expected>, got <value>"``."""
    return RequestError(f"{where}: expected {expected}, got {echo(value, 80)}")


def field(params: dict[str, Any], key: str, method: str) -> Any:
    """``params[key]``, or an error saying it is missing."""
    if key not in params:
        raise RequestError(f"{method} request: params.{key} is missing")
    return params[key]


def count(params: dict[str, Any], key: str, method: str) -> int:
    """A non-negative integer (:func:`is_count`)."""
    value = field(params, key, method)
    if not is_count(value):
        raise fail(f"{method} params.{key}", "a non-negative integer", value)
    return int(value)


def text(params: dict[str, Any], key: str, method: str, *, nullable: bool = False) -> Any:
    """A string of UTF-8 text of at most 4096 characters (or None when ``nullable``)."""
    value = field(params, key, method)
    if value is None and nullable:
        return None
    if not isinstance(value, str) or len(value) > _MAX_TEXT or not utf8(value):
        raise fail(f"{method} params.{key}", "a string (of UTF-8 text)", value)
    return value


def utf8(value: str) -> bool:
    """Whether ``value`` has a UTF-8 form (no lone surrogate): a reply echoing it must."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def path(params: dict[str, Any], method: str) -> tuple[str, ...]:
    """``params.path``: a list of at most 1024 keys of UTF-8 text, as a tuple."""
    value = field(params, "path", method)
    if not isinstance(value, list) or not all(isinstance(p, str) and utf8(p) for p in value):
        raise fail(f"{method} params.path", "a list of strings (of UTF-8 text)", value)
    if len(value) > 1024:
        raise fail(f"{method} params.path", "at most 1024 keys", len(value))
    return tuple(value)


def flag(params: dict[str, Any], key: str, method: str, default: bool | None = None) -> bool:
    """A boolean; ``default`` (when given) stands for an absent key."""
    if default is not None and key not in params:
        return default
    value = field(params, key, method)
    if not isinstance(value, bool):
        raise fail(f"{method} params.{key}", "a boolean", value)
    return value


def mode(params: dict[str, Any], method: str) -> str | None:
    """``params.mode`` of a load: one of :data:`MODES`."""
    value = field(params, "mode", method)
    if value not in MODES or isinstance(value, bool):
        raise fail(f"{method} params.mode", '"r", "r+" or null', value)
    return value


def variable(params: dict[str, Any]) -> str | None:
    """The name a load binds: NFKC-normalized as Python reads identifiers (else "ｘ" would
    be bound where no code can reach it), and none that IPython or Python itself use."""
    name = text(params, "variable", "load", nullable=True)
    if name is None:
        return None
    name = unicodedata.normalize("NFKC", name)
    if not name.isidentifier() or keyword.iskeyword(name):
        raise fail("load params.variable", "a Python identifier or null", name)
    if _RESERVED.fullmatch(name):
        raise fail("load params.variable", "a name that Python and IPython do not use", name)
    return name


def load_options(params: dict[str, Any], method: str) -> dict[str, Any]:
    """What a ``load`` and a ``diff_load`` both ask: ``path``, ``device``, ``mode``,
    ``allow_pickle``, ``variable`` and ``replace`` (absent: a name already bound is not
    rebound)."""
    checked_mode = mode(params, method)
    return {
        "path": path(params, method),
        "device": text(params, "device", method),
        "mode": checked_mode,
        "allow_pickle": flag(params, "allow_pickle", method),
        "variable": variable(params),
        "replace": flag(params, "replace", method, default=False),
    }
