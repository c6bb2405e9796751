"""Consolidated files that tensordict did not write as it writes them: a footer that lies,
metadata that is not its shape, leaves outside the payload or over each other, dtypes out
of the table, nesting without end; and a fuzz target of the footer's parser.

Each file starts as one written by ``td.consolidate(filename=...)`` and is then changed
by hand (the footer rewritten), as a damaged or hostile file would be.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensordict import TensorDict

import tdview
from tdview.errors import (
    CheckpointFormatError,
    LimitExceededError,
    NotACheckpointError,
    TDViewError,
    UnsafeCheckpointError,
)
from tdview.index import Checkpoint
from tdview.storage import open_store
from tdview.storage._consolidated_layout import MAX_DEPTH, Layout

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _written(tmp_path: Path) -> tuple[bytes, dict]:
    """A file tensordict wrote: its payload and its footer's document."""
    td = TensorDict(a=torch.arange(4.0), b={"c": torch.ones(2, dtype=torch.int16)}, batch_size=[])
    td.consolidate(filename=tmp_path / "ok.td")
    raw = (tmp_path / "ok.td").read_bytes()
    n = int.from_bytes(raw[-8:], "little")
    return raw[: -8 - n], json.loads(raw[-8 - n : -8])


def _file(tmp_path: Path, payload: bytes, document: object, name: str = "bad.td") -> Path:
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    path = tmp_path / name
    path.write_bytes(payload + body + len(body).to_bytes(8, "little"))
    return path


def test_the_file_as_written_opens(tmp_path: Path) -> None:
    payload, doc = _written(tmp_path)
    with Checkpoint(_file(tmp_path, payload, doc)) as ckpt:
        assert torch.equal(ckpt.load()["a"], torch.arange(4.0))


@pytest.mark.parametrize("length", [-1, 0, 1 << 40])
def test_a_footer_length_that_does_not_fit_is_refused(tmp_path: Path, length: int) -> None:
    """Not a consolidated footer at all: the file is said to be no checkpoint (as a zip
    without its end record is)."""
    payload, doc = _written(tmp_path)
    path = tmp_path / "bad.td"
    path.write_bytes(payload + json.dumps(doc).encode() + length.to_bytes(8, "little", signed=True))
    with pytest.raises(NotACheckpointError, match="bad.td"):
        open_store(path)


def test_a_footer_above_the_limit_is_refused_before_it_is_read(tmp_path: Path, monkeypatch) -> None:
    from tdview.storage import _consolidated_layout

    payload, doc = _written(tmp_path)
    path = _file(tmp_path, payload, doc)
    monkeypatch.setattr(_consolidated_layout, "MAX_FOOTER", 16)
    with pytest.raises(LimitExceededError, match=r"bad\.td.*above tdview's limit of 16 bytes"):
        _consolidated_layout.footer_length(path.read_bytes()[-8:], path.stat().st_size, str(path))


def test_metadata_that_is_not_json_names_the_file(tmp_path: Path) -> None:
    payload, _ = _written(tmp_path)
    with pytest.raises(CheckpointFormatError, match=r"bad\.td.*not JSON"):
        open_store(_file(tmp_path, payload, b'{"cls": "TensorDict", "leaves": {'))


@pytest.mark.parametrize(
    "change, what",
    [
        (lambda d: d.update(cls=3), '"cls" must be a string, got 3'),
        (lambda d: d.update(leaves=[1]), '"leaves" must be an object'),
        (lambda d: d["leaves"].update(a="x"), "a leaf is"),
        (lambda d: d["leaves"]["a"].__setitem__(1, [-2]), "non-negative integers, got \\[-2\\]"),
        (lambda d: d["leaves"]["a"].__setitem__(2, "0"), "start, stop and pad"),
        (lambda d: d["leaves"]["a"].__setitem__(4, 99), "start \\+ pad <= stop"),
        (lambda d: d["non_tensors"].update(s=["only data"]), "\\[data, batch size, device\\]"),
        (lambda d: d.update(extra=5), "a level must be a JSON object, got 5"),
    ],
)
def test_metadata_of_another_shape_names_the_file_key_and_value(
    tmp_path: Path, change, what: str
) -> None:
    payload, doc = _written(tmp_path)
    change(doc)
    with pytest.raises(CheckpointFormatError, match=rf"bad\.td.*{what}"):
        open_store(_file(tmp_path, payload, doc))


def test_a_leaf_past_the_payload_is_refused(tmp_path: Path) -> None:
    payload, doc = _written(tmp_path)
    doc["b"]["leaves"]["c"][3] = len(payload) + 8  # its stop in the footer
    with pytest.raises(UnsafeCheckpointError, match=r"leaf 'b/c' lies at bytes .* past the"):
        open_store(_file(tmp_path, payload, doc))


def test_overlapping_leaves_are_refused(tmp_path: Path) -> None:
    payload, doc = _written(tmp_path)
    doc["b"]["leaves"]["c"][2:4] = [8, 16]  # bytes 8..12, inside a's 0..16
    with pytest.raises(UnsafeCheckpointError, match=r"leaves 'a' and 'b/c' overlap"):
        open_store(_file(tmp_path, payload, doc))


def test_a_dtype_out_of_the_table_is_an_error_naming_file_key_and_value(tmp_path: Path) -> None:
    payload, doc = _written(tmp_path)
    doc["leaves"]["a"][0] = "torch.object"
    path = _file(tmp_path, payload, doc)
    with Checkpoint(path) as ckpt, pytest.raises(CheckpointFormatError) as error:
        ckpt.load()
    assert "bad.td" in str(error.value) and "torch.object" in str(error.value)
    assert "'a'" in str(error.value) or '"a"' in str(error.value)


def test_a_leaf_whose_span_is_not_its_size_is_a_clear_error(tmp_path: Path) -> None:
    payload, doc = _written(tmp_path)
    doc["leaves"]["a"][1] = [5]  # 20 bytes asked of a 16-byte span
    with Checkpoint(_file(tmp_path, payload, doc)) as ckpt, pytest.raises(TDViewError) as error:
        ckpt.load()
    assert "a.memmap" in str(error.value) and "16" in str(error.value)


def test_nesting_without_end_is_refused(tmp_path: Path) -> None:
    payload, _ = _written(tmp_path)
    level: dict = {"cls": "TensorDict", "leaves": {}, "non_tensors": {}, "cls_metadata": {}}
    doc = level
    for _ in range(MAX_DEPTH + 2):
        level["x"] = {"cls": "TensorDict", "leaves": {}, "non_tensors": {}, "cls_metadata": {}}
        level = level["x"]
    with pytest.raises(LimitExceededError, match="nests more than"):
        open_store(_file(tmp_path, payload, doc))
    deep = b'{"cls": "TensorDict", "x": ' * 100_000 + b"{}" + b"}" * 100_000
    with pytest.raises(LimitExceededError, match="nests too deeply"):
        open_store(_file(tmp_path, payload, deep, "deep.td"))


def test_keys_that_would_leave_a_folder_are_encoded(tmp_path: Path) -> None:
    """Keys are names in a footer, never paths: ``..``, ``/`` and ``""`` stay inside."""
    td = TensorDict({"..": torch.ones(1), "a/b": torch.zeros(1), "": torch.full((1,), 2.0)})
    td.consolidate(filename=tmp_path / "keys.td")
    with Checkpoint(tmp_path / "keys.td") as ckpt:
        got = ckpt.load()
        assert sorted(ckpt.store.list_dir("")) == [
            "%.memmap",
            "%2E%2E.memmap",
            "a%2Fb.memmap",
            "meta.json",
        ]
    ref = TensorDict.from_consolidated(tmp_path / "keys.td")
    assert sorted(got.keys()) == sorted(ref.keys())
    assert all(torch.equal(got[k], ref[k]) for k in ref.keys())


def test_nothing_is_written_to_the_file(tmp_path: Path) -> None:
    payload, doc = _written(tmp_path)
    path = _file(tmp_path, payload, doc)
    before = path.read_bytes()
    with Checkpoint(path) as ckpt:
        td = ckpt.load()
        td["a"] += 1  # a private mapping: the file keeps its bytes
    assert path.read_bytes() == before
    with pytest.raises(NotACheckpointError):
        tdview.load_memmap(path, mode="r+")


# -- a fuzz target of the footer's parser ---------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 300) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=40,
)
_LEAF = st.tuples(
    st.sampled_from(["torch.float32", "torch.bfloat16", "torch.bool", "bogus", 3]),
    st.lists(st.integers(-1, 5), max_size=3),
    st.integers(-4, 80),
    st.integers(-4, 80),
    st.integers(-1, 8),
).map(list)
_LEVEL = st.recursive(
    st.fixed_dictionaries(
        {
            "cls": st.sampled_from(
                ["TensorDict", "LazyStackedTensorDict", "NonTensorStack", "<class 'x.P'>", 1]
            ),
            "leaves": st.dictionaries(
                st.sampled_from(["a", "b", "", "..", "0", "1"]), _LEAF, max_size=3
            ),
            "non_tensors": st.dictionaries(
                st.sampled_from(["0", "1", "s"]),
                st.lists(_JSON, min_size=3, max_size=3),
                max_size=2,
            ),
            "cls_metadata": st.dictionaries(
                st.sampled_from(["batch_size", "names", "device", "stack_dim"]), _JSON, max_size=3
            ),
        }
    ),
    lambda inner: st.builds(
        lambda level, children: {**level, **children},
        inner,
        st.dictionaries(st.sampled_from(["0", "1", "n", "size"]), inner | _JSON, max_size=2),
    ),
    max_leaves=6,
)


def _every_folder(layout: Layout, dirkey: str = "", depth: int = 0) -> None:
    folder = layout.folder(dirkey)
    assert folder is not None
    json.loads(folder.meta)  # the meta.json made is JSON
    for name in folder.dirs:
        if depth < 20:
            _every_folder(layout, f"{dirkey}/{name}" if dirkey else name, depth + 1)


@FUZZ
@given(level=_LEVEL | _JSON)
def test_the_footer_parser_never_crashes(level: object) -> None:
    """Any document is a layout whose folders are all made, or a tdview error."""
    try:
        layout = Layout(json.dumps(level).encode(), 64, "fuzz.td")
    except TDViewError:
        return
    _every_folder(layout)
    for start, stop in (
        span for folder in layout._folders.values() for span in folder.files.values()
    ):
        assert 0 <= start < start + stop <= 64


@FUZZ
@given(data=st.binary(max_size=200))
def test_random_bytes_are_a_layout_or_a_tdview_error(data: bytes) -> None:
    try:
        Layout(data, 64, "fuzz.td")
    except TDViewError:
        pass


def test_jagged_offsets_that_decrease_are_an_error_naming_the_file(tmp_path: Path) -> None:
    jagged = torch.nested.nested_tensor([torch.ones(2, 3), torch.zeros(4, 3)], layout=torch.jagged)
    TensorDict(a=jagged, batch_size=[2]).consolidate(filename=tmp_path / "njt.td")
    raw = bytearray((tmp_path / "njt.td").read_bytes())
    n = int.from_bytes(raw[-8:], "little")
    start, stop, pad = json.loads(raw[-8 - n : -8])["leaves"]["<NJT_OFFSETS>a"][2:5]
    raw[start : stop - pad] = torch.tensor([0, 5, 2]).numpy().tobytes()  # 5 then 2
    (tmp_path / "njt.td").write_bytes(bytes(raw))
    with Checkpoint(tmp_path / "njt.td") as ckpt, pytest.raises(TDViewError) as error:
        ckpt.load()
    assert "njt.td" in str(error.value) and "[0, 5, 2]" in str(error.value)
