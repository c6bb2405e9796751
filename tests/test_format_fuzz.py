"""Fuzz targets: hostile input either parses or raises a TDViewError, nothing else."""

from __future__ import annotations

import json
import pickle
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tdview.errors import TDViewError
from tdview.format import (
    NodeBase,
    _keys,
    candidate_names,
    decode_name,
    encode_key,
    is_canonical_name,
    json_depth,
    parse_json_types,
    parse_meta_json,
    parse_node,
    scan_pickle,
)

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TYPE_NAMES = [
    "<class 'tensordict._td.TensorDict'>",
    "<class 'tensordict._lazy.LazyStackedTensorDict'>",
    "<class 'tensordict.tensorclass.NonTensorStack'>",
    "<class 'tensordict.tensorclass.NonTensorData'>",
    "<class 'tensordict.tensorclass.MetaData[str]'>",
    "<class 'tensordict._td._SubTensorDict'>",
    "<class 'tensordict._lazy._PermutedTensorDict'>",
    "<class 'tensordict._lazy._ViewedTensorDict'>",
    "<class '__main__.MyTC'>",
    "<class 'x'>",
    "garbage",
]
CLASS_IDS = [
    "tensordict:TensorDict",
    "tensordict:LazyStackedTensorDict",
    "__main__:MyTD",
    "a:b:c",
    "",
]
FIELDS = [
    "shape",
    "device",
    "_names",
    "_format_version",
    "_class",
    "stack_dim",
    "stack_dim_name",
    "data",
    "_metadata",
    "index",
    "custom_op",
    "inv_op",
    "custom_op_kwargs",
    "inv_op_kwargs",
    "type",
    "dtype",
    "is_nested",
    "obs",
]
TAGS = [
    "tuple",
    "list",
    "slice",
    "range",
    "tensor",
    "ellipsis",
    "start",
    "stop",
    "step",
    "dims",
    "size",
    "dim",
    "permute",
    "view",
    "squeeze",
    "pickle.pkl",
    "torch.float32",
    "cpu",
    "None",
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from(TAGS + TYPE_NAMES)
)
keys = st.sampled_from(FIELDS + TAGS) | st.text(max_size=6)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(keys, children, max_size=5),
    max_leaves=40,
)


@st.composite
def node_dicts(draw):
    meta = draw(st.dictionaries(keys, json_values, max_size=8))
    if draw(st.booleans()):
        meta["_type"] = draw(st.sampled_from(TYPE_NAMES) | json_values)
    if draw(st.booleans()):
        meta["_class"] = draw(st.sampled_from(CLASS_IDS) | json_values)
    if draw(st.booleans()):
        # a plausible leaf record with a random field
        record = {"dtype": "torch.float32", "shape": [2], "is_nested": False, "device": "cpu"}
        record[draw(st.sampled_from(list(record)))] = draw(json_values)
        meta[draw(keys)] = record
    return meta


VALID = [
    {
        "obs": {"device": "cpu", "shape": [2, 3], "dtype": "torch.float32", "is_nested": False},
        "nt": {"device": "cpu", "shape": [2, 2], "dtype": "torch.int64", "is_nested": True},
        "sub": {"type": "TensorDict"},
        "shape": [2],
        "device": "cpu",
        "_type": TYPE_NAMES[0],
        "_format_version": 1,
        "_class": "tensordict:TensorDict",
        "_names": ["b"],
    },
    {
        "_type": TYPE_NAMES[1],
        "_format_version": 1,
        "_class": CLASS_IDS[1],
        "stack_dim": 0,
        "stack_dim_name": "s",
    },
    {
        "_type": TYPE_NAMES[2],
        "_format_version": 1,
        "_class": "tensordict:NonTensorStack",
        "stack_dim": 0,
        "device": None,
        "data": [["a"], ["b"]],
    },
    {"_type": TYPE_NAMES[3], "data": 1, "_metadata": None, "_is_non_tensor": True},
    {
        "_type": TYPE_NAMES[5],
        "index": [
            "tuple",
            [
                ["slice", {"start": 0, "stop": 1, "step": None}],
                ["tensor", [[0, 1]], "cpu"],
                ["ellipsis"],
            ],
        ],
    },
    {
        "shape": [3, 2],
        "device": "cpu",
        "_type": TYPE_NAMES[6],
        "custom_op": "permute",
        "inv_op": "permute",
        "custom_op_kwargs": {"dims": [1, 0]},
        "inv_op_kwargs": {"dims": [1, 0]},
    },
    {"_type": "<class '__main__.MyTC'>", "label": "x"},
]


def _mutate(value, draw, depth=0):
    """Replace, drop or recurse into one part of a valid structure."""
    action = draw(st.integers(min_value=0, max_value=3 if depth < 4 else 1))
    if action == 0 or not isinstance(value, (dict, list)) or not value:
        return draw(json_values)
    if action == 1 and isinstance(value, dict):
        copy = dict(value)
        del copy[draw(st.sampled_from(sorted(copy)))]
        return copy
    if isinstance(value, dict):
        key = draw(st.sampled_from(sorted(value)))
        return {**value, key: _mutate(value[key], draw, depth + 1)}
    pos = draw(st.integers(min_value=0, max_value=len(value) - 1))
    return [*value[:pos], _mutate(value[pos], draw, depth + 1), *value[pos + 1 :]]


@st.composite
def mutated_nodes(draw):
    meta = draw(st.sampled_from(VALID))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        meta = _mutate(meta, draw)
    return meta


def test_valid_skeletons_parse():
    kinds = [parse_node(meta, "m").kind for meta in VALID]
    assert kinds == [
        "tensordict",
        "lazy_stack",
        "non_tensor_stack",
        "non_tensor_data",
        "sub_tensordict",
        "view",
        "tensorclass",
    ]


@FUZZ
@given(mutated_nodes())
def test_parse_mutated_nodes(meta):
    try:
        parse_node(meta, "fuzz/meta.json")
    except TDViewError:
        pass


@FUZZ
@given(node_dicts())
def test_parse_node_never_crashes(meta):
    try:
        node = parse_node(meta, "fuzz/meta.json")
    except TDViewError:
        return
    assert isinstance(node, NodeBase)
    assert isinstance(node.kind, str) and node.kind
    hash(node.class_ref)


@FUZZ
@given(json_values)
def test_parse_node_accepts_any_json_value(value):
    try:
        parse_node(value, "fuzz/meta.json")
    except TDViewError:
        pass


@FUZZ
@given(st.binary(max_size=300))
def test_parse_meta_json_random_bytes(data):
    try:
        result = parse_meta_json(data, "fuzz/meta.json")
    except TDViewError:
        return
    assert isinstance(result, dict)


@FUZZ
@given(st.dictionaries(keys, json_values, max_size=6))
def test_parse_meta_json_round_trip(obj):
    data = json.dumps(obj).encode()
    if json_depth(data) > 64:  # the only bound that refuses a valid document
        return
    assert json.dumps(parse_meta_json(data, "m")) == json.dumps(obj)


# numbers of every width (orjson, when installed, reads one beyond 64 bits as a float),
# every float (NaN and infinities are Python's tokens), text with lone surrogates
wide_scalars = (
    st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text()
    | st.booleans()
    | st.none()
)
wide_values = st.recursive(
    wide_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=30,
)


@FUZZ
@given(st.dictionaries(st.text(), wide_values, max_size=6), st.booleans(), st.data())
def test_parse_meta_json_reads_what_json_reads(obj, ascii_only, data):
    """Whatever decoder reads it, a document reads as ``json.loads`` reads it: the same
    values of the same types, keys in the same order; a cut one fails as json fails."""
    text = json.dumps(obj, ensure_ascii=ascii_only)
    if json_depth(text.encode("utf-8", "surrogatepass")) > 64:
        return
    encoded = text.encode("utf-8", "surrogatepass")  # raw lone surrogates: not UTF-8
    cut = data.draw(st.integers(min_value=0, max_value=len(encoded)))
    for sample in (encoded, encoded[:cut]):
        try:
            expected = json.loads(sample.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            with pytest.raises(TDViewError):
                parse_meta_json(sample, "m")
            continue
        if not isinstance(expected, dict):
            continue
        assert repr(parse_meta_json(sample, "m")) == repr(expected)


@FUZZ
@given(st.binary(max_size=300))
def test_scan_pickle_random_bytes(data):
    try:
        info = scan_pickle(data, "fuzz/other.pickle")
    except TDViewError:
        return
    assert info.size == len(data) and 0 < info.end <= len(data)


@FUZZ
@given(json_values, st.integers(min_value=0, max_value=5), st.data())
def test_scan_pickle_mutated(value, protocol, data):
    raw = bytearray(pickle.dumps(value, protocol=protocol))
    for _ in range(data.draw(st.integers(min_value=0, max_value=3))):
        pos = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
        raw[pos] = data.draw(st.integers(min_value=0, max_value=255))
    try:
        scan_pickle(bytes(raw), "fuzz/other.pickle")
    except TDViewError:
        pass


@FUZZ
@given(json_values, st.integers(min_value=0, max_value=5))
def test_scan_pickle_plain_values_have_no_globals_from_protocol_4(value, protocol):
    info = scan_pickle(pickle.dumps(value, protocol=protocol), "p")
    if protocol >= 4:
        assert info.is_plain_data
    assert info.end == info.size


@FUZZ
@given(st.binary(max_size=200))
def test_parse_json_types_random_bytes(data):
    try:
        jt = parse_json_types(data, "fuzz/json_types.json")
        jt.types_if_matches(b"")
    except TDViewError:
        pass


@FUZZ
@given(st.text())
def test_key_round_trip(key):
    name = encode_key(key)
    assert decode_name(name) == key
    assert is_canonical_name(name)
    assert name and name not in (".", "..") and "/" not in name and "\\" not in name
    assert "\0" not in name


@FUZZ
@given(st.text(), st.booleans(), st.booleans(), st.booleans())
def test_candidates_never_escape(key, robust, collection, windows):
    # a backslash separates, and a drive prefix escapes, on Windows only
    with mock.patch.object(_keys, "WINDOWS_PATHS", windows):
        names = candidate_names(key, robust=robust, collection=collection)
    for name in names:
        full = name if collection else name + ".memmap"
        parts = (full.replace("\\", "/") if windows else full).split("/")
        assert ".." not in parts and not full.startswith("/") and "\0" not in full
        assert parts[-1] not in ("", ".")
        assert not windows or not (len(full) > 1 and full[1] == ":" and full[0].isalpha())


@FUZZ
@given(st.text(alphabet=st.sampled_from("%0123456789abcdefABCDEFxz/. "), max_size=12))
def test_decode_any_name(name):
    key = decode_name(name)
    assert isinstance(key, str)
    if is_canonical_name(name):
        assert encode_key(key) == name


def _depth(value: object) -> int:
    """The nesting depth of a decoded JSON value (a scalar is 0)."""
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


bracket_text = st.text(alphabet='[]{}"\\ab\n', max_size=8)
nested_values = st.recursive(
    st.none() | st.integers() | bracket_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(bracket_text, inner, max_size=3),
    max_leaves=30,
)


@FUZZ
@given(nested_values, st.booleans())
def test_json_depth_is_the_real_depth(value, ascii_only):
    """Both scans (escape-free text split on quotes, and the regex for text with escapes)
    give the depth of the decoded value, whatever brackets and quotes the strings hold."""
    data = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert json_depth(data) == _depth(value)
