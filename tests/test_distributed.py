"""``tdview.distributed``: each rank loads its rows, under torchrun with gloo on loopback.

Each run starts ``python -m torch.distributed.run --nproc_per_node=N`` on
``tests/distributed_worker.py``, whose ranks save their results with tensordict's
``memmap``; every result is compared here with the matching slice of tensordict's own
full load. The bytes the ranks read from the HTTP and S3 servers are counted on the
servers' side. Two runs (2 and 3 ranks), each with several jobs: they are slow to start.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict, pack_memmap

import tdview
import tdview.distributed
from tdview.errors import ProcessGroupError
from tdview.storage import ArchiveStore

from ._optional import require_module
from .remote_servers import RangeServer, Request, start_s3
from .test_index_deflated import inflation_needs
from .test_indexed_load import same

ROOT = Path(__file__).resolve().parents[1]
ROWS = 301  # not a multiple of 2 or 3: the shares differ by one row


def _buffer() -> TensorDict:
    """A replay-buffer-like tree: rows of plain leaves, nested, and a tensorclass-free
    NonTensorData; a second subtree of two rows (more ranks than rows)."""
    g = torch.Generator().manual_seed(5)
    td = TensorDict(
        rows=TensorDict(
            obs=torch.randn(ROWS, 256, generator=g),
            action=torch.randint(0, 9, (ROWS, 2), generator=g),
            next=TensorDict(reward=torch.randn(ROWS, 1, generator=g), batch_size=[ROWS]),
            steps=TensorDict(x=torch.randn(ROWS, 4, 3, generator=g), batch_size=[ROWS, 4]),
            batch_size=[ROWS],
        ),
        pair=TensorDict(w=torch.randn(2, 5, generator=g), batch_size=[2]),
        stack=LazyStackedTensorDict(*(TensorDict(v=torch.full((3,), float(i))) for i in range(7))),
    )
    td["rows", "tag"] = "buffer"
    return td


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dist")
    _buffer().memmap(root / "ckpt")
    pack_memmap(root / "ckpt", root / "ckpt.tdz")
    pack_memmap(root / "ckpt", root / "ckpt-deflate.tdz", compression="deflate")
    return root


def _job(name: str, path: str, subpath: str, call: str = "shard", **more: Any) -> dict[str, Any]:
    """One job of tests/distributed_worker.py: ``call`` is ``"shard"`` (load_shard),
    ``"broadcast"`` (load_shard(broadcast=True)) or ``"load"``."""
    return {"name": name, "path": path, "subpath": subpath, "call": call, **more}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(nproc: int, jobs: list[dict[str, Any]], out: Path) -> None:
    """Run the jobs on ``nproc`` ranks; fail with the ranks' output if a rank fails."""
    spec = out / "jobs.json"
    out.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps(jobs))
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [
            sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
            "--master_addr=127.0.0.1", f"--master_port={_free_port()}",
            str(ROOT / "tests" / "distributed_worker.py"), str(out), str(spec),
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]


def _results(out: Path, name: str, nproc: int) -> list[Any]:
    return [TensorDict.load_memmap(out / name / str(rank)) for rank in range(nproc)]


def _check_shards(
    out: Path, name: str, nproc: int, full: Any, dim: int = 0, n: int | None = None
) -> None:
    """Each rank's result is the matching slice of the full load; together, every row."""
    n = full.batch_size[dim] if n is None else n
    for rank, got in enumerate(_results(out, name, nproc)):
        start, stop = rank * n // nproc, (rank + 1) * n // nproc
        same(got, full[(slice(None),) * dim + (slice(start, stop),)], f"{name}@{rank}")


def _payload_spans(path: Path, under: str) -> list[tuple[int, int]]:
    with ArchiveStore(path) as store:
        found = []
        for key in store.keys():
            if key.endswith(".memmap") and key.startswith(under):
                start = store.payload_offset(key)
                found.append((start, start + store.entry(key).stored_size))
        return found


def _split(log: list[Request], payload: list[tuple[int, int]]) -> tuple[int, int]:
    """``(payload bytes, other bytes)`` served: a ranged read's bytes inside the payload
    spans, and the rest (the first read of the archive's end, for its central directory,
    is metadata whatever it holds)."""
    inside = other = 0
    for r in log:
        span = r.span()
        if span is None or (r.range or "").startswith("bytes=-"):
            other += r.sent
            continue
        hit = sum(max(0, min(span[1], b) - max(span[0], a)) for a, b in payload)
        inside += hit
        other += r.sent - hit
    return inside, other


def _inflation_needed(archive: Path, under: str, nproc: int) -> int:
    """The stored bytes that the ranks' rows of the leaves below ``under`` need
    together: each rank inflates each entry from its start to the end of its rows."""
    needed = 0
    with ArchiveStore(archive) as store:
        sizes = {k: store.entry(k).size for k in store.keys() if k.startswith(under)}
    for key, size in sizes.items():
        if key.endswith(".memmap") and size:
            row = size // ROWS
            for rank in range(nproc):
                end = (rank + 1) * ROWS // nproc * row
                needed += inflation_needs(archive, key, end) if end else 0
    return needed


def _metadata(server: RangeServer, url: str, payload: list[tuple[int, int]]) -> int:
    """What one rank's metadata reads cost: a load's bytes outside the payload."""
    server.take()
    with tdview.Checkpoint(url) as ckpt:
        ckpt.load("rows")
        return _split(server.take(), payload)[1]


def test_outside_a_process_group_it_says_to_init_one(saved: Path) -> None:
    for call in (
        lambda: tdview.distributed.load_shard(saved / "ckpt", "rows"),
        lambda: tdview.distributed.load(saved / "ckpt"),
    ):
        with pytest.raises(ProcessGroupError, match=r"torch\.distributed\.init_process_group"):
            call()


@pytest.mark.parametrize("n", [0, 1, 2, 7, 301])
@pytest.mark.parametrize("world", [1, 2, 3, 8])
def test_the_ranks_rows_cover_every_row_once(n: int, world: int) -> None:
    rows = [tdview.distributed.rows_of_rank(n, r, world) for r in range(world)]
    assert [i for a, b in rows for i in range(a, b)] == list(range(n))
    assert max(b - a for a, b in rows) - min(b - a for a, b in rows) <= 1


def test_two_ranks_local_archive_and_http(saved: Path, tmp_path: Path) -> None:
    require_module("aiohttp", "tdview's HTTP reads go through it")
    server = RangeServer(str(saved))
    try:
        url, deflated = f"{server.url}/ckpt.tdz", f"{server.url}/ckpt-deflate.tdz"
        payload = _payload_spans(saved / "ckpt.tdz", "rows/")
        payload_d = _payload_spans(saved / "ckpt-deflate.tdz", "rows/")
        metadata = _metadata(server, url, payload)
        metadata_d = _metadata(server, deflated, payload_d)
        local, archive = str(saved / "ckpt"), str(saved / "ckpt.tdz")
        jobs = [
            _job("folder", local, "rows"),
            _job("archive", archive, "rows"),
            _job("dim1", local, "rows/steps", dim=1),
            _job("scatter", archive, "rows", call="broadcast"),
            _job("weights", local, "pair", call="load"),
            _job("http", url, "rows"),
            _job("member", str(saved), "ckpt.tdz/rows"),  # a folder of checkpoints
            _job("http-deflate", deflated, "rows"),
        ]
        _torchrun(2, jobs, tmp_path)
        log = server.take()
    finally:
        server.stop()
    full = TensorDict.load_memmap(saved / "ckpt")
    for name in ("folder", "archive", "http", "scatter", "member", "http-deflate"):
        _check_shards(tmp_path, name, 2, full["rows"])
    _check_shards(tmp_path, "dim1", 2, full["rows", "steps"], dim=1)
    for got in _results(tmp_path, "weights", 2):
        same(got, full["pair"])
    inside, other = _split([r for r in log if r.path == "/ckpt.tdz"], payload)
    total = sum(b - a for a, b in payload)
    assert inside <= 1.05 * total, (inside, total)
    assert inside + other <= 1.05 * total + 2 * metadata, (inside, other, total, metadata)
    # deflated: each rank inflates from each entry's start to its last row, no further
    inside, other = _split([r for r in log if r.path == "/ckpt-deflate.tdz"], payload_d)
    needed = _inflation_needed(saved / "ckpt-deflate.tdz", "rows/", 2)
    assert inside <= 1.05 * needed, (inside, needed)
    assert inside + other <= 1.05 * needed + 2 * metadata_d, (inside, other, needed, metadata_d)


def test_three_ranks_s3_and_more_ranks_than_rows(saved: Path, tmp_path: Path) -> None:
    require_module("moto", "the S3 server")
    s3fs = require_module("s3fs", "the S3 client")
    server, options = start_s3("dist")
    try:
        s3fs.S3FileSystem(**options).put(str(saved / "ckpt"), "dist/ckpt", recursive=True)
        server.take()
        remote = tdview.remote("s3://dist/ckpt", **options)
        with tdview.Checkpoint(remote) as ckpt:
            ckpt.load("rows")
        one_load = server.take()
        metadata = sum(r.sent for r in one_load if ".memmap" not in r.path)
        jobs = [
            _job("s3", "s3://dist/ckpt", "rows", options=options),
            _job("pair", str(saved / "ckpt.tdz"), "pair"),
            _job("pair-scatter", str(saved / "ckpt"), "pair", call="broadcast"),
            _job("sub", str(saved / "ckpt-deflate.tdz"), "rows", group=[0, 2]),
            _job("sub-scatter", str(saved / "ckpt"), "rows", call="broadcast", group=[0, 2]),
        ]
        _torchrun(3, jobs, tmp_path)
        log = server.take()
    finally:
        server.stop()
    full = TensorDict.load_memmap(saved / "ckpt")
    _check_shards(tmp_path, "s3", 3, full["rows"])
    for name in ("pair", "pair-scatter"):
        _check_shards(tmp_path, name, 3, full["pair"])
        empty = _results(tmp_path, name, 3)[0]  # rows [0, 0): the structure, no rows
        assert empty.batch_size == torch.Size([0]) and empty["w"].shape == (0, 5)
    for name in ("sub", "sub-scatter"):  # ranks 0 and 2 split the rows; rank 1 is told
        for rank, (start, stop) in ((0, (0, ROWS // 2)), (2, (ROWS // 2, ROWS))):
            got = TensorDict.load_memmap(tmp_path / name / str(rank))
            same(got, full["rows"][start:stop], f"{name}@{rank}")
        told = (tmp_path / name / "1.error").read_text()
        assert "global rank 1" in told and "not a member of the group" in told, told
        assert not (tmp_path / name / "1").exists()
    payload_files = sum(p.stat().st_size for p in (saved / "ckpt" / "rows").rglob("*.memmap"))
    inside = sum(r.sent for r in log if ".memmap" in r.path)
    assert inside <= 1.05 * payload_files, (inside, payload_files)
    assert sum(r.sent for r in log) <= 1.05 * payload_files + 3 * metadata
