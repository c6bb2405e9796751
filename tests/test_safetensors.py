"""safetensors files (``safetensors.torch.save_file``) opened as checkpoints: the tree
grouped by ``.``, loads equal to ``safetensors.torch.load_file``, memory-mapped, and
nothing read but the header while browsing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from tensordict import TensorDict

import tdview
from tdview.format import encode_key
from tdview.index import Checkpoint, walk
from tdview.storage import open_store
from tdview.storage._safetensors_files import LocalShard
from tdview.storage._safetensors_tree import file_name

from .test_index_safety import visit_everything


def model_state() -> dict[str, torch.Tensor]:
    """A small state dict named as a transformer's, with every dtype torch and
    safetensors share, an empty tensor, a 0-d one, and a key that is also a prefix."""
    g = torch.Generator().manual_seed(3)
    state: dict[str, torch.Tensor] = {}
    for i in range(12):  # layers.10 sorts after layers.2
        state[f"model.layers.{i}.mlp.up.weight"] = torch.randn(8, 4, generator=g)
        state[f"model.layers.{i}.mlp.up.bias"] = torch.randn(8, generator=g).half()
    state["model.embed.weight"] = torch.randn(16, 4, generator=g).to(torch.bfloat16)
    state["lm_head.weight"] = torch.randn(16, 4, generator=g).double()
    state["ids"] = torch.arange(7, dtype=torch.int64)
    state["mask"] = torch.rand(5, generator=g) > 0.5
    state["small.i8"] = torch.arange(-3, 3, dtype=torch.int8)
    state["small.u8"] = torch.arange(6, dtype=torch.uint8)
    state["small.i16"] = torch.arange(6, dtype=torch.int16)
    state["small.i32"] = torch.arange(6, dtype=torch.int32)
    state["small.f8"] = torch.randn(6, generator=g).to(torch.float8_e4m3fn)
    state["step"] = torch.tensor(7)
    state["empty"] = torch.zeros(0, 3)
    state["a.b"] = torch.ones(2)
    state["a.b.c"] = torch.full((3,), 2.0)
    state["x.shape"] = torch.ones(1)  # "shape" names a node's batch size in meta.json
    return state


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("safetensors") / "model.safetensors"
    save_file(model_state(), path, metadata={"format": "pt", "note": "tdview test"})
    return path


def dotted(td: TensorDict) -> dict[str, torch.Tensor]:
    """A loaded tree's leaves by their real keys (levels joined with ``.``)."""
    return {
        ".".join(key if isinstance(key, tuple) else (key,)): value
        for key, value in td.items(include_nested=True, leaves_only=True)
    }


def assert_same(found: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert sorted(found) == sorted(want)
    for key, tensor in want.items():
        got = found[key]
        assert got.dtype == tensor.dtype and got.shape == tensor.shape, key
        assert torch.equal(
            got.reshape(-1).view(torch.uint8), tensor.reshape(-1).view(torch.uint8)
        ), key


# -- the tree ----------------------------------------------------------------------------


def test_the_tree_groups_keys_by_their_dots(model_file: Path) -> None:
    with Checkpoint(model_file) as ckpt:
        names = {child.path[-1] for child in ckpt.children()}
        assert {"model", "lm_head", "small", "a", "ids", "mask", "step", "empty"} <= names
        layers = [child.path[-1] for child in ckpt.children(ckpt.node(("model", "layers")))]
        assert layers == [str(i) for i in range(12)]  # in their numbers' order
        up = ckpt.node(("model", "layers", "10", "mlp", "up", "weight"))
        assert up.is_leaf and up.record is not None and up.record.shape == (8, 4)
        # a.b is a leaf and a prefix: a.b.c keeps its flat name under a
        assert [c.path[-1] for c in ckpt.children(ckpt.node(("a",)))] == ["b", "b.c"]
        assert ckpt.node(("x.shape",)).is_leaf
        leaves = {".".join(n.path) for n in walk(ckpt, ckpt.root) if n.is_leaf}
    with safe_open(model_file, "pt") as f:
        assert leaves == set(f.keys())


def test_the_tree_reads_the_header_alone(model_file: Path, monkeypatch) -> None:
    """Browsing everything (every node, its facts, sizes, pickles) reads no payload byte:
    the file's reads are refused."""

    def refuse(self, start, dest):
        raise AssertionError(f"a payload read at byte {start}")

    monkeypatch.setattr(LocalShard, "read", refuse)
    with Checkpoint(model_file) as ckpt:
        visit_everything(ckpt)
        assert sum(1 for n in walk(ckpt, ckpt.root) if n.is_leaf) == len(model_state())


def test_metadata_is_the_files(model_file: Path) -> None:
    with open_store(model_file) as store, safe_open(model_file, "pt") as f:
        assert store.metadata == f.metadata() == {"format": "pt", "note": "tdview test"}


# -- loads --------------------------------------------------------------------------------


def test_a_load_equals_load_file(model_file: Path) -> None:
    with Checkpoint(model_file) as ckpt:
        td = ckpt.load()
    assert isinstance(td, TensorDict) and td.batch_size == torch.Size([])
    assert_same(dotted(td), load_file(model_file))


@pytest.mark.parametrize("subpath", ["model/layers/10", "model", "a", "small"])
def test_a_subtree_load_equals_load_file(model_file: Path, subpath: str) -> None:
    prefix = subpath.replace("/", ".") + "."
    want = {k[len(prefix) :]: v for k, v in load_file(model_file).items() if k.startswith(prefix)}
    with Checkpoint(model_file) as ckpt:
        td = ckpt.load(subpath=subpath)
    assert_same(dotted(td), want)


def test_a_leaf_load_equals_load_file(model_file: Path) -> None:
    with Checkpoint(model_file) as ckpt:
        leaf = ckpt.load_leaf("model/embed/weight")
    assert torch.equal(leaf, load_file(model_file)["model.embed.weight"])


def test_leaves_are_views_of_one_mapping(model_file: Path) -> None:
    with Checkpoint(model_file) as ckpt:
        td = ckpt.load(subpath="model")
    storages = {
        t.untyped_storage().data_ptr() for t in td.values(include_nested=True, leaves_only=True)
    }
    assert len(storages) == 1
    first = next(iter(td.values(include_nested=True, leaves_only=True)))
    assert first.untyped_storage().nbytes() == model_file.stat().st_size


# -- the names the store gives ------------------------------------------------------------


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text())
def test_file_names_are_the_format_codecs(key: str) -> None:
    assert file_name(key) == encode_key(key)


def test_odd_keys_round_trip(tmp_path: Path) -> None:
    """Keys with characters a file name cannot hold, empty parts and dots alone load back
    under their real keys."""
    state = {
        "a/b.c d": torch.ones(1),
        "..": torch.zeros(2),
        "x..y": torch.full((2,), 3.0),
        "%": torch.arange(3),
        "": torch.tensor(5),
    }
    save_file(state, tmp_path / "odd.safetensors")
    with Checkpoint(tmp_path / "odd.safetensors") as ckpt:
        td = ckpt.load()
    assert_same(dotted(td), load_file(tmp_path / "odd.safetensors"))


def test_the_meta_json_a_folder_shows(model_file: Path) -> None:
    with open_store(model_file) as store:
        meta = json.loads(store.read_bytes("model/embed/meta.json", 1 << 20))
        assert meta["weight"] == {
            "device": "cpu",
            "shape": [16, 4],
            "dtype": "torch.bfloat16",
            "is_nested": False,
        }
        assert meta["shape"] == [] and meta["_class"] == "tensordict:TensorDict"
        assert store.display("model/embed/weight.memmap").endswith("::model.embed.weight")


def test_load_memmap_refuses_it_naming_the_checkpoint_load(model_file: Path) -> None:
    """tensordict's loader refuses a file that is no archive with a ValueError: so does
    load_memmap, naming the call that reads it."""
    with pytest.raises(ValueError) as reference:
        TensorDict.load_memmap(model_file)
    with pytest.raises(type(reference.value)) as found:
        tdview.load_memmap(model_file)
    assert f"tdview.Checkpoint({str(model_file)!r}).load()" in str(found.value)


def test_an_unaligned_tensor_loads_as_load_file_reads_it(tmp_path: Path) -> None:
    """Another writer may leave a float32 at an odd offset (safetensors' own sorts by
    alignment): it cannot be a view of the mapping, and is copied."""
    import struct

    header = json.dumps(
        {
            "flags": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]},
            "w": {"dtype": "F32", "shape": [2], "data_offsets": [3, 11]},
        }
    ).encode()
    body = bytes([1, 0, 1]) + torch.tensor([1.5, -2.0]).numpy().tobytes()
    path = tmp_path / "odd.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + body)
    with Checkpoint(path) as ckpt:
        td = ckpt.load()
    assert_same(dotted(td), load_file(path))


def test_only_mode_r_plus_writes_to_the_file(tmp_path: Path) -> None:
    """``mode="r"`` keeps writes in memory (a private mapping); ``mode="r+"`` writes them
    into the file, where safetensors reads them back."""
    path = tmp_path / "model.safetensors"
    save_file({"w": torch.zeros(4), "step": torch.tensor(1)}, path)
    with Checkpoint(path) as ckpt:
        ckpt.load(mode="r")["w"][0] = 5.0
    assert load_file(path)["w"][0] == 0.0
    with Checkpoint(path) as ckpt:
        loaded = ckpt.load(mode="r+")
        loaded["w"][1] = 7.0
        del loaded
    assert load_file(path)["w"].tolist() == [0.0, 7.0, 0.0, 0.0]
