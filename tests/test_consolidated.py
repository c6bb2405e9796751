"""tensordict's consolidated files (``td.consolidate(filename=...)``), read by tdview.

Every file here is written by tensordict's own ``consolidate``; every load is compared
with ``TensorDict.from_consolidated`` of the same file (tests/compare.py: classes, batch
sizes, names, devices, dtypes, shapes, values bit for bit, non-tensor values, lazy-stack
parameters, and which leaves share a storage, at which offset). tdview's loads give the
keys of each level in ``load_memmap``'s order (leaves first, then the nested levels and
non-tensors), where ``from_consolidated`` puts the non-tensors first: the reference is
put in that order before it is compared, nothing else of it is touched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
    is_tensorclass,
    tensorclass,
)

import tdview
from tdview.errors import NotACheckpointError
from tdview.index import Checkpoint, walk
from tdview.protocol import Session, handle

from ._optional import require_module
from .compare import assert_same
from .remote_servers import RangeServer


@tensorclass
class Point:
    pos: torch.Tensor
    label: str


def _tree() -> TensorDict:
    """Every kind of level tensordict consolidates: nested, tensorclass, non-tensor, lazy
    stack, NonTensorStack; leaves of bf16, bool, int, 0-d, expanded, empty."""
    g = torch.Generator().manual_seed(3)
    td = TensorDict(
        obs=torch.randn(4, 3, generator=g),
        done=torch.rand(4, generator=g) > 0.5,
        half=torch.randn(4, 2, generator=g).to(torch.bfloat16),
        step=torch.arange(4),
        empty=torch.zeros(4, 0),
        nested=TensorDict(deep=TensorDict(w=torch.randn(4, 2, 2, generator=g), batch_size=[4])),
        batch_size=[4],
        names=["time"],
    )
    td["note"] = NonTensorData("a string", batch_size=[4])
    td["point"] = Point(pos=torch.randn(4, 3, generator=g), label="p", batch_size=[4])
    td["stack"] = LazyStackedTensorDict(
        *[
            TensorDict(u=torch.full((2,), float(i)), **({"v": torch.ones(1)} if i else {}))
            for i in range(4)
        ],
        stack_dim=0,
        stack_dim_name="time",
    )
    td["words"] = NonTensorStack("a", "b", "c", "d")
    td["key with/slash"] = torch.ones(4)
    return td


def _scalars() -> TensorDict:
    """A batch-less tree of 0-d leaves of many dtypes, and non-tensor values."""
    td = TensorDict(
        f=torch.tensor(1.5),
        b=torch.tensor(True),
        bf=torch.tensor(2.0, dtype=torch.bfloat16),
        i8=torch.tensor(-3, dtype=torch.int8),
        c=torch.tensor(1 + 2j, dtype=torch.complex64),
        meta={"lr": torch.tensor(0.1, dtype=torch.float64)},
    )
    td["n"] = 7
    td["d"] = {"k": [1, 2]}
    return td


def _in_load_order(td: object) -> None:
    """Put the reference's keys in the order of a memory-mapped load: tensor leaves
    first, then the rest, each level (the tensors and their storages are untouched); a
    non-tensor gets its parent's dim names."""
    if is_tensorclass(td):
        _in_load_order(td._tensordict)  # type: ignore[attr-defined]
        return
    if isinstance(td, LazyStackedTensorDict):
        for member in td.tensordicts:
            _in_load_order(member)
        return
    if isinstance(td, TensorDictBase) and hasattr(td, "_tensordict"):
        items = td._tensordict
        order = [k for k, v in items.items() if isinstance(v, torch.Tensor)]
        order += [k for k in items if k not in order]
        td._tensordict = {k: items[k] for k in order}
        for value in td._tensordict.values():
            if isinstance(value, NonTensorData) and any(td.names):
                # as load_memmap's, tdview's load gives a non-tensor its parent's dim names
                value._tensordict.names = td.names
            _in_load_order(value)


def _reference(path: Path, subpath: tuple[str, ...] = ()) -> object:
    ref = TensorDict.from_consolidated(path)
    for key in subpath:
        ref = ref.tensordicts[int(key)] if isinstance(ref, LazyStackedTensorDict) else ref.get(key)
    _in_load_order(ref)
    return ref


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("consolidated")
    paths = {"tree": root / "tree.td", "scalars": root / "scalars.bin"}
    _tree().consolidate(filename=paths["tree"])
    _scalars().consolidate(filename=paths["scalars"])
    return paths


@pytest.mark.parametrize("name", ["tree", "scalars"])
def test_load_equals_from_consolidated(files: dict[str, Path], name: str) -> None:
    with Checkpoint(files[name]) as ckpt:
        assert_same(ckpt.load(), _reference(files[name]))


@pytest.mark.parametrize(
    "subpath",
    [("nested",), ("nested", "deep"), ("point",), ("stack",), ("stack", "1"), ("words",)],
)
def test_a_subtree_load_equals_that_subtree_of_from_consolidated(
    files: dict[str, Path], subpath: tuple[str, ...]
) -> None:
    with Checkpoint(files["tree"]) as ckpt:
        got = ckpt.load(subpath=subpath)
    ref = _reference(files["tree"], subpath)
    if isinstance(ref, NonTensorStack):  # a stack loaded alone: its values
        assert type(got) is NonTensorStack and got.tolist() == ref.tolist()
        assert got.batch_size == ref.batch_size
        return
    assert_same(got, ref)


def test_a_tensorclass_loads_as_its_class(files: dict[str, Path]) -> None:
    with Checkpoint(files["tree"]) as ckpt:
        point = ckpt.load(subpath="point")
    assert type(point) is Point and point.label == "p" and point.batch_size == (4,)


def test_leaves_are_views_of_one_mapping_of_the_file(files: dict[str, Path]) -> None:
    """Zero-copy: every leaf views one mapping of the whole file, at its offset."""
    path = files["tree"]
    with Checkpoint(path) as ckpt:
        td = ckpt.load()
        storages = {
            (key, leaf.untyped_storage().data_ptr())
            for key, leaf in td.exclude("stack").items(True, True)  # a lazy stack's: a copy
            if isinstance(leaf, torch.Tensor) and leaf.numel()
        }
        assert len({ptr for _, ptr in storages}) == 1, storages
        assert td["obs"].untyped_storage().nbytes() == path.stat().st_size
        start = ckpt.store.stored_span("nested/deep/w.memmap")
        assert start is not None
        w = td["nested", "deep", "w"]
        assert w.storage_offset() * w.element_size() == start[0]


def test_the_tree_is_read_from_the_footer(files: dict[str, Path]) -> None:
    """The index sees the levels, leaves and classes the footer names."""
    with Checkpoint(files["tree"]) as ckpt:
        root = ckpt.root
        kinds = {child.key: (child.kind, child.class_name) for child in ckpt.children(root)}
        assert kinds["obs"][0] == "leaf" and kinds["nested"][1] == "TensorDict"
        assert kinds["point"][1] == "Point" and kinds["stack"][1] == "LazyStackedTensorDict"
        assert kinds["note"][1] == "NonTensorData" and kinds["words"][1] == "NonTensorStack"
        leaf = ckpt.node(("nested", "deep", "w"))
        assert leaf.record.dtype.name == "torch.float32" and list(leaf.record.shape) == [4, 2, 2]


def test_load_memmap_refuses_it_as_tensordict_does(files: dict[str, Path]) -> None:
    path = files["tree"]
    with pytest.raises(ValueError) as reference:
        TensorDict.load_memmap(path)
    with pytest.raises(NotACheckpointError) as ours:
        tdview.load_memmap(path)
    assert str(ours.value).startswith(str(reference.value).rstrip("."))
    assert f"tdview.Checkpoint({str(path)!r}).load()" in str(ours.value)


def test_tree_command_lists_it(files: dict[str, Path]) -> None:
    run = [sys.executable, "-m", "tdview", "tree", str(files["tree"]), "--depth", "-1"]
    out = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "nested  TensorDict" in out and "w  float32  [4, 2, 2]" in out
    assert "point  Point" in out and "bfloat16" in out


@pytest.mark.parametrize("key", ["obs", "half"])
def test_preview_reads_the_leaf_from_the_file(files: dict[str, Path], key: str) -> None:
    session = Session(Checkpoint(files["tree"]), str(files["tree"]), namespace={})
    params = {"path": [key], "rows": 4}
    message = {"kind": "tdview:request", "v": 1, "id": 1, "method": "preview", "params": params}
    reply, buffers = handle(session, message)
    assert reply is not None and reply["ok"], reply["error"]
    table = reply["result"]["slice"]
    got = torch.frombuffer(
        bytearray(buffers[table["buffer"]]), dtype=getattr(torch, table["dtype"])
    )
    want = TensorDict.from_consolidated(files["tree"])[key]
    assert torch.equal(got.reshape(table["shape"]), want.to(got.dtype)[:4])


def test_diff_of_the_file_and_its_memmap_folder_is_empty(
    files: dict[str, Path], tmp_path: Path
) -> None:
    TensorDict.from_consolidated(files["tree"]).memmap(tmp_path / "folder")
    run = [sys.executable, "-m", "tdview", "diff", str(files["tree"]), str(tmp_path / "folder")]
    same = subprocess.run(run + ["--level", "values"], capture_output=True, text=True)
    assert same.returncode == 0, same.stdout + same.stderr
    changed = TensorDict.from_consolidated(files["tree"]).clone()
    changed["obs"][0, 0] += 1
    changed.consolidate(filename=tmp_path / "changed.td")
    run[-1] = str(tmp_path / "changed.td")
    differs = subprocess.run(run + ["--level", "values"], capture_output=True, text=True)
    assert differs.returncode == 1 and "obs" in differs.stdout


def test_a_rewritten_footer_padded_with_spaces_reads(tmp_path: Path) -> None:
    """tensordict rewrites the footer in place, padding a shorter one with spaces."""
    path = tmp_path / "p.td"
    td = TensorDict(a=torch.arange(6.0), batch_size=[6]).consolidate(filename=path)
    td.names = ["t"]  # [null] -> ["t"]: one byte shorter
    td.consolidate(filename=path)  # the footer again, in place
    raw = path.read_bytes()
    assert raw[-9:-8] == b" "  # padded
    with Checkpoint(path) as ckpt:
        got = ckpt.load()
    assert got.names == ["t"]
    assert_same(got, _reference(path))


def test_renames_between_two_files_are_paired_by_their_bytes(tmp_path: Path) -> None:
    """No CRC-32 is recorded in a consolidated file: the diff computes each leaf's from
    its bytes (an equal size alone pairs nothing), and its default level reads none."""
    TensorDict(x=torch.ones(4), y=torch.zeros(4)).consolidate(filename=tmp_path / "a.td")
    TensorDict(x2=torch.zeros(4), y2=torch.ones(4)).consolidate(filename=tmp_path / "b.td")
    run = [sys.executable, "-m", "tdview", "diff", str(tmp_path / "a.td"), str(tmp_path / "b.td")]
    found = json.loads(
        subprocess.run(
            [*run, "--level", "fingerprint", "--json"], capture_output=True, text=True
        ).stdout
    )
    renamed = {
        tuple(r["renamed_from"]): tuple(r["path"])
        for r in found["rows"]
        if r["status"] == "renamed"
    }
    assert renamed == {("y",): ("x2",), ("x",): ("y2",)}
    auto = json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True).stdout)
    assert auto["level"] == "metadata"


# -- remote: an HTTP server of ranges (tests/remote_servers.py) ------------------------------


@pytest.fixture(scope="module")
def http(files: dict[str, Path]) -> Iterator[RangeServer]:
    require_module("aiohttp", "the HTTP store reads through it")
    server = RangeServer(str(files["tree"].parent))
    yield server
    server.stop()


def test_over_http_the_tree_is_two_reads_and_a_load_its_own_bytes(
    http: RangeServer, files: dict[str, Path]
) -> None:
    """Opening reads the object's end twice (as a zip, then as a consolidated file: the
    last 64 KiB, which hold the footer); browsing reads nothing more; a subtree's load
    reads that subtree's spans."""
    http.take()
    with Checkpoint(f"{http.url}/tree.td") as ckpt:
        assert len(list(walk(ckpt, ckpt.root))) > 20  # every node of the tree
        opened = http.take()
        assert len(opened) == 2 and all(r.range == "bytes=-65536" for r in opened), opened
        got = ckpt.load(subpath="nested")
        read = http.take()
        span = ckpt.store.layout.folder("nested/deep").files["w.memmap"]
    assert_same(got, _reference(files["tree"], ("nested",)), storage=False)
    assert [r.span() for r in read] == [(span[0], span[0] + span[1])]  # w's bytes alone


def test_over_http_a_load_equals_from_consolidated(
    http: RangeServer, files: dict[str, Path]
) -> None:
    with Checkpoint(f"{http.url}/tree.td") as ckpt:
        got = ckpt.load()
    assert_same(got, _reference(files["tree"]), storage=False)


def test_a_jagged_leaf_loads_as_a_nested_tensor_of_the_same_elements(tmp_path: Path) -> None:
    """tensordict records a jagged (NJT) tensor as its values and offsets; tdview shows it
    as a memmap save's nested leaf (its sizes made from the offsets) and loads a strided
    nested tensor whose elements are from_consolidated's."""
    jagged = torch.nested.nested_tensor(
        [torch.ones(2, 3), torch.full((4, 3), 2.0), torch.zeros(1, 3)], layout=torch.jagged
    )
    td = TensorDict(a=jagged, b=torch.arange(3.0), batch_size=[3])
    td.consolidate(filename=tmp_path / "njt.td")
    with Checkpoint(tmp_path / "njt.td") as ckpt:
        assert sorted(child.key for child in ckpt.children(ckpt.root)) == ["a", "b"]
        assert ckpt.node(("a",)).record.is_nested
        got = ckpt.load()
    ref = TensorDict.from_consolidated(tmp_path / "njt.td")
    assert got["a"].is_nested and ref["a"].is_nested
    pairs = list(zip(got["a"].unbind(), ref["a"].unbind(), strict=True))
    assert all(x.shape == y.shape and torch.equal(x, y) for x, y in pairs)
    assert torch.equal(got["b"], ref["b"])


def test_a_jagged_leaf_with_holes_is_said_and_the_rest_loads(tmp_path: Path) -> None:
    """A jagged tensor with lengths (holes between its elements) cannot be a memmap
    save's nested leaf: a note under its key says so, the rest of the file reads."""
    values, offsets = torch.arange(12.0).reshape(6, 2), torch.tensor([0, 3, 6])
    holes = torch.nested.nested_tensor_from_jagged(values, offsets, lengths=torch.tensor([2, 1]))
    td = TensorDict(a=holes, b=torch.arange(2.0), batch_size=[2])
    td.consolidate(filename=tmp_path / "holes.td")
    with Checkpoint(tmp_path / "holes.td") as ckpt:
        got = ckpt.load()
    assert "jagged" in got["a"] and "from_consolidated" in got["a"]
    assert torch.equal(got["b"], TensorDict.from_consolidated(tmp_path / "holes.td")["b"])
