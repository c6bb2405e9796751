"""Sharded safetensors checkpoints (``model.safetensors.index.json`` and its shards, as
``huggingface_hub`` and ``transformers`` write them): one tree, loads equal to
``load_file`` of each shard, problems of a broken shard set on the nodes concerned, and
the Hugging Face cache layout (snapshot links into ``blobs/``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tdview.errors import ArchiveError
from tdview.index import Checkpoint, walk
from tdview.storage import open_store

from .test_safetensors import assert_same, dotted, model_state

SHARDS = 3


def write_shards(folder: Path, state: dict[str, torch.Tensor], shards: int = SHARDS) -> Path:
    """``state`` split over ``shards`` files, with the index naming each key's file."""
    folder.mkdir(parents=True, exist_ok=True)
    keys = list(state)
    weight_map = {}
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {k: state[k] for k in keys[i::shards]}
        save_file(part, folder / name, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, name))
    total = sum(t.numel() * t.element_size() for t in state.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


def reference(folder: Path) -> dict[str, torch.Tensor]:
    """Every shard read by safetensors itself."""
    found: dict[str, torch.Tensor] = {}
    for shard in sorted(folder.glob("*.safetensors")):
        found.update(load_file(shard))
    return found


@pytest.fixture
def sharded(tmp_path: Path) -> Path:
    return write_shards(tmp_path / "model", model_state())


@pytest.mark.parametrize("opened", ["folder", "index"])
def test_a_shard_set_is_one_tree(sharded: Path, opened: str) -> None:
    path = sharded if opened == "folder" else sharded / "model.safetensors.index.json"
    with Checkpoint(path) as ckpt:
        leaves = {".".join(n.path) for n in walk(ckpt, ckpt.root) if n.is_leaf}
        assert not [n.problems for n in walk(ckpt, ckpt.root) if n.problems]
        assert ckpt.store.metadata["total_size"] > 0
        td = ckpt.load()
        layer = ckpt.load(subpath="model/layers/10")
    assert leaves == set(model_state())
    assert_same(dotted(td), reference(sharded))
    want = {
        k[len("model.layers.10.") :]: v
        for k, v in reference(sharded).items()
        if k.startswith("model.layers.10.")
    }
    assert_same(dotted(layer), want)


def _problems(path: Path) -> dict[str, list[str]]:
    with Checkpoint(path) as ckpt:
        return {
            ".".join(n.path): [str(p) for p in n.problems]
            for n in walk(ckpt, ckpt.root)
            if n.problems
        }


def test_a_missing_shard_flags_the_keys_it_held(sharded: Path) -> None:
    lost = sharded / "model-00002-of-00003.safetensors"
    held = set(load_file(lost))
    lost.unlink()
    problems = _problems(sharded)
    assert set(problems) == held
    assert all("model-00002-of-00003.safetensors is missing" in p[0] for p in problems.values())
    kept = sorted(set(model_state()) - held)
    with Checkpoint(sharded) as ckpt:  # the other keys load; a lost one says why
        leaf = ckpt.load_leaf(kept[0].replace(".", "/"))
        assert torch.equal(leaf, model_state()[kept[0]])
        with pytest.raises(ArchiveError, match="model-00002-of-00003.safetensors is missing"):
            ckpt.load()


def test_a_key_the_index_names_that_no_shard_holds(sharded: Path) -> None:
    index_file = sharded / "model.safetensors.index.json"
    index = json.loads(index_file.read_text())
    index["weight_map"]["model.layers.3.attn.q.weight"] = "model-00001-of-00003.safetensors"
    index_file.write_text(json.dumps(index))
    problems = _problems(sharded)
    assert list(problems) == ["model.layers.3.attn.q.weight"]
    (problem,) = problems["model.layers.3.attn.q.weight"]
    assert (
        "names shard model-00001-of-00003.safetensors for 'model.layers.3.attn.q.weight', "
        "but no shard holds it"
    ) in problem


def test_a_shard_key_missing_from_the_index(sharded: Path) -> None:
    index_file = sharded / "model.safetensors.index.json"
    index = json.loads(index_file.read_text())
    del index["weight_map"]["lm_head.weight"]
    index_file.write_text(json.dumps(index))
    problems = _problems(sharded)
    assert list(problems) == ["lm_head.weight"]
    assert "holds 'lm_head.weight', but the index does not name it" in problems["lm_head.weight"][0]


def test_a_bad_index_is_refused_naming_it(sharded: Path) -> None:
    index_file = sharded / "model.safetensors.index.json"
    index_file.write_text(json.dumps({"weight_map": ["not", "a", "map"]}))
    with pytest.raises(ValueError, match="model.safetensors.index.json.*weight_map"):
        open_store(sharded)


# -- the Hugging Face cache ------------------------------------------------------------


def _hf_cache(tmp_path: Path, src: Path) -> Path:
    """``hub/models--org--name/snapshots/<rev>/`` of links into ``blobs/<sha256>``, as
    ``huggingface_hub.snapshot_download`` leaves it."""
    repo = tmp_path / "hub" / "models--org--name"
    blobs, snapshot = repo / "blobs", repo / "snapshots" / ("a" * 40)
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for file in sorted(src.iterdir()):
        blob = blobs / hashlib.sha256(file.read_bytes()).hexdigest()
        shutil.move(file, blob)
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    return snapshot


def test_a_hugging_face_snapshot_of_shards_opens(tmp_path: Path) -> None:
    src = write_shards(tmp_path / "src", model_state())
    want = reference(src)
    snapshot = _hf_cache(tmp_path, src)
    with Checkpoint(snapshot) as ckpt:
        assert_same(dotted(ckpt.load()), want)


def test_a_hugging_face_snapshot_of_one_file_opens(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    save_file(model_state(), src / "model.safetensors")
    (src / "config.json").write_text("{}")
    want = load_file(src / "model.safetensors")
    snapshot = _hf_cache(tmp_path, src)
    for path in (snapshot, snapshot / "model.safetensors"):
        with Checkpoint(path) as ckpt:
            assert ckpt.store.mappable
            assert_same(dotted(ckpt.load()), want)


def test_a_link_out_of_a_plain_folder_is_refused_on_its_keys(tmp_path: Path) -> None:
    """Outside a content store, a shard linked from elsewhere is refused as any link out
    of the root is: the keys it holds are flagged, naming the link."""
    folder = write_shards(tmp_path / "model", model_state())
    outside = tmp_path / "elsewhere.safetensors"
    shard = folder / "model-00003-of-00003.safetensors"
    held = set(load_file(shard))
    shutil.move(shard, outside)
    shard.symlink_to(outside)
    problems = _problems(folder)
    assert set(problems) == held
    assert all(
        "cannot be read" in p[0] and "elsewhere.safetensors" in p[0] for p in problems.values()
    )


@pytest.mark.parametrize("opened", ["folder", "index"])
def test_load_memmap_refuses_a_shard_set_as_tensordict_does(sharded: Path, opened: str) -> None:
    """A folder without meta.json: FileNotFoundError for its meta.json, as tensordict's
    loader raises; the index file: the ValueError of a file that is no archive. Both
    name the call that reads it."""
    from tensordict import TensorDict

    import tdview

    path = sharded if opened == "folder" else sharded / "model.safetensors.index.json"
    with pytest.raises((FileNotFoundError, ValueError)) as reference:
        TensorDict.load_memmap(path)
    with pytest.raises(type(reference.value)) as found:
        tdview.load_memmap(path)
    assert "safetensors shard set" in str(found.value)
    assert f"tdview.Checkpoint({str(path)!r}).load()" in str(found.value)


def test_a_local_shard_set_loads_mapped_one_mapping_per_shard(sharded: Path) -> None:
    """Each leaf is a view of its shard's one read-only mapping, as a single file's
    leaves are of its own."""
    with Checkpoint(sharded) as ckpt:
        assert ckpt.store.mappable
        td = ckpt.load()
    sizes = {p.stat().st_size for p in sharded.glob("*.safetensors")}
    storages: dict[int, int] = {}
    for tensor in td.values(include_nested=True, leaves_only=True):
        if tensor.numel():
            storage = tensor.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    assert len(storages) == SHARDS
    assert set(storages.values()) == sizes
