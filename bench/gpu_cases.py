"""``python -m bench.gpu_cases [--check] [--megabytes N]``: loads to a CUDA device.

Case 15: a checkpoint of about 1 GB (64 float32 leaves of 16 MiB, nested as a model's
layers), written by tensordict as a folder and packed as a ``.tdz``, loaded to ``cuda``
by tdview and by tensordict, with ``non_blocking`` off and on; each timed load ends with
``torch.cuda.synchronize()``, so both sides are timed until the bytes are on the device.
The floor is a host-to-device copy of the same number of bytes from pinned memory, and
the note gives that copy's bandwidth (and a pageable copy's), measured here.

Prints the table and writes it as JSON to ``bench/results/gpu-latest.json``.
``--check`` only says whether there is a CUDA device (``make test-gpu`` runs it first).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from tensordict import TensorDict

import tdview

from . import _checkpoints as ck
from ._harness import Result, compare
from ._machine import machine_facts
from ._report import render_markdown

RESULTS = Path(__file__).parent / "results"
LEAF_BYTES = 16 << 20
REPS = 5


def cuda_missing() -> str | None:
    """One line saying why there is no CUDA device to run on, or None when there is one."""
    if torch.cuda.is_available():
        return None
    build = "a CPU build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
    return (
        f"make test-gpu: no CUDA device (torch {torch.__version__}, {build}: "
        "torch.cuda.is_available() is False); run it on a machine with an NVIDIA GPU and "
        "a CUDA build of torch (scripts/bootstrap.sh keeps an installed torch)."
    )


def model(megabytes: int) -> TensorDict:
    """Float32 leaves of 16 MiB, four to a layer: ``model/layers/<i>/w<j>``."""
    leaves = max(1, (megabytes << 20) // LEAF_BYTES)
    generator = torch.Generator().manual_seed(0)
    layers = {
        str(i): {
            f"w{j}": torch.randn(LEAF_BYTES // 4, generator=generator)
            for j in range(min(4, leaves - 4 * i))
        }
        for i in range((leaves + 3) // 4)
    }
    return TensorDict({"model": {"layers": layers}}, batch_size=[])


def _synced(loaded: object) -> object:
    torch.cuda.synchronize()
    return loaded


def copier(nbytes: int, pinned: bool) -> Callable[[], None]:
    """A host-to-device copy of ``nbytes`` from pinned or pageable memory, to be timed."""
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
    device = torch.empty(nbytes, dtype=torch.uint8, device="cuda")

    def copy() -> None:
        device.copy_(host, non_blocking=pinned)
        torch.cuda.synchronize()

    return copy


def fastest(run: Callable[[], object], reps: int = REPS) -> float:
    run()  # the first copy sets the driver up
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _same_on_device(path: Path) -> None:
    """Both loaders give the same values on the device (else the timings mean nothing)."""
    ours = tdview.load_memmap(path, device="cuda")
    theirs = TensorDict.load_memmap(path, device="cuda")
    assert ours.device == theirs.device and (ours == theirs).all(), path


def gpu_cases(root: Path, megabytes: int, reps: int = REPS) -> list[Result]:
    td = model(megabytes)
    nbytes = td.bytes()
    paths = ck.write_both(td, root, "gpu")
    del td
    pinned_copy = copier(nbytes, pinned=True)
    pinned, pageable = fastest(pinned_copy), fastest(copier(nbytes, pinned=False))
    note = (
        f"host-to-device copy of {nbytes / 1e9:.2f} GB: pinned {nbytes / pinned / 1e9:.1f} GB/s, "
        f"pageable {nbytes / pageable / 1e9:.1f} GB/s"
    )
    results = []
    for layout, path in paths.items():
        _same_on_device(path)
        for non_blocking in (False, True):
            sides = {
                "tensordict": lambda p=path, nb=non_blocking: _synced(
                    TensorDict.load_memmap(p, device="cuda", non_blocking=nb)
                ),
                "tdview": lambda p=path, nb=non_blocking: _synced(
                    tdview.load_memmap(p, device="cuda", non_blocking=nb)
                ),
            }
            floor = {"pinned host-to-device copy": pinned_copy}
            results.append(
                compare(
                    "15 cuda load",
                    f"{nbytes / 1e9:.2f} GB, {layout}, non_blocking={non_blocking}",
                    sides,
                    baseline="tensordict",
                    reps=reps,
                    floor=floor,
                    note=note,
                )
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_cases")
    parser.add_argument("--check", action="store_true", help="only check for a CUDA device")
    parser.add_argument("--megabytes", type=int, default=1024, help="checkpoint size (MiB)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON report")
    args = parser.parse_args()
    missing = cuda_missing()
    if missing is not None:
        sys.exit(missing)
    if args.check:
        return
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="tdview-gpu-bench-") as tmp:
        results = gpu_cases(Path(tmp), args.megabytes)
    facts = machine_facts()
    facts["gpu"] = torch.cuda.get_device_name()
    report = {
        "machine": facts,
        "mode": "gpu",
        "seconds": round(time.time() - started, 1),
        "timing": [r.as_json() for r in results],
        "memory": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu-latest.json").write_text(json.dumps(report, indent=1))
    print(render_markdown(report))


if __name__ == "__main__":
    main()
