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


RESULTS = ROOT / "bench" / "results"


def test_report_only_writes_results_md_from_the_json(tmp_path: Path) -> None:
    """``python -m bench --report-only`` renders the goals and every row of latest.json
    (bench/RESULTS.md is written this way, never by hand)."""
    report = json.loads((RESULTS / "latest.json").read_text())
    (tmp_path / "latest.json").write_text(json.dumps(report))
    markdown = tmp_path / "RESULTS.md"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--report-only", "--out", str(tmp_path)]
        + ["--markdown", str(markdown)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    text = markdown.read_text()
    assert "## Goals" in text and f"{report['machine']['cpu']}, " in text
    for row in report["timing"]:
        for side in row["ratios"]:
            line = f"| {row['case']} | {row['variant']} | {row['cache']} | {side} |"
            assert line in text, line
    # only latest.json was given: the other scripts' sections are left out
    assert "## `tdview diff`" not in text


def test_committed_results_md_is_the_rendering_of_the_results() -> None:
    from bench._report import render_results

    report = json.loads((RESULTS / "latest.json").read_text())
    assert (ROOT / "bench" / "RESULTS.md").read_text() == render_results(report, RESULTS), (
        "bench/RESULTS.md is stale: run `python -m bench --report-only`"
    )


def test_every_goal_reads_rows_of_the_full_run() -> None:
    """A goal whose case or side was renamed would read nothing: each finds its rows."""
    from bench._goals import GOALS, render_goals

    table = render_goals(json.loads((RESULTS / "latest.json").read_text()))
    rows = table.splitlines()[2:]
    assert len(rows) == len(GOALS)
    assert not [row for row in rows if "not measured" in row]


def test_gpu_cases_check_says_whether_there_is_a_cuda_device() -> None:
    """``make test-gpu`` starts with this: without CUDA it stops in one clear line."""
    import torch

    done = subprocess.run(
        [sys.executable, "-m", "bench.gpu_cases", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if torch.cuda.is_available():
        assert done.returncode == 0 and done.stderr == "", done.stderr
    else:
        assert done.returncode == 1
        assert done.stderr.startswith("make test-gpu: no CUDA device (torch ")
        assert done.stderr.count("\n") == 1 and done.stdout == ""
