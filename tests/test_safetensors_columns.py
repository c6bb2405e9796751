"""The safetensors header read fast: checked by whole columns where it is plainly well
formed (against safetensors' own reader), and otherwise read record by record with the
same result or the same error; the tree grouped one folder at a time, as the rule says."""

from __future__ import annotations

import json
import os
from math import prod
from pathlib import Path
from unittest import mock

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.torch import save_file

from tdview.errors import CheckpointFormatError, TDViewError
from tdview.storage import _safetensors as header_module
from tdview.storage._fast_json import NOT_READ
from tdview.storage._safetensors import DTYPES, PREFIX, parse_header
from tdview.storage._safetensors_tree import RESERVED, Layout, file_name

EXAMPLES = int(os.environ.get("TDVIEW_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize="TDVIEW_FUZZ_EXAMPLES" not in os.environ,
    suppress_health_check=[HealthCheck.too_slow],
)
#: safetensors' names of torch dtypes save_file writes
SAVED = {
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int8: "I8",
    torch.bool: "BOOL",
    torch.float64: "F64",
}


def _body(path: Path) -> bytes:
    data = path.read_bytes()
    return data[PREFIX : PREFIX + int.from_bytes(data[:PREFIX], "little")]


def test_a_saved_header_is_checked_at_once_and_reads_as_safe_open(tmp_path: Path) -> None:
    """A file written by save_file (every dtype it writes, empty tensors, scalars, names
    with colons and non-ASCII) takes the checks by whole columns, and each tensor's
    dtype, shape and bytes are what safe_open reads."""
    state = {
        f"blocks.{i}.{name}:{dtype}": torch.arange(i % 5, dtype=torch.float64)
        .to(dtype)
        .reshape(-1, 1)[: i % 3]
        for i, (name, dtype) in enumerate(
            (name, dtype) for name in ("w", "é", "b") for dtype in SAVED for _ in range(3)
        )
    }
    state["scalar"] = torch.tensor(3.5)
    path = tmp_path / "m.safetensors"
    save_file(state, path, metadata={"format": "pt", "note": "a:b"})
    body = _body(path)
    size = path.stat().st_size
    header = header_module._checked_at_once(body, PREFIX + len(body), size)
    assert header is not None  # the columns vouched for it: no record-by-record pass
    data = path.read_bytes()
    with safe_open(path, "pt") as f:
        assert sorted(header.records) == sorted(f.keys())
        assert header.metadata == f.metadata()
        for name in f.keys():
            tensor = f.get_tensor(name)
            dtype, shape = header.describe(name)
            assert (dtype, list(shape)) == (
                str(tensor.dtype).removeprefix("torch."),
                [*tensor.shape],
            )
            begin, end = header.span(name)
            expected = tensor.contiguous().reshape(-1).view(torch.uint8)
            assert data[begin:end] == expected.numpy().tobytes()
            assert (name in header.empty) == (tensor.numel() == 0)


def _slow(body: bytes, size: int | None) -> object:
    with mock.patch.object(header_module, "fast_loads", lambda body, **_: NOT_READ):
        return _outcome(body, size)


def _outcome(body: bytes, size: int | None) -> object:
    try:
        header = parse_header(body, "fuzz.safetensors", size)
    except TDViewError as error:
        return type(error), str(error)
    return header.records, header.metadata, header.data_start, header.empty, header.tensors


_NAMES = st.text(alphabet='ab.:é\\"0 ', min_size=0, max_size=6)
#: how a well-formed number is spoiled: each is refused record by record
_SPOIL = st.sampled_from(
    [
        lambda n: bool(n) if n in (0, 1) else n,  # true/false: no int to safetensors
        float,
        lambda n: n + 2**64,  # past 64 bits
        lambda n: n + 2**63,
        lambda n: -1 - n,
        str,
    ]
)


@st.composite
def _headers(draw: st.DrawFn) -> bytes:
    """A header of a few records, most well formed, some not (a number spoiled in a
    shape or the offsets, a dtype off the table, extra members, overlapping spans), in
    ASCII or UTF-8, maybe with a member given twice."""
    records: dict[str, object] = {}
    at = 0
    for name in draw(st.lists(_NAMES, max_size=8, unique=True)):
        dtype = draw(st.sampled_from(["I8", "I8", "F32", "BF16", "F4"]))
        sizes = draw(st.lists(st.integers(0, 2), max_size=2))
        shape: list[object] = list(sizes)
        size = prod(sizes) * DTYPES.get(dtype, ("", 1))[1]
        begin = max(0, at - draw(st.sampled_from([0, 0, 0, 0, 1])))  # sometimes overlapping
        offsets: list[object] = [begin, begin + size]
        if draw(st.integers(0, 3)) == 0:
            spoiled = draw(st.sampled_from([shape, offsets] if shape else [offsets]))
            at_index = draw(st.integers(0, len(spoiled) - 1))
            spoiled[at_index] = draw(_SPOIL)(spoiled[at_index])
        record: dict[str, object] = {"dtype": dtype, "shape": shape, "data_offsets": offsets}
        if draw(st.integers(0, 9)) == 0:
            record["extra"] = draw(st.sampled_from(["x:y", {"k": 1}, 5]))
        records[name] = record
        at = max(at, begin + size)
    if draw(st.booleans()):
        records["__metadata__"] = {"format": "pt", "n": draw(st.sampled_from(["1", "a:b", 1]))}
    text = json.dumps(records, ensure_ascii=draw(st.booleans()))
    if records and draw(st.integers(0, 3)) == 0:  # a member given twice, as text
        first = next(iter(records))
        text = text[:-1] + f", {json.dumps(first)}: {json.dumps(records[first])}}}"
    return text.encode()


@FUZZ
@given(_headers(), st.integers(0, 120))
def test_checks_at_once_read_as_record_by_record(body: bytes, extra: int) -> None:
    """Whatever the header, the reading by columns gives the record-by-record reading's
    header, or its error (the same class and words)."""
    size = PREFIX + len(body) + extra
    assert _outcome(body, size) == _slow(body, size)


def _record(dtype: str, shape: object, offsets: object) -> dict[str, object]:
    return {"dtype": dtype, "shape": shape, "data_offsets": offsets}


@pytest.mark.parametrize(
    ("records", "match"),
    [
        ({"w": _record("I8", [1], [False, True])}, "data_offsets"),
        ({"w": _record("I8", [True], [0, 1])}, "shape"),
        ({"w": _record("I8", [1.0], [0, 1])}, "shape"),
        ({"w": _record("I8", [2**64], [0, 1])}, "needs"),
        ({"w": _record("I8", [1], [2**64, 2**64 + 1])}, "past the end"),
        ({"w": _record("I8", [-1], [0, 1])}, "shape"),
        ({"w": _record("I4", [1], [0, 1])}, "dtype"),
        ({"w": _record("I8", [1] * 65, [0, 1])}, "shape"),
        ({"w": _record("I8", [2], [0, 1])}, "needs 2 bytes"),
        ({"w": _record("I8", [1], [0, 9])}, "needs 1 bytes"),
        ({"w": _record("I8", [1], [0])}, "data_offsets"),
        ({"w": _record("I8", [1], [99, 100])}, "past the end"),
        ({"w": {"dtype": "I8", "shape": [1]}}, "data_offsets"),
        ({"w": [1]}, "not a record"),
        (
            {
                "a": _record("I8", [1], [0, 1]),
                "b": _record("I8", [1], [1, 2]),
                "c": _record("I8", [1], [1, 2]),
                "d": _record("I8", [1], [2, 3]),
            },
            "overlap",
        ),
        ({"__metadata__": {"n": 1}}, "__metadata__"),
    ],
)
def test_what_the_columns_refuse_is_refused_by_name(records: dict[str, object], match: str) -> None:
    """Each flaw the columns meet sends the header record by record, which refuses it
    naming the value (a bool or a float is no size, as for safetensors)."""
    body = json.dumps(records).encode()
    size = PREFIX + len(body) + 8
    assert header_module._checked_at_once(body, PREFIX + len(body), size) is None
    with pytest.raises(TDViewError, match=match) as error:
        parse_header(body, "bad.safetensors", size)
    assert "bad.safetensors" in str(error.value)


def test_a_name_given_twice_is_refused_even_when_an_escape_evens_the_colons() -> None:
    """A duplicate member hides from the count of colons only behind an escape (``:``
    written ``\\u003a``): with any escape the header is read record by record."""
    record = '{"dtype": "F32", "shape": [], "data_offsets": [%d, %d]}'
    a, b, b2 = record % (0, 4), record % (4, 8), record % (8, 12)
    colons = 4 * "\\u003a"
    body = f'{{"a{colons}": {a}, "b": {b}, "b": {b2}}}'.encode()
    # as many colons as the members parsed (2 + 2 * 3) and the colons of their strings (4)
    assert body.count(b":") == 2 + 2 * 3 + 4
    with pytest.raises(CheckpointFormatError, match="'b' twice"):
        parse_header(body, "dup.safetensors", PREFIX + len(body) + 12)


def _placed(keys: list[str]) -> dict[str, str]:
    """The grouping rule as written (the module docstring), key by key: a part descends
    unless it is reserved or the key so far is a key itself; a reserved last part stays
    flat one level up. Store key of each file -> its real key."""
    names = set(keys)
    out = {}
    for key in keys:
        parts = key.split(".")
        depth = 0
        while (
            depth < len(parts) - 1
            and parts[depth] not in RESERVED
            and ".".join(parts[: depth + 1]) not in names
        ):
            depth += 1
        if depth and depth == len(parts) - 1 and parts[-1] in RESERVED:
            depth -= 1
        folder = "".join(file_name(part) + "/" for part in parts[:depth])
        out[folder + file_name(".".join(parts[depth:])) + ".memmap"] = key
    return out


_PART = st.sampled_from(["a", "b", "0", "10", "2", "", "shape", "_type", "x y", "%", "a-b"])


@FUZZ
@given(st.lists(st.lists(_PART, min_size=1, max_size=4).map(".".join), max_size=12, unique=True))
def test_each_key_is_placed_as_the_rule_says(keys: list[str]) -> None:
    if RESERVED.intersection(keys):
        return  # refused (test_safetensors_hostile)
    layout = Layout(keys, lambda key: ("float32", [1]))
    assert layout.files == _placed(keys)


def test_a_level_is_grouped_when_it_is_asked_for() -> None:
    """Listing the top of 1,000 layers describes no tensor; the top's meta.json only
    its own; a layer's only that layer's."""
    keys = [f"model.layers.{i}.{w}" for i in range(1000) for w in ("q.weight", "k.weight")]
    keys.append("model.norm")
    asked: list[str] = []

    def describe(key: str) -> tuple[str, list[int]]:
        asked.append(key)
        return "float32", [4]

    layout = Layout(keys, describe)
    assert layout.children("") == ["meta.json", "model"]
    assert layout.children("model") == ["layers", "meta.json", "norm.memmap"]
    assert asked == []
    json.loads(layout.meta("model"))
    assert asked == ["model.norm"]
    meta = json.loads(layout.meta("model/layers/7/q"))
    assert asked == ["model.norm", "model.layers.7.q.weight"]
    assert meta["weight"]["shape"] == [4]
    assert list(json.loads(layout.meta("model/layers")))[:3] == ["0", "1", "2"]
    assert layout.leaf("model/layers/999/k/weight.memmap") == "model.layers.999.k.weight"


def test_a_key_its_index_puts_in_another_shard_is_flagged(tmp_path: Path) -> None:
    """As many keys as the index names, but one named for a shard that does not hold
    it: the shard set is looked at key by key, and that key alone says so."""
    from .test_safetensors import model_state
    from .test_safetensors_shards import _problems, write_shards

    folder = write_shards(tmp_path / "model", model_state())
    index_file = folder / "model.safetensors.index.json"
    index = json.loads(index_file.read_text())
    key, name = next(iter(index["weight_map"].items()))
    other = next(n for n in index["weight_map"].values() if n != name)
    index["weight_map"][key] = other
    index_file.write_text(json.dumps(index))
    problems = _problems(folder)
    assert list(problems) == [key]
    assert f"names shard {other} for {key!r}, but another shard holds it" in problems[key][0]


def test_folders_asked_on_threads_are_grouped_as_on_one() -> None:
    """The index reads folders ahead on threads: each folder is grouped once, and every
    answer is what one thread gets."""
    from concurrent.futures import ThreadPoolExecutor

    keys = [f"m.l.{i}.{w}.{p}" for i in range(60) for w in ("q", "k", "v") for p in "wb"]

    def answers(layout: Layout) -> dict[str, object]:
        folders = ["", "m", "m/l"] + [f"m/l/{i}" for i in range(60)]
        folders += [f"m/l/{i}/{w}" for i in range(60) for w in "qkv"]
        return {key: (layout.children(key), layout.meta(key)) for key in folders[::-1]}

    alone = answers(Layout(keys, lambda key: ("float32", [1])))
    shared = Layout(keys, lambda key: ("float32", [1]))
    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(lambda _: answers(shared), range(8)))
    assert all(one == alone for one in found)
    assert shared.files == Layout(keys, lambda key: ("float32", [1])).files
