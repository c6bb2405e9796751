"""The benchmark cases of the suite: tdview and tensordict on the same files."""

from __future__ import annotations

import json
import os
import warnings
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from tensordict import TensorDict

import tdview
from tdview.errors import TDViewError
from tdview.index import Checkpoint, rollup

from . import _checkpoints as ck
from . import _modules as md
from ._harness import Result, compare


@dataclass(frozen=True)
class Sizes:
    """Full sizes (the issue's) or quick ones (a smoke run under two minutes)."""

    moe_leaves: int
    replay_rows: int
    many_leaves: int
    many_leaf_bytes: int
    big_leaf_bytes: int
    scaling: tuple[int, ...]
    reps: int
    big_archive_leaves: int  # an archive of about 1.34 entries per leaf (case 2, open + list)
    frame_rows: tuple[int, int]  # case 8: the small and the large tensorclass checkpoint
    history_turns: int  # case 8: members of the lazy stack of tensorclasses
    dump_rows: int  # case 9: rows of the torchrl replay-buffer dump
    loads: int  # cases 8, 9: loads per timed call (one takes a fraction of a millisecond)
    load_reps: int  # cases 8, 9: timed calls per side


FULL = Sizes(
    10_000,
    1_000_000,
    64,
    3 << 20,
    180 << 20,
    (1_000, 100_000),
    5,
    15_000,
    frame_rows=(120, 229_500),
    history_turns=64,
    dump_rows=100_000,
    loads=40,
    load_reps=15,
)
QUICK = Sizes(
    600,
    20_000,
    8,
    256 << 10,
    8 << 20,
    (100, 2_000),
    3,
    1_000,
    frame_rows=(120, 10_400),
    history_turns=8,
    dump_rows=5_000,
    loads=10,
    load_reps=5,
)


def load_loop(load: Callable[..., object], path: Path, loads: int, **kwargs: object) -> object:
    """``loads`` loads of ``path`` one after the other (warnings ignored around all of
    them, the same for both sides): a side of the per-load cases."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(loads):
            result = load(path, **kwargs)
    return result


def per_load(
    case: str, variant: str, path: Path, sizes: Sizes, note: str = "", **kwargs: object
) -> Result:
    """tdview's and tensordict's load of ``path`` with ``kwargs``, timed ``sizes.loads``
    loads at a time (small loads: the fixed cost of one load is what is measured)."""
    return compare(
        case,
        f"{variant} (time per load)",
        {
            "tensordict": lambda: load_loop(TensorDict.load_memmap, path, sizes.loads, **kwargs),
            "tdview": lambda: load_loop(tdview.load_memmap, path, sizes.loads, **kwargs),
        },
        baseline="tensordict",
        reps=sizes.load_reps,
        per=sizes.loads,
        note=note,
    )


def tensorclass_cases(root: Path, sizes: Sizes) -> list[Result]:
    """A ``@tensorclass`` saved by ``memmap`` and ``save(".tdz")`` (small and large: a
    mapped load maps, so both cost the same fixed time), then a lazy stack of
    tensorclasses (torchrl's ``History``): mapped and ``device="meta"`` loads."""
    results = []
    for rows in sizes.frame_rows:
        nbytes = rows * ck.FRAME_BYTES
        size = f"{nbytes / 2**10:.0f} KiB" if nbytes < 2**20 else f"{nbytes / 2**20:.0f} MiB"
        paths = ck.write_both(ck.frames(rows), root, f"frames{rows}")
        for kind, path in paths.items():
            for device in (None, "meta"):
                results.append(
                    per_load(
                        "8 tensorclass",
                        f"{size}, {kind}, {device or 'mapped'}",
                        path,
                        sizes,
                        device=device,
                    )
                )
    paths = ck.write_both(ck.history(sizes.history_turns), root, "history")
    for kind, path in paths.items():
        for device in (None, "meta"):
            results.append(
                per_load(
                    "8 tensorclass",
                    f"lazy stack of {sizes.history_turns}, {kind}, {device or 'mapped'}",
                    path,
                    sizes,
                    device=device,
                )
            )
    return results


def replay_dump_cases(root: Path, sizes: Sizes) -> list[Result]:
    """The ``storage/`` folder of a torchrl ``ReplayBuffer.dumps`` (the checkpoint in it):
    mapped and ``device="meta"`` loads."""
    dump = root / "replay_dump"
    note = ck.write_replay_dump(sizes.dump_rows, dump)
    path = dump / "storage"
    nbytes = sum(f.stat().st_size for f in path.rglob("*.memmap"))
    return [
        per_load(
            "9 replay dump",
            f"storage/ of {nbytes / 1e6:.0f} MB, {device or 'mapped'}",
            path,
            sizes,
            note=note,
            device=device,
        )
        for device in (None, "meta")
    ]


def hub_cache_cases(root: Path, sizes: Sizes) -> list[Result]:
    """The small tensorclass checkpoint of case 8 in a Hugging Face cache (every file a
    symlink into ``blobs/``): mapped and ``device="meta"`` loads. None where this tdview
    does not load such a folder."""
    path = ck.write_hub_cache(ck.frames(sizes.frame_rows[0]), root, "frames")
    try:
        tdview.load_memmap(path, device="meta")
    except (TDViewError, ValueError) as error:  # links out of the root not followed
        print(f"… case 10 left out: {type(error).__name__}: {str(error)[:120]}", flush=True)
        return []
    nbytes = sum(f.stat().st_size for f in path.rglob("*.memmap"))
    results = [
        per_load(
            "10 hub cache",
            f"{nbytes / 2**10:.0f} KiB tensorclass, {device or 'mapped'}",
            path,
            sizes,
            device=device,
        )
        for device in (None, "meta")
    ]
    # a model's many files (case 11's module tree), each a link into blobs/: the per-link
    # check against a fixed cost of a few files
    saved = md.write_module_tree(sizes.moe_leaves, root / "hub-modules-saved")
    tree = ck.write_hub_cache(TensorDict.load_memmap(saved).clone(), root, "modules")
    files = sum(1 for _ in tree.rglob("*") if _.is_symlink())
    for device in (None, "meta"):
        results.append(
            compare(
                "10 hub cache",
                f"module tree, {files} linked files, {device or 'mapped'}",
                {
                    "tensordict": lambda d=device: reference_load(tree, device=d),
                    "tdview": lambda d=device: tdview.load_memmap(tree, device=d),
                },
                baseline="tensordict",
                reps=sizes.reps,
            )
        )
    return results


def reference_load(path: Path, **kwargs: object) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TensorDict.load_memmap(path, **kwargs)


def tdview_structure(path: Path) -> object:
    """tdview's index: open it and read every node (what the tree view needs)."""
    with Checkpoint(path) as ckpt:
        return rollup(ckpt, ckpt.root)


def read_every_byte(td: object) -> int:
    total = 0
    for leaf in td.values(True, True):  # type: ignore[attr-defined]
        total += int(leaf.reshape(-1).view(torch.uint8).sum())
    return total


def parse_every_meta(path: Path) -> int:
    """Floor for a directory: read and parse every meta.json it holds."""
    count = 0
    for folder, _, files in os.walk(path):
        if "meta.json" in files:
            _parse_meta(folder)
            count += 1
    return count


def _parse_meta(folder: str) -> None:
    with open(os.path.join(folder, "meta.json"), "rb") as handle:
        json.loads(handle.read())


def parse_central_directory(path: Path) -> int:
    """Floor for an archive: Python's own parse of the central directory."""
    with zipfile.ZipFile(path) as archive:
        return len(archive.infolist())


def floor_for(path: Path) -> dict[str, Callable[[], object]]:
    if path.is_dir():
        return {"parse every meta.json": lambda: parse_every_meta(path)}
    return {"parse the central directory": lambda: parse_central_directory(path)}


def structure_cases(root: Path, sizes: Sizes) -> list[Result]:
    paths = ck.write_both(ck.moe_state_dict(sizes.moe_leaves), root, "moe")
    results = []
    for kind, path in paths.items():
        for cold in (False, True):
            results.append(
                compare(
                    "1 structure",
                    f"moe {sizes.moe_leaves} leaves, {kind}",
                    {
                        "tensordict meta": lambda p=path: reference_load(p, device="meta"),
                        "tdview meta": lambda p=path: tdview.load_memmap(p, device="meta"),
                        "tdview index": lambda p=path: tdview_structure(p),
                    },
                    baseline="tensordict meta",
                    reps=sizes.reps,
                    cold=[path] if cold else None,
                    floor=floor_for(path),
                )
            )
    return (
        results
        + subpath_cases(paths, sizes)
        + open_list_cases(root, sizes)
        + mapped_read_cases(paths, sizes)
    )


SUBPATH = "model/layers/1/attn"  # 7 leaves


def subpath_cases(paths: dict[str, Path], sizes: Sizes) -> list[Result]:
    results = []
    for kind, path in paths.items():
        opened = Checkpoint(path)
        opened.load(subpath=SUBPATH)  # the browser's first load; later ones are timed
        results.append(
            compare(
                "2 subpath",
                f"7-leaf subtree, {kind}",
                {
                    "tensordict": lambda p=path: reference_load(p, subpath=SUBPATH),
                    "tdview first access": lambda p=path: tdview.load_memmap(p, subpath=SUBPATH),
                    "tdview open Checkpoint": lambda c=opened: c.load(subpath=SUBPATH),
                },
                baseline="tensordict",
                reps=sizes.reps,
            )
        )
    return results


def open_and_list(path: Path, subpath: str) -> list[str]:
    """What the browser does first: open the archive, list the children of one node."""
    with Checkpoint(path) as ckpt:
        return [child.key for child in ckpt.children(ckpt.node(subpath))]


def open_list_cases(root: Path, sizes: Sizes) -> list[Result]:
    """Open a big archive (20,000 entries in the full run) and list one node, against
    tensordict's meta load of that node alone (goal: under 5% of it)."""
    path = ck.write_both(ck.moe_state_dict(sizes.big_archive_leaves), root, "moe_big")["archive"]
    with zipfile.ZipFile(path) as archive:
        entries = len(archive.infolist())
    return [
        compare(
            "2 open + list",
            f"{entries} entries, list {SUBPATH}, archive",
            {
                "tensordict subpath meta": lambda: reference_load(
                    path, subpath=SUBPATH, device="meta"
                ),
                "tdview open + list": lambda: open_and_list(path, SUBPATH),
            },
            baseline="tensordict subpath meta",
            reps=sizes.reps,
        )
    ]


def map_every_file(path: Path, *, read_meta: bool = False) -> int:
    """Floor for a directory's mapped load: stat and map every leaf file (what any loader
    of per-leaf files does); with ``read_meta``, read and parse every meta.json too (what
    a loader also needs, to know the leaves)."""
    count = 0
    for folder, _, files in os.walk(path):
        if read_meta and "meta.json" in files:
            _parse_meta(folder)
        for name in files:
            if name.endswith(".memmap"):
                file = os.path.join(folder, name)
                size = os.stat(file).st_size
                if size:
                    torch.from_file(file, shared=False, size=size, dtype=torch.uint8)
                count += 1
    return count


def mapped_read_cases(paths: dict[str, Path], sizes: Sizes) -> list[Result]:
    """The memory-mapped load alone (the goal), then the load and a read of every byte."""
    results = []
    for kind, path in paths.items():
        floor = (
            {
                "stat and map every leaf file": lambda p=path: map_every_file(p),
                "read every meta.json, stat and map every leaf file": lambda p=path: map_every_file(
                    p, read_meta=True
                ),
            }
            if kind == "directory"
            else None
        )
        results.append(
            compare(
                "3 mapped load",
                f"moe, {kind}",
                {
                    "tensordict": lambda p=path: reference_load(p),
                    "tdview": lambda p=path: tdview.load_memmap(p),
                },
                baseline="tensordict",
                reps=sizes.reps,
                floor=floor,
            )
        )
    for kind, path in paths.items():
        results.append(
            compare(
                "3 mapped load + read",
                f"moe, {kind}",
                {
                    "tensordict": lambda p=path: read_every_byte(reference_load(p)),
                    "tdview": lambda p=path: read_every_byte(tdview.load_memmap(p)),
                },
                baseline="tensordict",
                reps=sizes.reps,
            )
        )
    return results


def replay_cases(root: Path, sizes: Sizes) -> list[Result]:
    paths = ck.write_both(ck.replay_buffer(sizes.replay_rows), root, "replay")
    nbytes = sum(f.stat().st_size for f in paths["directory"].rglob("*.memmap"))
    results = []
    for kind, path in paths.items():
        for cold in (False, True):
            results.append(
                compare(
                    "4 replay buffer",
                    f"{nbytes / 1e6:.0f} MB, {kind}",
                    {
                        "tensordict": lambda p=path: read_every_byte(reference_load(p)),
                        "tdview": lambda p=path: read_every_byte(tdview.load_memmap(p)),
                    },
                    baseline="tensordict",
                    reps=sizes.reps,
                    cold=[path] if cold else None,
                )
            )
    return results


def _inflate_all(path: Path) -> int:
    """Floor: raw zlib inflate of every deflated entry (no CRC, no tensor)."""
    total = 0
    with zipfile.ZipFile(path) as archive, open(path, "rb") as handle:
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_DEFLATED:
                continue
            handle.seek(info.header_offset + 26)
            name_len, extra_len = (int.from_bytes(handle.read(2), "little") for _ in range(2))
            handle.seek(info.header_offset + 30 + name_len + extra_len)
            total += len(zlib.decompress(handle.read(info.compress_size), -15))
    return total


def deflate_cases(root: Path, sizes: Sizes) -> list[Result]:
    many = ck.write_both(
        ck.deflate_many(sizes.many_leaves, sizes.many_leaf_bytes),
        root,
        "deflate_many",
        compression="deflate",
    )["archive"]
    big = ck.write_both(
        ck.deflate_one_big(sizes.big_leaf_bytes), root, "deflate_big", compression="deflate"
    )["archive"]
    labels = {
        many: f"{sizes.many_leaves} x {sizes.many_leaf_bytes >> 20 or 0.25} MB",
        big: f"one {sizes.big_leaf_bytes >> 20} MB + 3 small",
    }
    results = []
    for read in (False, True):  # the load (the goal), then the load and a read of it all
        for path in (many, big):
            for threads in (0, 2):
                results.append(
                    compare(
                        "5 deflate load + read" if read else "5 deflate load",
                        f"{labels[path]}, num_threads={threads}",
                        {
                            "tensordict": lambda p=path, t=threads, r=read: _then_read(
                                reference_load(p, num_threads=t), r
                            ),
                            "tdview": lambda p=path, t=threads, r=read: _then_read(
                                tdview.load_memmap(p, num_threads=t), r
                            ),
                        },
                        baseline="tensordict",
                        reps=sizes.reps,
                        floor=None
                        if read
                        else {"raw zlib inflate": lambda p=path: _inflate_all(p)},
                    )
                )
    return results


def _then_read(td: object, read: bool) -> object:
    return read_every_byte(td) if read else td


def scaling_cases(root: Path, sizes: Sizes) -> list[Result]:
    results = []
    for leaves in sizes.scaling:
        path = ck.write_flat_tree(leaves, root / f"flat{leaves}")
        results.append(
            compare(
                "6 scaling",
                f"{leaves} leaves, directory (time per leaf)",
                {
                    "tensordict meta": lambda p=path: reference_load(p, device="meta"),
                    "tdview meta": lambda p=path: tdview.load_memmap(p, device="meta"),
                    "tdview index": lambda p=path: tdview_structure(p),
                },
                baseline="tensordict meta",
                reps=max(3, sizes.reps - 2),
                per=leaves,
                floor=floor_for(path),
            )
        )
    return results
