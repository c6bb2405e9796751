"""The benchmark suite runs in quick mode and reports every case (it cannot rot).

Nothing here looks at the times: tests are never timed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def test_quick_benchmark_reports_every_case(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "latest-quick.json").read_text())
    cases = {row["case"] for row in report["timing"]}
    assert {
        "1 structure",
        "2 subpath",
        "3 mapped load",
        "3 mapped load + read",
        "4 replay buffer",
        "5 deflate load",
        "5 deflate load + read",
        "6 scaling",
        "8 tensorclass",
        "9 replay dump",
        "11 module tree",
    } <= cases
    assert [row["case"] for row in report["memory"]] == ["7 memory"] * 3
    modules = report["memory"][2]
    assert modules["variant"].startswith("module tree, 2000 leaves in ")
    assert set(modules["sides"]) == {"tdview meta", "tensordict meta"}
    assert all(side["peak_added"] > 0 for side in modules["sides"].values())
    for row in report["timing"]:
        assert set(row["ratios"]) == set(row["times"]) - {row["baseline"]}
        assert all(len(times) >= 3 for times in row["times"].values())
    assert {"cpu", "cores", "torch", "tensordict", "python"} <= set(report["machine"])
    assert "| case | variant | cache | side |" in done.stdout
