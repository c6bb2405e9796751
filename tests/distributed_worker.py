"""One rank of the torchrun tests of ``tdview.distributed`` (tests/test_distributed.py).

``python -m torch.distributed.run --nproc_per_node=N tests/distributed_worker.py OUT JOBS``:
each rank joins the gloo group torchrun describes, runs every job of the JSON file
``JOBS`` (``{"name", "path", "subpath", "call": "shard" | "broadcast" | "load", "dim",
"options"}``) and saves its result with tensordict's ``memmap`` to ``OUT/<name>/<rank>``,
where the test compares it with the matching slice of a full load.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist

import tdview
import tdview.distributed


def main(out: str, jobs: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for job in json.loads(Path(jobs).read_text()):
        path = job["path"]
        if job.get("options"):
            path = tdview.remote(path, **job["options"])
        if job["call"] == "load":
            result = tdview.distributed.load(path, job["subpath"])
        else:
            result = tdview.distributed.load_shard(
                path, job["subpath"], dim=job.get("dim", 0), broadcast=job["call"] == "broadcast"
            )
        result.memmap(Path(out) / job["name"] / str(rank), copy_existing=True)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
