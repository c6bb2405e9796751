"""``python -m bench.check_cases [--quick]``: ``tdview.check`` against its goals (issue 34).

* speed: a check without values of a 1 GB archive (64 float32 leaves of 16 MiB, stored,
  as ``TensorDict.save`` writes it), side by side with reading the same file from the
  page cache in 1 MiB chunks into one buffer (the baseline; goal: the check at no less
  than 70 % of its speed, a ratio <= 1.43); the archive deflated, side by side with the
  reference's CRC check of every entry (``zipfile.ZipFile.testzip``, which inflates them
  too; reading the deflated bytes is the floor); and a check with values of the
  directory against reading its files (reported, no goal);
* memory: the peak resident memory a check adds to its process (goal: <= 64 MiB for
  the 1 GB checkpoint), each in a fresh interpreter.

The CRC-32 runs on ``tdview.storage.CRC32_LIBRARY`` (ISA-L where installed). Writes
``bench/results/check-latest.json`` (``check-latest-quick.json`` with ``--quick``) and
prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from pathlib import Path

import torch
from tensordict import TensorDict, pack_memmap

from tdview.answers import check
from tdview.storage import CRC32_LIBRARY

from ._harness import Result, compare
from ._machine import machine_facts
from .diff_cases import read_chunked

RESULTS = Path(__file__).parent / "results"


def write(root: Path, leaves: int, leaf_bytes: int) -> dict[str, Path]:
    """A folder, its stored archive and its deflated archive (kept with ``--root``)."""
    root = root / f"check{leaves}x{leaf_bytes}"
    paths = {"dir": root / "ckpt", "tdz": root / "ckpt.tdz", "deflate": root / "deflated.zip"}
    if all(path.exists() for path in paths.values()):
        return paths
    root.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(34)
    n = leaf_bytes // 4
    td = TensorDict({f"layer{i:02d}": torch.randn(n, generator=generator) for i in range(leaves)})
    td.memmap(paths["dir"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pack_memmap(paths["dir"], paths["tdz"])
        pack_memmap(paths["dir"], paths["deflate"], compression="deflate")
    return paths


def _check(path: Path, values: bool = False) -> int:
    report = check(path, values=values)
    assert report.healthy, report.problems[:3]
    return report.checked["bytes"]


def _testzip(path: Path) -> None:
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None


def speed_cases(paths: dict[str, Path], reps: int) -> list[Result]:
    read = "read in 1 MiB chunks"
    files = sorted(paths["dir"].rglob("*.memmap"))
    stored, deflated = paths["tdz"], paths["deflate"]
    return [
        compare(
            "check",
            f"{_gb([stored])}, stored archive, no values",
            {read: lambda: read_chunked([stored]), "tdview check": lambda: _check(stored)},
            baseline=read,
            reps=reps,
            note="goal: ratio <= 1.43 (70 % of the read's speed)",
        ),
        compare(
            "check",
            f"{_gb([deflated])}, deflated archive, no values",
            {
                "zipfile testzip": lambda: _testzip(deflated),
                "tdview check": lambda: _check(deflated),
            },
            baseline="zipfile testzip",
            reps=reps,
            floor={read: lambda: read_chunked([deflated])},
        ),
        compare(
            "check",
            f"{_gb(files)}, directory, values",
            {read: lambda: read_chunked(files), "tdview check": lambda: _check(paths["dir"], True)},
            baseline=read,
            reps=reps,
        ),
    ]


def _gb(files: list[Path]) -> str:
    return f"{sum(p.stat().st_size for p in files) / 1e9:.2f} GB"


_PROBE = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import torch, tdview.answers, tdview.diff._pool

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024

base = status("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current size
report = tdview.answers.check(sys.argv[1], values=sys.argv[2] == "values")
assert report.healthy, report.problems[:3]
print(json.dumps({"peak_added": status("VmHWM:") - base, "after": status("VmRSS:") - base}))
"""


def memory_cases(paths: dict[str, Path]) -> list[dict[str, object]]:
    rows = []
    for variant, path, values in (
        ("stored archive, no values", paths["tdz"], False),
        ("deflated archive, no values", paths["deflate"], False),
        ("stored archive, values", paths["tdz"], True),
        ("directory, values", paths["dir"], True),
    ):
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(path), "values" if values else "-"],
            capture_output=True,
            text=True,
            check=True,
        )
        found = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append({"case": "check memory", "variant": variant, **found})
    return rows


def render(report: dict) -> str:
    lines = [
        f"CRC-32 by {report['crc32']}",
        "",
        "| case | variant | side | min | median | ratio vs baseline | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["timing"]:
        for side, stats in row["stats"].items():
            ratio = "baseline" if side == row["baseline"] else f"{row['ratios'][side]:.2f}×"
            lines.append(
                f"| {row['case']} | {row['variant']} | {side} | {stats['min'] * 1e3:.0f} ms | "
                f"{stats['median'] * 1e3:.0f} ms | {ratio} | {row['note']} |"
            )
        for side, seconds in row["floor"].items():
            lines.append(
                f"| {row['case']} | {row['variant']} | floor: {side} | {seconds * 1e3:.0f} ms "
                "| | | |"
            )
    lines += ["", "| memory case | variant | peak added | after |", "|---|---|---|---|"]
    for row in report["memory"]:
        lines.append(
            f"| {row['case']} | {row['variant']} | {row['peak_added'] / 2**20:.1f} MiB"
            f" | {row['after'] / 2**20:.1f} MiB |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.check_cases")
    parser.add_argument("--quick", action="store_true", help="64 MiB instead of 1 GB")
    parser.add_argument("--root", type=Path, help="keep the checkpoints in this folder")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--only", help="comma-separated parts: speed, memory")
    args = parser.parse_args()
    parts = set(args.only.split(",")) if args.only else {"speed", "memory"}
    if parts - {"speed", "memory"}:
        parser.error(f"--only takes speed and memory, not {args.only!r}")
    leaves, leaf_bytes, reps = (8, 8 << 20, 3) if args.quick else (64, 16 << 20, 5)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="tdview-check-bench-") as tmp:
        root = args.root or Path(tmp)
        paths = write(root, leaves, leaf_bytes)
        timing = speed_cases(paths, reps) if "speed" in parts else []
        memory = memory_cases(paths) if "memory" in parts else []
    report = {
        "machine": machine_facts(),
        "mode": "quick" if args.quick else "full",
        "crc32": CRC32_LIBRARY,
        "seconds": round(time.time() - started, 1),
        "timing": [r.as_json() for r in timing],
        "memory": memory,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = "check-latest-quick.json" if args.quick else "check-latest.json"
    (args.out / name).write_text(json.dumps(report, indent=1))
    print(render(report))


if __name__ == "__main__":
    main()
