"""One test per input the format layer rejects.

Each asserts the exception type and that the message names the file, the key (or
field) and the offending value.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import random

import pytest

from tdview.errors import (
    CheckpointFormatError,
    LimitExceededError,
    TDViewError,
    UnsupportedFormatVersionError,
)
from tdview.format import (
    json_depth,
    parse_dtype,
    parse_json_types,
    parse_meta_json,
    parse_node,
    scan_pickle,
)

WHERE = "/ckpt/sub dir/meta.json"
TD = "<class 'tensordict._td.TensorDict'>"


def td_meta(**entries):
    return {
        **entries,
        "shape": [2],
        "device": "cpu",
        "_type": TD,
        "_format_version": 1,
        "_class": "tensordict:TensorDict",
    }


def leaf(dtype="torch.float32", shape=(2,), **extra):
    return {"device": "cpu", "shape": list(shape), "dtype": dtype, "is_nested": False, **extra}


def raises(exc_type, func, *args, names=()):
    with pytest.raises(exc_type) as info:
        func(*args)
    message = str(info.value)
    for part in (WHERE, *names):
        assert part in message, (part, message)
    assert isinstance(info.value, TDViewError)
    return message


# ---------------------------------------------------------------- JSON


def test_invalid_json():
    msg = raises(CheckpointFormatError, parse_meta_json, b'{"a": [1, 2}', WHERE)
    assert "line 1 column" in msg and "invalid JSON" in msg


def test_invalid_utf8():
    raises(
        CheckpointFormatError, parse_meta_json, b'{"a": "\xff\xfe"}', WHERE, names=["UTF-8", "xff"]
    )


def test_non_object_root():
    raises(CheckpointFormatError, parse_meta_json, b"[1, 2]", WHERE, names=["an array"])
    raises(CheckpointFormatError, parse_meta_json, b'"s"', WHERE, names=["a string"])
    raises(CheckpointFormatError, parse_meta_json, b"null", WHERE, names=["null"])


def test_too_deep():
    data = b'{"a": ' + b"[" * 100 + b"]" * 100 + b"}"
    raises(LimitExceededError, parse_meta_json, data, WHERE, names=["101", "64"])


def test_too_deep_huge_does_not_recurse():
    data = b"[" * 2_000_000 + b"]" * 2_000_000
    raises(LimitExceededError, parse_meta_json, data, WHERE, names=["2000000"])


def test_brackets_in_strings_do_not_count():
    data = b'{"a": "' + b"[" * 1000 + b'\\"{{{"}'
    assert parse_meta_json(data, WHERE)["a"].startswith("[[")


def test_a_string_that_never_closes_is_scanned_once():
    # a quote, then escaped quotes to the end: a scan that retried each quote as the start
    # of a string took minutes here (it grew with the square of the size)
    data = b"[" * 65 + b'"' + b'\\"' * 400_000
    raises(LimitExceededError, parse_meta_json, data, WHERE, names=["65", "64"])


def test_escaped_backslashes_before_quotes():
    text = json.dumps({"a": ["\\", '\\"[', "[\\\\"], "b": '\\\\"{{'}).encode()
    assert json_depth(text) == 2
    assert parse_meta_json(text, WHERE)["b"] == '\\\\"{{'


def test_json_depth_is_the_running_count_of_brackets_outside_strings():
    """The pair-removal passes and the quote shortcuts give what a running count of the
    brackets left outside strings gives, on balanced, deep, unbalanced and unclosed texts
    (an unclosed string's brackets count: the decoder refuses it anyway)."""

    def counted(data: bytes) -> int:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
        if data.count(b'"') % 2:  # a string that never closes: its brackets count
            cut = data.rindex(b'"')
            data = data[:cut] + data[cut + 1 :]
        depth = level = 0
        inside = False
        for byte in data:
            if byte == ord('"'):
                inside = not inside
            elif not inside and byte in b"[{":
                level += 1
                depth = max(depth, level)
            elif not inside and byte in b"]}":
                level -= 1
        return depth

    rng = random.Random(18)
    texts = [b"[" * n + b"]" * n for n in range(12)] + [b"[]" * 50, b'["]"]', b'""]["']
    for _ in range(3000):
        body = bytes(rng.choice(b'[]{}"\\ a,') for _ in range(rng.randint(0, 30)))
        n = rng.randint(0, 10)
        texts.append(b"[" * n + body + b"]" * n)
    for text in texts:
        assert json_depth(text) == counted(text), text


def test_integer_too_long():
    raises(
        CheckpointFormatError,
        parse_meta_json,
        b'{"a": ' + b"9" * 5000 + b"}",
        WHERE,
        names=["invalid JSON"],
    )


# ---------------------------------------------------------------- node header


def test_format_version_2():
    msg = raises(
        UnsupportedFormatVersionError, parse_node, {**td_meta(), "_format_version": 2}, WHERE
    )
    assert "format version 2" in msg and "up to 1" in msg
    with pytest.raises(RuntimeError):  # the reference's exception type still catches it
        parse_node({**td_meta(), "_format_version": 7}, WHERE)


def test_missing_type():
    meta = td_meta()
    del meta["_type"]
    raises(CheckpointFormatError, parse_node, meta, WHERE, names=['"_type"'])


def test_type_not_a_string():
    raises(
        CheckpointFormatError, parse_node, {**td_meta(), "_type": 5}, WHERE, names=['"_type"', "5"]
    )


def test_unreadable_type_without_class():
    meta = {"_type": "TensorDict", "shape": [], "device": "cpu"}
    raises(CheckpointFormatError, parse_node, meta, WHERE, names=['"_type"', "'TensorDict'"])


def test_node_not_a_dict():
    raises(CheckpointFormatError, parse_node, [1], WHERE, names=["[1]"])


# ---------------------------------------------------------------- leaf records


def test_bad_dtype_string():
    meta = td_meta(obs=leaf(dtype="torch.float128"))
    raises(CheckpointFormatError, parse_node, meta, WHERE, names=["'obs'", "'torch.float128'"])


def test_dtype_not_a_string():
    raises(
        CheckpointFormatError, parse_node, td_meta(obs=leaf(dtype=4)), WHERE, names=["'obs'", "4"]
    )


def test_parse_dtype_names_file_key_value():
    raises(CheckpointFormatError, parse_dtype, "float32", WHERE, "k", names=["'k'", "'float32'"])


def test_negative_shape_entry():
    raises(
        CheckpointFormatError,
        parse_node,
        td_meta(obs=leaf(shape=[2, -1])),
        WHERE,
        names=["'obs'", "[2, -1]"],
    )


def test_bool_shape_entry():
    raises(
        CheckpointFormatError,
        parse_node,
        td_meta(obs=leaf(shape=[True])),
        WHERE,
        names=["'obs'", "[True]"],
    )


def test_float_shape_entry():
    raises(
        CheckpointFormatError,
        parse_node,
        td_meta(obs=leaf(shape=[2.0])),
        WHERE,
        names=["'obs'", "[2.0]"],
    )


def test_shape_not_a_list():
    raises(
        CheckpointFormatError,
        parse_node,
        td_meta(obs={"dtype": "torch.int8", "shape": "2"}),
        WHERE,
        names=["'obs'", "'2'"],
    )


def test_huge_shape():
    meta = td_meta(obs=leaf(shape=[2**31, 2**31]))
    raises(CheckpointFormatError, parse_node, meta, WHERE, names=["'obs'", "2147483648", "2**62"])


def test_empty_shape_whose_strides_overflow():
    # no elements, but torch cannot make the strides of [2, 0, 2**62, 2**62]
    meta = td_meta(obs=leaf(shape=[2, 0, 2**62, 2**62]))
    raises(CheckpointFormatError, parse_node, meta, WHERE, names=["'obs'", str(2**62), "strides"])
    assert parse_node(td_meta(obs=leaf(shape=[2, 0, 2**20, 2**20])), WHERE).entries


def test_dimension_beyond_int64():
    meta = td_meta(obs=leaf(shape=[0, 2**64]))
    raises(CheckpointFormatError, parse_node, meta, WHERE, names=["'obs'", "18446744073709551616"])


def test_rank_too_large():
    raises(
        CheckpointFormatError,
        parse_node,
        td_meta(obs=leaf(shape=[1] * 65)),
        WHERE,
        names=["'obs'", "rank 65"],
    )


def test_nested_leaf_shape_rank():
    meta = td_meta(nt=leaf(shape=[2, 3, 4], is_nested=True))
    raises(CheckpointFormatError, parse_node, meta, WHERE, names=["'nt'", "(2, 3, 4)"])


def test_is_nested_not_bool():
    raises(
        CheckpointFormatError,
        parse_node,
        td_meta(nt=leaf(is_nested="yes")),
        WHERE,
        names=["'nt'", "'yes'"],
    )


def test_leaf_device_not_a_string():
    raises(
        CheckpointFormatError,
        parse_node,
        td_meta(x=leaf(device=0)),
        WHERE,
        names=["'x'", "device", "0"],
    )


# ---------------------------------------------------------------- TensorDict node fields


def test_batch_size_invalid():
    raises(
        CheckpointFormatError,
        parse_node,
        {**td_meta(), "shape": [2, "3"]},
        WHERE,
        names=['"shape"', "[2, '3']"],
    )


def test_device_null():
    raises(
        CheckpointFormatError,
        parse_node,
        {**td_meta(), "device": None},
        WHERE,
        names=['"device"', "None"],
    )


def test_device_garbage():
    raises(
        CheckpointFormatError,
        parse_node,
        {**td_meta(), "device": "cu da"},
        WHERE,
        names=['"device"', "'cu da'"],
    )


def test_bad_names_length():
    meta = {**td_meta(), "_names": ["a", "b"]}
    raises(
        CheckpointFormatError,
        parse_node,
        meta,
        WHERE,
        names=['"_names"', "['a', 'b']", "1 batch dims"],
    )


def test_names_not_unique():
    meta = {**td_meta(), "shape": [2, 2], "_names": ["a", "a"]}
    raises(
        CheckpointFormatError, parse_node, meta, WHERE, names=['"_names"', "['a', 'a']", "unique"]
    )


def test_names_wrong_item_type():
    raises(
        CheckpointFormatError,
        parse_node,
        {**td_meta(), "_names": [3]},
        WHERE,
        names=['"_names"', "[3]"],
    )


# ---------------------------------------------------------------- other node kinds

VIEW = {
    "_type": "<class 'tensordict._lazy._PermutedTensorDict'>",
    "shape": [3, 2],
    "device": "cpu",
    "custom_op": "permute",
    "inv_op": "permute",
    "custom_op_kwargs": {"dims": [1, 0]},
    "inv_op_kwargs": {"dims": [1, 0]},
}


def test_bad_view_op():
    meta = {**VIEW, "custom_op": "__import__"}
    raises(CheckpointFormatError, parse_node, meta, WHERE, names=['"custom_op"', "'__import__'"])


def test_bad_view_kwargs():
    meta = {**VIEW, "inv_op_kwargs": {"dims": [1, True]}}
    raises(CheckpointFormatError, parse_node, meta, WHERE, names=['"inv_op"', "True"])
    meta = {**VIEW, "custom_op_kwargs": {"dims": [1, 0], "extra": 1}}
    raises(CheckpointFormatError, parse_node, meta, WHERE, names=['"custom_op"', "'extra'"])
    meta = {**VIEW, "inv_op": None, "inv_op_kwargs": None}
    raises(CheckpointFormatError, parse_node, meta, WHERE, names=['"inv_op"', "None"])


def test_missing_view_field():
    meta = dict(VIEW)
    del meta["custom_op_kwargs"]
    raises(CheckpointFormatError, parse_node, meta, WHERE, names=['"custom_op_kwargs"'])


NTS = {
    "_type": "<class 'tensordict.tensorclass.NonTensorStack'>",
    "_format_version": 1,
    "_class": "tensordict:NonTensorStack",
    "stack_dim": 0,
    "device": None,
}


def test_bad_non_tensor_stack_data_string():
    raises(
        CheckpointFormatError,
        parse_node,
        {**NTS, "data": "../evil.pkl"},
        WHERE,
        names=['"data"', "'../evil.pkl'"],
    )


def test_bad_non_tensor_stack_data_type():
    raises(CheckpointFormatError, parse_node, {**NTS, "data": 3.5}, WHERE, names=['"data"', "3.5"])


LS = {
    "_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>",
    "_format_version": 1,
    "_class": "tensordict:LazyStackedTensorDict",
    "stack_dim": 0,
    "stack_dim_name": None,
}


def test_lazy_stack_without_stack_dim():
    meta = dict(LS)
    del meta["stack_dim"]
    raises(CheckpointFormatError, parse_node, meta, WHERE, names=['"stack_dim"'])


def test_lazy_stack_dim_not_int():
    raises(
        CheckpointFormatError,
        parse_node,
        {**LS, "stack_dim": True},
        WHERE,
        names=['"stack_dim"', "True"],
    )


def test_stack_dim_name_not_str():
    raises(
        CheckpointFormatError,
        parse_node,
        {**LS, "stack_dim_name": 1},
        WHERE,
        names=['"stack_dim_name"', "1"],
    )


SUB = {
    "_type": "<class 'tensordict._td._SubTensorDict'>",
    "_format_version": 1,
    "_class": "tensordict._td:_SubTensorDict",
}


@pytest.mark.parametrize(
    "index, shown",
    [
        ("0", "'0'"),
        (["tuple", [1.5]], "1.5"),
        (["tensor", [0.5, 1], "cpu"], "0.5"),
        (["tensor", [[0], [1, 2]], "cpu"], "[[0], [1, 2]]"),
        (["tensor", [0], "c p u"], "'c p u'"),
        (["slice", {"start": 0, "stop": "1", "step": None}], "'1'"),
        (["slice", {"start": 0}], "{'start': 0}"),
        (["range", {"start": 0, "stop": 3, "step": 0}], "'step': 0"),
        (["tuple", 5], "5"),
        (["ellipsis", 1], "['ellipsis', 1]"),
        ({"a": 1}, "{'a': 1}"),
        (2**70, "1180591620717411303424"),
    ],
)
def test_bad_sub_tensordict_index(index, shown):
    raises(
        CheckpointFormatError, parse_node, {**SUB, "index": index}, WHERE, names=['"index"', shown]
    )


def test_sub_tensordict_without_index():
    raises(CheckpointFormatError, parse_node, dict(SUB), WHERE, names=['"index"'])


def test_index_too_deep():
    index = 0
    for _ in range(100):
        index = ["tuple", [index]]
    raises(
        CheckpointFormatError,
        parse_node,
        {**SUB, "index": index},
        WHERE,
        names=['"index"', "deeper"],
    )


# ---------------------------------------------------------------- pickles


@pytest.mark.parametrize(
    "data, problem",
    [
        (pickle.dumps({"a": 1})[:-3], "malformed pickle"),
        (b"\x80\x04\xff.", "malformed pickle"),
        (b"\x80\x04K\x01", "malformed pickle"),  # no STOP
        (b"\x80\x04h\x05.", "memo key 5"),  # BINGET of an unset memo slot
        (b"\x80\x04\x93.", "STACK_GLOBAL"),  # stack underflow
        (b"\x80\x04e.", "APPENDS"),  # no MARK
        (b"", "malformed pickle"),
    ],
)
def test_malformed_pickle(data, problem):
    raises(CheckpointFormatError, scan_pickle, data, WHERE, names=[problem])


def test_pickle_globals_are_listed_not_run():
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    info = scan_pickle(pickle.dumps({"x": Evil()}), WHERE)
    assert ("builtins", "print") in info.globals and not info.is_plain_data


def test_stack_global_from_memo():
    # module and name pushed once, memoized, fetched back for a second STACK_GLOBAL
    data = (
        b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00"  # PROTO 4, FRAME
        b"\x8c\x02os\x94\x8c\x06system\x94\x93"  # 'os' MEMOIZE 'system' MEMOIZE STACK_GLOBAL
        b"0h\x00h\x01\x93."  # POP, BINGET 0, BINGET 1, STACK_GLOBAL, STOP
    )
    info = scan_pickle(data, WHERE)
    assert info.globals == (("os", "system"),)


def test_unresolvable_stack_global():
    data = b"\x80\x04K\x01K\x02\x93."  # two ints then STACK_GLOBAL
    assert scan_pickle(data, WHERE).globals == (("?", "?"),)


# ---------------------------------------------------------------- json_types.json


def test_json_types_unknown_name():
    pickled = pickle.dumps({"data": set})
    digest = hashlib.sha256(pickled).hexdigest()
    data = json.dumps({"types": {"data": "set"}, "pickle_sha256": digest}).encode()
    jt = parse_json_types(data, WHERE)
    with pytest.raises(CheckpointFormatError) as info:
        jt.types_if_matches(pickled)
    assert str(info.value) == (
        f"Unknown type name 'set' for the field 'data' in {WHERE}. "
        "Expected one of ['OrderedDict', 'dict', 'list', 'tuple']."
    )
    assert (
        jt.types_if_matches(b"other bytes") is None
    )  # hash mismatch: ignored, as in the reference


def test_json_types_bad_structure():
    raises(
        CheckpointFormatError,
        parse_json_types,
        b'{"types": ["dict"]}',
        WHERE,
        names=['"types"', "['dict']"],
    )
    raises(
        CheckpointFormatError,
        parse_json_types,
        b'{"types": {}, "pickle_sha256": 5}',
        WHERE,
        names=['"pickle_sha256"', "5"],
    )
    raises(CheckpointFormatError, parse_json_types, b"nope", WHERE, names=["invalid JSON"])
