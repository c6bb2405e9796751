"""``python -m bench.diff_cases [--quick]``: ``tdview.diff`` against its goals (issue 20).

* metadata: two 100,000-leaf checkpoints (one folder's dtype changed, one key added),
  as directories and as archives; absolute times (goals: < 1 s, < 0.5 s; nothing in
  tensordict does this);
* values: two 1 GB checkpoints (64 float32 leaves of 16 MiB), side by side with reading
  both files' bytes (the baseline: each leaf file read whole, ``Path.read_bytes``) and the
  floor of reading them in 1 MiB chunks into one buffer; two variants: every element
  changed (one optimizer step) and one leaf in eight changed (a fine-tune);
* memory: the peak resident memory a value diff adds to its process (goal: < 64 MiB),
  each in a fresh interpreter.

``--only values`` (or ``metadata``, ``memory``, comma-separated) runs those parts alone.
Float32 values go through the compiled kernel of ``tdview/diff/_stats.py`` where a C
compiler is found (the report's ``kernel``); ``TDVIEW_NO_KERNEL=1`` measures torch alone.

Writes ``bench/results/diff-latest.json`` (``diff-latest-quick.json`` with ``--quick``)
and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
from tensordict import TensorDict, pack_memmap

import tdview
from tdview.diff._stats import kernel

from . import _checkpoints as ck
from ._harness import Result, compare
from ._machine import machine_facts

RESULTS = Path(__file__).parent / "results"


def _write_pair_meta(root: Path, leaves: int) -> dict[str, Path]:
    a, b = root / f"meta{leaves}_a", root / f"meta{leaves}_b"
    paths = {"dir_a": a, "dir_b": b, "tdz_a": a.with_suffix(".tdz"), "tdz_b": b.with_suffix(".tdz")}
    if all(path.exists() for path in paths.values()):  # kept from a run with --root
        return paths
    ck.write_flat_tree(leaves, a)
    ck.write_flat_tree(leaves, b)
    # one folder's dtype changed and a key added: the walk meets both kinds of folder
    changed = TensorDict({f"t{t:03d}": torch.zeros(4, dtype=torch.float64) for t in range(100)})
    changed["added"] = torch.ones(3)
    changed.memmap(b / "g00001", existsok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pack_memmap(a, paths["tdz_a"])
        pack_memmap(b, paths["tdz_b"])
    return paths


def metadata_cases(root: Path, leaves: int, reps: int) -> list[Result]:
    paths = _write_pair_meta(root, leaves)
    out = []
    for kind, goal in (("dir", 1.0), ("tdz", 0.5)):
        a, b = paths[f"{kind}_a"], paths[f"{kind}_b"]
        check = tdview.diff(a, b)
        assert check.rollup().changed == 100 and check.rollup().added == 1, check
        del check
        variant = f"{leaves} leaves, {'directories' if kind == 'dir' else 'archives'}"
        out.append(
            compare(
                "diff metadata",
                variant,
                {"tdview diff": lambda a=a, b=b: _diff(a, b)},
                baseline="tdview diff",
                reps=reps,
                note=f"goal: under {goal} s",
            )
        )
    return out


def _diff(a: Path, b: Path, **options: object) -> int:
    result = tdview.diff(a, b, **options)
    return len(result.rows)


def _leaf_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*.memmap"))


def read_whole(paths: list[Path]) -> int:
    """The baseline: every leaf file of both checkpoints read whole."""
    total = 0
    for path in paths:
        total += len(path.read_bytes())
    return total


def read_chunked(paths: list[Path]) -> int:
    """The floor: every leaf file read in 1 MiB chunks into one reused buffer."""
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            while True:
                got = os.readv(fd, [view])
                if not got:
                    break
                total += got
        finally:
            os.close(fd)
    return total


def _big_pair(root: Path, leaves: int, leaf_bytes: int) -> dict[str, Path]:
    root = root / f"big{leaves}x{leaf_bytes}"
    paths = {name: root / f"big_{name}" for name in ("a", "step", "tune")}
    paths.update({f"{name}.tdz": root / f"big_{name}.tdz" for name in ("a", "step")})
    if all(path.exists() for path in paths.values()):  # kept from a run with --root
        return paths
    root.mkdir(parents=True, exist_ok=True)
    n = leaf_bytes // 4
    gen = torch.Generator().manual_seed(0)
    a = TensorDict({f"layer{i:02d}": torch.randn(n, generator=gen) for i in range(leaves)})
    step = TensorDict({k: v + 1e-3 * torch.randn(n, generator=gen) for k, v in a.items()})
    tune = a.clone()
    for i in range(0, leaves, 8):
        tune[f"layer{i:02d}"] = tune[f"layer{i:02d}"] + 1e-3
    for name, td in (("a", a), ("step", step), ("tune", tune)):
        td.memmap(paths[name])
    for name in ("a", "step"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pack_memmap(paths[name], paths[f"{name}.tdz"])
    return paths


def value_cases(paths: dict[str, Path], reps: int) -> list[Result]:
    out = []
    for variant, a, b in (
        ("every element changed, directories", paths["a"], paths["step"]),
        ("every element changed, archives", paths["a.tdz"], paths["step.tdz"]),
        ("1 leaf in 8 changed, directories", paths["a"], paths["tune"]),
    ):
        files = _leaf_files(a) + _leaf_files(b) if a.is_dir() else [a, b]
        size = sum(p.stat().st_size for p in files)
        sides = {
            "read both whole": lambda files=files: read_whole(files),
            "tdview diff values": lambda a=a, b=b: _diff(a, b, level="values"),
        }
        floor = {"floor: read both in 1 MiB chunks": lambda files=files: read_chunked(files)}
        out.append(
            compare(
                "diff values",
                f"{size / 1e9:.2f} GB, {variant}",
                sides,
                baseline="read both whole",
                reps=reps,
                floor=floor,
                note="goal: tdview time <= 1/0.7 of the baseline (ratio <= 1.43)",
            )
        )
    return out


_PROBE = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import torch, tdview, tdview.diff._api, tdview.diff._tiers

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024

base = status("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current size
result = tdview.diff(sys.argv[1], sys.argv[2], level="values")
assert not result.equal
print(json.dumps({"peak_added": status("VmHWM:") - base,
                  "after": status("VmRSS:") - base}))
"""


def memory_cases(paths: dict[str, Path]) -> list[dict[str, object]]:
    rows = []
    for variant, a, b in (
        ("directories", paths["a"], paths["step"]),
        ("archives", paths["a.tdz"], paths["step.tdz"]),
    ):
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(a), str(b)],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(
            {
                "case": "diff values memory",
                "variant": variant,
                **json.loads(done.stdout.strip().splitlines()[-1]),
            }
        )
    return rows


def render(report: dict) -> str:
    lines = [
        "| case | variant | side | min | median | ratio vs baseline | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["timing"]:
        for side, stats in row["stats"].items():
            ratio = "baseline" if side == row["baseline"] else f"{row['ratios'][side]:.2f}×"
            if len(row["stats"]) == 1:
                ratio = ""
            lines.append(
                f"| {row['case']} | {row['variant']} | {side} | "
                f"{stats['min'] * 1e3:.0f} ms | {stats['median'] * 1e3:.0f} ms | "
                f"{ratio} | {row['note']} |"
            )
        for side, seconds in row["floor"].items():
            lines.append(
                f"| {row['case']} | {row['variant']} | {side} | {seconds * 1e3:.0f} ms | | | |"
            )
    lines += ["", "| memory case | variant | peak added | after |", "|---|---|---|---|"]
    for row in report["memory"]:
        lines.append(
            f"| {row['case']} | {row['variant']} | {row['peak_added'] / 2**20:.1f} MiB"
            f" | {row['after'] / 2**20:.1f} MiB |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.diff_cases")
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--root", type=Path, help="keep the checkpoints in this folder")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--only", help="comma-separated parts: metadata, values, memory")
    args = parser.parse_args()
    parts = set(args.only.split(",")) if args.only else {"metadata", "values", "memory"}
    if parts - {"metadata", "values", "memory"}:
        parser.error(f"--only takes metadata, values and memory, not {args.only!r}")
    leaves, big_leaves, leaf_bytes, reps = (
        (2_000, 8, 1 << 20, 3) if args.quick else (100_000, 64, 16 << 20, 5)
    )
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="tdview-diff-bench-") as tmp:
        root = args.root or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        timing, memory = [], []
        if "metadata" in parts:
            timing += metadata_cases(root, leaves, reps)
            print(f"… metadata done ({time.time() - started:.0f} s)", flush=True)
        if parts & {"values", "memory"}:
            big = _big_pair(root, big_leaves, leaf_bytes)
        if "values" in parts:
            timing += value_cases(big, max(3, reps - 2))
            print(f"… values done ({time.time() - started:.0f} s)", flush=True)
        if "memory" in parts:
            memory = memory_cases(big)
    report = {
        "machine": machine_facts(),
        "mode": "quick" if args.quick else "full",
        "kernel": kernel() is not None,
        "seconds": round(time.time() - started, 1),
        "timing": [r.as_json() for r in timing],
        "memory": memory,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = "diff-latest-quick.json" if args.quick else "diff-latest.json"
    (args.out / name).write_text(json.dumps(report, indent=1))
    print(render(report))


if __name__ == "__main__":
    main()
