"""Remote checkpoints over loopback HTTP (issue 21): bytes, requests, throughput.

One archive of 10,010 leaves, about 1 GB (143 blocks of 10 layers of 7 leaves of 100 KB,
written by tensordict's ``save``), served by the tests' range server
(``tests/remote_servers.RangeServer``), whose request log counts every request and byte:

* browse: the root's first page of children (batches of requests, that is round trips),
  then the whole tree (every node and rollup): bytes read against the central directory
  plus every ``meta.json`` entry (local header and data) plus 64 KiB;
* subpath load of one 7-leaf layer: bytes read against its payload plus its metadata;
* full load: throughput of ``load_memmap(url)`` against fsspec's ``cat_ranges`` of the
  same byte ranges (those the load requested, from the log), and the local load of the
  same archive (mapped, then every byte touched) for scale.

``python -m bench.remote [--quick] [--json PATH]`` (quick: 1,001 leaves, about 100 MB).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import tdview  # noqa: E402
from tdview.storage import ArchiveStore  # noqa: E402
from tests.remote_servers import RangeServer  # noqa: E402


def _write(path: Path, blocks: int) -> None:
    g = torch.Generator().manual_seed(0)
    td = TensorDict(
        {
            f"block{i:03d}": TensorDict(
                {
                    f"layer{j}": TensorDict(
                        {f"w{k}": torch.randn(25_000, generator=g) for k in range(7)}
                    )
                    for j in range(10)
                }
            )
            for i in range(blocks)
        }
    )
    td.save(path)


def _facts(path: Path) -> dict[str, Any]:
    """Central directory size and meta.json entry bytes, from the local archive."""
    with ArchiveStore(path) as opened:
        store: Any = opened
        cd = int(store.file_size - int(store._catalog.starts[-1]))
        meta_data = meta_entries = 0
        for key in store.keys():
            if key == "meta.json" or key.endswith("/meta.json"):
                e = store._file(key)
                meta_data += e.size
                meta_entries += 30 + len(e.raw_name) + e.stored_size
        return {
            "central_directory": cd,
            "meta_json_bytes": meta_data,
            "meta_json_entry_bytes": meta_entries,
            "entries": len(store.keys()),
        }


def _sent(log: list[Any]) -> int:
    return sum(r.sent for r in log)


def run(quick: bool) -> dict[str, Any]:
    blocks = 14 if quick else 143
    # in memory when the machine has a tmpfs: the server's disk is not what is measured
    shm = Path("/dev/shm")
    work = Path(tempfile.mkdtemp(prefix="tdview-bench-remote-", dir=shm if shm.is_dir() else None))
    path = work / "ckpt.tdz"
    t = time.perf_counter()
    _write(path, blocks)
    out: dict[str, Any] = {
        "write_s": round(time.perf_counter() - t, 1),
        "archive_bytes": path.stat().st_size,
        "leaves": blocks * 70,
    }
    facts = _facts(path)
    out.update(facts)
    server = RangeServer(str(work))
    url = f"{server.url}/ckpt.tdz"
    try:
        # -- browse -------------------------------------------------------------------
        server.take()
        t = time.perf_counter()
        ckpt = tdview.Checkpoint(url)
        page = ckpt.page(ckpt.root, 0, 50)
        first = time.perf_counter() - t
        transport = ckpt.store.transport  # type: ignore[attr-defined]
        log = server.take()
        out["browse_first_page"] = {
            "round_trips": transport.batches,
            "requests": len(log),
            "bytes": _sent(log),
            "seconds": round(first, 3),
            "children": len(page.items),
        }
        t = time.perf_counter()
        total = tdview.index.rollup(ckpt, ckpt.root)
        nodes = sum(1 for _ in tdview.index.walk(ckpt, ckpt.root))
        log += server.take()
        browsed = _sent(log)
        bound = facts["central_directory"] + facts["meta_json_entry_bytes"] + (64 << 10)
        out["browse_whole_tree"] = {
            "nodes": nodes,
            "leaves": total.leaves,
            "requests": len(log),
            "round_trips": transport.batches,
            "bytes": browsed,
            "bound": bound,
            "within_bound": browsed <= bound,
            "seconds": round(first + time.perf_counter() - t, 3),
            "payload_bytes_read": 0,
        }
        # -- subpath load ---------------------------------------------------------------
        sub = "block007/layer3"
        t = time.perf_counter()
        got = ckpt.load(sub)
        dt = time.perf_counter() - t
        log = server.take()
        payload = sum(v.numel() * v.element_size() for v in got.values())
        with ArchiveStore(path) as opened:
            store: Any = opened
            metadata = sum(
                store._file(k).size
                for k in store.keys()
                if k.startswith(sub + "/") and not k.endswith(".memmap")
            )
        read = _sent(log)
        out["subpath_load"] = {
            "leaves": len(got.keys()),
            "payload": payload,
            "metadata": metadata,
            "bytes": read,
            "requests": len(log),
            "ratio_to_payload_plus_metadata": round(read / (payload + metadata), 4),
            "within_1_05": read <= 1.05 * payload + metadata,
            "seconds": round(dt, 4),
        }
        ckpt.close()
        # -- full load ----------------------------------------------------------------------
        out["full_load"] = _throughput(server, url, path)
    finally:
        server.stop()
        for f in work.iterdir():
            f.unlink()
        work.rmdir()
    return out


def _throughput(server: RangeServer, url: str, path: Path) -> dict[str, Any]:
    import fsspec

    rows: dict[str, list[float]] = {"tdview": [], "fsspec_cat_ranges": [], "local": []}
    ranges: list[tuple[int, int]] = []
    for _ in range(5):  # alternated, the best of each: the machine is shared
        ckpt = tdview.Checkpoint(url)
        ckpt.children()
        server.take()
        t = time.perf_counter()
        td = ckpt.load()
        rows["tdview"].append(time.perf_counter() - t)
        log = server.take()
        ranges = [span for r in log if (span := r.span()) is not None]
        nbytes = sum(b - a for a, b in ranges)
        del td
        ckpt.close()
        fs = fsspec.filesystem("http")
        t = time.perf_counter()
        data = fs.cat_ranges([url] * len(ranges), [a for a, _ in ranges], [b for _, b in ranges])
        rows["fsspec_cat_ranges"].append(time.perf_counter() - t)
        assert sum(len(d) for d in data) == nbytes
        del data
        t = time.perf_counter()
        local = tdview.load_memmap(path)
        for v in local.values(True, True):
            v.sum()  # touch every page
        rows["local"].append(time.perf_counter() - t)
        del local
    best = {k: min(v) for k, v in rows.items()}
    mb = nbytes / 1e6
    return {
        "bytes": nbytes,
        "requests": len(ranges),
        "seconds": {k: round(v, 3) for k, v in best.items()},
        "MB_per_s": {k: round(mb / v, 1) for k, v in best.items()},
        "tdview_vs_fsspec_cat": round(best["fsspec_cat_ranges"] / best["tdview"], 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.remote")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = run(args.quick)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
