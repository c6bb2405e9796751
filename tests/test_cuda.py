"""Loads to a CUDA device, as tensordict makes them (``make test-gpu`` runs these).

Each test skips without a CUDA device (CI has none); bench/gpu_cases.py times the same
loads on a 1 GB checkpoint.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

import tdview
from tdview import Checkpoint

from ._optional import needs_cuda
from .compare import assert_same


def sample() -> TensorDict:
    generator = torch.Generator().manual_seed(0)
    layer = {
        "weight": torch.randn(64, 32, generator=generator),
        "bias": torch.randn(64, generator=generator).to(torch.bfloat16),
    }
    return TensorDict(
        model={"layers": {"0": layer, "1": dict(layer)}},
        step=torch.tensor(1000),
        mask=torch.arange(10) % 3 == 0,
        batch_size=[],
    )


@pytest.fixture(params=["directory", "archive"])
def saved(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    folder = tmp_path / "ckpt"
    sample().memmap(folder)
    if request.param == "directory":
        return folder
    archive = tmp_path / "ckpt.tdz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sample().save(str(archive))
    return archive


@needs_cuda
@pytest.mark.parametrize("non_blocking", [False, True])
def test_load_to_cuda_is_tensordicts(saved: Path, non_blocking: bool) -> None:
    ours = tdview.load_memmap(saved, device="cuda", non_blocking=non_blocking)
    torch.cuda.synchronize()  # non_blocking: the copies may still be running
    assert {leaf.device.type for leaf in ours.values(True, True)} == {"cuda"}
    theirs = TensorDict.load_memmap(saved, device="cuda")
    assert_same(ours, theirs, storage=False)


@needs_cuda
def test_subtree_and_leaf_to_cuda(saved: Path) -> None:
    ckpt = Checkpoint(saved)
    layer = ckpt.load(subpath="model/layers/1", device="cuda:0")
    assert layer.device == torch.device("cuda:0")
    reference = TensorDict.load_memmap(saved)["model", "layers", "1"]
    assert torch.equal(layer["weight"].cpu(), reference["weight"])
    assert torch.equal(layer["bias"].cpu(), reference["bias"])
    step = ckpt.load_leaf("step", device="cuda")
    assert step.device.type == "cuda" and int(step) == 1000
