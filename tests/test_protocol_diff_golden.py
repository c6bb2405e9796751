"""The compare view's golden messages (tests/protocol/*diff*.json, state_compare.json, also
read by the JS tests), the dispatcher's wiring of the diff methods (lanes, a session that
compares, refusals), and ``TDView(a, compare=b)`` without a kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tdview import TDView
from tdview.protocol import METHODS, Session, handle, parse_request
from tdview.protocol._compare import Comparison
from tdview.protocol._diff import open_view
from tdview.protocol._dispatch import lane
from tdview.protocol._preview import preview

from .corpus import write_diff_pair
from .test_protocol_golden import NAMES, check_buffers, golden, json_type

DIFF_METHODS = ("diff_children", "diff_node", "diff_refine", "diff_preview", "diff_load")
#: Keys of a side's facts: ``kind`` and ``class`` always, a leaf's ``dtype``, ``shape`` and
#: ``bytes`` too, the others when the side has them.
FACT_KEYS = {
    "kind",
    "class",
    "dtype",
    "shape",
    "nested",
    "bytes",
    "batch_size",
    "names",
    "value",
    "pickled",
}
#: Keys whose value may be null in a diff message.
NULLABLE = {
    "renamed_from",
    "path_a",
    "path_b",
    "kind",
    "a",
    "b",
    "fingerprint",
    "values",
    "value_equal",
    "note",
    "problem",
    "rollup",
    "differing",
    "max_abs",
    "mean_abs",
    "rel_l2",
    "cosine",
    "root",
    "variable",
    "scalars",
}


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """The checkpoints of the golden files: a model before and after a step, a key
    renamed (old -> new) and one added (extra)."""
    return write_diff_pair(tmp_path / "before", tmp_path / "after.tdz")


@pytest.fixture
def session(pair: tuple[Path, Path]):
    view = open_view(*pair)
    yield Session(
        None, "runs/before", namespace={}, diff=Comparison(view, "runs/before", "runs/after.tdz")
    )
    view.close()


def diff_shape(mine: object, gold: object, where: str = "message", key: str = "") -> None:
    """``same_shape`` for diff messages: a side's facts have the keys its kind has (the
    golden file's and maybe more of FACT_KEYS), a preview inside is a preview."""
    if mine is None or gold is None:
        assert mine is not None or key in NULLABLE, f"{where} is null"
        return
    assert json_type(mine) == json_type(gold), f"{where}: {json_type(mine)} != {json_type(gold)}"
    if isinstance(gold, dict) and key in ("a", "b") and "class" in gold:
        assert isinstance(mine, dict)
        assert set(gold) <= set(mine) <= FACT_KEYS, f"{where}: keys {sorted(mine)}"
        return
    if isinstance(gold, dict) and key in ("a", "b") and "slice" in gold:
        return  # a PreviewResult: checked against the preview method's own reply
    if isinstance(gold, dict):
        assert set(mine) == set(gold), f"{where}: keys {sorted(set(mine) ^ set(gold))} differ"
        for k in gold:
            if k != "value":
                diff_shape(mine[k], gold[k], f"{where}.{k}", k)
    elif isinstance(gold, list) and gold and mine:
        for i, item in enumerate(mine):
            diff_shape(item, gold[min(i, len(gold) - 1)], f"{where}[{i}]", key)


def ask(session: Session, method: str, params: dict) -> tuple[dict, list[bytes]]:
    message = {
        "kind": "tdview:request",
        "v": 1,
        "id": 8589934593,
        "method": method,
        "params": params,
    }
    reply, buffers = handle(session, message)
    json.dumps(reply, allow_nan=False)
    return reply, buffers


def test_the_golden_files_are_there() -> None:
    for method in DIFF_METHODS:
        assert f"request_{method}" in NAMES and f"reply_{method}" in NAMES
        assert method in METHODS
    assert "state_compare" in NAMES


@pytest.mark.parametrize("method", DIFF_METHODS)
def test_golden_requests_parse_and_replies_match(session: Session, method: str) -> None:
    request = golden(f"request_{method}")["message"]
    parsed = parse_request(request)
    assert parsed.method == method
    assert set(parsed.params) >= set(request["params"])
    if method != "diff_refine":  # the golden replies follow the refine of model
        ask(session, "diff_refine", {"path": ["model"], "level": "values"})
    reply, buffers = ask(session, method, request["params"])
    assert reply["ok"], reply
    doc = golden(f"reply_{method}")
    assert doc["method"] == method
    diff_shape(reply, doc["message"])
    if method == "diff_preview":
        assert reply["result"]["a"] is None
        side = reply["result"]["b"]
        alone, alone_buffers = preview(session.diff.view.b, ("extra",), 2)
        assert set(side) == set(alone)
        check_buffers(side, buffers)
        assert buffers == alone_buffers
    else:
        assert buffers == doc["buffers"] == []


def test_golden_items_are_the_kernel_rows(session: Session) -> None:
    """The golden page is this kernel's answer, but for the facts left out of nodes."""
    ask(session, "diff_refine", {"path": ["model"], "level": "values"})
    reply, _ = ask(session, "diff_children", {"path": ["model"], "offset": 0, "limit": 200})
    gold = golden("reply_diff_children")["message"]["result"]
    assert reply["result"] == gold


def test_golden_compare_state(pair: tuple[Path, Path]) -> None:
    view = TDView(*pair[:1], compare=pair[1])
    try:
        state = view.get_state()
        traits = {k: state[k] for k in golden("state_compare")["message"]}
        traits = json.loads(json.dumps(traits))
        diff_shape(traits, golden("state_compare")["message"])
        assert traits["root"] is None and traits["compare"]["summary"]["level"] == "metadata"
        assert traits["compare"]["source_b"] == str(pair[1])
        gold = golden("state_compare")["message"]["compare"]["summary"]["summary"]
        assert traits["compare"]["summary"]["summary"] == gold
    finally:
        view.close()


def test_lanes() -> None:
    def request(method: str) -> dict:
        return {"method": method, "params": {"path": []}}

    assert lane(request("diff_children")) == lane(request("diff_node")) == "browse"
    assert lane(request("diff_preview")) == "preview"
    assert lane(request("diff_refine")) == lane(request("diff_load")) == "load"
    assert lane({"method": ["diff_refine"], "params": {}}) == "browse"  # unhashable: checked


def test_bad_params_are_request_errors(session: Session) -> None:
    for method, params, where in [
        ("diff_children", {"path": [], "offset": 0, "limit": 5, "only_changed": 1}, "only_changed"),
        ("diff_refine", {"path": [], "level": "bytes"}, "level"),
        ("diff_refine", {"path": [], "level": "values", "atol": -1}, "atol"),
        ("diff_refine", {"path": [], "level": "values", "rtol": True}, "rtol"),
        ("diff_preview", {"path": ["extra"]}, "rows"),
        (
            "diff_load",
            {
                "side": "c",
                "path": [],
                "device": "cpu",
                "mode": "r",
                "allow_pickle": False,
                "variable": None,
            },
            "side",
        ),
        (
            "diff_load",
            {
                "side": "a",
                "path": [],
                "device": "cpu",
                "mode": "r",
                "allow_pickle": False,
                "variable": "__x__",
            },
            "variable",
        ),
    ]:
        reply, _ = ask(session, method, params)
        assert not reply["ok"] and reply["error"]["type"] == "RequestError", reply
        assert where in reply["error"]["message"]
    limited, _ = ask(session, "diff_children", {"path": [], "offset": 0, "limit": 10**9})
    assert limited["ok"]


def test_a_compare_session_answers_diff_methods_only(
    session: Session, demo_paths: dict[str, Path]
) -> None:
    reply, _ = ask(session, "children", {"path": [], "offset": 0, "limit": 5})
    assert reply["error"]["type"] == "NoCheckpointError"
    devices, _ = ask(session, "devices", {})
    assert devices["ok"] and devices["result"]["devices"][0]["name"] == "cpu"
    from tdview.index import Checkpoint

    plain = Session(Checkpoint(demo_paths["archive"]), "demo", namespace={})
    reply, _ = ask(plain, "diff_node", {"path": []})
    assert reply["error"]["type"] == "NoCheckpointError"
    assert "compare=" in reply["error"]["message"]


def test_diff_load_binds_one_side(session: Session) -> None:
    params = {
        "side": "b",
        "path": ["model", "new"],
        "device": "cpu",
        "mode": "r",
        "allow_pickle": False,
        "variable": "moved",
    }
    reply, _ = ask(session, "diff_load", params)
    assert reply["ok"], reply
    assert reply["result"]["code"] == (
        'moved = tdview.Checkpoint("runs/after.tdz").load_leaf("model/new", device="cpu", mode="r")'
    )
    assert torch.equal(session.namespace["moved"], torch.arange(6.0))
    old, _ = ask(session, "diff_load", {**params, "side": "a", "path": ["model", "new"]})
    assert old["error"]["type"] == "SubpathError"  # side a has model/old, not model/new


def test_refine_cancel_and_progress_through_the_widget(pair: tuple[Path, Path]) -> None:
    view = TDView(str(pair[0]), compare=str(pair[1]))
    sent: list[dict] = []
    view.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
    try:
        message = {
            "kind": "tdview:request",
            "v": 1,
            "id": 7,
            "method": "diff_refine",
            "params": {"path": [], "level": "values"},
        }
        view._on_custom_msg(view, message, [])
        assert view._dispatcher.drain(60)
        kinds = [m["kind"] for m in sent if m["id"] == 7]
        assert kinds[-1] == "tdview:reply" and "tdview:progress" in kinds
        assert view.compare["summary"]["level"] == "values"  # the trait follows
        assert view.diff is not None and view.diff.level == "values"
        assert view.diff.row("model/w").values.differing == 12
        text = view._repr_mimebundle_()[0]["text/plain"]
        assert "~ model/w" in text and "+ extra" in text
    finally:
        view.close()


def test_an_unopenable_side_is_shown_not_raised(pair: tuple[Path, Path], tmp_path: Path) -> None:
    view = TDView(str(pair[0]), compare=str(tmp_path / "missing"))
    try:
        assert view.compare is None and view.diff is None
        assert "missing" in view.error
        assert "missing" in view._repr_mimebundle_()[0]["text/plain"]
    finally:
        view.close()
