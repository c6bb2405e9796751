"""The load form's kernel side: a name already bound is not replaced unless the form
confirms it (``replace``), and the refusal says what the name holds; the first load
finds the loader imported once the form has asked for the devices."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from tdview import TDView

from .test_widget import Recorder


def load_params(variable: str, path: list[str], **extra: object) -> dict:
    return {
        "path": path,
        "device": "cpu",
        "mode": "r",
        "allow_pickle": False,
        "variable": variable,
        **extra,
    }


@pytest.fixture
def view(demo_paths: dict[str, Path]):
    widget = TDView(demo_paths["directory"])
    widget.namespace = {}
    yield widget
    widget.close()


def test_a_name_bound_to_the_view_is_not_replaced_without_asking(view: TDView) -> None:
    ns = view.namespace
    assert ns is not None
    ns["view"] = view
    reply = Recorder(view).ask("load", **load_params("view", ["model", "layers", "0"]))
    assert not reply["ok"]
    assert reply["error"]["type"] == "VariableBoundError"
    assert reply["error"]["message"] == "`view` is already bound to this TDView"
    assert ns["view"] is view and view.value is None  # nothing loaded, nothing bound

    again = Recorder(view).ask(
        "load", 42, **load_params("view", ["model", "layers", "0"], replace=True)
    )
    assert again["ok"], again
    assert isinstance(ns["view"], TensorDict) and ns["view"] is view.value
    assert set(ns["view"].keys()) == set(view.checkpoint.load("model/layers/0").keys())


def test_the_refusal_says_what_the_name_holds(view: TDView, demo_paths: dict[str, Path]) -> None:
    ns = view.namespace
    assert ns is not None
    other = TDView(demo_paths["archive"])
    ns.update(
        w=torch.zeros(256, 64),
        td=TensorDict(a=torch.zeros(3), b=torch.ones(3), batch_size=[3]),
        n=5,
        other=other,
    )
    said = {}
    for name in ("w", "td", "n", "other"):
        reply = Recorder(view).ask("load", **load_params(name, ["model", "layers", "0"]))
        assert reply["error"]["type"] == "VariableBoundError"
        said[name] = reply["error"]["message"]
    other.close()
    assert said["w"] == "`w` is already bound to a Tensor [256, 64] float32"
    assert said["td"] == "`td` is already bound to a TensorDict of 2 keys, batch [3]"
    assert said["n"] == "`n` is already bound to an int: 5"
    assert said["other"].startswith("`other` is already bound to another TDView (of '")
    assert torch.equal(ns["w"], torch.zeros(256, 64)) and ns["n"] == 5


def test_a_free_name_binds_at_once(view: TDView) -> None:
    reply = Recorder(view).ask("load", **load_params("layer0", ["model", "layers", "0"]))
    assert reply["ok"], reply
    assert view.namespace is not None and view.namespace["layer0"] is view.value


def test_a_tensor_leaf_bound_is_named_as_such(view: TDView) -> None:
    leaf = Recorder(view).ask("load", **load_params("obs", ["replay", "observation"]))
    assert leaf["ok"], leaf
    again = Recorder(view).ask("load", 42, **load_params("obs", ["replay", "observation"]))
    shape = list(view.value.shape)
    dtype = str(view.value.dtype).removeprefix("torch.")
    expected = f"`obs` is already bound to a MemoryMappedTensor {shape} {dtype}"
    assert again["error"]["message"] == expected
