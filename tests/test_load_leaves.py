"""Leaves: how each one is mapped, copied or decompressed, and what is refused."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest
import torch
from tensordict import MemoryMappedTensor, TensorDict, pack_memmap
from torch._subclasses import FakeTensorMode
from torch._subclasses.fake_tensor import FakeTensor

import tdview
from tdview import Checkpoint
from tdview.errors import CheckpointFormatError, LeafDataError
from tdview.loader import _leaves, _mapping
from tdview.storage import ArchiveStore

from ._optional import needs_cuda
from .compare import assert_same

COMPRESSIONS = ["deflate", "bzip2", "lzma"]


def quiet_reference(path: Path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TensorDict.load_memmap(path, allow_pickle=True, **kwargs)


def sample() -> TensorDict:
    return TensorDict(
        a=torch.arange(6.0).reshape(2, 3),
        b=torch.arange(2, dtype=torch.int64),
        c=torch.tensor([True, False]),
        sub=TensorDict(d=torch.arange(8, dtype=torch.int16).reshape(2, 4), batch_size=[2]),
        batch_size=[2],
    )


@pytest.fixture
def ckpt_dir(tmp_path: Path) -> Path:
    sample().memmap(tmp_path / "ckpt")
    return tmp_path / "ckpt"


@pytest.fixture
def ckpt_tdz(tmp_path: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sample().save(str(tmp_path / "ckpt.tdz"))
    return tmp_path / "ckpt.tdz"


def edit_meta(folder: Path, key: str, **changes) -> None:
    meta = json.loads((folder / "meta.json").read_text())
    meta[key].update(changes)
    (folder / "meta.json").write_text(json.dumps(meta))


# -- directories ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", [None, "r", "r+"])
def test_directory_leaf_is_a_memory_mapped_tensor(ckpt_dir: Path, mode) -> None:
    loaded = tdview.load_memmap(ckpt_dir, mode=mode)
    leaf = loaded["a"]
    assert type(leaf) is MemoryMappedTensor
    assert leaf.filename == str(ckpt_dir / "a.memmap")
    assert leaf._handler is None and leaf._index is None and leaf._index_chain == ()
    assert leaf._mode == mode and leaf._parent_shape == torch.Size([2, 3])
    assert leaf.untyped_storage().nbytes() == 24
    # pickling sends the file, not the data, and comes back the same
    again = pickle.loads(pickle.dumps(leaf))  # noqa: S301 - our own bytes
    assert type(again) is MemoryMappedTensor and again.filename == leaf.filename
    assert again._mode == mode and torch.equal(again, leaf)


def test_directory_leaves_stay_memory_mapped_on_cpu(ckpt_dir: Path) -> None:
    loaded = tdview.load_memmap(ckpt_dir, device="cpu")
    assert loaded.device == torch.device("cpu") and loaded["sub"].device == torch.device("cpu")
    assert all(type(v) is MemoryMappedTensor for v in loaded.values(True, True))


def test_longer_file_loads_its_first_bytes(ckpt_dir: Path) -> None:
    with open(ckpt_dir / "b.memmap", "ab") as f:
        f.write(b"\xff" * 16)
    assert_same(tdview.load_memmap(ckpt_dir), quiet_reference(ckpt_dir))


@pytest.mark.parametrize("mode", [None, "r", "r+"])
def test_truncated_file_is_an_error_and_is_never_grown(ckpt_dir: Path, mode) -> None:
    """tensordict grows a short writable file with zeros (default mode); tdview refuses."""
    leaf = ckpt_dir / "a.memmap"
    os.truncate(leaf, 10)
    before = leaf.stat()
    with pytest.raises(LeafDataError, match=r"a\.memmap has 10 bytes.*needs 24 bytes"):
        tdview.load_memmap(ckpt_dir, mode=mode)
    after = leaf.stat()
    assert after.st_size == 10 and after.st_mtime_ns == before.st_mtime_ns
    if mode is None:  # the reference's hazard, for the record
        quiet_reference(ckpt_dir)
        assert leaf.stat().st_size == 24


def test_missing_leaf_file_is_left_out_with_a_warning(ckpt_dir: Path) -> None:
    (ckpt_dir / "sub" / "d.memmap").unlink()
    with pytest.warns(UserWarning, match=r"sub/d\.memmap is missing") as record:
        loaded = tdview.load_memmap(ckpt_dir)
    assert record[0].filename == __file__  # the warning points at the caller
    assert list(loaded["sub"].keys()) == [] == list(quiet_reference(ckpt_dir)["sub"].keys())


def test_missing_leaf_file_on_its_own_is_an_error(ckpt_dir: Path) -> None:
    (ckpt_dir / "a.memmap").unlink()
    with pytest.raises(LeafDataError, match=r"a\.memmap is missing"):
        Checkpoint(ckpt_dir).load_leaf("a")


# -- archives -------------------------------------------------------------------------


def test_archive_leaves_are_views_of_one_mapping(ckpt_tdz: Path, monkeypatch) -> None:
    calls = []
    real = _mapping.map_descriptor  # the archive's file, mapped from a checked descriptor
    monkeypatch.setattr(
        _mapping, "map_descriptor", lambda *a, **k: calls.append(a) or real(*a, **k)
    )
    ckpt = Checkpoint(ckpt_tdz)
    first, second = ckpt.load(), ckpt.load(mode="r")
    assert len(calls) == 1  # one mapping per checkpoint and kind of mapping
    size = ckpt_tdz.stat().st_size
    store = ckpt.store
    assert isinstance(store, ArchiveStore)
    storages = set()
    for key, leaf in first.items(True, True):
        key = "/".join(key) if isinstance(key, tuple) else key
        assert type(leaf) is torch.Tensor
        assert leaf.untyped_storage().nbytes() == size
        assert leaf.storage_offset() * leaf.element_size() == store.payload_offset(f"{key}.memmap")
        storages.add(leaf.untyped_storage().data_ptr())
    assert len(storages) == 1
    assert second["a"].untyped_storage().data_ptr() in storages
    ckpt.load(mode="r+")
    assert len(calls) == 2  # the shared mapping is another one


@pytest.mark.parametrize("shape, size", [([2], 12), ([4], 12)])
def test_archive_entry_must_have_exactly_the_leaf_size(tmp_path: Path, shape, size) -> None:
    TensorDict(x=torch.ones(3)).memmap(tmp_path / "d")
    edit_meta(tmp_path / "d", "x", shape=shape)
    pack_memmap(tmp_path / "d", tmp_path / "x.tdz")
    need = shape[0] * 4
    with pytest.raises(
        LeafDataError,
        match=rf"x\.tdz::x\.memmap holds {size} bytes.*"
        rf"exactly {need} bytes",
    ):
        tdview.load_memmap(tmp_path / "x.tdz")


def test_zip_tool_archive_unaligned_entries_are_copied(tmp_path: Path) -> None:
    td = TensorDict(
        f64=torch.arange(5, dtype=torch.float64),
        i16=torch.arange(3, dtype=torch.int16),
        ключ=torch.ones(2),
        sub=TensorDict(z=torch.zeros(3)),
    )
    td.memmap(tmp_path / "d")
    subprocess.run(
        ["zip", "-q", "-0", "-r", str(tmp_path / "z.zip"), "."], cwd=tmp_path / "d", check=True
    )
    loaded = tdview.load_memmap(tmp_path / "z.zip")
    store = Checkpoint(tmp_path / "z.zip").store
    assert isinstance(store, ArchiveStore)
    unaligned = 0
    for key in ("f64", "i16", ("sub", "z")):
        name = "/".join(key) if isinstance(key, tuple) else key
        leaf = loaded[key]
        if store.payload_offset(f"{name}.memmap") % leaf.element_size():
            unaligned += 1
            assert leaf.untyped_storage().nbytes() == leaf.nbytes  # copied
        else:
            assert leaf.untyped_storage().nbytes() == (tmp_path / "z.zip").stat().st_size
        assert torch.equal(leaf, td[key])
    assert unaligned  # zip does not align payloads
    # Info-ZIP writes the UTF-8 name without the UTF-8 flag: tensordict drops this key
    assert torch.equal(loaded["ключ"], torch.ones(2))
    assert "ключ" not in quiet_reference(tmp_path / "z.zip").keys()


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_compressed_leaves_are_decompressed_copies(
    ckpt_dir: Path, tmp_path: Path, compression: str
) -> None:
    path = tmp_path / f"c.{compression}.zip"
    pack_memmap(ckpt_dir, path, compression=compression)
    loaded = tdview.load_memmap(path)
    assert_same(loaded, quiet_reference(path))
    leaf = loaded["sub", "d"]
    assert leaf.untyped_storage().nbytes() < path.stat().st_size  # its own memory
    leaf += 1  # owned, writable memory


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_corrupt_compressed_leaf_is_an_error(
    ckpt_dir: Path, tmp_path: Path, compression: str
) -> None:
    path = tmp_path / "c.zip"
    pack_memmap(ckpt_dir, path, compression=compression)
    offset = Checkpoint(path).store.payload_offset("a.memmap")  # type: ignore[attr-defined]
    data = bytearray(path.read_bytes())
    data[offset + 8] ^= 0xFF
    data[offset + 9] ^= 0x55
    path.write_bytes(bytes(data))
    with pytest.raises(LeafDataError, match=r"a\.memmap"):
        tdview.load_memmap(path)


# -- nested, empty, float8, dtypes ------------------------------------------------------


def nested_td() -> TensorDict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nt = torch.nested.nested_tensor(
            [torch.arange(6.0).reshape(2, 3), torch.arange(4.0).reshape(1, 4)]
        )
    return TensorDict(nt=nt)


def test_nested_leaf_from_a_directory_is_mapped(tmp_path: Path) -> None:
    nested_td().memmap(tmp_path / "d")
    leaf = tdview.load_memmap(tmp_path / "d")["nt"]
    assert type(leaf) is MemoryMappedTensor and leaf.is_nested
    assert leaf.filename == str(tmp_path / "d" / "nt.memmap")
    assert leaf._parent_shape.tolist() == [[2, 3], [1, 4]]
    assert [t.tolist() for t in leaf.unbind(0)] == [[[0, 1, 2], [3, 4, 5]], [[0, 1, 2, 3]]]


@pytest.mark.parametrize("compression", [None, "deflate"])
def test_nested_leaf_from_an_archive_is_copied(tmp_path: Path, compression) -> None:
    nested_td().memmap(tmp_path / "d")
    pack_memmap(tmp_path / "d", tmp_path / "n.zip", compression=compression)
    leaf = tdview.load_memmap(tmp_path / "n.zip")["nt"]
    assert type(leaf) is torch.Tensor and leaf.is_nested
    assert leaf.untyped_storage().nbytes() < (tmp_path / "n.zip").stat().st_size
    assert_same(tdview.load_memmap(tmp_path / "n.zip"), quiet_reference(tmp_path / "n.zip"))


@pytest.mark.parametrize("mode", [None, "r"])
def test_nested_leaf_without_sizes_file_is_an_error(tmp_path: Path, mode) -> None:
    """tensordict creates a zero-filled sizes file (default mode); tdview creates nothing."""
    nested_td().memmap(tmp_path / "d")
    (tmp_path / "d" / "nt.shape.memmap").unlink()
    with pytest.raises(LeafDataError, match=r"nt\.shape\.memmap"):
        tdview.load_memmap(tmp_path / "d", mode=mode)
    assert not (tmp_path / "d" / "nt.shape.memmap").exists()


def test_nested_leaf_with_every_element_empty_comes_back(tmp_path: Path) -> None:
    """No data file is written; tensordict drops the key, tdview rebuilds it from the sizes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nt = torch.nested.nested_tensor([torch.zeros(0, 3), torch.zeros(0, 2)])
    TensorDict(nt=nt, x=torch.ones(1)).memmap(tmp_path / "d")
    pack_memmap(tmp_path / "d", tmp_path / "e.zip", compression="deflate")
    assert "nt" not in quiet_reference(tmp_path / "d").keys()
    for path in (tmp_path / "d", tmp_path / "e.zip"):
        leaf = tdview.load_memmap(path)["nt"]
        assert leaf.is_nested and [t.shape for t in leaf.unbind(0)] == [(0, 3), (0, 2)]
        assert tdview.load_memmap(path, device="meta")["nt"].shape == (2, 2)


def test_zero_element_leaves_keep_their_shapes(tmp_path: Path) -> None:
    td = TensorDict(rows=torch.zeros(0, 5), cols=torch.zeros(3, 0, dtype=torch.int64))
    td.memmap(tmp_path / "d")
    pack_memmap(tmp_path / "d", tmp_path / "z.zip", compression="lzma")
    for path in (tmp_path / "d", tmp_path / "z.zip"):
        for device in (None, "meta"):
            loaded = tdview.load_memmap(path, device=device)
            assert loaded["rows"].shape == (0, 5) and loaded["cols"].shape == (3, 0)
            assert loaded["cols"].dtype == torch.int64
            assert type(loaded["rows"]) is torch.Tensor


FLOAT8 = [
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "bits8",
    "bits16",
]


@pytest.mark.parametrize("container", ["dir", "tdz", "deflate"])
def test_float8_and_bits_leaves_load(tmp_path: Path, container: str) -> None:
    """tensordict writes these dtypes but its loader raises KeyError on them."""
    raw = (torch.arange(12) * 37 % 251).to(torch.uint8)
    td = TensorDict(
        {
            name: raw[: 6 * getattr(torch, name).itemsize].view(getattr(torch, name))
            for name in FLOAT8
        }
    )
    td.memmap(tmp_path / "d")
    path = tmp_path / "d"
    if container == "tdz":
        path = tmp_path / "f.tdz"
        pack_memmap(tmp_path / "d", path)
    elif container == "deflate":
        path = tmp_path / "f.zip"
        pack_memmap(tmp_path / "d", path, compression="deflate")
    loaded = tdview.load_memmap(path)
    for name in FLOAT8:
        assert loaded[name].dtype == td[name].dtype
        assert torch.equal(loaded[name].view(torch.uint8), td[name].view(torch.uint8))
    with pytest.raises(KeyError):
        quiet_reference(path)


def test_unknown_and_unloadable_dtypes(tmp_path: Path) -> None:
    TensorDict(x=torch.ones(2)).memmap(tmp_path / "d")
    edit_meta(tmp_path / "d", "x", dtype="torch.float128")
    with pytest.raises(CheckpointFormatError, match="float128"):
        tdview.load_memmap(tmp_path / "d")
    edit_meta(tmp_path / "d", "x", dtype="torch.qint8", shape=[8])
    with pytest.raises(LeafDataError, match="qint8"):
        tdview.load_memmap(tmp_path / "d")


# -- reading nothing: meta, FakeTensorMode ----------------------------------------------


def _forbid_payload_reads(monkeypatch) -> None:
    """Mapping a file (torch.from_file, or from a descriptor), and reading any ``.memmap``
    entry of an archive, fail the test."""

    def boom(*args, **kwargs):
        raise AssertionError("a payload was read")

    def only_metadata(real):
        def read(self, key, *args, **kwargs):
            if key.endswith(".memmap"):
                boom()
            return real(self, key, *args, **kwargs)

        return read

    monkeypatch.setattr(torch, "from_file", boom)
    for module in (_leaves, _mapping):
        monkeypatch.setattr(module, "map_descriptor", boom)
    for name in ("decompress", "payload", "raw_payload"):
        monkeypatch.setattr(ArchiveStore, name, only_metadata(getattr(ArchiveStore, name)))


@pytest.mark.parametrize("compression", [None, "dir", "deflate"])
def test_meta_device_reads_no_payload(
    ckpt_dir: Path, tmp_path: Path, monkeypatch, compression
) -> None:
    path = ckpt_dir
    if compression != "dir":
        path = tmp_path / "m.zip"
        pack_memmap(ckpt_dir, path, compression=compression)
    ref = quiet_reference(path, device="meta")
    if compression == "dir":
        for leaf in ckpt_dir.rglob("*.memmap"):
            os.truncate(leaf, 0)  # no byte left to read: shapes come from meta.json alone
    _forbid_payload_reads(monkeypatch)
    loaded = tdview.load_memmap(path, device="meta", num_threads=4)
    assert_same(loaded, ref)
    assert all(v.device.type == "meta" for v in loaded.values(True, True))


@pytest.mark.parametrize("container", ["dir", "deflate"])
def test_fake_tensor_mode_reads_no_payload(
    ckpt_dir: Path, tmp_path: Path, monkeypatch, container
) -> None:
    path = ckpt_dir
    if container != "dir":
        path = tmp_path / "f.zip"
        pack_memmap(ckpt_dir, path, compression=container)
    _forbid_payload_reads(monkeypatch)
    with FakeTensorMode():
        loaded = tdview.load_memmap(path, num_threads=2)
    leaves = list(loaded.values(True, True))
    assert leaves and all(isinstance(v, FakeTensor) for v in leaves)
    assert loaded["a"].shape == (2, 3) and loaded["sub", "d"].dtype == torch.int16


def test_only_metadata_is_read_through_the_store(ckpt_tdz: Path, monkeypatch) -> None:
    read = []
    real = ArchiveStore.read_bytes
    monkeypatch.setattr(
        ArchiveStore,
        "read_bytes",
        lambda self, key, limit: read.append(key) or real(self, key, limit),
    )
    decompressed = []
    real_decompress = ArchiveStore.decompress
    monkeypatch.setattr(
        ArchiveStore,
        "decompress",
        lambda self, key, *a, **k: decompressed.append(key) or real_decompress(self, key, *a, **k),
    )
    tdview.load_memmap(ckpt_tdz)
    assert sorted(read) == ["meta.json", "sub/meta.json"]
    # stored meta.json files are copied straight out of the mapping (read_bytes checks
    # their CRC itself): no entry at all goes through decompress, leaves least of all
    assert set(decompressed) <= {"meta.json", "sub/meta.json"}


@needs_cuda
def test_cuda_device(ckpt_tdz: Path) -> None:
    loaded = tdview.load_memmap(ckpt_tdz, device="cuda")
    assert loaded.device.type == "cuda" and loaded["sub"].device.type == "cuda"
    assert all(v.device.type == "cuda" for v in loaded.values(True, True))
    assert_same(loaded, quiet_reference(ckpt_tdz, device="cuda"), storage=False)


def test_copy_of_a_checkpoint_still_loads(ckpt_dir: Path, tmp_path: Path) -> None:
    shutil.copytree(ckpt_dir, tmp_path / "copy")
    assert_same(tdview.load_memmap(tmp_path / "copy"), quiet_reference(tmp_path / "copy"))


def test_hostile_nested_sizes_are_refused(tmp_path: Path) -> None:
    nested_td().memmap(tmp_path / "d")
    sizes = tmp_path / "d" / "nt.shape.memmap"
    sizes.write_bytes(torch.tensor([[2, 3], [-1, 4]]).numpy().tobytes())
    with pytest.raises(LeafDataError, match="must not be negative"):
        tdview.load_memmap(tmp_path / "d")
    sizes.write_bytes(torch.tensor([[2, 3], [100, 4]]).numpy().tobytes())  # beyond the data
    with pytest.raises(LeafDataError, match=r"nt\.memmap has 40 bytes"):
        tdview.load_memmap(tmp_path / "d")
    sizes.write_bytes(torch.tensor([[2**40, 2**40], [1, 1]]).numpy().tobytes())
    with pytest.raises(LeafDataError, match="2\\*\\*62"):
        tdview.load_memmap(tmp_path / "d")


def test_archive_changed_after_opening(ckpt_tdz: Path) -> None:
    ckpt = Checkpoint(ckpt_tdz)
    with open(ckpt_tdz, "ab") as f:
        f.write(b"\0" * 100)
    with pytest.raises(tdview.errors.ArchiveError, match="changed since it was opened"):
        ckpt.load()
