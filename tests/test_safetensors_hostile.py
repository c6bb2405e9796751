"""Hostile safetensors headers: each refused with a tdview error naming the file, the key
and the offending value; and a fuzz target of the header parser (anything it is given
parses or raises a tdview error, never another exception)."""

from __future__ import annotations

import json
import os
import struct
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from tdview.errors import (
    CheckpointFormatError,
    LimitExceededError,
    TDViewError,
    UnsafeCheckpointError,
)
from tdview.index import Checkpoint, walk
from tdview.storage import open_store
from tdview.storage._safetensors import MAX_HEADER, header_length, parse_header

EXAMPLES = int(os.environ.get("TDVIEW_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize="TDVIEW_FUZZ_EXAMPLES" not in os.environ,
    suppress_health_check=[HealthCheck.too_slow],
)


def craft(path: Path, header: object, data: bytes = b"", *, raw: bytes | None = None) -> Path:
    body = raw if raw is not None else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(body)) + body + data)
    return path


def test_a_header_length_above_the_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.safetensors"
    # a length that fits the (sparse) file, but above the bound: refused before reading
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", MAX_HEADER + 1) + b"{")
        f.truncate(MAX_HEADER + 16)
    with pytest.raises(LimitExceededError, match=f"{MAX_HEADER + 1:,}") as error:
        open_store(path)
    assert str(path) in str(error.value)


def test_a_header_past_the_end_of_the_file_is_no_safetensors_file(tmp_path: Path) -> None:
    """The sniff wants the header inside the file: a file whose length says more is not
    taken for safetensors (it is then no archive either)."""
    path = tmp_path / "short.safetensors"
    path.write_bytes(struct.pack("<Q", 1000) + b'{"a": 1}')
    with pytest.raises(TDViewError, match="short.safetensors"):
        open_store(path)
    with pytest.raises(UnsafeCheckpointError, match="past the end of the file"):
        header_length(path.read_bytes()[:8], str(path), path.stat().st_size)


def test_a_span_past_the_end_of_the_file_is_refused(tmp_path: Path) -> None:
    path = craft(
        tmp_path / "out.safetensors",
        {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},
        b"\0" * 8,
    )
    with pytest.raises(UnsafeCheckpointError, match=r"'w' ends at byte .*past the end") as e:
        open_store(path)
    assert str(path) in str(e.value)


def test_overlapping_spans_are_refused(tmp_path: Path) -> None:
    path = craft(
        tmp_path / "overlap.safetensors",
        {
            "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
        },
        b"\0" * 12,
    )
    with pytest.raises(UnsafeCheckpointError, match=r"'a' \(bytes .*'b' .*overlap") as e:
        open_store(path)
    assert str(path) in str(e.value)


@pytest.mark.parametrize(
    ("record", "match"),
    [
        ({"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}, "dtype 'F4'"),
        ({"dtype": "float32", "shape": [1], "data_offsets": [0, 4]}, "dtype 'float32'"),
        ({"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}, r"shape \[-1\]"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}, "needs 8 bytes"),
        ({"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}, r"data_offsets \[4, 0\]"),
        ({"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}, r"shape \[1.5\]"),
        ([1, 2], "is \\[1, 2\\], not a record"),
    ],
)
def test_a_bad_record_names_the_file_the_key_and_the_value(
    tmp_path: Path, record: object, match: str
) -> None:
    path = craft(tmp_path / "bad.safetensors", {"layer.w": record}, b"\0" * 16)
    with pytest.raises(CheckpointFormatError, match=match) as e:
        open_store(path)
    assert str(path) in str(e.value) and "'layer.w'" in str(e.value)


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (b'{"a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}, "a": 1}', "'a' twice"),
        (b"{not json", "not UTF-8 JSON"),
        (b"{\xff}", "not UTF-8 JSON"),
        (b'{"__metadata__": {"n": 1}}', "'__metadata__' must map strings"),
        (b"[" * 100_000 + b"]" * 100_000, "not UTF-8 JSON|JSON list"),
    ],
)
def test_a_bad_header_is_refused(tmp_path: Path, raw: bytes, match: str) -> None:
    if raw.startswith(b"["):
        raw = b"{" + b'"a": ' + raw + b"}"
    path = craft(tmp_path / "bad.safetensors", None, b"\0" * 4, raw=raw)
    with pytest.raises(CheckpointFormatError, match=match):
        open_store(path)


def test_a_top_level_key_tensordict_reserves_is_refused_by_name(tmp_path: Path) -> None:
    save_file({"shape": torch.ones(1)}, tmp_path / "r.safetensors")
    with pytest.raises(CheckpointFormatError, match="'shape'"):
        Checkpoint(tmp_path / "r.safetensors")


# -- fuzz ----------------------------------------------------------------------------------


def _valid() -> bytes:
    return json.dumps(
        {
            "__metadata__": {"format": "pt"},
            "a.w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
            "a.b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},
            "e": {"dtype": "I64", "shape": [0], "data_offsets": [22, 22]},
        }
    ).encode()


@FUZZ
@given(st.binary(max_size=400))
def test_parse_header_of_any_bytes(body: bytes) -> None:
    try:
        parse_header(body, "fuzz.safetensors", 8 + len(body) + 64)
    except TDViewError:
        pass


@FUZZ
@given(st.data())
def test_parse_header_of_a_mutated_header(data: st.DataObject) -> None:
    body = bytearray(_valid())
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(body) - 1))
        body[at] = data.draw(st.integers(0, 255))
    size = data.draw(st.integers(0, 8 + len(body) + 64))
    try:
        header = parse_header(bytes(body), "fuzz.safetensors", size)
    except TDViewError:
        return
    spans = sorted((t.begin, t.end) for t in header.tensors if t.size)
    assert all(end <= size for _, end in spans)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


_PART = st.sampled_from(["a", "b", "0", "10", "2", "", "shape", "_type", "x y", "%", ".."])


@FUZZ
@given(st.lists(st.lists(_PART, min_size=1, max_size=4).map(".".join), max_size=12, unique=True))
def test_grouping_any_keys_gives_each_its_own_leaf(keys: list[str]) -> None:
    """Whatever the keys (prefixes of each other, reserved names, empty parts, characters
    a file name cannot hold), each is one leaf whose path, joined by dots, is the key, and
    every folder's meta.json is a JSON object naming its entries; or the one refusal: a
    top-level key tensordict reserves."""
    from tdview.storage._safetensors_tree import META, RESERVED, Layout

    try:
        layout = Layout(keys, lambda key: ("float32", [1]))
    except CheckpointFormatError:
        assert any(key in RESERVED for key in keys)
        return
    assert sorted(layout.files.values()) == sorted(keys)
    for key in layout.files:
        folder, _, name = key.rpartition("/")
        assert layout.is_dir(folder) and name in layout.children(folder)
        meta = json.loads(layout.meta(folder))
        assert meta["shape"] == [] and meta["_class"] == "tensordict:TensorDict"
    for folder in {k.rpartition("/")[0] for k in layout.files}:
        assert META in layout.children(folder)
    with tempfile.TemporaryDirectory() as tmp:  # the index reads it so: paths are keys
        path = Path(tmp) / "fuzz.safetensors"
        save_file({key: torch.ones(1) for key in keys}, path)
        with Checkpoint(path) as ckpt:
            leaves = {".".join(node.path) for node in walk(ckpt, ckpt.root) if node.is_leaf}
        assert leaves == set(keys)
