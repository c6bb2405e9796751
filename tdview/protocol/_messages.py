"""Message envelopes of protocol v1: the bounds of an incoming message, its envelope
(``kind``, ``v``, ``id``), and the replies and progress messages sent back.

Every request is checked before anything runs: its bounds and envelope here, its method
and params by the table of methods (:func:`~._methods.parse_request`, with the checks
of :mod:`._checks`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .._text import MAX_MESSAGE, printable
from ..errors import RequestError
from ._checks import MAX_SAFE_INT, fail, is_count

PROTOCOL_VERSION = 1
REQUEST, REPLY = "tdview:request", "tdview:reply"
CANCEL, PROGRESS = "tdview:cancel", "tdview:progress"

#: Bounds of a whole incoming message, checked before anything else (see
#: :func:`check_bounds`): a request nests 3 levels (message, params, path) and names at
#: most 1024 keys.
MAX_MESSAGE_DEPTH = 8
MAX_MESSAGE_ITEMS = 4096
MAX_MESSAGE_CHARS = 1 << 20
#: Largest reply: JSON characters and buffer bytes together (see :func:`bound_reply`).
MAX_REPLY_BYTES = 32 << 20


@dataclass(frozen=True)
class Request:
    """A validated request: ``params`` hold Python values (paths as tuples)."""

    id: int
    method: str
    params: dict[str, Any]


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


def message_id(message: object) -> int | None:
    """The ``id`` of a message when it is a valid one, else None (for error replies)."""
    if isinstance(message, dict) and is_count(message.get("id")):
        return int(message["id"])
    return None


def envelope(message: object, kind: str) -> dict[str, Any]:
    """``message`` when it is an object of this ``kind``, protocol version and a valid id
    (its bounds checked already, :func:`check_bounds`)."""
    if not isinstance(message, dict):
        raise fail("message", "an object", message)
    if message.get("kind") != kind:
        raise fail("message.kind", repr(kind), message.get("kind"))
    if type(message.get("v")) is not int or message.get("v") != PROTOCOL_VERSION:
        raise fail("message.v", f"protocol version {PROTOCOL_VERSION}", message.get("v"))
    if message_id(message) is None:
        raise fail("message.id", "a non-negative integer", message.get("id"))
    return message


def parse_cancel(message: object) -> int:
    """Check a ``tdview:cancel`` message and return the id it cancels.

    Examples
    --------
    >>> parse_cancel({"kind": "tdview:cancel", "v": 1, "id": 7})
    7
    """
    check_bounds(message)
    return int(envelope(message, CANCEL)["id"])


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
        if type(item) is int and not -MAX_SAFE_INT <= item <= MAX_SAFE_INT:
            return MAX_SAFE_INT if item > 0 else -MAX_SAFE_INT
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
