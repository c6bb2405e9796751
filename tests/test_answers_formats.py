"""``tdview check``, ``tdview du`` and duplicates on every format tdview opens besides
tensordict's memory-mapped layout: a safetensors file and a shard set
(``safetensors.torch.save_file``), a consolidated file (``td.consolidate(filename=)``),
an HDF5 file (``td.to_h5``) and a zarr store (``td.to_zarr``).

Each is written by its own writer with a tied weight saved twice (two keys, the same
bytes) and a NaN planted in one leaf. The reference is the format's own reader
(safetensors' ``safe_open``, tensordict's ``from_consolidated``, ``h5py``, ``zarr``):
the check without values finds nothing (and says the format records no CRC-32: sizes
checked, not bytes), with values the NaN of that leaf alone, counted as the reader
counts it; the sizes are the reader's bytes, by dtype; the group stored twice is the
reader's.
"""

from __future__ import annotations

import itertools
import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from tensordict import TensorDict

from tdview.__main__ import main
from tdview.answers import check, find_duplicates, sizes

from ._optional import require_module

Leaves = dict[tuple[str, ...], np.ndarray]
#: The leaf the NaN is planted in, and the tied weight's two keys.
NAN = ("model", "layers", "0", "bias")
TIED = (("model", "embed", "weight"), ("model", "head", "weight"))


def state() -> dict[tuple[str, ...], torch.Tensor]:
    """A small model's state: the embedding tied to the head (saved twice), a NaN."""
    torch.manual_seed(0)
    embed = torch.randn(48, 16)
    found = {
        TIED[0]: embed,
        TIED[1]: embed.clone(),  # tied: the writers save each key's own copy
        ("step",): torch.tensor(1000),
    }
    for i in range(2):
        found[("model", "layers", str(i), "weight")] = torch.randn(16, 16)
        found[("model", "layers", str(i), "bias")] = torch.randn(16)
    found[NAN][5] = float("nan")
    found[("model", "norm", "weight")] = torch.randn(16).to(torch.float16)  # numpy has it
    return found


def nested() -> TensorDict:
    td = TensorDict()
    for key, value in state().items():
        td[key] = value
    return td


def flat() -> dict[str, torch.Tensor]:
    return {".".join(key): value for key, value in state().items()}


# -- the writers, and each format's own reader ------------------------------------------


def write_safetensors(root: Path) -> Path:
    path = root / "model.safetensors"
    save_file(flat(), path)
    return path


def write_shards(root: Path) -> Path:
    folder = root / "model"
    folder.mkdir()
    tensors = flat()
    weight_map = {}
    for i, keys in enumerate((list(tensors)[0::2], list(tensors)[1::2])):
        name = f"model-{i + 1:05d}-of-00002.safetensors"
        save_file({k: tensors[k] for k in keys}, folder / name, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(keys, name))
    index = {"metadata": {}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


def write_consolidated(root: Path) -> Path:
    path = root / "model.td"
    nested().consolidate(filename=path)
    return path


def write_h5(root: Path) -> Path:
    require_module("h5py", "td.to_h5 writes HDF5 with it")
    path = root / "model.h5"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nested().to_h5(path)
    return path


def write_zarr(root: Path) -> Path:
    require_module("zarr", "td.to_zarr writes with it")
    path = root / "model.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nested().to_zarr(str(path))
    return path


def read_safetensors_files(files: list[Path]) -> Leaves:
    found: Leaves = {}
    for file in files:
        with safe_open(file, "pt") as f:
            for key in f.keys():
                found[tuple(key.split("."))] = f.get_tensor(key).numpy()
    return found


def read_safetensors(path: Path) -> Leaves:
    return read_safetensors_files([path])


def read_shards(path: Path) -> Leaves:
    index = json.loads((path / "model.safetensors.index.json").read_text())
    return read_safetensors_files(
        [path / name for name in sorted(set(index["weight_map"].values()))]
    )


def read_consolidated(path: Path) -> Leaves:
    td = TensorDict.from_consolidated(str(path))
    return {
        key if isinstance(key, tuple) else (key,): value.numpy()
        for key, value in td.items(include_nested=True, leaves_only=True)
    }


def read_h5(path: Path) -> Leaves:
    h5py = require_module("h5py")
    found: Leaves = {}
    with h5py.File(path, "r") as f:

        def visit(name: str, item: object) -> None:
            if isinstance(item, h5py.Dataset):
                found[tuple(name.split("/"))] = item[()]

        f.visititems(visit)
    return found


def read_zarr(path: Path) -> Leaves:
    zarr = require_module("zarr")
    found: Leaves = {}
    group = zarr.open_group(str(path), mode="r")
    for name, array in group.arrays():
        found[(name,)] = array[...]
    stack = [((name,), sub) for name, sub in group.groups()]
    while stack:
        prefix, sub = stack.pop()
        for name, array in sub.arrays():
            found[(*prefix, name)] = array[...]
        stack += [((*prefix, name), child) for name, child in sub.groups()]
    return found


FORMATS: dict[str, tuple[Callable[[Path], Path], Callable[[Path], Leaves]]] = {
    "safetensors": (write_safetensors, read_safetensors),
    "shard-set": (write_shards, read_shards),
    "consolidated": (write_consolidated, read_consolidated),
    "h5": (write_h5, read_h5),
    "zarr": (write_zarr, read_zarr),
}


@pytest.fixture(params=list(FORMATS))
def written(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Leaves]:
    write, read = FORMATS[request.param]
    path = write(tmp_path)
    return path, read(path)


def _nan_count(array: np.ndarray) -> int:
    return int(np.isnan(array).sum()) if array.dtype.kind == "f" else 0


def reference_groups(leaves: Leaves) -> list[list[tuple[str, ...]]]:
    """Groups of leaves with the same dtype and bytes, every pair compared."""
    groups: list[set[tuple[str, ...]]] = []
    for (ka, a), (kb, b) in itertools.combinations(leaves.items(), 2):
        if a.dtype != b.dtype or a.tobytes() != b.tobytes():
            continue
        group = next((g for g in groups if ka in g or kb in g), None)
        if group is None:
            groups.append({ka, kb})
        else:
            group |= {ka, kb}
    return sorted(sorted(group) for group in groups)


def test_check_without_values_says_what_it_could_not_check(written) -> None:
    path, reference = written
    report = check(path)
    assert report.healthy and report.exit_status == 0, report.problems
    assert report.checked["leaves"] == len(reference)
    # no CRC-32 recorded: every leaf's size checked, its bytes not
    assert report.checked["no_crc"] == len(reference) and report.checked["entries"] == 0
    assert report.checked["bytes"] == 0  # nothing read
    assert f"no CRC-32 recorded for {len(reference)} leaves" in report.summary()
    assert report.duplicates == []  # no CRC-32 to group by without reading
    assert main(["check", str(path), "--no-progress"]) == 0


def test_check_with_values_finds_the_nan(written, capsys) -> None:
    path, reference = written
    nans = {key: _nan_count(array) for key, array in reference.items() if _nan_count(array)}
    assert list(nans) == [NAN]
    report = check(path, values=True)
    assert [(p.path, p.kind) for p in report.problems] == [(NAN, "nan")]
    assert report.problems[0].message.startswith(f"{nans[NAN]} of {reference[NAN].size} ")
    assert report.checked["values"] == len(reference)
    assert report.checked["bytes"] == sum(a.nbytes for a in reference.values())
    assert sorted(sorted(g) for g in report.duplicates) == reference_groups(reference)
    assert main(["check", str(path), "--values", "--json", "--no-progress"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert found["problems"][0]["path"] == list(NAN) and found["checked"]["no_crc"]


def test_du_sizes_are_the_reader_s_bytes(written, capsys) -> None:
    path, reference = written
    report = sizes(path)
    assert report.bytes == sum(a.nbytes for a in reference.values())
    by_dtype: dict[str, int] = {}
    for array in reference.values():
        by_dtype[str(array.dtype)] = by_dtype.get(str(array.dtype), 0) + array.nbytes
    assert report.by_dtype == dict(sorted(by_dtype.items(), key=lambda kv: (-kv[1], kv[0])))
    model = sum(a.nbytes for key, a in reference.items() if key[0] == "model")
    assert sizes(path, "model").bytes == model
    assert main(["du", str(path), "-b", "--depth", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {tuple(e["path"]): e["bytes"] for e in doc["entries"]} == {
        ("model",): model,
        ("step",): reference[("step",)].nbytes,
    }


def test_duplicates_find_the_tied_weight(written) -> None:
    path, reference = written
    expected = reference_groups(reference)
    assert list(TIED) in expected
    found = find_duplicates(path)
    assert sorted(sorted(g) for g in found.groups) == expected
    assert found.confirmed and not found.skipped
    assert found.wasted_bytes == reference[TIED[0]].nbytes
    assert sizes(path, duplicates=True).duplicates_bytes == reference[TIED[0]].nbytes


@pytest.mark.parametrize("damage", ["missing", "cut"])
def test_a_shard_set_with_a_damaged_shard_names_its_keys(tmp_path: Path, damage: str) -> None:
    """A shard missing, or cut short: each key the index maps to it is a problem named
    by its key (exit status 1), where safetensors itself cannot read the shard."""
    folder = write_shards(tmp_path)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    shard = folder / sorted(set(index["weight_map"].values()))[1]
    if damage == "missing":
        shard.unlink()
    else:
        shard.write_bytes(shard.read_bytes()[:-40])
    with pytest.raises(Exception):  # noqa: B017 - the reference cannot read it either
        with safe_open(shard, "pt") as f:
            [f.get_tensor(key) for key in f.keys()]
    report = check(folder)
    lost = sorted(
        tuple(k.split(".")) for k, name in index["weight_map"].items() if name == shard.name
    )
    assert sorted(p.path for p in report.problems) == lost
    assert all(shard.name in p.message for p in report.problems)
    assert report.exit_status == 1
    assert main(["check", str(folder), "--no-progress"]) == 1
