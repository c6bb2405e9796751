"""The payload methods: ``preview`` (slice, statistics, histogram, dtype conversions) and
``load`` (binding, code, progress, cancel), compared with tensordict's own loading."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from tdview.index import Checkpoint
from tdview.protocol import Dispatcher, Session, _preview, _stats, handle, load_code, statistics

from ._optional import needs_cuda
from .test_protocol_golden import check_buffers, golden, same_shape

NUMPY = {
    "bool": np.uint8,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "float32": np.float32,
    "float64": np.float64,
}


def request(method: str, params: dict, rid: int = 8589934593) -> dict:
    return {"kind": "tdview:request", "v": 1, "id": rid, "method": method, "params": params}


def call(session: Session, method: str, **params) -> tuple[dict, list[bytes]]:
    reply, buffers = handle(session, request(method, params))
    json.dumps(reply, allow_nan=False)
    return reply, buffers


def decode(ref: dict, buffers: list[bytes]) -> np.ndarray:
    return np.frombuffer(buffers[ref["buffer"]], dtype=NUMPY[ref["dtype"]]).reshape(ref["shape"])


def preview(session: Session, path: list[str], rows: int = 4) -> tuple[dict, list[bytes]]:
    reply, buffers = call(session, "preview", path=path, rows=rows)
    assert reply["ok"], reply.get("error")
    check_buffers(reply["result"], buffers)
    return reply["result"], buffers


@pytest.fixture(params=["directory", "archive"])
def session(request: pytest.FixtureRequest, demo_paths: dict[str, Path]) -> Session:
    path = demo_paths[request.param]
    return Session(Checkpoint(path), str(path), namespace={})


@pytest.fixture(scope="module")
def reference(demo_paths: dict[str, Path]) -> TensorDict:
    return TensorDict.load_memmap(demo_paths["directory"] / "replay")


# ------------------------------------------------------------------- preview


def test_preview_bfloat16_matches_golden(session: Session, reference: TensorDict) -> None:
    result, buffers = preview(session, ["replay", "reward"], rows=4)
    reply, _ = call(session, "preview", path=["replay", "reward"], rows=4)
    same_shape(reply, golden("reply_preview")["message"])
    assert result["dtype"] == "bfloat16" and result["display_dtype"] == "float32"
    assert result["shape"] == [1000]
    values = reference["reward"].float()
    np.testing.assert_array_equal(decode(result["slice"], buffers), values[:4].numpy())
    stats = result["stats"]
    assert stats["count"] == 1000 and stats["nan"] == 0 and stats["inf"] == 0
    assert stats["min"] == pytest.approx(float(values.min()))
    assert stats["max"] == pytest.approx(float(values.max()))
    assert stats["mean"] == pytest.approx(float(values.double().mean()), rel=1e-9)
    assert stats["std"] == pytest.approx(float(values.double().std()), rel=1e-9)
    edges = decode(result["histogram"]["edges"], buffers)
    counts = decode(result["histogram"]["counts"], buffers)
    assert len(edges) == 65 and len(counts) == 64 and counts.sum() == 1000
    assert edges[0] == pytest.approx(stats["min"]) and edges[-1] == pytest.approx(stats["max"])
    expected, _ = np.histogram(values.numpy(), bins=64, range=(stats["min"], stats["max"]))
    assert np.abs(counts - expected).sum() <= 2  # bin-edge rounding only


def test_preview_2d_and_int_and_bool(session: Session, reference: TensorDict) -> None:
    obs, buffers = preview(session, ["replay", "observation"], rows=5)
    assert obs["slice"]["shape"] == [5, 8] and obs["display_dtype"] == "float32"
    np.testing.assert_array_equal(
        decode(obs["slice"], buffers), reference["observation"][:5].numpy()
    )
    action, buffers = preview(session, ["replay", "action"], rows=100)
    assert action["display_dtype"] == "int64" and action["slice"]["shape"] == [100]
    counts = decode(action["histogram"]["counts"], buffers)
    expected = torch.bincount(reference["action"], minlength=4).numpy()
    assert counts.tolist() == expected.tolist()  # one bin per integer value
    done, buffers = preview(session, ["replay", "done"], rows=3)
    assert done["display_dtype"] == "bool" and done["slice"]["dtype"] == "bool"
    assert decode(done["slice"], buffers).tolist() == reference["done"][:3].to(torch.uint8).tolist()
    # a boolean has no mean, std, NaN or Inf; it has a count per value
    assert [done["stats"][k] for k in ("mean", "std", "nan", "inf")] == [None] * 4
    assert decode(done["histogram"]["values"], buffers).tolist() == [0.0, 1.0]
    true = int(reference["done"].sum())
    assert decode(done["histogram"]["counts"], buffers).tolist() == [
        reference["done"].numel() - true,
        true,
    ]


def test_preview_rows_are_capped(session: Session) -> None:
    result, _ = preview(session, ["replay", "observation"], rows=10**6)
    assert result["slice"]["shape"] == [100, 8]


def test_preview_scalar_and_nested_collections(session: Session) -> None:
    step, buffers = preview(session, ["optimizer", "state", "head", "weight", "step"])
    assert step["shape"] == [] and step["slice"]["shape"] == []
    assert decode(step["slice"], buffers).item() == 1.0
    for path in (["replay"], ["config"], []):
        reply, _ = call(session, "preview", path=path, rows=4)
        assert reply["ok"] is False
        assert reply["error"]["type"] in {"PreviewUnsupportedError", "SubpathError"}


@pytest.mark.parametrize(
    ("dtype", "display"),
    [
        (torch.float16, "float32"),
        (torch.complex64, "float32"),
        (torch.complex128, "float64"),
        (torch.uint16, "uint16"),
        (torch.int8, "int8"),
        (torch.float8_e4m3fn, "float32"),
    ],
)
def test_preview_dtypes(tmp_path: Path, dtype: torch.dtype, display: str) -> None:
    base = torch.linspace(-3, 3, 60).reshape(3, 4, 5)
    if dtype.is_complex:
        data = torch.complex(base, base.flip(0)).to(dtype)
    elif dtype.is_floating_point:
        data = base.to(dtype)
    else:
        data = (base.abs() * 10).to(torch.int64).to(dtype)
    TensorDict(x=data).memmap(tmp_path / "ckpt")
    session = Session(Checkpoint(tmp_path / "ckpt"), "ckpt")
    result, buffers = preview(session, ["x"], rows=2)
    assert result["display_dtype"] == display and result["shape"] == [3, 4, 5]
    assert result["slice"]["shape"] == [2, 5]  # n-d: the plane of its last two dims at 0
    shown = data.abs() if dtype.is_complex else data
    expected = shown[0, :2].to(getattr(torch, display))
    # |z| from numpy's hypot: within an ulp of torch's
    rtol = 1e-6 if dtype.is_complex else 0
    np.testing.assert_allclose(decode(result["slice"], buffers), expected.numpy(), rtol=rtol)
    assert result["stats"]["count"] == 60


def test_preview_nan_inf_and_empty(tmp_path: Path) -> None:
    x = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 3.0])
    TensorDict(x=x, empty=torch.zeros(0, 3), nan=torch.full((4,), float("nan"))).memmap(
        tmp_path / "ckpt"
    )
    session = Session(Checkpoint(tmp_path / "ckpt"), "ckpt")
    result, buffers = preview(session, ["x"])
    assert result["stats"] == {
        "min": 1.0,
        "max": 3.0,
        "mean": 2.0,
        "std": pytest.approx(2**0.5),
        "nan": 1,
        "inf": 2,
        "count": 5,
    }
    assert decode(result["histogram"]["counts"], buffers).sum() == 2
    empty, _ = preview(session, ["empty"])
    assert empty["slice"]["shape"] == [0, 3] and empty["histogram"] is None
    assert empty["stats"]["count"] == 0 and empty["stats"]["min"] is None
    nan, _ = preview(session, ["nan"])
    assert nan["stats"]["nan"] == 4 and nan["stats"]["mean"] is None and nan["histogram"] is None


def test_preview_truncated_leaf_is_an_error(tmp_path: Path) -> None:
    TensorDict(x=torch.zeros(100)).memmap(tmp_path / "ckpt")
    with open(tmp_path / "ckpt" / "x.memmap", "r+b") as handle_:
        handle_.truncate(40)
    session = Session(Checkpoint(tmp_path / "ckpt"), "ckpt")
    reply, buffers = call(session, "preview", path=["x"], rows=4)
    assert reply["ok"] is False and buffers == []
    assert reply["error"]["type"] == "LeafDataError" and reply["error"]["path"] == ["x"]
    same_shape(reply, golden("reply_error")["message"])


def test_statistics_are_chunked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_stats, "CHUNK", 7)
    data = torch.randn(1000, dtype=torch.float64) * 5 + 2
    data[::97] = float("nan")
    finite = data[data.isfinite()]
    calls = []
    stats, hist = statistics(data, check=lambda: calls.append(1))
    assert len(calls) == 2 * -(-1000 // 7)  # two passes, checked before each chunk
    assert stats["mean"] == pytest.approx(float(finite.mean()), rel=1e-12)
    assert stats["std"] == pytest.approx(float(finite.std()), rel=1e-12)
    assert stats["nan"] == 11 and int(hist["counts"].sum()) == finite.numel()


@pytest.mark.parametrize(
    "values, std",
    [
        ([1e200] * 5, 0.0),  # a first merge multiplied inf by 0
        ([1e200, 2e200, 3e200], 1e200),  # squared deviations beyond float64
        ([-1.7e308, 1.7e308, 0.0], 1.7e308),  # and a span beyond it
    ],
)
def test_statistics_of_huge_values(monkeypatch: pytest.MonkeyPatch, values, std) -> None:
    monkeypatch.setattr(_stats, "CHUNK", 2)  # merges across chunks too
    stats, hist = statistics(torch.tensor(values, dtype=torch.float64))
    assert stats["std"] == pytest.approx(std, rel=1e-12)
    assert stats["mean"] == pytest.approx(
        sum(v / 8 for v in values) / len(values) * 8, rel=1e-12, abs=1e294
    )
    edges = hist["edges"]
    assert bool(np.isfinite(edges).all()) and float(edges[0]) <= min(values)
    assert float(edges[-1]) >= max(values) and int(hist["counts"].sum()) == len(values)


def test_statistics_stop_when_check_raises() -> None:
    def stop() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        statistics(torch.zeros(10), stop)


# ------------------------------------------------------------------- load


def load_params(path: list[str], variable: str | None = "x", **extra) -> dict:
    return {
        "path": path,
        "device": "cpu",
        "mode": "r",
        "allow_pickle": False,
        "variable": variable,
        **extra,
    }


def test_load_binds_variable_and_matches_golden(session: Session, reference) -> None:
    reply, buffers = call(session, "load", **load_params(["replay"], "replay_td"))
    assert reply["ok"], reply.get("error")
    same_shape(reply, golden("reply_load")["message"])
    result = reply["result"]
    assert result["path"] == ["replay"] and result["variable"] == "replay_td"
    loaded = session.namespace["replay_td"]
    assert type(loaded) is type(reference) and loaded.batch_size == reference.batch_size
    for key in reference.keys(True, True):
        assert torch.equal(loaded.get(key), reference.get(key))
    assert result["summary"].startswith("TensorDict(")
    assert result["code"] == (
        f"replay_td = tdview.load_memmap({json.dumps(session.source)}, "
        'subpath="replay", device="cpu", mode="r")'
    )


def test_load_code_runs(session: Session) -> None:
    import tdview

    code = load_code(session.source, ("replay", "next"), "cpu", "r", False, "nxt")
    namespace = {"tdview": tdview}
    if not hasattr(tdview, "load_memmap"):
        pytest.fail("tdview.load_memmap is not exported: the code line would not run")
    exec(code, namespace)  # noqa: S102 - our own generated line
    assert namespace["nxt"].batch_size == torch.Size([1000])


def test_load_a_leaf_binds_its_tensor(session: Session, reference) -> None:
    import tdview

    reply, _ = call(session, "load", **load_params(["replay", "reward"], "rw"))
    assert reply["ok"], reply.get("error")
    loaded = session.namespace["rw"]
    assert isinstance(loaded, torch.Tensor) and torch.equal(loaded, reference["reward"])
    code = reply["result"]["code"]
    assert code.startswith("rw = tdview.Checkpoint(") and ".load_leaf(" in code
    namespace = {"tdview": tdview}
    exec(code, namespace)  # noqa: S102 - our own generated line
    assert torch.equal(namespace["rw"], loaded)


def test_load_pickles_need_permission(session: Session) -> None:
    reply, _ = call(session, "load", **load_params(["tags"], "tags"))
    assert reply["ok"] is False and "pickle" in reply["error"]["message"].lower()
    assert "tags" not in session.namespace
    reply, _ = call(session, "load", **load_params(["tags"], "tags", allow_pickle=True))
    assert reply["ok"], reply.get("error")
    assert session.namespace["tags"] in ({"demo", "tdview", "transformer"},) or (
        getattr(session.namespace["tags"], "data", None) == {"demo", "tdview", "transformer"}
    )
    assert reply["result"]["code"].endswith("allow_pickle=True)")


def test_load_without_variable_and_meta_device(session: Session) -> None:
    reply, _ = call(session, "load", **load_params(["replay"], None, device="meta"))
    assert reply["ok"], reply.get("error")
    assert reply["result"]["variable"] is None and session.namespace == {}
    assert reply["result"]["code"].startswith("tdview.load_memmap(")
    assert 'device="meta"' in reply["result"]["code"]


def test_load_progress_and_bind(session: Session) -> None:
    sent: list[dict] = []
    kept: list[object] = []
    session.on_load = kept.append
    dispatcher = Dispatcher(
        session, lambda content, buffers: sent.append(content), progress_interval=0
    )
    dispatcher.receive(request("load", load_params(["replay"], "r"), rid=9))
    assert dispatcher.drain(60)
    dispatcher.close()
    progress = [m for m in sent if m["kind"] == "tdview:progress"]
    same_shape(progress[0], golden("progress")["message"])
    assert progress[0]["done"] == 0 and progress[-1]["done"] == progress[-1]["total"] == 5
    assert len(progress) >= 6 and {m["id"] for m in progress} == {9}
    labels = {m["label"] for m in progress}
    assert "replay/observation" in labels
    assert sent[-1]["kind"] == "tdview:reply" and sent[-1]["ok"]
    assert kept == [session.namespace["r"]]


def test_cancelled_load_binds_nothing(session: Session) -> None:
    started = threading.Event()
    sent: list[dict] = []
    ckpt = session.ckpt
    original = type(ckpt).load

    def slow_load(self, *args, **kwargs):
        started.set()
        assert cancelled.wait(30)
        return original(self, *args, **kwargs)

    cancelled = threading.Event()
    dispatcher = Dispatcher(session, lambda content, buffers: sent.append(content))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(ckpt), "load", slow_load)
        dispatcher.receive(request("load", load_params(["replay"], "gone"), rid=11))
        assert started.wait(30)
        dispatcher.receive({"kind": "tdview:cancel", "v": 1, "id": 11})
        cancelled.set()
        assert dispatcher.drain(60)
    dispatcher.close()
    assert "gone" not in session.namespace
    assert sent[-1]["ok"] is False and sent[-1]["error"]["type"] == "Cancelled"


def test_a_cancel_that_arrives_while_binding_leaves_a_done_load(session: Session) -> None:
    """Once the value is bound, the reply says so, whatever cancel comes in after."""

    def bind(value: object) -> None:
        session.cancel(12)  # arrives between the last check and the binding

    session.on_load = bind
    reply, _ = handle(session, request("load", load_params(["replay"], "kept"), rid=12))
    assert reply is not None and reply["ok"], reply
    assert reply["result"]["variable"] == "kept" and "kept" in session.namespace


@pytest.mark.parametrize("name, bound", [("ｒｅｐｌａｙ", "replay"), ("ℌ", "H"), ("x1", "x1")])
def test_load_binds_the_name_python_reads(session: Session, name: str, bound: str) -> None:
    reply, _ = call(session, "load", **load_params(["replay"], name))
    assert reply["ok"], reply.get("error")
    assert reply["result"]["variable"] == bound and list(session.namespace) == [bound]
    assert reply["result"]["code"].startswith(f"{bound} = tdview.load_memmap(")


@pytest.mark.parametrize(
    "name",
    [
        "__builtins__",
        "__name__",
        "In",
        "Out",
        "get_ipython",
        "_",
        "__",
        "_i",
        "_ii",
        "_i3",
        "_7",
        "_oh",
        "exit",
    ],
)
def test_load_refuses_names_python_and_ipython_use(session: Session, name: str) -> None:
    reply, _ = call(session, "load", **load_params(["replay"], name))
    assert reply["ok"] is False and reply["error"]["type"] == "RequestError"
    assert "Python and IPython do not use" in reply["error"]["message"]
    assert session.namespace == {}


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_preview_nested_leaf(tmp_path: Path) -> None:
    parts = [torch.arange(6.0).reshape(2, 3), torch.arange(12.0).reshape(4, 3)]
    nested = torch.nested.nested_tensor(parts)
    TensorDict(n=nested, batch_size=[2]).memmap(tmp_path / "ckpt")
    session = Session(Checkpoint(tmp_path / "ckpt"), "ckpt")
    result, buffers = preview(session, ["n"], rows=100)
    assert result["shape"] == [18] and result["stats"]["count"] == 18
    flat = torch.cat([p.reshape(-1) for p in parts])
    np.testing.assert_array_equal(decode(result["slice"], buffers), flat.numpy())


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("archive", [False, True])
def test_preview_of_a_nested_leaf_reads_its_packed_elements(tmp_path: Path, archive: bool) -> None:
    """The components lie packed in the leaf's storage: the preview views them there (a
    concatenated copy took as much memory again as the leaf)."""
    parts = [torch.arange(6.0).reshape(2, 3), torch.arange(12.0).reshape(4, 3) + 100]
    td = TensorDict(n=torch.nested.nested_tensor(parts), batch_size=[2])
    path = tmp_path / ("c.tdz" if archive else "c")
    td.save(path) if archive else td.memmap(path)
    from tdview.protocol._preview_source import display_of, leaf_values

    with Checkpoint(path) as ckpt:
        flat = leaf_values(ckpt, ckpt.node(("n",)), display_of("float32"))
        assert not flat.flags.owndata and not flat.flags.writeable  # the mapping, read-only
        assert flat.tolist() == torch.cat([p.reshape(-1) for p in parts]).tolist()
        result, buffers = preview(Session(ckpt, str(path)), ["n"], rows=100)
    assert result["stats"]["count"] == 18 and result["stats"]["max"] == 111.0


def test_preview_refuses_to_decompress_beyond_the_free_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compressed leaf is decompressed whole for its preview: when that takes more than
    half the memory available, the preview is refused with the sizes; a mapped leaf reads
    only its pages and is previewed."""
    from tensordict import pack_memmap

    TensorDict(big=torch.zeros(4096), tiny=torch.ones(2)).memmap(tmp_path / "d")
    pack_memmap(tmp_path / "d", tmp_path / "z.tdz", compression="deflate")
    monkeypatch.setattr(
        _preview, "host_memory", lambda: {"free_bytes": 20_000, "total_bytes": 40_000}
    )
    with Checkpoint(tmp_path / "z.tdz") as ckpt:
        reply, buffers = call(Session(ckpt, "z"), "preview", path=["big"], rows=4)
        assert reply["ok"] is False and buffers == []
        assert reply["error"]["type"] == "LimitExceededError"
        assert (
            "z.tdz::big.memmap: a preview of this leaf would decompress all 16,384 bytes "
            "of it into memory, more than half of the 20,000 bytes available"
            in reply["error"]["message"]
        )
        assert preview(Session(ckpt, "z"), ["tiny"], rows=4)[0]["stats"]["count"] == 2
    with Checkpoint(tmp_path / "d") as ckpt:
        assert preview(Session(ckpt, "d"), ["big"], rows=4)[0]["stats"]["count"] == 4096


@needs_cuda
def test_load_to_cuda(session: Session, reference: TensorDict) -> None:
    reply, _ = call(session, "load", **load_params(["replay"], "on_gpu", device="cuda:0"))
    assert reply["ok"], reply.get("error")
    loaded = session.namespace["on_gpu"]
    assert loaded.device == torch.device("cuda:0")
    assert torch.equal(loaded["observation"].cpu(), reference["observation"])
    assert 'device="cuda:0"' in reply["result"]["code"]
