"""The main job's set-up part: the demo checkpoint command and what it writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from tdview._demo import REPLAY_ROWS, Trajectory


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run the exact command `make demo` runs, at full size."""
    out = tmp_path_factory.mktemp("demo-cli")
    done = subprocess.run(
        [sys.executable, "-m", "tdview", "demo", "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(out / "demo_ckpt.tdz") in done.stdout
    return out


@pytest.mark.parametrize("name", ["demo_ckpt", "demo_ckpt.tdz"])
def test_demo_checkpoint_loads_in_tensordict(written: Path, name: str) -> None:
    td = TensorDict.load_memmap(written / name, allow_pickle=True)
    assert td["replay"].batch_size == torch.Size([REPLAY_ROWS])
    assert td["replay", "reward"].dtype == torch.bfloat16
    assert isinstance(td.get("rollout"), Trajectory)
    assert td["rollout"].policy_name == "epsilon-greedy"
    episodes = td.get("episodes")
    assert isinstance(episodes, LazyStackedTensorDict)
    assert [m["observation"].shape[0] for m in episodes.tensordicts] == [5, 9, 3]
    assert td["config"] == {"width": 64, "depth": 2, "tokenizer": "bytes", "seed": 0}
    assert td["tags"] == {"demo", "tdview", "transformer"}
    # The model is nested by module, like a state dict.
    assert td["model", "layers", "0", "self_attn", "in_proj_weight"].shape == (192, 64)
    assert td["optimizer", "state", "head", "weight", "exp_avg"].shape == (512, 64)


def test_demo_has_exactly_one_pickled_value(written: Path) -> None:
    pickles = sorted(
        p.relative_to(written / "demo_ckpt").as_posix()
        for p in (written / "demo_ckpt").rglob("*.pickle")
    )
    assert pickles == ["tags/other.pickle"]


def test_demo_archive_and_directory_hold_the_same_data(written: Path) -> None:
    a = TensorDict.load_memmap(written / "demo_ckpt", allow_pickle=True)
    b = TensorDict.load_memmap(written / "demo_ckpt.tdz", allow_pickle=True)
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    assert torch.equal(a["replay", "observation"], b["replay", "observation"])


def test_demo_is_deterministic(tmp_path: Path) -> None:
    from tdview._demo import write_demo

    one = write_demo(tmp_path / "one", replay_rows=10)
    two = write_demo(tmp_path / "two", replay_rows=10)
    left = (one["directory"] / "model" / "head" / "weight.memmap").read_bytes()
    right = (two["directory"] / "model" / "head" / "weight.memmap").read_bytes()
    assert left == right
