"""Indexed loads: ``load(..., index=...)`` is ``load(...)[index]``, and reads only the rows
the index selects (``tdview/loader/_index.py``).

Checkpoints are written by tensordict (and torchrl) here; every result is compared with
tensordict's own ``load_memmap`` indexed by tensordict, and the bytes a remote load
reads are counted on the server's side (:mod:`tests.remote_servers`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import (
    LazyStackedTensorDict,
    MemoryMappedTensor,
    NonTensorData,
    TensorDict,
    TensorDictBase,
    pack_memmap,
    tensorclass,
)

import tdview
from tdview.index import Checkpoint
from tdview.loader._index import leaf_spans
from tdview.storage import ArchiveStore

from ._optional import require_module
from .remote_servers import RangeServer, Request, start_s3

ROWS = 64


@tensorclass
class Episode:
    obs: torch.Tensor
    action: torch.Tensor
    label: str


def _tree() -> TensorDict:
    g = torch.Generator().manual_seed(3)
    td = TensorDict(
        obs=torch.randn(ROWS, 3, 8, generator=g),
        reward=torch.randn(ROWS, 1, generator=g),
        done=torch.rand(ROWS, generator=g) > 0.5,
        half=torch.randn(ROWS, 5, generator=g).to(torch.bfloat16),
        nested=TensorDict(
            ids=torch.arange(ROWS * 4).view(ROWS, 4), x=torch.randn(ROWS, 4, 2, generator=g),
            batch_size=[ROWS, 4],
        ),
        batch_size=[ROWS],
    )  # fmt: skip
    td["tag"] = "run-1"
    td["episode"] = Episode(
        obs=torch.randn(ROWS, 6, generator=g),
        action=torch.arange(ROWS),
        label="ep",
        batch_size=[ROWS],
    )
    td["stack"] = LazyStackedTensorDict(
        *(TensorDict(v=torch.full((4,), float(i))) for i in range(ROWS)), stack_dim=0
    )
    return td


INDICES = [
    pytest.param(5, id="int"),
    pytest.param(-1, id="negative-int"),
    pytest.param(slice(3, 40, 5), id="slice-step"),
    pytest.param(slice(10, 20), id="slice"),
    pytest.param(slice(60, 200), id="slice-past-end"),
    pytest.param(slice(7, 7), id="empty-slice"),
    pytest.param(torch.tensor([9, 0, 9, 63]), id="int-tensor"),
    pytest.param(torch.arange(ROWS) % 3 == 0, id="bool-tensor"),
    pytest.param((slice(2, 6), ...), id="tuple-ellipsis"),
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("indexed")
    td = _tree()
    td.memmap(root / "tree")
    td.save(root / "tree.tdz")
    pack_memmap(root / "tree", root / "tree-deflate.tdz", compression="deflate")
    return {
        "folder": root / "tree",
        "archive": root / "tree.tdz",
        "deflate": root / "tree-deflate.tdz",
    }


def _reference(path: Path | str, subpath: Any = None) -> Any:
    """tensordict's own load of ``path`` (an archive: its folder's twin)."""
    path = Path(path)
    folder = path.with_suffix("") if path.suffix == ".tdz" else path
    folder = folder.with_name("tree") if folder.name.startswith("tree") else folder
    loaded = TensorDict.load_memmap(folder)
    return loaded if subpath is None else loaded.get(subpath)


def same(got: Any, ref: Any, where: str = "<root>") -> None:
    """Same classes, keys, batch sizes, dtypes, shapes, values and non-tensor data."""
    if isinstance(ref, TensorDictBase) or hasattr(ref, "_tensordict"):
        assert type(got) is type(ref) or (
            isinstance(got, TensorDictBase) and isinstance(ref, TensorDictBase)
        ), (where, type(got), type(ref))
        assert got.batch_size == ref.batch_size, where
        if isinstance(ref, NonTensorData):
            assert got.tolist() == ref.tolist(), where
            return
        if isinstance(ref, LazyStackedTensorDict):
            assert isinstance(got, LazyStackedTensorDict), where
            assert got.stack_dim == ref.stack_dim, where
        assert sorted(got.keys()) == sorted(ref.keys()), where
        for key in ref.keys():
            same(got.get(key), ref.get(key), f"{where}/{key}")
        return
    if isinstance(ref, torch.Tensor):
        assert got.dtype == ref.dtype and got.shape == ref.shape, where
        assert torch.equal(got, ref), where
        return
    assert got == ref, where


@pytest.mark.parametrize("index", INDICES)
@pytest.mark.parametrize("kind", ["folder", "archive", "deflate"])
def test_an_indexed_load_is_the_load_indexed(saved: dict[str, Path], kind: str, index: Any) -> None:
    path = saved[kind]
    got = tdview.load_memmap(path, index=index)
    same(got, _reference(path)[index])
    same(got, tdview.load_memmap(path)[index])
    assert type(got) is TensorDict
    assert type(got["episode"]).__name__ == "Episode"
    if kind == "folder" and not isinstance(index, torch.Tensor):
        # a view of the mapping, as tensordict's load indexed gives
        assert type(got["obs"]) is MemoryMappedTensor
        assert got["obs"].untyped_storage().nbytes() == (path / "obs.memmap").stat().st_size


def test_checkpoint_load_takes_index_and_subpath(saved: dict[str, Path]) -> None:
    with Checkpoint(saved["archive"]) as ckpt:
        got = ckpt.load("nested", index=(slice(1, 9, 2), 3))
        same(got, _reference(saved["archive"], "nested")[1:9:2, 3])
        assert got.batch_size == torch.Size([4])
        episode = ckpt.load("episode", index=torch.tensor([3, 1]))
        same(episode, _reference(saved["archive"], "episode")[torch.tensor([3, 1])])
        assert episode.label == "ep"


def test_an_indexed_load_on_meta_reads_shapes(saved: dict[str, Path]) -> None:
    got = tdview.load_memmap(saved["folder"], device="meta", index=slice(0, 10, 3))
    assert got.batch_size == torch.Size([4]) and got["obs"].device.type == "meta"
    assert got["nested", "x"].shape == (4, 4, 2)


@pytest.mark.parametrize(
    "index",
    [
        pytest.param(ROWS, id="int-past-end"),
        pytest.param(-ROWS - 1, id="negative"),
        pytest.param(torch.tensor([0, ROWS + 3]), id="tensor"),
        pytest.param(torch.ones(ROWS + 1, dtype=torch.bool), id="mask-too-long"),
        pytest.param((0, 0), id="too-many-dims"),
        pytest.param(slice(None, None, -1), id="negative-step"),
    ],
)
def test_an_index_the_batch_cannot_take_raises_what_tensordict_raises(
    saved: dict[str, Path], index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = _reference(saved["folder"])
    with pytest.raises((IndexError, ValueError)) as expected:
        ref[index]
    from tdview.loader import _build

    def no_build(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the load was built: bytes could be read")

    monkeypatch.setattr(_build, "build", no_build)
    monkeypatch.setattr("tdview.loader._api.build", no_build)
    for path in (saved["folder"], saved["archive"]):
        with pytest.raises(type(expected.value), match=re.escape(str(expected.value))):
            tdview.load_memmap(path, index=index)


@pytest.mark.parametrize("index", ["obs", 1.5, torch.tensor([0.5])])
def test_an_index_that_is_no_batch_index_is_a_type_error(
    saved: dict[str, Path], index: Any
) -> None:
    with pytest.raises(TypeError, match="index selects rows of the batch dims"):
        tdview.load_memmap(saved["folder"], index=index)


def test_index_and_out_cannot_be_combined(saved: dict[str, Path]) -> None:
    with pytest.raises(TypeError, match="index= and out= cannot be combined"):
        tdview.load_memmap(saved["folder"], index=0, out=TensorDict())


@pytest.mark.parametrize(
    ("shape", "index", "ndim", "rows"),
    [
        ((10, 4), slice(2, 5), 1, [2, 3, 4]),
        ((10, 4), torch.tensor([7, 1, 7]), 1, [1, 7]),
        ((10, 3, 2), (slice(None, 4, 2), 1), 2, [(0, 1), (2, 1)]),
        ((10, 3), (..., 2), 2, [(r, 2) for r in range(10)]),
        ((6, 2), torch.tensor([True, False, True, False, False, True]), 1, [0, 2, 5]),
    ],
)
def test_leaf_spans_cover_exactly_the_rows_selected(
    shape: tuple[int, ...], index: Any, ndim: int, rows: list[Any]
) -> None:
    """Without the gap merge, the spans are the selected rows' bytes and nothing else
    (rows of the leading dims the index consumes)."""
    from tdview.loader import _index

    itemsize = 4
    leaf = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.int32).view(shape)
    old = _index.GAP
    _index.GAP = 1
    try:
        spans = leaf_spans(shape, itemsize, index, ndim)
    finally:
        _index.GAP = old
    assert spans is not None
    flat = leaf.view(-1).numpy().view("uint8")
    read = sorted({int(i) for a, b in spans for i in flat[a:b].view("int32")})
    selected = leaf[index]
    assert read == sorted({int(i) for i in selected.reshape(-1)})
    k = len(rows[0]) if isinstance(rows[0], tuple) else 1
    assert len(read) == len(rows) * int(torch.tensor(shape[k:]).prod())


# -- remote: the rows, and nothing else --------------------------------------------------------


@pytest.fixture(scope="module")
def http(saved: dict[str, Path]):
    require_module("aiohttp", "tdview's HTTP reads go through it")
    server = RangeServer(str(saved["folder"].parent))
    yield server
    server.stop()


def _payload_spans(path: Path) -> dict[str, tuple[int, int]]:
    with ArchiveStore(path) as store:
        found = {}
        for key in store.keys():
            if key.endswith(".memmap"):
                start = store.payload_offset(key)
                found[key] = (start, start + store.entry(key).stored_size)
        return found


def _served(log: list[Request]) -> int:
    return sum(r.sent for r in log if r.method == "GET")


def _selected_bytes(td: TensorDict, index: Any, keys: list[tuple[str, ...]]) -> int:
    return sum(td.get(key)[index].numel() * td.get(key).element_size() for key in keys)


PLAIN = [("obs",), ("reward",), ("done",), ("half",), ("nested", "ids"), ("nested", "x")]


@pytest.mark.parametrize(
    "index",
    [slice(16, 32), torch.tensor([2, 40, 41]), slice(0, ROWS, 8)],
    ids=["slice", "tensor", "step"],
)
def test_http_archive_reads_only_the_selected_rows(
    http: RangeServer, saved: dict[str, Path], index: Any
) -> None:
    url = f"{http.url}/tree.tdz"
    with Checkpoint(url) as ckpt:
        ckpt.load(device="meta")  # every meta.json and local header: the metadata
        http.take()
        got = ckpt.load("nested", index=index)
        log = http.take()
    ref = _reference(saved["archive"], "nested")
    same(got, ref[index])
    spans = _payload_spans(saved["archive"])
    leaves = {k: s for k, s in spans.items() if k.startswith("nested/")}
    others = [s for k, s in spans.items() if k not in leaves]
    for r in log:
        span = r.span()
        assert span is not None and not any(
            max(0, min(span[1], o[1]) - max(span[0], o[0])) for o in others
        ), r
    wanted = _selected_bytes(ref, index, [("ids",), ("x",)])
    assert _served(log) <= wanted + 4096 * len(leaves) * 2, (_served(log), wanted)
    assert _served(log) < sum(b - a for a, b in leaves.values())


def test_http_archive_subtree_rows_with_lazy_stacks_and_tensorclasses(
    http: RangeServer, saved: dict[str, Path]
) -> None:
    """The whole tree at rows [8, 12): the result is tensordict's load indexed; of each
    leaf below TensorDicts and tensorclasses only the rows [8, 12) are read (the lazy
    stack's members are read whole)."""
    index = slice(8, 12)
    with Checkpoint(f"{http.url}/tree.tdz") as ckpt:
        ckpt.load(device="meta")
        http.take()
        got = ckpt.load(index=index)
        read = [r.span() for r in http.take()]
    ref = _reference(saved["archive"])
    same(got, ref[index])
    spans = _payload_spans(saved["archive"])
    for key in [*PLAIN, ("episode", "obs"), ("episode", "action")]:
        name = "/".join(key[:-1] + (key[-1] + ".memmap",))
        if key[0] == "episode":
            name = "episode/_tensordict/" + key[-1] + ".memmap"
        start, end = spans[name]
        row = (end - start) // ROWS
        rows = (start + 8 * row, start + 12 * row)
        outside = [(start, rows[0]), (rows[1], end)]
        for span in read:
            assert span is not None
            for a, b in outside:
                assert max(0, min(span[1], b) - max(span[0], a)) == 0, (key, span)
        assert any(s[0] <= rows[0] and rows[1] <= s[1] for s in read if s), key


@pytest.mark.parametrize(
    ("subpath", "index"),
    [
        ("stack", slice(1, 3)),
        ("stack", torch.tensor([5, 0])),
        ("episode", slice(4, 9, 2)),
        ("nested", (slice(2, 5), 1)),
    ],
)
def test_http_subtrees_of_every_kind_load_the_rows_tensordict_gives(
    http: RangeServer, saved: dict[str, Path], subpath: str, index: Any
) -> None:
    """A subtree rooted at a lazy stack (its members lack the stack dim: read whole), a
    tensorclass or a nested TensorDict: the values are tensordict's, never a row of the
    buffer that was not read."""
    for name in ("tree.tdz", "tree-deflate.tdz"):
        got = tdview.load_memmap(f"{http.url}/{name}", subpath=subpath, index=index)
        same(got, _reference(saved["archive"], subpath)[index], f"{name}:{subpath}")


def test_http_compressed_entries_load_the_rows_tensordict_gives(
    http: RangeServer, saved: dict[str, Path]
) -> None:
    got = tdview.load_memmap(f"{http.url}/tree-deflate.tdz", index=torch.tensor([5, 1]))
    same(got, _reference(saved["deflate"])[torch.tensor([5, 1])])


def test_s3_folder_reads_only_the_selected_rows(saved: dict[str, Path]) -> None:
    require_module("moto", "the S3 server")
    s3fs = require_module("s3fs", "the S3 client")
    server, options = start_s3("rows")
    try:
        fs = s3fs.S3FileSystem(**options)
        fs.put(str(saved["folder"]), "rows/tree", recursive=True)
        remote = tdview.remote("s3://rows/tree", **options)
        with Checkpoint(remote) as ckpt:
            ckpt.load(device="meta")
            server.take()
            got = ckpt.load(index=slice(32, 48))
            log = server.take()
        ref = _reference(saved["folder"])
        same(got, ref[32:48])
        assert type(got["obs"]) is MemoryMappedTensor
        plain = _selected_bytes(ref, slice(32, 48), PLAIN)
        stack = ROWS * 4 * 4
        served = _served(log)
        assert served <= plain + stack + 4096 * 8 + 2 * ROWS * 6 * 4 + ROWS * 8
    finally:
        server.stop()


# -- replay buffers ------------------------------------------------------------------------------


def test_a_replay_buffer_storage_loads_its_rows(tmp_path: Path) -> None:
    data = require_module("torchrl.data", "the buffer is written by torchrl itself")
    buffer = data.TensorDictReplayBuffer(storage=data.LazyMemmapStorage(50))
    buffer.extend(
        TensorDict(obs=torch.arange(30.0).view(10, 3), step=torch.arange(10), batch_size=[10])
    )
    buffer.dumps(tmp_path / "rb")
    ref = TensorDict.load_memmap(tmp_path / "rb" / "storage")
    with Checkpoint(tmp_path / "rb") as folder:
        got = folder.load("storage", index=slice(4, 12))
    same(got, ref[4:12])
    assert got["step"].tolist() == [4, 5, 6, 7, 8, 9, 0, 0]
