"""Resident memory of one operation, each in a fresh Python process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_PROBE = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import torch, tensordict, tdview
from tdview.index import Checkpoint, rollup

def rss(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024

path, op = sys.argv[1], sys.argv[2]
base = rss("VmRSS:")
if op == "tdview index":
    ckpt = Checkpoint(path); rollup(ckpt, ckpt.root); result = ckpt
elif op == "tdview meta":
    result = tdview.load_memmap(path, device="meta")
elif op == "tensordict meta":
    result = tensordict.TensorDict.load_memmap(path, device="meta")
elif op == "tdview mapped":
    result = tdview.load_memmap(path)
elif op == "tensordict mapped":
    result = tensordict.TensorDict.load_memmap(path)
else:
    raise SystemExit(f"unknown op {op}")
loaded = rss("VmRSS:")
if "mapped" in op:  # read one row of every leaf
    for leaf in result.values(True, True):
        leaf[0].clone()
print(json.dumps({"peak_added": rss("VmHWM:") - base, "after_load": loaded - base,
                  "after_one_row": rss("VmRSS:") - base}))
"""


def measure(path: Path, op: str) -> dict[str, int]:
    """Bytes of resident memory the operation added, in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(path), op], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])
