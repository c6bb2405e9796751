"""``tdview diff model_dir model.safetensors``: a module dumped by tensordict
(``TensorDict.from_module(m).memmap``, a ``/`` tree) against its ``state_dict`` saved by
safetensors (dotted keys): the grouped tree lines the two spellings up key by key, so a
conversion can be checked, at every level, and a changed tensor is found."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from tensordict import TensorDict
from torch import nn

import tdview
from tdview.protocol._diff import open_view

from .test_protocol_diff import ask


def _module() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(4, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2))
    )
    model.register_buffer("steps", torch.tensor(3))
    return model


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path, nn.Module]:
    model = _module()
    TensorDict.from_module(model).memmap(tmp_path / "model_dir")
    save_file(model.state_dict(), tmp_path / "model.safetensors")
    return tmp_path / "model_dir", tmp_path / "model.safetensors", model


@pytest.mark.parametrize("level", ["metadata", "fingerprint", "values"])
def test_a_module_dump_equals_its_state_dict(pair, level: str) -> None:
    folder, file, model = pair
    found = tdview.diff(folder, file, level=level)
    assert found.equal
    leaves = {".".join(row.path) for row in found.rows if row.is_leaf}
    assert leaves == set(model.state_dict())
    assert all(row.status == "same" for row in found.rows)


def test_a_changed_tensor_is_found(pair, tmp_path: Path) -> None:
    folder, _, model = pair
    state = model.state_dict()
    state["2.0.weight"] = state["2.0.weight"] + 1
    save_file(state, tmp_path / "changed.safetensors")
    found = tdview.diff(folder, tmp_path / "changed.safetensors", level="values")
    assert not found.equal
    assert [row.path for row in found.changed()] == [("2", "0", "weight")]


def test_the_command_line(pair) -> None:
    folder, file, _ = pair
    run = subprocess.run(
        [sys.executable, "-m", "tdview", "diff", "--level", "values", str(folder), str(file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 changed, 0 added, 0 removed" in run.stdout


def test_the_compare_view_pairs_the_two_spellings(pair) -> None:
    """``TDView(model_dir, compare=model.safetensors)``: the compare view's pages pair
    every key, and refined to values, every row is the same."""
    folder, file, model = pair
    view = open_view(folder, file)
    try:
        page, _ = ask(view, "diff_children", {"path": ["2", "0"], "offset": 0, "limit": 10})
        assert {item["key"]: item["status"] for item in page["items"]} == {
            "weight": "same",
            "bias": "same",
        }
        state, _ = ask(view, "diff_refine", {"path": [], "level": "values"})
        assert state["equal"] is True
        assert state["summary"]["added"] == state["summary"]["removed"] == 0
    finally:
        view.close()
