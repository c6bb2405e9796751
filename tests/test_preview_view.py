"""What a preview shows (issues 15 and 32): the index grammar (cases shared with the JS
tests in tests/preview_index_cases.json, ``...`` and negative integers included), errors
that name the part and the leaf's shape, statistics, histogram and heatmap of the
selection (not of the whole leaf), the plane of an n-d selection that the table and the
heatmap show (a conv weight's kernel, never flattened columns), a table paged within its
selection, a slice of a mapped leaf that reads only that slice's pages, statistics kept
per selection, a bar per value for booleans and integers, the dtypes numpy lacks
(bfloat16, float8, complex32) decoded as torch decodes them, and a preview answered in a
fresh process that never imports torch or tensordict."""

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
    written = [p if isinstance(p, int) else "..." if p is ... else list(p) for p in parts]
    assert written == case["parts"], case["why"]
    if case.get("error") == "PreviewIndexError":
        with pytest.raises(PreviewIndexError):
            select(parts, case["shape"])
        return
    key, dims = select(parts, case["shape"])
    assert [d.as_json() for d in dims] == case["dims"], case["why"]
    assert index_text(dims) == case["canonical"]
    assert parse_index(case["canonical"]) is not None  # written back, it parses
    picked = np.arange(int(np.prod(case["shape"]))).reshape(case["shape"])
    as_numpy = tuple(... if p is ... else p if isinstance(p, int) else slice(*p) for p in parts)
    assert picked[key].shape == picked[as_numpy].shape  # numpy reads the index so too
    assert list(picked[key].shape) == [d.size for d in dims if d.kept]


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
    assert result["stats"]["count"] == 20 * 8  # of the selection
    assert result["stats"]["min"] == 50000 * 16 and result["stats"]["max"] == 50019 * 16 + 7
    paged, buffers = ask(replay, "preview", path=["replay", "observation"], rows=5, offset=99_998)
    assert paged["slice"]["shape"] == [2, 16] and paged["plane"]["offset"] == 99_998
    assert decode(paged["slice"], buffers)[1, 0] == 99_999 * 16
    assert paged["stats"]["count"] == 100_000 * 16  # no index: the whole leaf
    strided, buffers = ask(
        replay, "preview", path=["replay", "observation"], rows=3, index="[::25000, -1]"
    )
    assert decode(strided["slice"], buffers).tolist() == [15, 25000 * 16 + 15, 50000 * 16 + 15]
    assert strided["selection"]["dims"][1] == {"start": 15, "stop": 16, "step": 1, "kept": False}


def test_a_cube_shows_a_plane_of_its_selection(replay: Session) -> None:
    """An n-d selection: the table is the plane of its last two dims at the first
    position of the others, never its dims flattened into columns; the statistics are
    of the whole selection."""
    result, buffers = ask(replay, "preview", path=["cube"], rows=2, index="[1:, :, 2:]")
    cube = np.arange(4 * 5 * 6).reshape(4, 5, 6)
    assert result["plane"] == {
        "rows": 1,
        "cols": 2,
        "at": [0, None, None],
        "offset": 0,
        "col_offset": 0,
    }
    assert result["slice"]["shape"] == [2, 4]
    assert decode(result["slice"], buffers).tolist() == cube[1, :2, 2:].tolist()
    assert result["stats"]["count"] == 3 * 5 * 4
    assert result["stats"]["min"] == cube[1:, :, 2:].min()
    slid, buffers = ask(
        replay,
        "preview",
        path=["cube"],
        rows=5,
        index="[1:, :, 2:]",
        plane={"rows": 2, "cols": 0, "at": [2, 3, 0]},
        offset=1,
    )
    # rows: dim 2 of the leaf from the selection's position 1 (leaf index 3); columns:
    # dim 0 (leaf indices 1, 2, 3); dim 1 at position 3
    assert slid["plane"] == {
        "rows": 2,
        "cols": 0,
        "at": [None, 3, None],
        "offset": 1,
        "col_offset": 0,
    }
    assert decode(slid["slice"], buffers).tolist() == cube[1:, 3, 3:].T.tolist()
    assert slid["stats"] == result["stats"]  # the same selection


def test_statistics_describe_the_selection(tmp_path: Path) -> None:
    """``[5]`` of a [256, 64] weight: the statistics, histogram and heatmap of row 5's 64
    values, not of the 16,384 of the weight (issue 32)."""
    weight = torch.randn(256, 64, generator=torch.Generator().manual_seed(3))
    weight[5] = torch.linspace(-2, 3, 64)
    TensorDict(weight=weight).memmap(tmp_path / "ckpt")
    session = Session(Checkpoint(tmp_path / "ckpt"), "ckpt")
    row, buffers = ask(
        session, "preview", path=["weight"], rows=20, index="[5]", heatmap={"rows": 8, "cols": 8}
    )
    assert row["selection"]["shape"] == [64] and row["slice"]["shape"] == [20]
    assert row["stats"]["count"] == 64
    assert (row["stats"]["min"], row["stats"]["max"]) == (-2.0, 3.0)
    assert row["stats"]["mean"] == pytest.approx(0.5, abs=1e-6)
    assert int(decode(row["histogram"]["counts"], buffers).sum()) == 64
    cells = decode(row["heatmap"]["cells"], buffers)
    assert row["heatmap"]["of"] == [1, 64] and cells.shape == (1, 8)
    assert cells[0, 0] == pytest.approx(float(weight[5, :8].mean()), abs=1e-6)
    whole, _ = ask(session, "preview", path=["weight"], rows=20)
    assert whole["stats"]["count"] == 256 * 64
    assert whole["stats"]["min"] == pytest.approx(float(weight.min()))
    # the columns past the first 50: a page of the table, the statistics unchanged
    right, buffers = ask(session, "preview", path=["weight"], rows=3, col_offset=50)
    assert right["plane"]["col_offset"] == 50 and right["slice"]["shape"] == [3, 14]
    assert decode(right["slice"], buffers).tolist() == weight[:3, 50:].tolist()
    assert right["stats"] == whole["stats"]
    last, buffers = ask(session, "preview", path=["weight"], rows=20, index="[..., -1]")
    assert last["selection"]["index"] == "[0:256, 63]" and last["stats"]["count"] == 256
    assert decode(last["slice"], buffers).tolist() == weight[:20, -1].tolist()


def test_a_conv_weight_shows_its_kernels(tmp_path: Path) -> None:
    """[64, 3, 7, 7]: the 7 x 7 kernel at [0, 0] (columns are dim 3's positions), the
    statistics of all 9,408 values; another filter and channel by ``plane.at``."""
    conv = torch.randn(64, 3, 7, 7, generator=torch.Generator().manual_seed(1))
    TensorDict(conv=conv).memmap(tmp_path / "ckpt")
    session = Session(Checkpoint(tmp_path / "ckpt"), "ckpt")
    shown, buffers = ask(
        session, "preview", path=["conv"], rows=20, heatmap={"rows": 64, "cols": 64}
    )
    assert shown["plane"] == {
        "rows": 2,
        "cols": 3,
        "at": [0, 0, None, None],
        "offset": 0,
        "col_offset": 0,
    }
    assert decode(shown["slice"], buffers).tolist() == conv[0, 0].tolist()
    assert shown["heatmap"]["of"] == [7, 7] and shown["stats"]["count"] == 9408
    other, buffers = ask(
        session, "preview", path=["conv"], rows=20, plane={"rows": 2, "cols": 3, "at": [9, 2, 0, 0]}
    )
    assert decode(other["slice"], buffers).tolist() == conv[9, 2].tolist()


@pytest.mark.parametrize(
    "params, words",
    [
        ({"index": "[0, 0, 7]"}, ["part 2", "7", "dim 2 of size 7", "[64, 3, 7, 7]"]),
        ({"index": "[0, 0, 0, 0, 0]"}, ["5 parts", "4 dims", "[64, 3, 7, 7]"]),
        ({"index": "[..., -8]"}, ["part 1", "-8", "dim 3", "[64, 3, 7, 7]"]),
        ({"plane": {"rows": 1, "cols": 1, "at": [0, 0, 0, 0]}}, ["dim 1", "both"]),
        ({"plane": {"rows": 2, "cols": 3, "at": [64, 0, 0, 0]}}, ["position 64", "dim 0"]),
        ({"index": "[0]", "plane": {"rows": 0, "cols": 3, "at": [0, 0, 0, 0]}}, ["dim 0"]),
    ],
)
def test_what_a_leaf_cannot_take_is_named(tmp_path: Path, params: dict, words: list) -> None:
    TensorDict(conv=torch.zeros(64, 3, 7, 7)).memmap(tmp_path / "ckpt")
    session = Session(Checkpoint(tmp_path / "ckpt"), "ckpt")
    reply, _ = handle(
        session,
        {
            "kind": "tdview:request",
            "v": 1,
            "id": 3,
            "method": "preview",
            "params": {"path": ["conv"], "rows": 4, **params},
        },
    )
    assert reply is not None and not reply["ok"]
    assert reply["error"]["type"] == "PreviewIndexError"
    for word in words:
        assert word in reply["error"]["message"], (word, reply["error"]["message"])


def test_index_errors_are_replies(replay: Session) -> None:
    for params, kind in (
        ({"index": "[0, 0, 0]"}, "PreviewIndexError"),
        ({"index": "[100000]"}, "PreviewIndexError"),
        ({"index": "[::-1]"}, "RequestError"),
        ({"index": "__import__('os')"}, "RequestError"),
        ({"plane": {"rows": 0, "cols": 1}}, "RequestError"),
        ({"plane": {"rows": -1, "cols": 1, "at": []}}, "RequestError"),
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
    _, hist = statistics(values.numpy())
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
            "the fraction of True). `selection` says what the preview describes: its "
            "statistics (those that mean nothing for a boolean, mean, std, nan and inf, "
            "are null), a bar per value (`histogram.values`) and the heatmap are of those "
            "4 rows; `plane` says which dims the table shows as rows and columns, from "
            "which row (`offset`). Buffers: [slice bool 4x1, edges float64 3, "
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
    data = np.random.default_rng(0).standard_normal((1000, 37))
    data[3, 3] = float("nan")
    out = heatmap(data, 7, 5)
    assert out is not None and out["of"] == [1000, 37] and out["cells"].shape == (7, 5)
    for i in range(7):
        for j in range(5):
            rows = [r for r in range(1000) if r * 7 // 1000 == i]
            cols = [c for c in range(37) if c * 5 // 37 == j]
            block = data[rows][:, cols]
            mean = block[np.isfinite(block)].mean()
            assert out["cells"][i, j] == pytest.approx(float(mean), abs=1e-6)
    assert out["min"] == pytest.approx(float(out["cells"].min()))
    small = heatmap(np.arange(6.0).reshape(2, 3), 256, 256)
    assert small is not None and small["cells"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert heatmap(np.array(1.0), 4, 4) is None
    assert heatmap(np.zeros((0, 3)), 4, 4) is None
    nan = heatmap(np.full((2, 2), float("nan")), 1, 1)
    assert nan is not None and nan["min"] is None and bool(np.isnan(nan["cells"]).all())


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
    kernel reads a little ahead), not the leaf, with or without the statistics of that
    selection; the statistics of the whole leaf read it, once: paging its table with
    ``offset`` keeps them."""
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
    picked, _ = ask(session, "preview", path=["x"], rows=20, index="[500000:500020, :8]")
    assert picked["stats"]["count"] == 160 and _resident(leaf) < size // 4
    ask(session, "preview", path=["x"], rows=20)  # the statistics of the whole leaf
    assert _resident(leaf) > size * 9 // 10
    _evict(leaf)
    again, _ = ask(session, "preview", path=["x"], rows=20, offset=900_000)
    assert again["stats"]["count"] == rows * width  # kept: the leaf is not read again
    assert _resident(leaf) < size // 4


# ------------------------------------------------------ dtypes numpy lacks, and no torch


@pytest.mark.parametrize(
    "name",
    ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"],
)
def test_each_float8_pattern_is_decoded_as_torch_decodes_it(name: str) -> None:
    from tdview.protocol._preview_source import display_of

    if not hasattr(torch, name):
        pytest.skip(f"this torch has no {name}")
    bits = torch.arange(256, dtype=torch.uint8)
    want = bits.view(getattr(torch, name)).to(torch.float32).numpy()
    got = display_of(name).decode(bits.numpy())
    np.testing.assert_array_equal(got, want)  # NaNs where torch has them, infinities too


def test_bfloat16_float16_and_complex32_leaves(tmp_path: Path) -> None:
    """Previewed from their bytes: every bfloat16 bit pattern (NaNs, infinities,
    subnormals) as torch widens it, and complex32's magnitude."""
    bf16 = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    half = torch.linspace(-70000, 70000, 101).to(torch.float16)
    chalf = torch.complex(torch.tensor([3.0, 0.0]), torch.tensor([4.0, -2.0])).to(torch.complex32)
    TensorDict(bf16=bf16.reshape(256, 256), half=half, chalf=chalf).memmap(tmp_path / "ckpt")
    session = Session(Checkpoint(tmp_path / "ckpt"), "ckpt")
    shown, buffers = ask(session, "preview", path=["bf16"], rows=100, index="[::2, 100:150]")
    want = bf16.reshape(256, 256)[::2, 100:150][:100].float().numpy()
    np.testing.assert_array_equal(decode(shown["slice"], buffers), want)
    finite = bf16.float()[bf16.float().isfinite()]
    assert shown["display_dtype"] == "float32"
    whole, _ = ask(session, "preview", path=["bf16"], rows=1)
    assert whole["stats"]["nan"] == int(bf16.float().isnan().sum())
    assert whole["stats"]["inf"] == 2 and whole["stats"]["max"] == float(finite.max())
    halves, buffers = ask(session, "preview", path=["half"], rows=100)
    np.testing.assert_array_equal(decode(halves["slice"], buffers), half[:100].float().numpy())
    magnitude, buffers = ask(session, "preview", path=["chalf"], rows=2)
    assert decode(magnitude["slice"], buffers).tolist() == [5.0, 2.0]


_FRESH = r"""
import json, sys
from tdview import TDView  # the widget's own import, as a notebook cell makes it
from tdview.index import Checkpoint
from tdview.protocol import Session, handle

session = Session(Checkpoint(sys.argv[1]), "ckpt")
asked = [
    ("children", {"path": [], "offset": 0, "limit": 50}),
    ("node", {"path": ["model", "conv"]}),
    ("search", {"pattern": "weight", "limit": 10}),
]
for leaf in ("weight", "conv", "bf16", "flags", "ragged"):
    heat = {"rows": 8, "cols": 8}
    asked.append(("preview", {"path": ["model", leaf], "rows": 20, "heatmap": heat}))
asked.append(("preview", {"path": ["model", "weight"], "rows": 5, "index": "[5]"}))
replies = []
for i, (method, params) in enumerate(asked):
    reply, buffers = handle(
        session, {"kind": "tdview:request", "v": 1, "id": i, "method": method, "params": params}
    )
    assert reply["ok"], reply
    replies.append(reply["result"].get("stats"))
print(json.dumps({
    "torch": "torch" in sys.modules,
    "tensordict": "tensordict" in sys.modules,
    "stats": replies,
}))
"""


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("archive", [False, True])
def test_a_fresh_process_browses_and_previews_without_torch(tmp_path: Path, archive: bool) -> None:
    """The protocol's children, node, search and preview (a 2-d, a 4-d, a bfloat16, a
    bool and a nested leaf) in a fresh Python: torch and tensordict are never imported,
    and the statistics are those torch computes. ``from tdview import TDView`` comes
    first, as in a notebook (tdview/__init__.py and widget.py keep it light)."""
    import subprocess
    import sys

    gen = torch.Generator().manual_seed(7)
    model = TensorDict(
        weight=torch.randn(256, 64, generator=gen),
        conv=torch.randn(8, 3, 7, 7, generator=gen),
        bf16=torch.randn(100, generator=gen).bfloat16(),
        flags=torch.arange(50) % 7 == 0,
        ragged=torch.nested.nested_tensor([torch.ones(2, 3), torch.zeros(4, 3)]),
    )
    td = TensorDict(model=model)
    path = tmp_path / ("c.tdz" if archive else "c")
    td.save(path) if archive else td.memmap(path)
    run = subprocess.run(
        [sys.executable, "-c", _FRESH, str(path)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["torch"] is False and found["tensordict"] is False
    weight, conv, bf16, flags, ragged, row5 = found["stats"][3:]
    assert weight["count"] == 256 * 64 and weight["mean"] == pytest.approx(
        float(model["weight"].double().mean()), rel=1e-9
    )
    assert conv["count"] == 8 * 3 * 7 * 7
    assert bf16["max"] == float(model["bf16"].float().max())
    assert flags["count"] == 50 and flags["max"] == 1.0
    assert ragged["count"] == 18 and ragged["mean"] == pytest.approx(6 / 18)
    assert row5["count"] == 64 and row5["max"] == float(model["weight"][5].max())


class _BytesStore:
    """Only what a ranged view asks of a store: ``read_ranges`` over bytes in memory,
    each span recorded."""

    def __init__(self, data: bytes) -> None:
        self.data, self.spans = data, []

    def read_ranges(self, key: str, spans: list, dest: memoryview) -> None:
        at = 0
        for start, end in spans:
            self.spans.append((start, end))
            dest[at : at + end - start] = self.data[start:end]
            at += end - start


@pytest.mark.parametrize(
    "key",
    [
        (slice(3, 9), slice(None, None, 2)),
        (5,),
        (slice(None), 2, slice(1, 4)),
        (-1, slice(None, None, 3), 0),
        (slice(7, 7),),
    ],
)
def test_a_ranged_view_reads_what_numpy_indexes(key: tuple) -> None:
    """A remote leaf's view (integers, slices, steps, a plane's rows and columns swapped)
    reads the values numpy's indexing gives, by the ranges its runs need."""
    from tdview.protocol._preview_ranged import RangedView, read

    values = np.arange(10 * 6 * 5, dtype=np.float32).reshape(10, 6, 5)
    store = _BytesStore(values.tobytes())
    view = RangedView.of_leaf(store, "x", np.dtype(np.float32), values.shape)[key]  # type: ignore[arg-type]
    want = values[key]
    assert view.shape == want.shape
    np.testing.assert_array_equal(read(view), want)
    assert sum(b - a for a, b in store.spans) <= values.nbytes  # never more than the leaf
    if len(view.shape) == 2:
        np.testing.assert_array_equal(read(view.T), want.T)
