"""What a preview shows (issue 15): the index grammar (cases shared with the JS tests in
tests/preview_index_cases.json), a slice of a mapped leaf that reads only that slice's
pages, statistics kept per leaf, a bar per value for booleans and integers, statistics
that mean nothing for a dtype left null, and the heatmap."""

from __future__ import annotations

import ctypes
import gc
import json
import mmap
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from tdview.errors import PreviewIndexError, RequestError
from tdview.index import Checkpoint
from tdview.protocol import Session, handle
from tdview.protocol._heatmap import heatmap
from tdview.protocol._selection import index_text, parse_index, select
from tdview.protocol._stats import statistics

from .test_protocol_golden import GOLDEN, check_buffers, golden, same_shape

CASES = json.loads((Path(__file__).parent / "preview_index_cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: repr(c["index"])[:40])
def test_index_case(case: dict) -> None:
    if case.get("error") == "RequestError":
        with pytest.raises(RequestError):
            parse_index(case["index"])
        return
    parts = parse_index(case["index"])
    assert [p if isinstance(p, int) else list(p) for p in parts] == case["parts"], case["why"]
    if case.get("error") == "PreviewIndexError":
        with pytest.raises(PreviewIndexError):
            select(parts, case["shape"])
        return
    key, dims = select(parts, case["shape"])
    assert [d.as_json() for d in dims] == case["dims"], case["why"]
    assert index_text(dims) == case["canonical"]
    assert parse_index(case["canonical"]) is not None  # written back, it parses
    picked = torch.arange(int(np.prod(case["shape"]))).reshape(case["shape"])[key]
    assert list(picked.shape) == [d.size for d in dims if d.kept]


def ask(session: Session, method: str, **params: object) -> tuple[dict, list[bytes]]:
    reply, buffers = handle(
        session, {"kind": "tdview:request", "v": 1, "id": 1, "method": method, "params": params}
    )
    assert reply is not None and reply["ok"], reply
    json.dumps(reply, allow_nan=False)
    return reply["result"], buffers


def decode(ref: dict, buffers: list[bytes]) -> np.ndarray:
    dtype = {"bool": np.uint8}.get(ref["dtype"], ref["dtype"])
    return np.frombuffer(buffers[ref["buffer"]], dtype=dtype).reshape(ref["shape"])


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Session:
    root = tmp_path_factory.mktemp("view") / "ckpt"
    rows = 100_000
    done = torch.zeros(rows, 1, dtype=torch.bool)
    picked = torch.randperm(rows, generator=torch.Generator().manual_seed(0))[:989]
    if not bool((picked == 50_001).any()):
        picked[0] = 50_001  # one True among the rows of the golden view
    done[picked] = True
    TensorDict(
        replay=TensorDict(
            observation=torch.arange(rows * 16, dtype=torch.float32).reshape(rows, 16),
            done=done,
            action=torch.arange(rows) % 5 * 1000,
            batch_size=[rows],
        ),
        cube=torch.arange(4 * 5 * 6).reshape(4, 5, 6),
    ).memmap(root)
    return Session(Checkpoint(root), str(root))


def test_row_50000_of_a_replay_buffer(replay: Session) -> None:
    result, buffers = ask(
        replay, "preview", path=["replay", "observation"], rows=20, index="[50000:50020, :8]"
    )
    assert result["slice"]["shape"] == [20, 8]
    table = decode(result["slice"], buffers)
    assert table[0, 0] == 50000 * 16 and table[19, 7] == 50019 * 16 + 7
    assert result["selection"] == {
        "index": "[50000:50020, 0:8]",
        "shape": [20, 8],
        "dims": [
            {"start": 50000, "stop": 50020, "step": 1, "kept": True},
            {"start": 0, "stop": 8, "step": 1, "kept": True},
        ],
    }
    assert result["stats"]["count"] == 100_000 * 16  # over the whole leaf
    paged, buffers = ask(replay, "preview", path=["replay", "observation"], rows=5, offset=99_998)
    assert paged["slice"]["shape"] == [2, 16]
    assert decode(paged["slice"], buffers)[1, 0] == 99_999 * 16
    strided, buffers = ask(
        replay, "preview", path=["replay", "observation"], rows=3, index="[::25000, -1]"
    )
    assert decode(strided["slice"], buffers).tolist() == [15, 25000 * 16 + 15, 50000 * 16 + 15]
    assert strided["selection"]["dims"][1] == {"start": 15, "stop": 16, "step": 1, "kept": False}


def test_a_cube_is_cut_before_it_is_flattened(replay: Session) -> None:
    result, buffers = ask(replay, "preview", path=["cube"], rows=2, index="[1:, :, 2:]")
    cube = torch.arange(4 * 5 * 6).reshape(4, 5, 6)
    expected = cube[1:, :, 2:].reshape(3, 20)[:2]
    assert result["slice"]["shape"] == [2, 20]
    assert decode(result["slice"], buffers).tolist() == expected.tolist()


def test_index_errors_are_replies(replay: Session) -> None:
    for params, kind in (
        ({"index": "[0, 0, 0]"}, "PreviewIndexError"),
        ({"index": "[100000]"}, "PreviewIndexError"),
        ({"index": "[::-1]"}, "RequestError"),
        ({"index": "__import__('os')"}, "RequestError"),
        ({"index": "[0]", "offset": 3}, "RequestError"),
        ({"heatmap": {"rows": 2000, "cols": 4}}, "RequestError"),
        ({"stats": "no"}, "RequestError"),
    ):
        reply, buffers = handle(
            replay,
            {
                "kind": "tdview:request",
                "v": 1,
                "id": 2,
                "method": "preview",
                "params": {"path": ["replay", "observation"], "rows": 4, **params},
            },
        )
        assert reply is not None and not reply["ok"] and buffers == []
        assert reply["error"]["type"] == kind, (params, reply["error"])


def test_989_true_among_100000_is_a_bar_of_its_own(replay: Session) -> None:
    result, buffers = ask(replay, "preview", path=["replay", "done"], rows=4)
    stats = result["stats"]
    assert stats["count"] == 100_000 and (stats["min"], stats["max"]) == (0.0, 1.0)
    assert [stats[k] for k in ("mean", "std", "nan", "inf")] == [None] * 4
    hist = result["histogram"]
    assert decode(hist["values"], buffers).tolist() == [0.0, 1.0]
    assert decode(hist["counts"], buffers).tolist() == [99_011, 989]
    check_buffers(result, buffers)


def test_integers_with_few_values_have_a_bar_each(replay: Session) -> None:
    result, buffers = ask(replay, "preview", path=["replay", "action"], rows=4)
    assert result["stats"]["nan"] is None and result["stats"]["inf"] is None
    assert result["stats"]["mean"] == 2000.0
    hist = result["histogram"]
    assert decode(hist["values"], buffers).tolist() == [0.0, 1000.0, 2000.0, 3000.0, 4000.0]
    assert decode(hist["counts"], buffers).tolist() == [20_000] * 5
    assert decode(hist["edges"], buffers).tolist() == [-0.5, 500, 1500, 2500, 3500, 4000.5]


@pytest.mark.parametrize(
    "values, per_value",
    [
        (torch.arange(64), True),
        (torch.arange(65), False),
        (torch.tensor([0, 10**12, -(10**12)] * 7), True),
        (torch.arange(0, 65 * 10**9, 10**9), False),
    ],
)
def test_per_value_or_bins(
    values: torch.Tensor, per_value: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tdview.protocol import _stats

    monkeypatch.setattr(_stats, "CHUNK", 5)  # values met chunk after chunk
    _, hist = statistics(values)
    assert hist is not None and (hist["values"] is not None) == per_value
    assert int(hist["counts"].sum()) == values.numel()
    if per_value:
        assert hist["values"].tolist() == sorted(set(values.tolist()))
        assert len(hist["edges"]) == len(hist["values"]) + 1
    else:
        assert len(hist["counts"]) == 64


def test_the_golden_view_reply(replay: Session) -> None:
    """reply_preview_view.json is this kernel's answer (regenerate it with
    TDVIEW_WRITE_GOLDEN=1): a boolean leaf's rows 50,000 to 50,003, a bar per value, and a
    heatmap of the selection."""
    request = {
        "kind": "tdview:request",
        "v": 1,
        "id": 8589934593,
        "method": "preview",
        "params": {
            "path": ["replay", "done"],
            "rows": 4,
            "index": "[50000:50004]",
            "heatmap": {"rows": 2, "cols": 1},
        },
    }
    reply, buffers = handle(replay, request)
    assert reply is not None and reply["ok"], reply
    target = GOLDEN / "reply_preview_view.json"
    if os.environ.get("TDVIEW_WRITE_GOLDEN"):
        import base64
        import re

        doc = {
            "description": "Preview of rows 50,000 to 50,003 of a boolean leaf of 100,000 "
            "rows (989 True), with a heatmap of those rows in 2 x 1 cells (block means: "
            "the fraction of True). `selection` says what the table shows; statistics "
            "that mean nothing for a boolean (mean, std, nan, inf) are null; a bar per "
            "value (`histogram.values`). Buffers: [slice bool 4x1, edges float64 3, "
            "counts int64 2, values float64 2, heatmap cells float32 2x1].",
            "method": "preview",
            "message": reply,
            "buffers": [base64.b64encode(b).decode() for b in buffers],
        }
        text = json.dumps(doc, indent=2)
        text = re.sub(
            r"\[\s+([^\[\]{}]*?)\s+\]",
            lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]",
            text,
        )
        target.write_text(text + "\n")
    gold = golden("reply_preview_view")
    assert reply == gold["message"] and buffers == gold["buffers"]
    same_shape(reply, golden("reply_preview")["message"])
    check_buffers(reply["result"], buffers)


def test_heatmap_block_means() -> None:
    data = torch.randn(1000, 37, dtype=torch.float64)
    data[3, 3] = float("nan")
    out = heatmap(data, 7, 5)
    assert out is not None and out["of"] == [1000, 37] and out["cells"].shape == (7, 5)
    for i in range(7):
        for j in range(5):
            rows = [r for r in range(1000) if r * 7 // 1000 == i]
            cols = [c for c in range(37) if c * 5 // 37 == j]
            block = data[rows][:, cols]
            mean = block[block.isfinite()].mean()
            assert out["cells"][i, j] == pytest.approx(float(mean), abs=1e-6)
    assert out["min"] == pytest.approx(float(out["cells"].min()))
    small = heatmap(torch.arange(6.0).reshape(2, 3), 256, 256)
    assert small is not None and small["cells"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert heatmap(torch.tensor(1.0), 4, 4) is None
    assert heatmap(torch.zeros(0, 3), 4, 4) is None
    nan = heatmap(torch.full((2, 2), float("nan")), 1, 1)
    assert nan is not None and nan["min"] is None and bool(nan["cells"].isnan().all())


def test_heatmap_in_a_reply(replay: Session) -> None:
    result, buffers = ask(
        replay,
        "preview",
        path=["replay", "observation"],
        rows=1,
        heatmap={"rows": 256, "cols": 256},
        stats=False,
    )
    cells = decode(result["heatmap"]["cells"], buffers)
    assert cells.dtype == np.float32 and cells.shape == (256, 16)
    assert result["heatmap"]["of"] == [100_000, 16]
    expected = torch.arange(100_000 * 16, dtype=torch.float64).reshape(100_000, 16)
    rows = [r for r in range(100_000) if r * 256 // 100_000 == 0]
    assert cells[0, 3] == pytest.approx(float(expected[rows, 3].mean()))
    check_buffers(result, buffers)


# ------------------------------------------------------------------ only the slice is read

_libc = ctypes.CDLL(None, use_errno=True)


def _resident(path: Path) -> int:
    """Bytes of ``path`` in the page cache (mincore over a fresh mapping of it)."""
    size = path.stat().st_size
    with open(path, "rb") as handle_:
        mapping = mmap.mmap(handle_.fileno(), size, prot=mmap.PROT_READ)
    try:
        view = np.frombuffer(mapping, dtype=np.uint8)
        pages = -(-size // mmap.PAGESIZE)
        vec = (ctypes.c_ubyte * pages)()
        if _libc.mincore(ctypes.c_void_p(view.ctypes.data), ctypes.c_size_t(size), vec):
            pytest.skip(f"mincore failed: errno {ctypes.get_errno()}")
        del view
        return sum(v & 1 for v in vec) * mmap.PAGESIZE
    finally:
        mapping.close()


def _evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="needs posix_fadvise and mincore")
def test_a_slice_of_a_mapped_leaf_reads_only_its_pages(tmp_path: Path) -> None:
    """Row 500,000 of a 128 MiB leaf: the pages read are those around the slice (the
    kernel reads a little ahead), not the leaf; with statistics, the whole leaf."""
    rows, width = 1_000_000, 32
    TensorDict(x=torch.zeros(rows, width)).memmap(tmp_path / "ckpt")
    gc.collect()
    leaf = tmp_path / "ckpt" / "x.memmap"
    size = leaf.stat().st_size
    _evict(leaf)
    if _resident(leaf) > size // 8:
        pytest.skip("this file system keeps the pages: nothing to measure")
    session = Session(Checkpoint(tmp_path / "ckpt"), "ckpt")
    result, _ = ask(
        session, "preview", path=["x"], rows=20, index="[500000:500020, :8]", stats=False
    )
    assert result["slice"]["shape"] == [20, 8] and result["stats"] is None
    touched = _resident(leaf)
    assert touched < size // 4, f"{touched:,} of {size:,} bytes read for a 20-row slice"
    ask(session, "preview", path=["x"], rows=20, index="[500000:500020, :8]")  # stats: all
    assert _resident(leaf) > size * 9 // 10
    _evict(leaf)
    again, _ = ask(session, "preview", path=["x"], rows=20, index="[900000:900020]")
    assert again["stats"]["count"] == rows * width  # kept: the leaf is not read again
    assert _resident(leaf) < size // 4
