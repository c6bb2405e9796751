"""``tdview check`` and the sizes (``tdview du``) on a safetensors file: no CRC-32 is
recorded there, so the check has none to compare (it reads the values when asked), and
the sizes are the tensors' bytes as safetensors counts them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save_file

from tdview.answers import check, sizes

from .test_safetensors import model_state


def test_a_healthy_file_checks_healthy(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    save_file(model_state(), path)
    report = check(path)
    assert report.healthy, report.problems
    assert report.checked["leaves"] == len(model_state())
    run = subprocess.run(
        [sys.executable, "-m", "tdview", "check", str(path)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_values_find_a_nan_by_its_key(tmp_path: Path) -> None:
    state = model_state()
    state["model.layers.4.mlp.up.weight"][1, 2] = float("nan")
    path = tmp_path / "model.safetensors"
    save_file(state, path)
    report = check(path, values=True)
    assert not report.healthy
    flagged = {problem.path for problem in report.problems if "NaN" in str(problem)}
    assert ("model", "layers", "4", "mlp", "up", "weight") in flagged


def test_sizes_are_the_tensors_bytes(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    save_file(model_state(), path)
    with safe_open(path, "pt") as f:
        layers = sum(f.get_tensor(k).nbytes for k in f.keys() if k.startswith("model.layers."))
        total = sum(f.get_tensor(k).nbytes for k in f.keys())
    assert sizes(path).bytes == total
    assert sizes(path, "model/layers").bytes == layers
