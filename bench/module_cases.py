"""Case 11: a checkpoint saved from an ``nn.Module`` (one folder per module), the shape
the goals of issue 18 are judged on; and the same loads with a latency added to every
file-system call (a network or shared file system, where each open is a round trip).
"""

from __future__ import annotations

import builtins
import gc
import io
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from tensordict import pack_memmap

import tdview

from . import _modules as md
from ._harness import Result, compare

#: The latency added to each file-system call in the latency variants (0.2 ms).
LATENCY = 0.2e-3


def module_cases(root: Path, sizes: object) -> list[Result]:
    """Structure (``device="meta"``), mapped load and first ``subpath=`` access of a
    module-shaped tree (``sizes.moe_leaves`` leaves, as the MoE case of case 1), with
    floor rows for reading and parsing every ``meta.json``; then the directory loads with
    :data:`LATENCY` added to every open, stat and listing."""
    from .cases import reference_load  # cases imports this module's peers

    leaves = sizes.moe_leaves  # type: ignore[attr-defined]
    reps = sizes.reps  # type: ignore[attr-defined]
    directory = md.write_module_tree(leaves, root / "modules")
    archive = root / "modules.tdz"
    pack_memmap(directory, archive)
    files = md.meta_files(directory)
    count = sum(1 for _ in directory.rglob("*.memmap"))
    label = f"{count} leaves in {len(files)} folders"
    floors = _floors(files)
    results = []
    for kind, path in (("directory", directory), ("archive", archive)):
        results.append(
            compare(
                "11 module tree",
                f"{label}, {kind}, meta",
                {
                    "tensordict meta": lambda p=path: reference_load(p, device="meta"),
                    "tdview meta": lambda p=path: tdview.load_memmap(p, device="meta"),
                },
                baseline="tensordict meta",
                reps=reps,
                floor={**floors, **_walk_floor(directory)} if kind == "directory" else None,
            )
        )
        results.append(
            compare(
                "11 module tree",
                f"{label}, {kind}, mapped",
                {
                    "tensordict": lambda p=path: reference_load(p),
                    "tdview": lambda p=path: tdview.load_memmap(p),
                },
                baseline="tensordict",
                reps=reps,
                floor=_map_floor(directory) if kind == "directory" else None,
            )
        )
    for kind, path in (("directory", directory), ("archive", archive)):
        results.append(
            compare(
                "11 module tree",
                f"subpath {md.SUBPATH} (7 leaves), {kind}, first access",
                {
                    "tensordict": lambda p=path: reference_load(p, subpath=md.SUBPATH),
                    "tdview": lambda p=path: tdview.load_memmap(p, subpath=md.SUBPATH),
                },
                baseline="tensordict",
                reps=reps,
            )
        )
    with added_latency(LATENCY):
        for device in ("meta", None):
            results.append(
                compare(
                    "11 module tree",
                    f"{label}, directory, {device or 'mapped'}, "
                    f"+{LATENCY * 1e3:.1f} ms per file-system call",
                    {
                        "tensordict": lambda d=device: reference_load(directory, device=d),
                        "tdview": lambda d=device: tdview.load_memmap(directory, device=d),
                    },
                    baseline="tensordict",
                    reps=max(3, reps - 2),
                    warmup=0,
                )
            )
    return results


def _floors(files: list[str]) -> dict[str, Callable[[], object]]:
    """Reading every ``meta.json`` by its known path (no listing), and parsing the bytes
    read with ``json`` (and with ``msgspec``, where it is installed)."""

    def read() -> int:
        total = 0
        for file in files:
            fd = os.open(file, os.O_RDONLY)
            try:
                total += len(os.read(fd, 1 << 20))
            finally:
                os.close(fd)
        return total

    blobs = []
    for file in files:
        with open(file, "rb") as handle:
            blobs.append(handle.read())
    floors: dict[str, Callable[[], object]] = {
        "read every meta.json by its path": read,
        "parse every meta.json (json)": lambda: [json.loads(b) for b in blobs],
    }
    try:
        import msgspec
    except ImportError:
        return floors
    decode = msgspec.json.decode
    floors["parse every meta.json (msgspec)"] = lambda: [decode(b) for b in blobs]
    return floors


def _walk_floor(directory: Path) -> dict[str, Callable[[], object]]:
    """Walking the tree by the names each ``meta.json`` gives (an ``lstat`` of each leaf
    file and folder, every ``meta.json`` opened, read and parsed with ``json``, the same
    bytes parsed once) and building each TensorDict with meta leaves, nothing checked:
    what a meta load costs in Python before any of its checks, bounds and fallbacks
    (the collector paused, as a load pauses it)."""
    from tensordict import TensorDict  # only this floor uses it

    parsed: dict[bytes, dict] = {}
    dtypes: dict[str, torch.dtype] = {}
    meta = torch.device("meta")
    plain = ("shape", "device", "_type", "_format_version", "_class", "_names")

    def walk(folder: str, prefix: Path) -> TensorDict:
        fd = os.open(folder + "/meta.json", os.O_RDONLY | os.O_NOFOLLOW)
        try:
            data = os.read(fd, os.fstat(fd).st_size + 1)
        finally:
            os.close(fd)
        record = parsed.get(data)
        if record is None:
            record = parsed[data] = json.loads(data)
        result = TensorDict._new_unsafe(batch_size=torch.Size(record["shape"]))
        entries = result._tensordict
        for key, entry in record.items():
            if key in plain:
                continue
            if "dtype" in entry:
                os.lstat(f"{folder}/{key}.memmap")
                dtype = dtypes.get(entry["dtype"])
                if dtype is None:
                    dtype = dtypes[entry["dtype"]] = getattr(torch, entry["dtype"][6:])
                entries[key] = torch.empty(size=entry["shape"], dtype=dtype, device=meta)
            else:
                os.lstat(f"{folder}/{key}")
                entries[key] = walk(f"{folder}/{key}", prefix / key)
        result._memmap_prefix = prefix
        return result

    def run() -> TensorDict:
        enabled = gc.isenabled()
        gc.disable()  # as a load pauses it: no collection passes over what it builds
        try:
            return walk(str(directory), directory)
        finally:
            if enabled:
                gc.enable()

    return {"walk and build, nothing checked": run}


def _map_floor(directory: Path) -> dict[str, Callable[[], object]]:
    """Mapping every leaf file by its known path (``torch.from_file``, what tensordict
    maps each leaf with, no tensordict built): the part of a mapped load that a meta
    load does not make."""
    leaves = [(str(file), file.stat().st_size) for file in directory.rglob("*.memmap")]

    def map_all() -> int:
        mapped = [
            torch.from_file(file, shared=False, size=size, dtype=torch.uint8)
            for file, size in leaves
            if size
        ]
        return len(mapped)

    return {"map every leaf file by its path": map_all}


_PATCHED = ("open", "stat", "lstat", "scandir", "listdir", "readlink", "access")


@contextmanager
def added_latency(seconds: float) -> Iterator[None]:
    """Sleep ``seconds`` before every ``os.open``, ``os.stat``, ``os.lstat``,
    ``os.scandir``, ``os.listdir``, ``os.readlink``, ``os.access``, ``open()`` and
    ``torch.from_file`` (both sides make theirs through these), as a network file
    system's round trip would. ``os.fstat``, reads and maps of an open file are left as
    they are (they go to the open file, not the server, once it is open), and so is
    ``os.readlink`` of ``/proc/self/fd/N`` (the kernel's record of an open file: no
    file system is asked)."""
    saved = {name: getattr(os, name) for name in _PATCHED}
    saved_open, saved_io_open, saved_from_file = builtins.open, io.open, torch.from_file

    def slow(call: Callable[..., object]) -> Callable[..., object]:
        def wrapped(*args: object, **kwargs: object) -> object:
            if not (call is saved["readlink"] and str(args[0]).startswith("/proc/self/")):
                time.sleep(seconds)
            return call(*args, **kwargs)

        return wrapped

    try:
        for name, call in saved.items():
            setattr(os, name, slow(call))
        builtins.open = io.open = slow(saved_open)  # type: ignore[assignment]
        torch.from_file = slow(saved_from_file)  # type: ignore[assignment]
        yield
    finally:
        for name, call in saved.items():
            setattr(os, name, call)
        builtins.open, io.open, torch.from_file = saved_open, saved_io_open, saved_from_file
