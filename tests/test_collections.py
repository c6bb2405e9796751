"""Folders that hold checkpoints: a training run, torchrl's replay-buffer dumps and
``torchrl.checkpoint`` folders, a tensordict cache. Browsed as one collection (index,
protocol, command line), loaded member by member, compared with tensordict."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

import tdview
from tdview.__main__ import main, parse_cli_subpath
from tdview.errors import NotACheckpointError, SubpathError
from tdview.index import Checkpoint, Collection, search
from tdview.index import _collection as collection_module
from tdview.protocol import Session, handle

from ._optional import require_module
from .compare import assert_same


def _model(seed: int) -> TensorDict:
    torch.manual_seed(seed)
    return TensorDict(
        {
            "model": {
                "layers": {"0": {"weight": torch.randn(4, 3), "bias": torch.randn(4)}},
                "head": torch.randn(2, 4),
            },
            "step": torch.tensor(seed),
        },
        [],
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A training run: a directory checkpoint, an archive, a config, a note."""
    root = tmp_path_factory.mktemp("run")
    _model(1000).memmap(root / "step_1000")
    _model(2000).save(root / "step_2000.tdz")
    (root / "config.json").write_text(json.dumps({"lr": 0.001, "layers": [4, 3]}))
    (root / "notes.txt").write_text("not shown")
    (root / ".hidden").mkdir()
    (root / "logs").mkdir()
    (root / "logs" / "events.json").write_text("[1, 2")  # broken JSON
    return root


def request(session: Session, method: str, **params) -> dict:
    reply, _ = handle(
        session, {"kind": "tdview:request", "v": 1, "id": 1, "method": method, "params": params}
    )
    json.dumps(reply, allow_nan=False)
    return reply


def ok(session: Session, method: str, **params) -> dict:
    reply = request(session, method, **params)
    assert reply["ok"], reply["error"]
    return reply["result"]


# ------------------------------------------------------------------- the index


def test_a_folder_without_meta_json_opens_as_a_collection(run: Path) -> None:
    with Checkpoint(run) as ckpt:
        assert isinstance(ckpt, Collection)
        kinds = {n.key: n.kind for n in ckpt.children()}
        assert kinds == {
            "config.json": "json",
            "logs": "folder",
            "step_1000": "checkpoint",
            "step_2000.tdz": "checkpoint",
        }
        assert [n.key for n in ckpt.children("logs")] == ["events.json"]
        broken = ckpt.node("logs/events.json")
        assert ckpt.side_value(broken) is None and "is not JSON" in broken.problems[0]
        assert ckpt.side_value(ckpt.node("config.json")) == {"lr": 0.001, "layers": [4, 3]}
    with Checkpoint(run / "step_1000") as plain:  # a checkpoint stays one
        assert type(plain) is Checkpoint


@pytest.mark.parametrize("member", ["step_1000", "step_2000.tdz"])
def test_members_browse_and_load_as_checkpoints_opened_alone(run: Path, member: str) -> None:
    with Checkpoint(run) as ckpt:
        owner, prefix, inner = ckpt.locate(f"{member}/model/layers/0")
        assert owner.path == str(run / member) and prefix == (member,)
        assert inner == ("model", "layers", "0")
        assert [n.key for n in ckpt.children(f"{member}/model/layers/0")] == ["weight", "bias"]
        assert ckpt.batch_size(ckpt.own_node((member,))) == ()
        got = ckpt.load(f"{member}/model", mode="r")
        leaf = ckpt.load_leaf(f"{member}/model/head")
    reference = TensorDict.load_memmap(run / member, subpath="model", mode="r")
    assert_same(got, reference)
    assert torch.equal(leaf, reference["head"])


def test_totals_add_up_members_and_side_files(run: Path) -> None:
    with Checkpoint(run) as ckpt:
        total = ckpt.total(ckpt.root)
        members = [tdview.Checkpoint(run / m) for m in ("step_1000", "step_2000.tdz")]
    expected = sum(td_bytes(m) for m in members)
    side = (run / "config.json").stat().st_size + (run / "logs" / "events.json").stat().st_size
    assert total.bytes == expected + side
    assert total.leaves == 2 * 4


def td_bytes(ckpt: Checkpoint) -> int:
    from tdview.index import rollup

    return rollup(ckpt, ckpt.root).bytes


def test_search_reaches_into_every_member(run: Path) -> None:
    from tdview.index import rollup

    with Checkpoint(run) as ckpt:
        assert search(ckpt, "bias") == (
            [
                ("step_1000", "model", "layers", "0", "bias"),
                ("step_2000.tdz", "model", "layers", "0", "bias"),
            ],
            False,
        )
        assert search(ckpt, "b*s", under="step_2000.tdz/model") == (
            [("step_2000.tdz", "model", "layers", "0", "bias")],
            False,
        )
        assert rollup(ckpt, ckpt.root) is ckpt.total(ckpt.root)
    session = Session(Checkpoint(run), str(run), namespace={})
    found = ok(session, "search", pattern="bias", limit=10)
    assert found["matches"] == [
        ["step_1000", "model", "layers", "0", "bias"],
        ["step_2000.tdz", "model", "layers", "0", "bias"],
    ]
    assert not found["truncated"]
    one = ok(session, "search", pattern="bias", limit=1)
    assert one["matches"] == found["matches"][:1] and one["truncated"]
    assert ok(session, "search", pattern="config*", limit=5)["matches"] == [["config.json"]]


def test_loader_on_a_folder_of_checkpoints_raises_what_tensordict_raises(run: Path) -> None:
    with pytest.raises(FileNotFoundError) as reference:
        TensorDict.load_memmap(run)
    with pytest.raises(FileNotFoundError) as ours:
        tdview.load_memmap(run)
    assert isinstance(ours.value, NotACheckpointError) and isinstance(ours.value, ValueError)
    assert ours.value.filename == reference.value.filename == str(run / "meta.json")
    assert str(reference.value) in str(ours.value)
    assert "step_1000" in str(ours.value) and "step_2000.tdz" in str(ours.value)


def test_bounded_listing_and_no_walk_through_a_symlink_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collection_module, "MAX_ENTRIES", 50)
    (tmp_path / "many").mkdir()
    for i in range(60):
        (tmp_path / "many" / f"f{i:03}.json").write_text(str(i))
    _model(1).memmap(tmp_path / "zz" / "ckpt")
    (tmp_path / "zz" / "loop").symlink_to(tmp_path, target_is_directory=True)
    with Checkpoint(tmp_path) as ckpt:
        assert len(ckpt.children("many")) == 50
        assert "more than 50 entries" in ckpt.node("many").problems[0]
        # the loop is not followed: the walk ends and finds the one member
        assert [n.path for n in ckpt.members()] == [("zz", "ckpt")]
        assert "loop" not in [n.key for n in ckpt.children("zz")]


def test_a_broken_archive_member_is_a_problem_of_its_node(tmp_path: Path) -> None:
    _model(1).memmap(tmp_path / "good")
    (tmp_path / "bad.tdz").write_bytes(b"not a zip at all" * 4)
    session = Session(Checkpoint(tmp_path), str(tmp_path), namespace={})
    page = ok(session, "children", path=[], offset=0, limit=10, totals=True)
    bad = next(c for c in page["children"] if c["key"] == "bad.tdz")
    assert bad["kind"] == "checkpoint" and not bad["has_children"]
    assert "not a memory-mapped tensordict archive" in bad["problems"][0]
    details = ok(session, "node", path=["bad.tdz"], totals=True)
    assert details["kind"] == "checkpoint" and details["problems"] == bad["problems"]
    inside = request(session, "node", path=["bad.tdz", "x"], totals=True)
    assert inside["error"]["type"] == "NotACheckpointError"
    good = next(c for c in page["children"] if c["key"] == "good")
    assert good["bytes"] == td_bytes(Checkpoint(tmp_path / "good"))


def test_side_pickles_are_described_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    payload = pickle.dumps(_Marker(str(marker)))
    _model(1).memmap(tmp_path / "storage")
    (tmp_path / "prefetch.pkl").write_bytes(payload)
    session = Session(Checkpoint(tmp_path), str(tmp_path), namespace={})
    details = ok(session, "node", path=["prefetch.pkl"], totals=True)
    assert details["kind"] == "pickle" and details["pickled"]
    assert ["pathlib", "Path.touch"] in details["pickle"]["globals"]
    refused = request(
        session,
        "load",
        path=["prefetch.pkl"],
        device="cpu",
        mode="r",
        allow_pickle=True,
        variable="x",
    )
    assert refused["error"]["type"] == "SubpathError"
    assert "side file" in refused["error"]["message"]
    assert main(["tree", str(tmp_path)]) == 0
    assert not marker.exists()


class _Marker:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):  # unpickling it writes a file
        return (Path.touch, (Path(self.path),))


# ------------------------------------------------------------------- the protocol


def test_protocol_routes_into_members_and_back(run: Path) -> None:
    session = Session(Checkpoint(run), "run", namespace={})
    root = ok(session, "children", path=[], offset=0, limit=10, totals=False)
    config = next(c for c in root["children"] if c["key"] == "config.json")
    assert config["bytes"] == (run / "config.json").stat().st_size  # even without totals
    member = next(c for c in root["children"] if c["key"] == "step_2000.tdz")
    assert member["member"] == {
        "source": os.path.join("run", "step_2000.tdz"),
        "depth": 1,
        "container": "archive",
    }
    inner = ok(
        session, "children", path=["step_2000.tdz", "model"], offset=0, limit=10, totals=True
    )
    assert [c["path"] for c in inner["children"]] == [  # leaves first, as tensordict loads
        ["step_2000.tdz", "model", "head"],
        ["step_2000.tdz", "model", "layers"],
    ]
    details = ok(session, "node", path=["step_2000.tdz", "model", "head"], totals=True)
    assert details["subpath"] == "model/head" and details["member"]["depth"] == 1
    preview = ok(session, "preview", path=["step_1000", "model", "head"], rows=2)
    assert preview["path"] == ["step_1000", "model", "head"] and preview["shape"] == [2, 4]
    loaded = ok(
        session,
        "load",
        path=["step_1000", "model"],
        device="cpu",
        mode="r",
        allow_pickle=False,
        variable="model",
    )
    assert loaded["code"] == (
        'model = tdview.load_memmap("run/step_1000", subpath="model", device="cpu", mode="r")'
    )
    assert_same(
        session.namespace["model"],
        TensorDict.load_memmap(run / "step_1000", subpath="model", mode="r"),
    )
    folder = request(
        session, "load", path=["logs"], device="cpu", mode="r", allow_pickle=False, variable="x"
    )
    assert folder["error"]["type"] == "SubpathError"
    missing = request(session, "node", path=["step_1000", "nope"], totals=False)
    assert missing["error"]["type"] == "SubpathError"


# ------------------------------------------------------------------- torchrl


def test_torchrl_replay_buffer_dump(tmp_path: Path) -> None:
    require_module("torchrl.data", "its replay buffer writes the dump")
    from torchrl.data import LazyMemmapStorage, TensorDictReplayBuffer

    buffer = TensorDictReplayBuffer(storage=LazyMemmapStorage(100))
    buffer.extend(TensorDict({"obs": torch.randn(20, 4), "step_count": torch.arange(20)}, [20]))
    buffer.dumps(tmp_path / "rb")
    with Checkpoint(tmp_path / "rb") as ckpt:
        kinds = {n.key: n.kind for n in ckpt.walk_own()}
        assert kinds["storage"] == "checkpoint" and kinds["prefetch.pkl"] == "pickle"
        assert kinds["buffer_metadata.json"] == "json" and kinds["metadata.json"] == "json"
        assert ckpt.side_value(ckpt.node("writer/metadata.json"))["cursor"] == 20
        assert ckpt.batch_size(ckpt.own_node(("storage",))) == (100,)
        got = ckpt.load("storage", mode="r")
    assert_same(got, TensorDict.load_memmap(tmp_path / "rb" / "storage", mode="r"))


def test_prioritized_sampler_arrays_are_typed_by_their_json(tmp_path: Path) -> None:
    """``sampler/`` as torchrl 0.14.1's ``PrioritizedSampler.dumps`` writes it (its C++
    extension does not load on torch 2.13, so the test writes the same files)."""
    sampler = tmp_path / "sampler"
    sampler.mkdir()
    sums = torch.arange(100, dtype=torch.float64)
    (sampler / "sumtree.memmap").write_bytes(sums.numpy().tobytes())
    (sampler / "mintree.memmap").write_bytes(bytes(8 * 99))  # not what the JSON says
    (sampler / "sampler_metadata.json").write_text(
        json.dumps(
            {
                "_alpha": 0.7,
                "_beta": 0.5,
                "_eps": 1e-8,
                "_max_priority": 1.0,
                "_max_capacity": 100.0,
            }
        )
    )
    _model(1).memmap(tmp_path / "storage")
    with Checkpoint(tmp_path) as ckpt:
        sumtree = ckpt.node("sampler/sumtree.memmap")
        assert sumtree.record.dtype.name == "torch.float64" and sumtree.record.shape == (100,)
        assert torch.equal(ckpt.load_leaf("sampler/sumtree.memmap"), sums)
        mintree = ckpt.node("sampler/mintree.memmap")
        assert mintree.record.dtype.name == "torch.uint8" and mintree.record.shape == (792,)
        assert "describes it as torch.float64 [100]" in mintree.problems[0]
        with pytest.raises(SubpathError, match="read-only"):
            ckpt.load_leaf("sampler/sumtree.memmap", mode="r+")
    session = Session(Checkpoint(tmp_path), str(tmp_path), namespace={})
    preview = ok(session, "preview", path=["sampler", "sumtree.memmap"], rows=3)
    assert preview["stats"]["max"] == 99.0 and preview["dtype"] == "float64"
    assert (sampler / "sumtree.memmap").read_bytes() == sums.numpy().tobytes()


def test_torchrl_checkpoint_folder(tmp_path: Path) -> None:
    require_module("torchrl.checkpoint", "its Checkpoint writes the folder")
    from torchrl.checkpoint import Checkpoint as TorchRLCheckpoint

    policy = torch.nn.Linear(4, 3)
    TorchRLCheckpoint(policy=policy, step=12).save(str(tmp_path / "ckpt"))
    with Checkpoint(tmp_path / "ckpt") as ckpt:
        members = [n.path for n in ckpt.members()]
        assert members == [("components", "0000-policy", "state")]
        assert ckpt.side_value(ckpt.node("manifest.json"))["format"] == "torchrl.checkpoint"
        state = ckpt.load("components/0000-policy/state", mode="r")
    reference = TensorDict.load_memmap(
        tmp_path / "ckpt" / "components" / "0000-policy" / "state", mode="r"
    )
    assert_same(state, reference)
    weights = sorted(tuple(t.shape) for t in state.values(True, True))
    assert weights == sorted(tuple(p.shape) for p in policy.parameters())


# ------------------------------------------------------------------- the command line


def _tree(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tdview", "tree", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_tree_of_a_collection(run: Path) -> None:
    out = _tree(str(run), "--depth", "-1")
    assert out.returncode == 0, out.stderr
    assert "step_2000.tdz  checkpoint (archive)  TensorDict" in out.stdout
    assert "config.json  JSON" in out.stdout and "{'lr': 0.001" in out.stdout
    assert "notes.txt" not in out.stdout and ".hidden" not in out.stdout
    assert "│       └── weight" not in out.stdout  # weight is not a last child
    assert "weight  float32  [4, 3]" in out.stdout
    member = _tree(str(run), "step_1000/model", "--depth", "1")
    assert member.returncode == 0 and "head  float32  [2, 4]" in member.stdout


def test_cli_filter_matches_at_any_depth_and_says_no_matches(run: Path) -> None:
    deep = _tree(str(run / "step_1000"), "--filter", "bias")  # at depth 4, beyond --depth 2
    assert deep.returncode == 0
    rows = deep.stdout.splitlines()[1:]
    for row, start in zip(
        rows,
        ["└── model  ", "    └── layers  ", "        └── 0  ", "            └── bias  "],
        strict=True,
    ):
        assert row.startswith(start), rows
    assert rows[-1].endswith("bias  float32  [4]  16 B")
    both = _tree(str(run), "--filter", "bias")
    assert both.stdout.count("bias  float32  [4]") == 2
    none = _tree(str(run), "--filter", "no_such_key")
    assert none.returncode == 0 and none.stdout.splitlines()[-1] == "no matches"
    alone = _tree(str(run / "step_1000"), "--filter", "no_such_key")
    assert alone.stdout.splitlines()[-1] == "no matches"


def test_cli_on_a_folder_with_nothing_checkpoint_like_fails(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "readme.txt").write_text("hello")
    out = _tree(str(tmp_path))
    assert out.returncode == 1 and out.stdout == ""
    assert "holds none: no meta.json" in out.stderr and str(tmp_path) in out.stderr


def test_cli_subpath_reaches_keys_holding_a_slash(tmp_path: Path) -> None:
    """A tensordict cache keys entries by model name (``openai/clip-vit-large-patch14``)."""
    key = "openai/clip-vit-large-patch14"
    TensorDict({key: {"weight": torch.ones(3)}}, []).memmap(tmp_path / "cache")
    assert parse_cli_subpath(r"openai\/clip-vit-large-patch14/weight") == (key, "weight")
    assert parse_cli_subpath(json.dumps([key, "weight"])) == (key, "weight")
    for spelled in (r"openai\/clip-vit-large-patch14", json.dumps([key])):
        out = _tree(str(tmp_path / "cache"), spelled)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[1] == "└── weight  float32  [3]  12 B"
    split = _tree(str(tmp_path / "cache"), key)  # unescaped: two keys, the first absent
    assert split.returncode == 2 and "has no key 'openai'" in split.stderr
    with Checkpoint(tmp_path / "cache") as ckpt:
        assert search(ckpt, "clip")[0] == [(key,)]


# ------------------------------------------------------------------- the widget


def test_widget_shows_a_collection_and_its_static_tree(run: Path) -> None:
    from tdview import TDView

    view = TDView(run)
    assert view.error == "" and view.root["kind"] == "collection"
    assert view.root["n_children"] == 4
    text = view._repr_mimebundle_()[0]["text/plain"]
    assert "step_2000.tdz  checkpoint (archive)  TensorDict" in text
    assert "step  int64  []  8 B" in text  # a member's first level, read from metadata
    html = view._repr_mimebundle_()[0]["text/html"]
    assert "step_1000" in html and "config.json" in html
    layer = view.load("step_1000/model/layers/0")
    assert torch.equal(
        layer["weight"], TensorDict.load_memmap(run / "step_1000")["model", "layers", "0", "weight"]
    )
    view.close()


def test_widget_on_a_folder_with_nothing_checkpoint_like(tmp_path: Path) -> None:
    from tdview import TDView

    (tmp_path / "readme.txt").write_text("hello")
    view = TDView(tmp_path)
    assert "holds none: no meta.json" in view.error and str(tmp_path) in view.error
    view.close()


def test_a_hugging_face_cache_folder_opens_with_its_snapshot(tmp_path: Path) -> None:
    """``models--org--name/`` as ``huggingface_hub.snapshot_download`` leaves it: every
    file of ``snapshots/<rev>/`` a relative symlink into ``blobs/``."""
    import hashlib
    import shutil

    source = tmp_path / "source"
    _model(7).memmap(source)
    cache = tmp_path / "models--org--name"
    snapshot = cache / "snapshots" / "0123abcd"
    (cache / "blobs").mkdir(parents=True)
    for file in sorted(p for p in source.rglob("*") if p.is_file()):
        blob = cache / "blobs" / hashlib.sha256(file.read_bytes() + str(file).encode()).hexdigest()
        shutil.copyfile(file, blob)
        link = snapshot / file.relative_to(source)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (cache / "refs").mkdir()
    (cache / "refs" / "main").write_text("0123abcd")
    shutil.rmtree(source)
    with Checkpoint(cache) as ckpt:
        assert [n.path for n in ckpt.members()] == [("snapshots", "0123abcd")]
        got = ckpt.load("snapshots/0123abcd/model", mode="r")
    assert_same(got, TensorDict.load_memmap(snapshot, subpath="model", mode="r"))
    out = _tree(str(cache), "--depth", "-1")
    assert out.returncode == 0 and "PROBLEM" not in out.stdout
    assert "weight  float32  [4, 3]" in out.stdout
