"""The protocol dispatcher on real checkpoints written by tensordict: every method,
paging, validation and error replies (preview and load: tests/test_protocol_data.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from tdview.index import Checkpoint
from tdview.protocol import (
    MAX_PAGE,
    Dispatcher,
    RequestError,
    Session,
    details,
    handle,
    parse_cancel,
    parse_request,
    summary,
)

KINDS = {
    "tensordict",
    "tensorclass",
    "lazy_stack",
    "non_tensor",
    "non_tensor_stack",
    "view",
    "leaf",
}
SUMMARY_KEYS = {
    "key",
    "path",
    "kind",
    "class_name",
    "has_children",
    "n_children",
    "shape",
    "dtype",
    "batch_size",
    "stack_dim",
    "bytes",
    "numel",
    "pickled",
    "problems",
}
DETAIL_KEYS = SUMMARY_KEYS | {
    "names",
    "device",
    "subpath",
    "storage",
    "value",
    "pickle",
    "rollup",
    "rows",
}


def request(method: str, params: dict, rid: int = 8589934593) -> dict:
    return {"kind": "tdview:request", "v": 1, "id": rid, "method": method, "params": params}


def call(session: Session, method: str, **params) -> dict:
    reply, buffers = handle(session, request(method, params))
    assert reply is not None
    json.dumps(reply, allow_nan=False)  # every reply is strict JSON
    assert reply["kind"] == "tdview:reply" and reply["v"] == 1 and reply["id"] == 8589934593
    return reply


def ok(session: Session, method: str, **params) -> dict:
    reply = call(session, method, **params)
    assert reply["ok"], reply.get("error")
    return reply["result"]


def failed(session: Session, method: str, **params) -> dict:
    reply = call(session, method, **params)
    assert reply["ok"] is False, reply
    assert set(reply["error"]) == {"type", "message", "path"}
    return reply["error"]


@pytest.fixture(params=["directory", "archive"])
def session(request: pytest.FixtureRequest, demo_paths: dict[str, Path]) -> Session:
    path = demo_paths[request.param]
    return Session(Checkpoint(path), str(path), namespace={})


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Session:
    """A level with 5,000 keys (and one nested level) written by tensordict."""
    path = tmp_path_factory.mktemp("wide") / "ckpt"
    keys = {f"k{i:04d}": torch.full((2,), float(i)) for i in range(5000)}
    TensorDict(wide=TensorDict(keys, batch_size=[2]), batch_size=[]).memmap(path)
    return Session(Checkpoint(path), str(path))


def check_summary(item: dict) -> None:
    assert set(item) == SUMMARY_KEYS
    assert item["kind"] in KINDS
    assert item["path"][-1:] == ([item["key"]] if item["path"] else [])
    assert item["has_children"] == (item["n_children"] > 0)
    if item["kind"] == "leaf":
        assert item["shape"] is not None and item["dtype"] is not None
        assert not item["dtype"].startswith("torch.")
        assert item["batch_size"] is None


# ------------------------------------------------------------------- methods


def test_children_of_root(session: Session) -> None:
    result = ok(session, "children", path=[], offset=0, limit=200)
    assert result["path"] == [] and result["offset"] == 0 and result["total"] == 10
    keys = [c["key"] for c in result["children"]]
    assert keys == [
        "model",
        "optimizer",
        "replay",
        "rollout",
        "episodes",
        "run_name",
        "step",
        "learning_rate",
        "config",
        "tags",
    ]
    for item in result["children"]:
        check_summary(item)
    by_key = {c["key"]: c for c in result["children"]}
    assert by_key["replay"]["batch_size"] == [1000]
    assert by_key["rollout"]["kind"] == "tensorclass"
    assert by_key["rollout"]["class_name"] == "Trajectory"
    assert by_key["episodes"]["kind"] == "lazy_stack"
    assert by_key["episodes"]["stack_dim"] == 0 and by_key["episodes"]["n_children"] == 3
    # a pickled value has its pickle's size and no element count (it holds no tensor)
    assert by_key["tags"]["pickled"] is True and by_key["tags"]["bytes"] > 0
    assert by_key["tags"]["numel"] is None
    assert by_key["run_name"]["pickled"] is False


def test_children_rollup_matches_tensordict(session: Session, demo_paths) -> None:
    replay = ok(session, "children", path=["replay"], offset=0, limit=10)
    reference = TensorDict.load_memmap(demo_paths["directory"], allow_pickle=True)["replay"]
    expected = {key: reference[key] for key in ("observation", "action", "reward", "done")}
    for item in replay["children"]:
        if item["key"] in expected:
            tensor = expected[item["key"]]
            assert item["shape"] == list(tensor.shape)
            assert item["dtype"] == str(tensor.dtype).removeprefix("torch.")
            assert item["bytes"] == tensor.numel() * tensor.element_size()
            assert item["numel"] == tensor.numel()
    node = ok(session, "node", path=["replay"])
    leaves = [reference.get(k) for k in reference.keys(True, True)]
    assert node["bytes"] == sum(t.numel() * t.element_size() for t in leaves)
    assert node["rollup"]["leaves"] == len(leaves)


def test_node_leaf(session: Session) -> None:
    result = ok(session, "node", path=["replay", "reward"])
    assert set(result) == DETAIL_KEYS
    assert result["dtype"] == "bfloat16" and result["shape"] == [1000]
    assert result["subpath"] == "replay/reward"
    assert result["rollup"] is None and result["pickle"] is None
    storage = result["storage"]
    assert storage["cost"] == "map" and storage["stored_bytes"] == 2000
    assert "reward.memmap" in storage["location"]
    if session.ckpt.store.kind == "archive":
        assert storage["offset"] > 0 and isinstance(storage["crc32"], int)


def test_node_collections(session: Session) -> None:
    replay = ok(session, "node", path=["replay"])
    assert replay["names"] == ["row"]
    assert replay["rollup"]["by_dtype"] == {
        "float32": 64000,
        "int64": 8000,
        "bfloat16": 2000,
        "bool": 1000,
    }
    root = ok(session, "node", path=[])
    assert root["key"] == "" and root["path"] == [] and root["subpath"] == ""
    assert root["rollup"]["leaves"] > 100
    episodes = ok(session, "node", path=["episodes"])
    assert episodes["batch_size"] == [3] and episodes["stack_dim"] == 0


def test_node_non_tensor_values(session: Session) -> None:
    config = ok(session, "node", path=["config"])
    assert config["value"] == {"width": 64, "depth": 2, "tokenizer": "bytes", "seed": 0}
    assert config["pickled"] is False and config["pickle"] is None
    assert ok(session, "node", path=["run_name"])["value"] == "tiny-transformer-demo"
    assert ok(session, "node", path=["step"])["value"] == 1200
    assert ok(session, "node", path=["rollout", "policy_name"])["value"] == "epsilon-greedy"


def test_node_pickled_is_described_not_unpickled(session: Session) -> None:
    tags = ok(session, "node", path=["tags"])
    assert tags["pickled"] is True and tags["value"] is None
    assert tags["pickle"]["bytes"] > 0 and isinstance(tags["pickle"]["globals"], list)
    assert any("allow_pickle" in p for p in tags["problems"])
    assert tags["storage"]["location"].endswith("other.pickle")


def test_node_value_json_safe(tmp_path: Path) -> None:
    from tensordict import MetaData

    TensorDict(meta=MetaData({"nan": float("nan"), "inf": [float("inf"), -float("inf")]})).memmap(
        tmp_path / "ckpt"
    )
    session = Session(Checkpoint(tmp_path / "ckpt"), "ckpt")
    value = ok(session, "node", path=["meta"])["value"]
    assert value == {"nan": "NaN", "inf": ["Infinity", "-Infinity"]}


def test_search(session: Session) -> None:
    result = ok(session, "search", pattern="OBSERV", limit=50)
    assert result["pattern"] == "OBSERV" and result["truncated"] is False
    assert ["replay", "observation"] in result["matches"]
    assert ["replay", "next", "observation"] in result["matches"]
    assert ["episodes", "0", "observation"] in result["matches"]
    limited = ok(session, "search", pattern="o", limit=3)
    assert len(limited["matches"]) == 3 and limited["truncated"] is True
    assert ok(session, "search", pattern="", limit=3)["matches"] == []
    assert ok(session, "search", pattern="zzz-none", limit=3) == {
        "pattern": "zzz-none",
        "offset": 0,
        "total": 0,
        "counted": True,
        "matches": [],
        "nodes": [],
        "truncated": False,
        "notes": [],
    }


def test_search_first_page_then_count(session: Session) -> None:
    """``count: false`` answers the page and a lower bound; ``limit: 0`` then counts."""
    full = ok(session, "search", pattern="o", limit=3)
    first = ok(session, "search", pattern="o", limit=3, count=False)
    assert first["matches"] == full["matches"] and first["nodes"] == full["nodes"]
    assert (first["total"], first["counted"], first["truncated"]) == (4, False, True)
    counted = ok(session, "search", pattern="o", limit=0)
    assert (counted["total"], counted["counted"]) == (full["total"], True)
    assert ok(session, "search", pattern="o", limit=0, count=False)["counted"] is True
    last = ok(session, "search", pattern="o", limit=3, offset=full["total"] - 2, count=False)
    assert (last["total"], last["counted"], last["truncated"]) == (full["total"], True, False)
    assert failed(session, "search", pattern="o", limit=3, count="no")["type"] == "RequestError"


def test_devices(session: Session) -> None:
    found = ok(session, "devices")["devices"]
    names = [d["name"] for d in found]
    assert names[0] == "cpu" and "meta" in names
    assert all(set(d) == {"name", "free_bytes", "total_bytes"} for d in found)
    cuda = [d for d in found if d["name"].startswith("cuda:")]
    assert len(cuda) == torch.cuda.device_count()
    for device in cuda:
        assert 0 <= device["free_bytes"] <= device["total_bytes"]
    cpu = found[0]
    if cpu["total_bytes"] is not None:  # /proc/meminfo on Linux
        assert 0 <= cpu["free_bytes"] <= cpu["total_bytes"]


def test_load_code_of_a_leaf() -> None:
    """The lines js/tests/python-code.test.ts expects of loadCode for a leaf."""
    from tdview.protocol._load import load_code

    assert load_code("ckpt.tdz", ("replay", "reward"), "cpu", "r", False, "r", leaf=True) == (
        'r = tdview.Checkpoint("ckpt.tdz").load_leaf("replay/reward", device="cpu", mode="r")'
    )
    assert load_code("ckpt.tdz", ("a/b",), "cpu", None, True, None, leaf=True) == (
        'tdview.Checkpoint("ckpt.tdz").load_leaf(("a/b",), device="cpu", mode=None)'
    )


def test_load_code_spells_keys_with_a_slash_as_a_tuple() -> None:
    from tdview.protocol._load import load_code

    assert load_code("c.tdz", ("a", "b"), "cpu", "r", False, "x") == (
        'x = tdview.load_memmap("c.tdz", subpath="a/b", device="cpu", mode="r")'
    )
    assert load_code("c.tdz", ("a/b", "c"), "cuda:0", None, True, None) == (
        'tdview.load_memmap("c.tdz", subpath=("a/b", "c"), device="cuda:0", mode=None,'
        " allow_pickle=True)"
    )


# ------------------------------------------------------------------- paging


def test_paging_5000_keys(wide: Session) -> None:
    root = summary(wide.ckpt, wide.ckpt.root)
    assert root["n_children"] == 1
    first = ok(wide, "children", path=["wide"], offset=0, limit=200)
    assert first["total"] == 5000 and len(first["children"]) == 200
    assert first["children"][0]["key"] == "k0000"
    middle = ok(wide, "children", path=["wide"], offset=4900, limit=200)
    assert middle["offset"] == 4900 and middle["total"] == 5000
    assert [c["key"] for c in middle["children"]] == [f"k{i:04d}" for i in range(4900, 5000)]
    past = ok(wide, "children", path=["wide"], offset=6000, limit=200)
    assert past["children"] == [] and past["total"] == 5000
    assert ok(wide, "children", path=["wide"], offset=0, limit=0)["children"] == []
    seen = []
    for offset in range(0, 5000, 1000):
        seen += [
            c["key"]
            for c in ok(wide, "children", path=["wide"], offset=offset, limit=1000)["children"]
        ]
    assert seen == [f"k{i:04d}" for i in range(5000)]
    node = ok(wide, "node", path=["wide"])
    assert node["n_children"] == 5000 and node["rollup"]["bytes"] == 5000 * 2 * 4


def test_children_without_totals_walks_nothing(session: Session) -> None:
    """``totals: false`` (the widget's first paint): collections whose rollup is not
    cached come without bytes/numel, leaves with theirs; a later page with totals fills
    them in, and from then on they are cached for pages without totals too."""
    first = ok(session, "children", path=[], offset=0, limit=50, totals=False)
    collections = [c for c in first["children"] if c["has_children"]]
    assert collections and all(c["bytes"] is None and c["numel"] is None for c in collections)
    assert all(session.ckpt.node(tuple(c["path"])).rollup_cache is None for c in collections)
    leaf = ok(session, "children", path=["replay"], offset=0, limit=50, totals=False)
    assert all(c["bytes"] is not None for c in leaf["children"] if c["kind"] == "leaf")
    full = ok(session, "children", path=[], offset=0, limit=50, totals=True)
    assert all(
        c["bytes"] is not None
        for c in full["children"]
        if c["has_children"] and c["kind"] != "non_tensor"
    )
    again = ok(session, "children", path=[], offset=0, limit=50, totals=False)
    assert again == full
    assert ok(session, "children", path=[], offset=0, limit=50) == full  # default: totals


def test_node_without_totals(session: Session) -> None:
    bare = ok(session, "node", path=["replay"], totals=False)
    assert bare["rollup"] is None and bare["bytes"] is None and bare["n_children"] > 0
    full = ok(session, "node", path=["replay"])
    assert full["rollup"]["leaves"] > 0 and full["bytes"] == full["rollup"]["bytes"]
    assert ok(session, "node", path=["replay"], totals=False) == full  # cached now


def test_page_limit_is_capped(wide: Session) -> None:
    parsed = parse_request(request("children", {"path": ["wide"], "offset": 0, "limit": 10**9}))
    assert parsed.params["limit"] == MAX_PAGE


def test_search_wide(wide: Session) -> None:
    result = ok(wide, "search", pattern="k49", limit=1000)
    assert len(result["matches"]) == 100 and not result["truncated"]
    assert ok(wide, "search", pattern="k", limit=10)["truncated"] is True


def test_children_of_a_leaf_is_empty(session: Session) -> None:
    result = ok(session, "children", path=["replay", "reward"], offset=0, limit=10)
    assert result == {"path": ["replay", "reward"], "offset": 0, "total": 0, "children": []}


# ------------------------------------------------------------------- errors


def test_bad_path(session: Session) -> None:
    for method, params in [
        ("children", {"offset": 0, "limit": 5}),
        ("node", {}),
        ("preview", {"rows": 4}),
    ]:
        error = failed(session, method, path=["replay", "nope"], **params)
        assert error["type"] == "SubpathError" and error["path"] == ["replay", "nope"]
        assert "nope" in error["message"]


@pytest.mark.parametrize(
    "message",
    [
        None,
        [],
        "x",
        {},
        {"kind": "tdview:request", "v": 2, "id": 1, "method": "node", "params": {"path": []}},
        {"kind": "tdview:request", "v": 1.0, "id": 1, "method": "node", "params": {"path": []}},
        {"kind": "tdview:request", "v": True, "id": 1, "method": "node", "params": {"path": []}},
        {"kind": "tdview:request", "v": 1, "id": -1, "method": "node", "params": {"path": []}},
        {"kind": "tdview:request", "v": 1, "id": 1.5, "method": "node", "params": {"path": []}},
        {"kind": "tdview:request", "v": 1, "id": True, "method": "node", "params": {"path": []}},
        {"kind": "tdview:request", "v": 1, "id": 1, "method": "rm", "params": {}},
        {"kind": "tdview:request", "v": 1, "id": 1, "method": "node"},
        {"kind": "tdview:request", "v": 1, "id": 1, "method": "node", "params": {}},
        {"kind": "tdview:request", "v": 1, "id": 1, "method": "node", "params": {"path": "a"}},
        {"kind": "tdview:request", "v": 1, "id": 1, "method": "node", "params": {"path": [1]}},
        {
            "kind": "tdview:request",
            "v": 1,
            "id": 1,
            "method": "children",
            "params": {"path": [], "offset": -1, "limit": 5},
        },
        {
            "kind": "tdview:request",
            "v": 1,
            "id": 1,
            "method": "children",
            "params": {"path": [], "offset": 0, "limit": False},
        },
        {
            "kind": "tdview:request",
            "v": 1,
            "id": 1,
            "method": "children",
            "params": {"path": [], "offset": 0, "limit": 5, "totals": "no"},
        },
        {
            "kind": "tdview:request",
            "v": 1,
            "id": 1,
            "method": "search",
            "params": {"pattern": 3, "limit": 5},
        },
        {
            "kind": "tdview:request",
            "v": 1,
            "id": 1,
            "method": "preview",
            "params": {"path": [], "rows": "4"},
        },
        {
            "kind": "tdview:request",
            "v": 1,
            "id": 1,
            "method": "load",
            "params": {
                "path": [],
                "device": "cpu",
                "mode": "w",
                "allow_pickle": False,
                "variable": None,
            },
        },
        {
            "kind": "tdview:request",
            "v": 1,
            "id": 1,
            "method": "load",
            "params": {
                "path": [],
                "device": "cpu",
                "mode": "r",
                "allow_pickle": 1,
                "variable": None,
            },
        },
        {
            "kind": "tdview:request",
            "v": 1,
            "id": 1,
            "method": "load",
            "params": {
                "path": [],
                "device": "cpu",
                "mode": "r",
                "allow_pickle": False,
                "variable": "not valid",
            },
        },
        {
            "kind": "tdview:request",
            "v": 1,
            "id": 1,
            "method": "load",
            "params": {
                "path": [],
                "device": "cpu",
                "mode": "r",
                "allow_pickle": False,
                "variable": "import",
            },
        },
    ],
)
def test_invalid_requests_get_error_replies(session: Session, message: object) -> None:
    with pytest.raises(RequestError):
        parse_request(message)
    reply, buffers = handle(session, message)
    assert reply is not None and reply["ok"] is False and buffers == []
    assert reply["error"]["type"] == "RequestError"
    expected_id = message.get("id") if isinstance(message, dict) else None
    if type(expected_id) is int and expected_id >= 0:
        assert reply["id"] == expected_id
    json.dumps(reply, allow_nan=False)


def test_unknown_keys_are_ignored(session: Session) -> None:
    message = request("node", {"path": ["replay"], "later": 1})
    message["extra"] = True
    reply, _ = handle(session, message)
    assert reply["ok"] is True


def test_bad_device_is_an_error_reply(session: Session) -> None:
    error = failed(
        session,
        "load",
        path=["replay"],
        device="gpu-nine",
        mode="r",
        allow_pickle=False,
        variable=None,
    )
    assert error["type"] == "ValueError" and "gpu-nine" in error["message"]


def test_no_checkpoint(tmp_path: Path) -> None:
    session = Session(None, str(tmp_path / "missing.tdz"), error="NotACheckpointError: nope")
    error = failed(session, "children", path=[], offset=0, limit=5)
    assert error["type"] == "NoCheckpointError" and "nope" in error["message"]


def test_corrupt_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    TensorDict(a=TensorDict(x=torch.zeros(3)), b=torch.ones(4)).memmap(path)
    (path / "a" / "meta.json").write_text("{not json")
    with open(path / "b.memmap", "r+b") as handle_:
        handle_.truncate(4)
    session = Session(Checkpoint(path), str(path))
    children = ok(session, "children", path=[], offset=0, limit=10)["children"]
    by_key = {c["key"]: c for c in children}
    assert any("invalid JSON" in p for p in by_key["a"]["problems"])
    assert any("16 bytes" in p and "4 bytes" in p for p in by_key["b"]["problems"])
    assert ok(session, "node", path=["a"])["problems"]
    root_text = tmp_path / "bad"
    root_text.mkdir()
    (root_text / "meta.json").write_text("[]")
    broken = Session(Checkpoint(root_text), str(root_text))
    root = ok(broken, "node", path=[])
    assert root["problems"] and root["n_children"] == 0


def test_cancel_messages() -> None:
    assert parse_cancel({"kind": "tdview:cancel", "v": 1, "id": 5}) == 5
    with pytest.raises(RequestError):
        parse_cancel({"kind": "tdview:cancel", "v": 1})
    session = Session(None, "x")
    assert handle(session, {"kind": "tdview:cancel", "v": 1, "id": 5}) == (None, [])
    assert not session.is_cancelled(5)  # no request 5 is pending: nothing to cancel
    session.expect(5)  # what the dispatcher notes when request 5 arrives
    assert handle(session, {"kind": "tdview:cancel", "v": 1, "id": 5}) == (None, [])
    assert session.is_cancelled(5)
    assert handle(session, {"kind": "tdview:cancel", "v": 1}) == (None, [])


def test_cancelled_request_answers_cancelled(session: Session) -> None:
    session.expect(8589934593)  # received, waiting for a worker
    session.cancel(8589934593)
    reply, _ = handle(session, request("node", {"path": ["replay"]}), expected=True)
    assert reply is not None and reply["error"]["type"] == "Cancelled"
    assert not session.is_cancelled(8589934593)  # forgotten once answered
    assert ok(session, "node", path=["replay"])["key"] == "replay"


def test_summary_and_details_functions(session: Session) -> None:
    ckpt = session.ckpt
    node = ckpt.node("replay/observation")
    assert set(summary(ckpt, node)) == SUMMARY_KEYS
    assert set(details(ckpt, node)) == DETAIL_KEYS


# ------------------------------------------------------------------- dispatcher


def test_dispatcher_answers_on_worker_threads(session: Session) -> None:
    sent: list[tuple[dict, list]] = []
    done = threading.Event()
    threads = set()

    def send(content: dict, buffers: list) -> None:
        threads.add(threading.current_thread().name)
        sent.append((content, buffers))
        if len(sent) == 3:
            done.set()

    dispatcher = Dispatcher(session, send)
    dispatcher.receive(request("children", {"path": [], "offset": 0, "limit": 2}, rid=1))
    dispatcher.receive({"kind": "tdview:cancel", "v": 1, "id": 999})
    dispatcher.receive(request("search", {"pattern": "reward", "limit": 5}, rid=2))
    dispatcher.receive({"junk": True})
    assert done.wait(30)
    dispatcher.close()
    by_id = {content["id"]: content for content, _ in sent}
    assert by_id[1]["ok"] and len(by_id[1]["result"]["children"]) == 2
    assert by_id[2]["ok"] and ["replay", "reward"] in by_id[2]["result"]["matches"]
    assert by_id[0]["ok"] is False and by_id[0]["error"]["type"] == "RequestError"
    assert threading.current_thread().name not in threads


def test_dispatcher_survives_a_failing_send(session: Session) -> None:
    calls = []
    done = threading.Event()

    def send(content: dict, buffers: list) -> None:
        calls.append(content["id"])
        if len(calls) == 2:
            done.set()
        raise RuntimeError("comm closed")

    dispatcher = Dispatcher(session, send)
    dispatcher.receive(request("node", {"path": []}, rid=1))
    dispatcher.receive(request("node", {"path": []}, rid=2))
    assert done.wait(30)
    dispatcher.close()
    dispatcher.receive(request("node", {"path": []}, rid=3))  # after close: dropped
    assert sorted(calls) == [1, 2]  # answered on two threads of one lane: in any order


def _utf8_send(sent: list, done: threading.Event, expected: int):
    """A ``send`` that packs as ipykernel's comm does (strict UTF-8 JSON)."""

    def send(content: dict, buffers: list) -> None:
        json.dumps(content, ensure_ascii=False, allow_nan=False).encode("utf-8")
        sent.append(content)
        if len(sent) == expected:
            done.set()

    return send


def test_dispatcher_answers_odd_requests(session: Session) -> None:
    """A method that is no string, and text without a UTF-8 form (a lone surrogate, which
    the browser's JSON.stringify writes): each gets an error reply that can be sent."""
    sent: list[dict] = []
    done = threading.Event()
    dispatcher = Dispatcher(session, _utf8_send(sent, done, 3))
    dispatcher.receive(
        {"kind": "tdview:request", "v": 1, "id": 1, "method": ["load"], "params": {}}
    )
    dispatcher.receive(request("node", {"path": ["\ud800"]}, rid=2))
    dispatcher.receive(request("search", {"pattern": "a\udfffb", "limit": 5}, rid=3))
    assert done.wait(30)
    dispatcher.close()
    by_id = {content["id"]: content for content in sent}
    assert {1, 2, 3} == set(by_id)
    assert all(not c["ok"] and c["error"]["type"] == "RequestError" for c in by_id.values())
    assert "UTF-8" in by_id[2]["error"]["message"] and "UTF-8" in by_id[3]["error"]["message"]


def test_a_key_without_a_utf8_form_is_sent_replaced(tmp_path: Path) -> None:
    """A hostile meta.json names a key with a lone surrogate: its siblings are served, the
    key shows with U+FFFD, and its leaf has a problem instead of failing the level."""
    path = tmp_path / "ck"
    TensorDict(x=torch.zeros(3)).memmap(path)
    meta = json.loads((path / "meta.json").read_text())
    (path / "meta.json").write_text(json.dumps({**meta, "\ud800bad": meta["x"]}))
    sent: list[dict] = []
    done = threading.Event()
    dispatcher = Dispatcher(Session(Checkpoint(path), str(path)), _utf8_send(sent, done, 1))
    dispatcher.receive(request("children", {"path": [], "offset": 0, "limit": 10}, rid=1))
    assert done.wait(30)
    dispatcher.close()
    (reply,) = sent
    assert reply["ok"], reply
    children = {c["key"]: c for c in reply["result"]["children"]}
    assert set(children) == {"x", "\ufffdbad"}
    assert not children["x"]["problems"]
    assert "no file-name form" in children["\ufffdbad"]["problems"][0]


def test_a_cancel_of_no_pending_request_stops_nothing_later(session: Session) -> None:
    """Cancels of an id never sent, or already answered, are not kept: a later request
    that reuses the id runs."""
    session.cancel(5)
    assert ok(session, "node", path=[])  # id 8589934593: also cancelled before, below
    session.cancel(8589934593)
    assert ok(session, "node", path=[])
    sent: list[dict] = []
    done = threading.Event()
    dispatcher = Dispatcher(session, _utf8_send(sent, done, 1))
    dispatcher.receive(request("node", {"path": []}, rid=5))
    assert done.wait(30)
    dispatcher.close()
    assert sent[0]["id"] == 5 and sent[0]["ok"], sent
