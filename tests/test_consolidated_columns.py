"""A consolidated file's footer read fast: checked by whole columns where it is plainly
well formed, otherwise level by level with the same result or the same error; each
folder's ``meta.json`` written as ``json.dumps`` writes it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from unittest import mock

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensordict import NonTensorData, TensorDict

from tdview.errors import TDViewError
from tdview.storage import _consolidated_layout as layout_module
from tdview.storage._consolidated_layout import Layout

from .test_consolidated import _scalars, _tree

EXAMPLES = int(os.environ.get("TDVIEW_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize="TDVIEW_FUZZ_EXAMPLES" not in os.environ,
    suppress_health_check=[HealthCheck.too_slow],
)


def _odd() -> TensorDict:
    """Names to escape, a leaf named as a meta.json field, a NaN value, a device."""
    td = TensorDict(
        {"é": torch.ones(2), 'x"y': torch.zeros(2, 1), "shape": torch.ones(2)},
        batch_size=[2],
        names=["n"],
    )
    td["nan"] = NonTensorData(float("nan"), batch_size=[2])
    td["sub"] = TensorDict(w=torch.ones(2, 3), batch_size=[2], device="cpu")
    return td


def _footer(path: Path) -> tuple[bytes, int]:
    raw = path.read_bytes()
    n = int.from_bytes(raw[-8:], "little")
    return raw[-8 - n : -8], len(raw) - 8 - n


@pytest.mark.parametrize("make", [_tree, _scalars, _odd])
def test_a_written_footer_is_checked_at_once_and_each_meta_is_json_dumps(
    tmp_path: Path, make
) -> None:
    path = tmp_path / "c.td"
    make().consolidate(filename=path)
    document, payload = _footer(path)
    assert layout_module._checked_at_once(json.loads(document), payload)
    layout = Layout(document, payload, str(path))
    todo, seen = [""], 0
    while todo:
        dirkey = todo.pop()
        folder = layout.folder(dirkey)
        assert folder is not None
        # as tensordict's memmap writer writes a meta.json: json.dumps of its dict
        assert folder.meta == json.dumps(json.loads(folder.meta)).encode()
        todo += [f"{dirkey}/{name}" if dirkey else name for name in folder.dirs]
        seen += 1
    assert seen >= 3


def _outcome(document: bytes, payload: int) -> object:
    try:
        layout = Layout(document, payload, "fuzz.td")
    except TDViewError as error:
        return type(error), str(error)
    return layout.tree


def _one_by_one(document: bytes, payload: int) -> object:
    with mock.patch.object(layout_module, "_checked_at_once", lambda tree, payload: False):
        return _outcome(document, payload)


#: how a well-formed number is spoiled: each is refused level by level
_SPOIL = st.sampled_from(
    [
        lambda n: bool(n) if n in (0, 1) else n,
        float,
        lambda n: n + 2**64,
        lambda n: n + 2**63,
        lambda n: -1 - n,
        str,
    ]
)


@st.composite
def _documents(draw: st.DrawFn) -> bytes:
    """A footer of a few nested levels of a few leaves each, most well formed, some not
    (a number spoiled, leaves over each other or past the payload, a record of the
    wrong length, a level that is no object)."""
    at = 0

    def level(depth: int) -> object:
        nonlocal at
        if draw(st.integers(0, 30)) == 0:
            return draw(st.sampled_from([[], "x", 1, {"cls": 1}]))
        leaves: dict[str, object] = {}
        for name in draw(st.lists(st.sampled_from("abcd"), max_size=3, unique=True)):
            sizes = draw(st.lists(st.integers(0, 2), max_size=2))
            size = 4
            for n in sizes:
                size *= n
            pad = draw(st.sampled_from([0, 0, 4]))
            start = max(0, at - draw(st.sampled_from([0, 0, 0, 0, 4])))
            leaf: list[object] = ["torch.float32", list(sizes), start, start + size + pad, pad]
            if draw(st.integers(0, 3)) == 0:
                shape: list[object] = leaf[1]  # type: ignore[assignment]
                where = draw(st.sampled_from([leaf, shape] if sizes else [leaf]))
                index = draw(st.integers(2 if where is leaf else 0, len(where) - 1))
                where[index] = draw(_SPOIL)(where[index])
            if draw(st.integers(0, 20)) == 0:
                leaf = leaf[:4]
            leaves[name] = leaf
            at = max(at, start + size + pad)
        out: dict[str, object] = {"cls": "TensorDict", "leaves": leaves, "non_tensors": {}}
        out["cls_metadata"] = {"batch_size": [], "device": None}
        if draw(st.integers(0, 15)) == 0:
            out["non_tensors"] = {"n": draw(st.sampled_from([["v", [], None], ["v"], 5]))}
        if depth < 3:
            for name in draw(st.lists(st.sampled_from("xyz"), max_size=2, unique=True)):
                out[name] = level(depth + 1)
        return out

    return json.dumps(level(0)).encode()


@FUZZ
@given(_documents(), st.integers(-8, 40))
def test_checks_at_once_read_as_level_by_level(document: bytes, slack: int) -> None:
    """Whatever the footer, the columns give the levels' reading: the same tree, or the
    same error (class and words)."""
    tree = json.loads(document)
    payload = max(0, _payload(tree) + slack)
    assert _outcome(document, payload) == _one_by_one(document, payload)


def _payload(level: object) -> int:
    if not isinstance(level, dict):
        return 0
    ends = [leaf[3] for leaf in level.get("leaves", {}).values() if len(leaf) > 3]
    ends = [end for end in ends if type(end) is int]
    nested = [_payload(v) for k, v in level.items() if k not in layout_module.LEVEL_FIELDS]
    return max([0, *ends, *nested])


def _level(leaves: dict[str, object]) -> dict[str, object]:
    return {"cls": "TensorDict", "cls_metadata": {}, "non_tensors": {}, "leaves": leaves}


@pytest.mark.parametrize(
    ("document", "match"),
    [
        (_level({"a": ["torch.float32", [1], False, 4, 0]}), "start, stop and pad"),
        (_level({"a": ["torch.float32", [True], 0, 4, 0]}), "shape"),
        (_level({"a": ["torch.float32", [1.0], 0, 4, 0]}), "shape"),
        (_level({"a": ["torch.float32", [-1], 0, 4, 0]}), "shape"),
        (_level({"a": ["torch.float32", [1], 0, 2**64, 0]}), "past the"),
        (_level({"a": ["torch.float32", [1], 0, 4, 8]}), "start \\+ pad <= stop"),
        (_level({"a": ["torch.float32", [1], 0, 4]}), "a leaf is"),
        (_level({"a": [1, [1], 0, 4, 0]}), "dtype"),
        (
            _level(
                {
                    "a": ["torch.float32", [1], 0, 4, 0],
                    "b": ["torch.float32", [1], 4, 8, 0],
                    "c": ["torch.float32", [1], 4, 8, 0],
                    "d": ["torch.float32", [1], 8, 12, 0],
                }
            ),
            "overlap",
        ),
        ({**_level({}), "non_tensors": {"n": ["v"]}}, "a non-tensor"),
        ({**_level({}), "x": []}, "a level must be"),
        ({**_level({}), "cls": 3}, '"cls"'),
    ],
)
def test_what_the_columns_refuse_is_refused_by_name(document: dict, match: str) -> None:
    body = json.dumps(document).encode()
    assert not layout_module._checked_at_once(document, 12)
    with pytest.raises(TDViewError, match=match) as error:
        Layout(body, 12, "bad.td")
    assert "bad.td" in str(error.value)
