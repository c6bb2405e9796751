"""Message envelopes of protocol v1 and the validators of incoming messages.

Every request is checked before anything runs: the envelope (``kind``, ``v``, ``id``),
the method name, and each parameter's type and range. Unknown keys are ignored (the
protocol lets objects gain keys without a version bump); a missing or mistyped key is a
:class:`RequestError` naming the key and the value.
"""

from __future__ import annotations

import json
import keyword
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .._text import MAX_MESSAGE, echo, printable
from ..errors import RequestError
from ._selection import parse_index, plane_params

PROTOCOL_VERSION = 1
REQUEST, REPLY = "tdview:request", "tdview:reply"
CANCEL, PROGRESS = "tdview:cancel", "tdview:progress"
#: The compare view's methods (params checked in :mod:`._diff_params`).
DIFF_METHODS = ("diff_children", "diff_node", "diff_refine", "diff_preview", "diff_load")
METHODS = ("children", "node", "search", "preview", "devices", "load", *DIFF_METHODS)
MODES = ("r", "r+", None)
#: ``rows_scope`` of ``preview``: the written rows of a torchrl storage, or all its rows.
ROWS_SCOPES = ("written", "all")

#: Largest ``limit`` honoured by ``children`` and ``search`` (bigger ones are clamped).
MAX_PAGE = 10_000
#: Largest ``rows`` honoured by ``preview``.
MAX_ROWS = 100
#: Most cells per side of a preview's heatmap.
MAX_HEATMAP_CELLS = 1024
#: Bounds of a whole incoming message, checked before anything else (see
#: :func:`check_bounds`): a request nests 3 levels (message, params, path) and names at
#: most 1024 keys.
MAX_MESSAGE_DEPTH = 8
MAX_MESSAGE_ITEMS = 4096
MAX_MESSAGE_CHARS = 1 << 20
#: Largest reply: JSON characters and buffer bytes together (see :func:`bound_reply`).
MAX_REPLY_BYTES = 32 << 20
_MAX_SAFE_INT = 2**53 - 1
_MAX_TEXT = 4096


@dataclass(frozen=True)
class Request:
    """A validated request: ``params`` hold Python values (paths as tuples)."""

    id: int
    method: str
    params: dict[str, Any]


def _is_count(value: object) -> bool:
    return type(value) is int and 0 <= value <= _MAX_SAFE_INT


def _fail(where: str, expected: str, value: object) -> RequestError:
    return RequestError(f"{where}: expected {expected}, got {echo(value, 80)}")


def check_bounds(message: object) -> None:
    """Refuse a message nested deeper than :data:`MAX_MESSAGE_DEPTH`, with more than
    :data:`MAX_MESSAGE_ITEMS` values or more than :data:`MAX_MESSAGE_CHARS` characters of
    strings, before anything recurses into it (``repr``, a validator, an error message).
    The walk is iterative and stops at the first bound passed.

    Raises
    ------
    RequestError
        Naming the bound.

    Examples
    --------
    >>> deep = []
    >>> for _ in range(10_000):
    ...     deep = [deep]
    >>> check_bounds({"params": {"path": deep}})
    Traceback (most recent call last):
    ...
    tdview.errors.RequestError: message: nested deeper than 8 levels
    """
    stack: list[tuple[object, int]] = [(message, 1)]
    items = chars = 0
    while stack:
        value, depth = stack.pop()
        items += 1
        if items > MAX_MESSAGE_ITEMS:
            raise RequestError(f"message: more than {MAX_MESSAGE_ITEMS:,} values")
        if isinstance(value, str):
            chars += len(value)
        elif isinstance(value, (dict, list, tuple)):
            if depth >= MAX_MESSAGE_DEPTH:
                raise RequestError(f"message: nested deeper than {MAX_MESSAGE_DEPTH} levels")
            children: Iterable[object] = value
            if isinstance(value, dict):
                chars += sum(len(k) if isinstance(k, str) else 1 for k in value)
                children = value.values()
            if len(value) > MAX_MESSAGE_ITEMS:
                raise RequestError(f"message: more than {MAX_MESSAGE_ITEMS:,} values")
            stack.extend((child, depth + 1) for child in children)
        if chars > MAX_MESSAGE_CHARS:
            raise RequestError(
                f"message: more than {MAX_MESSAGE_CHARS:,} characters of "
                "text (no key that long can be asked for)"
            )


def _field(params: dict[str, Any], key: str, method: str) -> Any:
    if key not in params:
        raise RequestError(f"{method} request: params.{key} is missing")
    return params[key]


def _count(params: dict[str, Any], key: str, method: str) -> int:
    value = _field(params, key, method)
    if not _is_count(value):
        raise _fail(f"{method} params.{key}", "a non-negative integer", value)
    return int(value)


def _text(params: dict[str, Any], key: str, method: str, *, nullable: bool = False) -> Any:
    value = _field(params, key, method)
    if value is None and nullable:
        return None
    if not isinstance(value, str) or len(value) > _MAX_TEXT or not _utf8(value):
        raise _fail(f"{method} params.{key}", "a string (of UTF-8 text)", value)
    return value


# Dunders (``__builtins__``...), IPython's input and output history and its own names.
_RESERVED = re.compile(r"__\w*__|_+|_i+|_i\d+|_\d+|_[oid]h|In|Out|get_ipython|exit|quit")


def _utf8(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form (no lone surrogate): a reply echoing it must."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _path(params: dict[str, Any], method: str) -> tuple[str, ...]:
    value = _field(params, "path", method)
    if not isinstance(value, list) or not all(isinstance(p, str) and _utf8(p) for p in value):
        raise _fail(f"{method} params.path", "a list of strings (of UTF-8 text)", value)
    if len(value) > 1024:
        raise _fail(f"{method} params.path", "at most 1024 keys", len(value))
    return tuple(value)


def _bool(params: dict[str, Any], key: str, method: str) -> bool:
    value = _field(params, key, method)
    if not isinstance(value, bool):
        raise _fail(f"{method} params.{key}", "a boolean", value)
    return value


def _totals(params: dict[str, Any], method: str) -> bool:
    """``totals`` of ``children`` and ``node`` (optional, default true): false leaves the
    bytes/numel (and rollup) of a collection whose totals are not cached yet null, so
    that a first paint walks nothing."""
    return _bool(params, "totals", method) if "totals" in params else True


def _rows_scope(params: dict[str, Any]) -> str:
    """``rows_scope`` of ``preview`` (optional, default ``"written"``): below a torchrl
    storage, ``"written"`` previews the rows its ``storage_metadata.json`` says were
    written and ``"all"`` every row (elsewhere both preview every row)."""
    value = params.get("rows_scope", "written")
    if not isinstance(value, str) or value not in ROWS_SCOPES:
        raise _fail("preview params.rows_scope", '"written" or "all"', value)
    return value


def _preview_view(params: dict[str, Any]) -> dict[str, Any]:
    """The optional view params of ``preview``: ``index`` (an index expression, see
    :mod:`._selection`; null: none), ``plane`` (the dims shown, see
    :func:`._selection.plane_params`; null: the default), ``offset`` and ``col_offset``
    (the table's first row and column of the plane), ``stats`` (default true: false
    sends the statistics only when known already) and ``heatmap`` (``{rows, cols}``, each 1 to
    :data:`MAX_HEATMAP_CELLS`; null: none)."""
    where = "preview params"
    index = _text(params, "index", "preview", nullable=True) if "index" in params else None
    heatmap = params.get("heatmap")
    if heatmap is not None:
        if not isinstance(heatmap, dict):
            raise _fail(f"{where}.heatmap", "an object {rows, cols} or null", heatmap)
        sides = tuple(_count(heatmap, side, "preview heatmap") for side in ("rows", "cols"))
        if not all(1 <= n <= MAX_HEATMAP_CELLS for n in sides):
            raise _fail(f"{where}.heatmap", f"rows and cols from 1 to {MAX_HEATMAP_CELLS}", heatmap)
        heatmap = sides
    return {
        "index": None if index is None else parse_index(index),
        "offset": _count(params, "offset", "preview") if "offset" in params else None,
        "stats": _bool(params, "stats", "preview") if "stats" in params else True,
        "heatmap": heatmap,
        "plane": plane_params(params.get("plane")),
        "col_offset": _count(params, "col_offset", "preview") if "col_offset" in params else 0,
    }


def _variable(params: dict[str, Any]) -> str | None:
    """The name to bind: NFKC-normalized as Python reads identifiers (else "ｘ" would be
    bound where no code can reach it), and none that IPython or Python itself use."""
    name = _text(params, "variable", "load", nullable=True)
    if name is None:
        return None
    name = unicodedata.normalize("NFKC", name)
    if not name.isidentifier() or keyword.iskeyword(name):
        raise _fail("load params.variable", "a Python identifier or null", name)
    if _RESERVED.fullmatch(name):
        raise _fail("load params.variable", "a name that Python and IPython do not use", name)
    return name


# -- the params of each method (the table of methods, :mod:`._methods`, names them) --


def children_params(params: dict[str, Any]) -> dict[str, Any]:
    method = "children"
    return {
        "path": _path(params, method),
        "offset": _count(params, "offset", method),
        "limit": min(_count(params, "limit", method), MAX_PAGE),
        "totals": _totals(params, method),
    }


def node_params(params: dict[str, Any]) -> dict[str, Any]:
    return {"path": _path(params, "node"), "totals": _totals(params, "node")}


def search_params(params: dict[str, Any]) -> dict[str, Any]:
    method = "search"
    return {
        "pattern": _text(params, "pattern", method),
        "limit": min(_count(params, "limit", method), MAX_PAGE),
        "offset": _count(params, "offset", method) if "offset" in params else 0,
        "count": _bool(params, "count", method) if "count" in params else True,
    }


def preview_params(params: dict[str, Any]) -> dict[str, Any]:
    method = "preview"
    return {
        "path": _path(params, method),
        "rows": min(_count(params, "rows", method), MAX_ROWS),
        "rows_scope": _rows_scope(params),
        **_preview_view(params),
    }


def devices_params(params: dict[str, Any]) -> dict[str, Any]:
    return {}


def load_params(params: dict[str, Any]) -> dict[str, Any]:
    method = "load"
    mode = _field(params, "mode", method)
    if mode not in MODES or isinstance(mode, bool):
        raise _fail("load params.mode", '"r", "r+" or null', mode)
    return {
        "path": _path(params, method),
        "device": _text(params, "device", method),
        "mode": mode,
        "allow_pickle": _bool(params, "allow_pickle", method),
        "variable": _variable(params),
        "replace": replace_param(params, method),
    }


def replace_param(params: dict[str, Any], method: str) -> bool:
    """``replace``: the load may rebind a name already bound (absent: it may not)."""
    return _bool(params, "replace", method) if "replace" in params else False


def message_id(message: object) -> int | None:
    """The ``id`` of a message when it is a valid one, else None (for error replies)."""
    if isinstance(message, dict) and _is_count(message.get("id")):
        return int(message["id"])
    return None


def _envelope(message: object, kind: str) -> dict[str, Any]:
    if not isinstance(message, dict):
        raise _fail("message", "an object", message)
    if message.get("kind") != kind:
        raise _fail("message.kind", repr(kind), message.get("kind"))
    if type(message.get("v")) is not int or message.get("v") != PROTOCOL_VERSION:
        raise _fail("message.v", f"protocol version {PROTOCOL_VERSION}", message.get("v"))
    if message_id(message) is None:
        raise _fail("message.id", "a non-negative integer", message.get("id"))
    return message


def parse_request(message: object) -> Request:
    """Check a ``tdview:request`` message and return its typed parameters.

    Parameters
    ----------
    message : object
        The JSON content of a custom message.

    Returns
    -------
    Request
        ``id``, ``method`` and ``params`` (paths as tuples; limits clamped to the caps).

    Raises
    ------
    RequestError
        The message is nested too deep or too large (:func:`check_bounds`), or the
        envelope, the method or a parameter is wrong; the message says which.

    Examples
    --------
    >>> parse_request({"kind": "tdview:request", "v": 1, "id": 7, "method": "node",
    ...                "params": {"path": ["obs"]}})
    Request(id=7, method='node', params={'path': ('obs',), 'totals': True})
    """
    from ._methods import TABLE  # the table stands on these checks

    check_bounds(message)
    found = _envelope(message, REQUEST)
    method = found.get("method")
    if method not in METHODS:
        raise _fail("message.method", f"one of {', '.join(METHODS)}", method)
    params = found.get("params")
    if not isinstance(params, dict):
        raise _fail(f"{method} params", "an object", params)
    return Request(int(found["id"]), method, TABLE[method].parse(params))


def parse_cancel(message: object) -> int:
    """Check a ``tdview:cancel`` message and return the id it cancels.

    Examples
    --------
    >>> parse_cancel({"kind": "tdview:cancel", "v": 1, "id": 7})
    7
    """
    check_bounds(message)
    return int(_envelope(message, CANCEL)["id"])


def reply_ok(request_id: int, result: dict[str, Any]) -> dict[str, Any]:
    """A successful ``tdview:reply``."""
    return {"kind": REPLY, "v": PROTOCOL_VERSION, "id": request_id, "ok": True, "result": result}


def reply_error(
    request_id: int, error_type: str, message: str, path: tuple[str, ...] | list[str] | None
) -> dict[str, Any]:
    """A failed ``tdview:reply``: ``error = {type, message, path}``. The message is shown
    as text: its control and bidirectional characters are escaped and it is cut to
    :data:`~tdview._text.MAX_MESSAGE` characters (whatever it echoes)."""
    return {
        "kind": REPLY,
        "v": PROTOCOL_VERSION,
        "id": request_id,
        "ok": False,
        "error": {
            "type": error_type,
            "message": printable(message, limit=MAX_MESSAGE),
            "path": None if path is None else list(path),
        },
    }


def bound_reply(
    reply: dict[str, Any], buffers: list[bytes], method: str
) -> tuple[dict[str, Any], list[bytes]]:
    """``(reply, buffers)`` as they may be sent: at most :data:`MAX_REPLY_BYTES` of JSON
    and buffers together, and every integer one that JavaScript holds exactly.

    A larger reply is replaced by an error reply (``LimitExceededError``) naming its size
    and the cap, and no buffer (a level of many very long keys, a hostile key echoed).
    An integer beyond ``±(2**53 - 1)`` (the rolled-up bytes of a hostile tree, a
    dimension of an empty tensor) is sent as that bound. A value JSON cannot hold
    (NaN, an object) is an error reply too.

    Examples
    --------
    >>> bound_reply(reply_ok(1, {"bytes": 2**60}), [], "node")[0]["result"]
    {'bytes': 9007199254740991}
    """
    try:
        text = json.dumps(reply, ensure_ascii=False, allow_nan=False, check_circular=False)
    except (ValueError, TypeError, RecursionError) as error:
        return reply_error(
            int(reply.get("id", 0)),
            "LimitExceededError",
            f"the reply to the {method} request cannot be sent as JSON: {error}",
            None,
        ), []
    size = len(text) + sum(len(b) for b in buffers)
    if size > MAX_REPLY_BYTES:
        return reply_error(
            int(reply.get("id", 0)),
            "LimitExceededError",
            f"the reply to the {method} request would be {size:,} bytes, more "
            f"than the cap of {MAX_REPLY_BYTES:,} bytes (MAX_REPLY_BYTES): it "
            "is not sent",
            None,
        ), []
    if _LONG_NUMBER.search(text):  # rare: a digit run that may be an unsafe integer
        reply = _safe_ints(reply)
    return reply, buffers


_LONG_NUMBER = re.compile(r"\d{16}")


def _safe_ints(value: Any) -> Any:
    """``value`` with every integer clamped to ``±(2**53 - 1)`` (iterative: no depth)."""

    def clamp(item: Any) -> Any:
        if type(item) is int and not -_MAX_SAFE_INT <= item <= _MAX_SAFE_INT:
            return _MAX_SAFE_INT if item > 0 else -_MAX_SAFE_INT
        return item

    root = [value]
    stack: list[Any] = [root]
    while stack:
        container = stack.pop()
        keys = container.keys() if isinstance(container, dict) else range(len(container))
        for key in keys:
            item = container[key]
            if isinstance(item, dict):
                item = container[key] = dict(item)
                stack.append(item)
            elif isinstance(item, (list, tuple)):
                item = container[key] = list(item)
                stack.append(item)
            else:
                container[key] = clamp(item)
    return root[0]


def progress(request_id: int, done: int, total: int, label: str) -> dict[str, Any]:
    """A ``tdview:progress`` message (``done`` of ``total`` steps, ``label`` the current one)."""
    return {
        "kind": PROGRESS,
        "v": PROTOCOL_VERSION,
        "id": request_id,
        "done": max(int(done), 0),
        "total": max(int(total), 0),
        "label": label,
    }
