"""One rank of the torchrun tests of ``tdview.distributed`` (tests/test_distributed.py).

``python -m torch.distributed.run --nproc_per_node=N tests/distributed_worker.py OUT JOBS``:
each rank joins the gloo group torchrun describes, runs every job of the JSON file
``JOBS`` (``{"name", "path", "subpath", "call": "shard" | "broadcast" | "load", "dim",
"options", "group"}``) and saves its result with tensordict's ``memmap`` to
``OUT/<name>/<rank>``, where the test compares it with the matching slice of a full
load. ``group``: the global ranks of a subgroup (``torch.distributed.new_group``) that
the job runs on; a rank outside it saves the ``ProcessGroupError`` it was told to
``OUT/<name>/<rank>.error``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch.distributed as dist

import tdview
import tdview.distributed
from tdview.errors import ProcessGroupError


def main(out: str, jobs: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for job in json.loads(Path(jobs).read_text()):
        path = job["path"]
        if job.get("options"):
            path = tdview.remote(path, **job["options"])
        members = job.get("group")
        group = None if members is None else dist.new_group(members)  # every rank calls it
        try:
            result = _run(job, path, group)
        except ProcessGroupError as error:
            if members is None or rank in members:
                raise
            saved = Path(out) / job["name"]  # a rank outside the group: what it was told
            saved.mkdir(parents=True, exist_ok=True)
            (saved / f"{rank}.error").write_text(str(error))
        else:
            result.memmap(Path(out) / job["name"] / str(rank), copy_existing=True)
        dist.barrier()
    dist.destroy_process_group()


def _run(job: dict[str, Any], path: Any, group: Any) -> Any:
    if job["call"] == "load":
        return tdview.distributed.load(path, job["subpath"], group=group)
    broadcast = job["call"] == "broadcast"
    dim = job.get("dim", 0)
    return tdview.distributed.load_shard(
        path, job["subpath"], dim=dim, group=group, broadcast=broadcast
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
