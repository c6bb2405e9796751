"""Each rank's rows of a remote checkpoint (issue 36): an indexed load against every rank
loading the whole subtree and slicing it, side by side, on loopback HTTP.

A replay-buffer-like archive (``rows`` rows of an observation of 64 float32, an action of
4 int64, a nested reward; written by tensordict's ``save``) is served by the tests' range
server (``tests/remote_servers.RangeServer``), whose request log counts every byte. For
each rank ``r`` of ``W`` (one after the other, in this process: a rank's read does not
depend on the others'), with a fresh ``Checkpoint`` each time:

* ``shard``: ``ckpt.load("buffer", index=slice(r*n//W, (r+1)*n//W))`` (what
  ``tdview.distributed.load_shard`` does on rank ``r``);
* ``whole``: ``ckpt.load("buffer")[slice(...)]``, every rank reading every byte.

Alternated, the best of ``--repeat`` of each (the machine is shared). Reported: bytes and
seconds per rank for both, and the ratios whole / shard.

``--deflate``: the same buffer in an archive of deflated entries (tensordict's
``pack_memmap(..., compression="deflate")``). A deflate stream is read from its start, so
rank ``r``'s shard inflates each entry up to the end of its rows, reading the stored
bytes as far as that needs (``tdview/storage/_inflate_ranges.py``): rank 0 reads about
``1/W`` of them, the last rank all; ``whole`` reads and inflates every entry on every
rank.

``python -m bench.distributed_cases [--quick] [--deflate] [--ranks W] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict, pack_memmap

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import tdview  # noqa: E402
from tdview.distributed import rows_of_rank  # noqa: E402
from tests.remote_servers import RangeServer  # noqa: E402


def _write(path: Path, rows: int, deflate: bool) -> None:
    g = torch.Generator().manual_seed(0)
    td = TensorDict(
        buffer=TensorDict(
            obs=torch.randn(rows, 64, generator=g),
            action=torch.randint(0, 10, (rows, 4), generator=g),
            next=TensorDict(reward=torch.randn(rows, 1, generator=g), batch_size=[rows]),
            batch_size=[rows],
        )
    )
    if not deflate:
        td.save(path)
        return
    folder = path.with_suffix("")
    td.memmap(folder)
    pack_memmap(folder, path, compression="deflate")
    shutil.rmtree(folder)


def _timed(server: RangeServer, url: str, index: slice, shard: bool) -> tuple[float, int, Any]:
    """Seconds and bytes served for one rank's load (a fresh checkpoint, opened first)."""
    with tdview.Checkpoint(url) as ckpt:
        ckpt.children()
        server.take()
        t = time.perf_counter()
        got = ckpt.load("buffer", index=index) if shard else ckpt.load("buffer")[index]
        dt = time.perf_counter() - t
        sent = sum(r.sent for r in server.take())
    return dt, sent, got


def run(quick: bool, ranks: int, repeat: int, deflate: bool = False) -> dict[str, Any]:
    rows = 20_000 if quick else 400_000
    shm = Path("/dev/shm")
    work = Path(tempfile.mkdtemp(prefix="tdview-bench-dist-", dir=shm if shm.is_dir() else None))
    path = work / "rb.tdz"
    _write(path, rows, deflate)
    server = RangeServer(str(work))
    url = f"{server.url}/rb.tdz"
    per_rank = []
    try:
        for rank in range(ranks):
            index = slice(*rows_of_rank(rows, rank, ranks))
            best = {"shard": (float("inf"), 0), "whole": (float("inf"), 0)}
            for _ in range(repeat):
                for name in ("shard", "whole"):
                    dt, sent, got = _timed(server, url, index, name == "shard")
                    assert got.batch_size[0] == index.stop - index.start
                    best[name] = min(best[name], (dt, sent))
            per_rank.append(
                {
                    "rank": rank,
                    "rows": index.stop - index.start,
                    "shard_bytes": best["shard"][1],
                    "whole_bytes": best["whole"][1],
                    "shard_s": round(best["shard"][0], 4),
                    "whole_s": round(best["whole"][0], 4),
                    "bytes_ratio_whole_to_shard": round(best["whole"][1] / best["shard"][1], 3),
                    "time_ratio_whole_to_shard": round(best["whole"][0] / best["shard"][0], 3),
                }
            )
    finally:
        server.stop()
        path.unlink()
        work.rmdir()
    shard_bytes = sum(r["shard_bytes"] for r in per_rank)
    whole_bytes = sum(r["whole_bytes"] for r in per_rank)
    return {
        "rows": rows,
        "ranks": ranks,
        "compression": "deflate" if deflate else "stored",
        "archive_bytes": None if not per_rank else per_rank[0]["whole_bytes"],
        "per_rank": per_rank,
        "bytes_all_ranks": {"shard": shard_bytes, "whole": whole_bytes},
        "bytes_ratio_whole_to_shard": round(whole_bytes / shard_bytes, 3),
        "time_ratio_whole_to_shard": round(
            sum(r["whole_s"] for r in per_rank) / sum(r["shard_s"] for r in per_rank), 3
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.distributed_cases")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--deflate", action="store_true", help="deflated archive entries")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = run(args.quick, args.ranks, args.repeat, args.deflate)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
