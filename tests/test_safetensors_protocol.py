"""A safetensors file through the widget's protocol: the children of a grouped level, a
search by the real (dotted) key, a preview equal to ``load_file``'s values, and a load
whose code line, pasted, loads the same (``tdview.Checkpoint(...).load``: tensordict's
``load_memmap`` refuses safetensors, and so does tdview's)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

import tdview
from tdview.index import Checkpoint
from tdview.protocol import Session, handle

from .test_protocol_golden import golden, same_shape
from .test_safetensors import assert_same, dotted
from .test_safetensors import model_file as model_file


def call(session: Session, method: str, **params) -> tuple[dict, list[bytes]]:
    message = {"kind": "tdview:request", "v": 1, "id": 7, "method": method, "params": params}
    reply, buffers = handle(session, message)
    json.dumps(reply, allow_nan=False)
    assert reply["ok"], reply.get("error")
    return reply["result"], buffers


@pytest.fixture
def session(model_file: Path) -> Session:
    return Session(Checkpoint(model_file), str(model_file), namespace={})


def test_children_of_a_grouped_level(session: Session) -> None:
    result, _ = call(session, "children", path=["model", "layers"], offset=0, limit=100)
    assert [c["key"] for c in result["children"]] == [str(i) for i in range(12)]
    result, _ = call(
        session, "children", path=["model", "layers", "0", "mlp", "up"], offset=0, limit=9
    )
    shapes = {c["key"]: (c["dtype"], c["shape"]) for c in result["children"]}
    assert shapes == {"weight": ("float32", [8, 4]), "bias": ("float16", [8])}


def test_a_search_finds_the_real_key(session: Session) -> None:
    result, _ = call(session, "search", pattern="model.layers.10.mlp.up.weight", limit=10)
    assert ["model", "layers", "10", "mlp", "up", "weight"] in result["matches"]


def test_a_preview_shows_the_files_values(session: Session, model_file: Path) -> None:
    result, buffers = call(session, "preview", path=["lm_head", "weight"], rows=4)
    ref = result["slice"]
    values = np.frombuffer(buffers[ref["buffer"]], dtype=np.float64).reshape(ref["shape"])
    want = load_file(model_file)["lm_head.weight"]
    np.testing.assert_array_equal(values, want[: ref["shape"][0]].numpy())


def test_the_load_code_pasted_loads_the_same(session: Session, model_file: Path) -> None:
    params = {"device": "cpu", "mode": "r", "allow_pickle": False}
    result, _ = call(session, "load", path=["model", "layers", "2"], variable="layer", **params)
    assert result["code"] == (
        f"layer = tdview.Checkpoint({json.dumps(str(model_file))})"
        '.load(subpath="model/layers/2", device="cpu", mode="r")'
    )
    pasted: dict = {"tdview": tdview}
    exec(result["code"], pasted)  # noqa: S102 - our own generated line
    prefix = "model.layers.2."
    want = {k[len(prefix) :]: v for k, v in load_file(model_file).items() if k.startswith(prefix)}
    assert_same(dotted(pasted["layer"]), want)
    assert_same(dotted(session.namespace["layer"]), want)
    leaf, _ = call(session, "load", path=["step"], variable="step", **params)
    pasted = {"tdview": tdview}
    exec(leaf["code"], pasted)  # noqa: S102
    assert torch.equal(pasted["step"], load_file(model_file)["step"])


def test_the_view_tells_the_form_to_read_it_with_checkpoint(model_file: Path) -> None:
    """The load form writes its line before a load too (js ``loadCode``): the view's
    options say the format is one ``load_memmap`` refuses."""
    from tdview import TDView

    view = TDView(model_file)
    try:
        assert view.options["foreign"] is True
    finally:
        view.close()


def test_the_roots_details_show_the_files_metadata(session: Session, model_file: Path) -> None:
    """``__metadata__`` is a fact of the root (``metadata``, the golden reply's shape),
    sent only where the file records some: no other node has it."""
    message = {"kind": "tdview:request", "v": 1, "id": 8589934593, "method": "node"}
    reply, _ = handle(session, {**message, "params": {"path": []}})
    same_shape(reply, golden("reply_node_metadata")["message"])
    with safe_open(model_file, "pt") as f:
        assert reply["result"]["metadata"] == f.metadata()
    inner, _ = handle(session, {**message, "params": {"path": ["model"]}})
    assert "metadata" not in inner["result"]
