"""The golden messages in tests/protocol/ (also read by the JS tests): requests parse with
the Python validators, and the Python replies have exactly the golden key sets and JSON
types, so that the two sides cannot drift."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import pytest

from tdview.index import Checkpoint
from tdview.protocol import Session, handle, parse_cancel, parse_request

GOLDEN = Path(__file__).parent / "protocol"
NAMES = sorted(p.stem for p in GOLDEN.glob("*.json"))

#: Keys whose value may be null (from protocol.ts); a null elsewhere is a drift.
NULLABLE = {
    "shape",
    "dtype",
    "batch_size",
    "stack_dim",
    "bytes",
    "numel",
    "names",
    "device",
    "storage",
    "value",
    "pickle",
    "rollup",
    "offset",
    "crc32",
    "min",
    "max",
    "mean",
    "std",
    "stats",
    "histogram",
    "free_bytes",
    "total_bytes",
    "variable",
    "path",
    "root",
    "mode",
    "rows",
    "stopped",
    "nan",
    "inf",
    "values",
    "heatmap",
    "cols",
    "at",
    "duplicates_bytes",
}
#: Keys whose value is free-form (a record or any JSON): only its type is compared.
FREE = {"by_dtype", "by_section", "value"}
#: Element sizes of the buffer dtypes.
ITEMSIZE = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "float32": 4,
    "float64": 8,
}


def golden(name: str) -> dict:
    doc = json.loads((GOLDEN / f"{name}.json").read_text())
    doc["buffers"] = [base64.b64decode(b) for b in doc["buffers"]]
    return doc


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "str", list: "list", dict: "dict"}[type(value)]


def same_shape(mine: object, gold: object, where: str = "message", key: str = "") -> None:
    """Assert that ``mine`` has the JSON shape of ``gold`` (key sets and types)."""
    if mine is None or gold is None:
        assert mine is not None or key in NULLABLE, f"{where} is null"
        return
    assert json_type(mine) == json_type(gold), f"{where}: {json_type(mine)} != {json_type(gold)}"
    if key in FREE:
        return
    if isinstance(gold, dict):
        assert set(mine) == set(gold), f"{where}: keys {sorted(set(mine) ^ set(gold))} differ"
        for k in gold:
            same_shape(mine[k], gold[k], f"{where}.{k}", k)
    elif isinstance(gold, list) and gold and mine:
        for i, item in enumerate(mine):
            same_shape(item, _closest(item, gold), f"{where}[{i}]", key)


def _closest(item: object, gold: list) -> object:
    """The golden list element to compare with: one of the same node kind if any."""
    if isinstance(item, dict) and "kind" in item:
        for candidate in gold:
            if isinstance(candidate, dict) and candidate.get("kind") == item["kind"]:
                return candidate
    return gold[0]


def check_buffers(result: dict, buffers: list[bytes]) -> None:
    refs = [result["slice"]]
    if result["histogram"] is not None:
        refs += [result["histogram"]["edges"], result["histogram"]["counts"]]
        if result["histogram"]["values"] is not None:
            refs.append(result["histogram"]["values"])
    if result["heatmap"] is not None:
        refs.append(result["heatmap"]["cells"])
    assert sorted(r["buffer"] for r in refs) == list(range(len(buffers)))
    for ref in refs:
        count = 1
        for dim in ref["shape"]:
            count *= dim
        assert len(buffers[ref["buffer"]]) == count * ITEMSIZE[ref["dtype"]]


def request(method: str, params: dict) -> dict:
    return {"kind": "tdview:request", "v": 1, "id": 8589934593, "method": method, "params": params}


@pytest.fixture(scope="module")
def session(demo_paths) -> Session:
    path = demo_paths["archive"]
    return Session(Checkpoint(path), str(path), namespace={})


def reply_to(session: Session, method: str, **params) -> tuple[dict, list[bytes]]:
    reply, buffers = handle(session, request(method, params))
    json.dumps(reply, allow_nan=False)
    return reply, buffers


def test_every_golden_file_is_covered() -> None:
    covered = {"cancel", "progress", "state", "state_error"}  # progress: test_protocol_data;
    covered |= {n for n in NAMES if n.startswith("request_")}  # state: test_widget
    covered |= set(REPLIES) | {"reply_preview", "reply_load"}
    covered |= {"reply_node_storage", "reply_preview_storage"}  # test_replay_buffers
    covered |= {"reply_preview_view"}  # test_preview_view
    covered |= {"reply_children_collection"}  # below
    covered |= {"reply_duplicates"}  # test_duplicates
    covered |= {"reply_sizes"}  # test_sizes
    covered |= {"reply_check"}  # test_check_protocol
    covered |= {"reply_node_metadata"}  # test_safetensors_protocol
    covered |= {n for n in NAMES if n.startswith("reply_diff_")} | {"state_compare"}
    # (test_protocol_diff_golden: the compare view's replies and traits)
    assert set(NAMES) <= covered, set(NAMES) - covered


@pytest.mark.parametrize("name", [n for n in NAMES if n.startswith("request_")])
def test_golden_requests_parse(name: str, session: Session) -> None:
    doc = golden(name)
    parsed = parse_request(doc["message"])
    assert parsed.method == doc["message"]["method"]
    assert parsed.id == doc["message"]["id"]
    reply, _ = handle(session, doc["message"])  # the golden paths need not exist here
    json.dumps(reply, allow_nan=False)
    assert reply["id"] == doc["message"]["id"]
    assert set(reply) == {"kind", "v", "id", "ok", "result" if reply["ok"] else "error"}
    if not reply["ok"]:
        assert reply["error"]["type"] != "RequestError", reply


def test_golden_cancel_parses() -> None:
    message = golden("cancel")["message"]
    assert parse_cancel(message) == message["id"]


#: golden reply -> the same kind of request on the demo checkpoint.
REPLIES = {
    "reply_children": ("children", {"path": [], "offset": 0, "limit": 200}),
    "reply_node": ("node", {"path": ["replay", "observation"]}),
    "reply_node_tensordict": ("node", {"path": ["replay"]}),
    "reply_node_non_tensor": ("node", {"path": ["tags"]}),
    "reply_search": ("search", {"pattern": "o", "limit": 3}),
    "reply_search_uncounted": ("search", {"pattern": "o", "limit": 3, "count": False}),
    "reply_search_pasted": (
        "search",
        {"pattern": "state_dict['module.model.layers.0.linear1.weight']", "limit": 3},
    ),
    "reply_devices": ("devices", {}),
    "reply_error": ("preview", {"path": ["replay", "missing"], "rows": 4}),
}


@pytest.mark.parametrize("name", sorted(REPLIES))
def test_replies_match_golden_shapes(name: str, session: Session) -> None:
    doc = golden(name)
    method, params = REPLIES[name]
    assert doc["method"] == method
    reply, buffers = reply_to(session, method, **params)
    same_shape(reply, doc["message"])
    assert buffers == [] == doc["buffers"]


def test_golden_children_kinds_all_produced(session: Session) -> None:
    """Every node kind of the golden page is compared with a real node of that kind."""
    gold = golden("reply_children")["message"]
    mine = set()
    for path in ([], ["replay"]):
        reply, _ = reply_to(session, "children", path=path, offset=0, limit=200)
        same_shape(reply, gold)
        mine |= {c["kind"] for c in reply["result"]["children"]}
    assert {c["kind"] for c in gold["result"]["children"]} <= mine


def test_same_shape_catches_drift() -> None:
    gold = golden("reply_node")["message"]
    drifted = json.loads(json.dumps(gold))
    del drifted["result"]["storage"]["cost"]
    with pytest.raises(AssertionError, match="cost"):
        same_shape(drifted, gold)
    drifted = json.loads(json.dumps(gold))
    drifted["result"]["n_children"] = "0"
    with pytest.raises(AssertionError, match="n_children"):
        same_shape(drifted, gold)
    drifted = json.loads(json.dumps(gold))
    drifted["result"]["kind"] = None
    with pytest.raises(AssertionError, match="kind"):
        same_shape(drifted, gold)


def test_golden_preview_buffers_are_consistent() -> None:
    doc = golden("reply_preview")
    check_buffers(doc["message"]["result"], doc["buffers"])


# ------------------------------------------------------------------- a folder of checkpoints

#: The collection's path as the user spelled it: the members' ``source`` is built on it.
COLLECTION_SOURCE = "run"


def _collection(root: Path) -> Path:
    """A training run: a directory checkpoint, an archive, a config, a pickle, a folder."""
    import pickle

    import torch
    from tensordict import TensorDict

    td = TensorDict({"model": {"weight": torch.zeros(4, 3)}, "step": torch.tensor(7)}, [])
    td.memmap(root / "step_1000")
    td.save(root / "step_2000.tdz")
    (root / "config.json").write_text(json.dumps({"lr": 0.001, "layers": [4, 3]}))
    (root / "prefetch.pkl").write_bytes(pickle.dumps({"cursor": 20}, protocol=4))
    (root / "logs").mkdir()
    (root / "logs" / "events.json").write_text("[1, 2, 3]")
    return root


@pytest.fixture(scope="module")
def collection_session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    root = _collection(tmp_path_factory.mktemp("collection"))
    return Session(Checkpoint(root), COLLECTION_SOURCE, namespace={})


def test_collection_children_are_the_golden_reply(collection_session: Session) -> None:
    """reply_children_collection.json is this kernel's answer, exactly (regenerate it with
    TDVIEW_WRITE_GOLDEN=1 when the protocol changes on purpose)."""
    reply, buffers = reply_to(collection_session, "children", path=[], offset=0, limit=200)
    assert buffers == []
    target = GOLDEN / "reply_children_collection.json"
    if os.environ.get("TDVIEW_WRITE_GOLDEN"):
        doc = {
            "description": "The children of a folder of checkpoints (a collection): a JSON "
            "file, a plain folder, a pickle file, and two member checkpoints, a directory "
            "and an archive, each with `member` (where the loader finds it).",
            "method": "children",
            "message": reply,
            "buffers": [],
        }
        text = json.dumps(doc, indent=2)  # lists of scalars on one line, as the others
        text = re.sub(
            r"\[\s+([^\[\]{}]*?)\s+\]",
            lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]",
            text,
        )
        target.write_text(text + "\n")
    gold = golden("reply_children_collection")
    assert reply == gold["message"]
    kinds = {c["kind"] for c in reply["result"]["children"]}
    assert kinds == {"json", "folder", "pickle", "checkpoint"}


@pytest.mark.parametrize(
    "path",
    [
        [],
        ["logs"],
        ["config.json"],
        ["prefetch.pkl"],
        ["step_1000"],
        ["step_2000.tdz", "model", "weight"],
    ],
)
def test_collection_node_details_have_the_golden_keys(
    collection_session: Session, path: list[str]
) -> None:
    """Every node of a collection is a ``NodeDetails`` (the golden keys, each typed), plus
    ``member`` on a member checkpoint and inside it."""
    reply, _ = reply_to(collection_session, "node", path=path)
    assert reply["ok"], reply
    result = reply["result"]
    member = result.pop("member", None)
    same_shape(result, golden("reply_node")["message"]["result"], "result")
    inside = path[:1] in (["step_1000"], ["step_2000.tdz"])
    assert (member is not None) == inside
    if member is not None:
        assert member == {
            "source": os.path.join(COLLECTION_SOURCE, path[0]),
            "depth": 1,
            "container": "archive" if path[0].endswith(".tdz") else "directory",
        }


def _ts_list(path: Path, name: str) -> list[str]:
    """The strings of ``export const NAME = [...]`` in a TypeScript file."""
    text = path.read_text(encoding="utf-8")
    found = re.search(rf"export const {name} = \[(.*?)\]", text, re.S)
    assert found, f"no {name} in {path}"
    return re.findall(r'"([^"]+)"', found.group(1))


def test_the_method_table_is_the_front_ends_list() -> None:
    """One table of methods in Python (name, params, lane, answer); the names are the
    front end's, in its order (protocol.ts ``METHODS`` ends with compare-protocol.ts's
    ``DIFF_METHODS``)."""
    from tdview.protocol._dispatch import LANES
    from tdview.protocol._methods import TABLE

    src = Path(__file__).resolve().parents[1] / "js" / "src"
    names = [
        *_ts_list(src / "protocol.ts", "METHODS"),
        *_ts_list(src / "compare-protocol.ts", "DIFF_METHODS"),
    ]
    assert list(TABLE) == names
    for method in TABLE.values():
        assert method.lane({"totals": False}) in LANES and method.lane({}) in LANES
