"""Fuzz targets of the protocol and the text helpers: any message gets one bounded,
strict-JSON reply (never an exception); the bounded pickle scan stops or finishes on any
bytes; a key or value shown as text never holds a control or bidirectional character."""

from __future__ import annotations

import json
import pickle
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tdview._text import echo, error_text, printable
from tdview.errors import TDViewError
from tdview.format import ScanLimits, scan_pickle
from tdview.index import Checkpoint
from tdview.protocol import METHODS, RequestError, Session, handle, parse_request
from tdview.protocol._messages import MAX_MESSAGE, bound_reply, check_bounds, reply_ok

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
json_like = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)
KEYS = [
    "path",
    "offset",
    "limit",
    "totals",
    "pattern",
    "rows",
    "rows_scope",
    "device",
    "mode",
    "allow_pickle",
    "variable",
]
params = st.dictionaries(st.sampled_from(KEYS), json_like, max_size=6)
messages = st.one_of(
    json_like,
    st.fixed_dictionaries(
        {
            "kind": st.sampled_from(["tdview:request", "tdview:cancel", "x"]),
            "v": st.sampled_from([1, 1.0, True, 2]),
            "id": st.one_of(st.integers(-3, 2**60), st.text(max_size=3)),
            "method": st.one_of(st.sampled_from(METHODS), json_like),
            "params": st.one_of(params, json_like),
        }
    ),
)


def _deep(depth: int, leaf: object = "k") -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture(scope="module")
def session(demo_paths: dict[str, Path]) -> Session:
    path = demo_paths["directory"]
    return Session(Checkpoint(path), str(path), namespace={})


@FUZZ
@given(messages)
def test_parse_request_raises_only_request_error(message):
    try:
        request = parse_request(message)
    except RequestError as error:
        assert len(str(error)) < 2000
        return
    assert request.method in METHODS


@FUZZ
@given(st.integers(1, 30), st.integers(0, 3))
def test_check_bounds_on_any_nesting(depth, where):
    message = {"kind": "tdview:request", "params": {"path": _deep(depth)}}
    if where:
        message = _deep(where, message)  # type: ignore[assignment]
    try:
        check_bounds(message)
    except RequestError:
        assert depth + where + 2 >= 8
    else:
        assert depth + where + 2 < 8


@FUZZ
@given(messages.filter(lambda m: not (isinstance(m, dict) and m.get("method") == "load")))
def test_handle_answers_every_message_with_bounded_json(session, message):
    reply, buffers = handle(session, message)
    if reply is None:  # a cancel
        return
    text = json.dumps(reply, allow_nan=False)
    assert reply["kind"] == "tdview:reply"
    if not reply["ok"]:
        assert len(reply["error"]["message"]) <= MAX_MESSAGE + 40
        assert printable(reply["error"]["message"]) == reply["error"]["message"]
    assert len(text) < 1 << 25


@FUZZ
@given(json_like)
def test_bound_reply_always_sends_strict_json(value):
    reply, _ = bound_reply(reply_ok(1, {"value": value}), [], "node")
    json.dumps(reply, allow_nan=False)


@FUZZ
@given(st.binary(max_size=400), st.integers(1, 50), st.integers(1, 400))
def test_bounded_scan_of_any_bytes(data, opcodes, size):
    try:
        info = scan_pickle(data, "fuzz/other.pickle", ScanLimits(opcodes=opcodes, bytes=size))
    except TDViewError:
        return
    assert info.complete or (info.unknown is not None and not info.is_plain_data)
    assert info.complete == (info.end is not None)


@FUZZ
@given(json_like, st.integers(1, 30))
def test_a_stopped_scan_never_says_plain_data(value, opcodes):
    data = pickle.dumps(value)
    info = scan_pickle(data, "p", ScanLimits(opcodes=opcodes))
    full = scan_pickle(data, "p")
    assert info.complete or not info.is_plain_data
    assert set(info.globals) <= set(full.globals)


_UNSAFE = {"Cc", "Cs", "Zl", "Zp"}


@FUZZ
@given(st.text())
def test_printable_leaves_no_control_or_bidi_character(text):
    shown = printable(text)
    for char in shown:
        assert unicodedata.category(char) not in _UNSAFE, repr(char)
        assert char not in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f"
    if text.isprintable():
        assert shown == text


@FUZZ
@given(st.one_of(json_like, st.integers(), st.text()), st.integers(5, 200))
def test_echo_is_bounded_and_printable(value, limit):
    shown = echo(value, limit)
    assert len(shown) <= limit * 4 + 3  # escapes grow a character to at most \U0010ffff
    assert printable(shown) == shown
    assert error_text(ValueError(value)) == printable(error_text(ValueError(value)))


def test_echo_of_hostile_values():
    assert len(echo("k" * 50_000_000)) < 200
    assert echo(_deep(10_000)) == "[[[[[...]]]]]"
    assert "bits" in echo(10**10000)
