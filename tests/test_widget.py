"""TDView without a kernel: traits, the message handler, static renderings."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from tdview import TDView
from tdview.protocol import PROTOCOL_VERSION
from tdview.protocol._dispatch import LANES

from .test_protocol_golden import golden, same_shape

TRAITS = ("_protocol_version", "source", "root", "selected", "options", "error")


class Recorder:
    """Stands in for the comm: collects what the widget sends."""

    def __init__(self, view: TDView) -> None:
        self.view = view
        self.sent: list[tuple[dict, list]] = []
        view.send = lambda content, buffers=None: self.sent.append((content, buffers or []))

    def ask(self, method: str, rid: int = 41, **params) -> dict:
        message = {"kind": "tdview:request", "v": 1, "id": rid, "method": method, "params": params}
        self.view._on_custom_msg(self.view, message, [])
        assert self.view._dispatcher.drain(60)
        replies = [c for c, _ in self.sent if c["kind"] == "tdview:reply" and c["id"] == rid]
        assert len(replies) == 1
        json.dumps(replies[0], allow_nan=False)
        return replies[0]


def state(view: TDView) -> dict:
    full = view.get_state()
    return json.loads(json.dumps({name: full[name] for name in TRAITS}))


@pytest.fixture(params=["directory", "archive"])
def view(request: pytest.FixtureRequest, demo_paths: dict[str, Path]):
    widget = TDView(demo_paths[request.param])
    yield widget
    widget.close()


def test_state_matches_golden(view: TDView) -> None:
    traits = state(view)
    same_shape(traits, golden("state")["message"])
    assert traits["_protocol_version"] == PROTOCOL_VERSION
    assert traits["root"]["n_children"] == 10 and traits["root"]["path"] == []
    assert traits["options"] == {
        "device": "cpu",
        "mode": "r",
        "allow_pickle": False,
        "robust_key": True,
        "can_bind": False,
    }  # no IPython here
    assert traits["error"] == "" and traits["selected"] == []


def test_esm_and_css_are_the_built_files(view: TDView) -> None:
    static = Path(__file__).parents[1] / "tdview" / "static"
    assert view._esm == (static / "widget.js").read_text()
    assert view._css == (static / "widget.css").read_text()


def test_unopenable_checkpoint_still_constructs(tmp_path: Path) -> None:
    missing = tmp_path / "missing.tdz"
    widget = TDView(missing, device="meta", mode=None, robust_key=False)
    traits = state(widget)
    same_shape(traits, golden("state_error")["message"])
    assert traits["root"] is None and str(missing) in traits["error"]
    assert traits["options"] == {
        "device": "meta",
        "mode": None,
        "allow_pickle": False,
        "robust_key": False,
        "can_bind": False,
    }
    reply = Recorder(widget).ask("children", path=[], offset=0, limit=10)
    assert reply["ok"] is False and reply["error"]["type"] == "NoCheckpointError"
    assert str(missing) in reply["error"]["message"]
    bundle, _ = widget._repr_mimebundle_()
    assert str(missing) in bundle["text/plain"] and str(missing) in bundle["text/html"]
    with pytest.raises(RuntimeError, match="no checkpoint"):
        widget.load()


def test_broken_root_sets_error(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_text("{broken")
    widget = TDView(tmp_path)
    assert "invalid JSON" in widget.error and widget.root is not None


def test_bad_options_raise() -> None:
    with pytest.raises(ValueError, match="mode"):
        TDView("x", mode="w")
    with pytest.raises(ValueError, match="device"):
        TDView("x", device="not-a-device")


def test_message_handler_replies(view: TDView) -> None:
    recorder = Recorder(view)
    children = recorder.ask("children", path=["replay"], offset=0, limit=2)
    assert children["ok"] and children["result"]["total"] == 5
    assert [c["key"] for c in children["result"]["children"]] == ["observation", "action"]
    node = recorder.ask("node", rid=42, path=["replay", "done"])
    assert node["result"]["dtype"] == "bool"
    search = recorder.ask("search", rid=43, pattern="reward", limit=10)
    assert ["replay", "reward"] in search["result"]["matches"]
    bad = recorder.ask("nope", rid=44)
    assert bad["ok"] is False and bad["error"]["type"] == "RequestError"
    missing = recorder.ask("node", rid=45, path=["nope"])
    assert missing["error"] == {
        "type": "SubpathError",
        "message": missing["error"]["message"],
        "path": ["nope"],
    }


def test_cancel_through_the_handler(view: TDView) -> None:
    recorder = Recorder(view)
    busy = threading.Event()
    for _ in range(LANES["walk"]):  # every worker of its lane is busy: request 77 waits
        view._dispatcher._lanes["walk"].submit(busy.wait, 30)
    message = {
        "kind": "tdview:request",
        "v": 1,
        "id": 77,
        "method": "node",
        "params": {"path": ["replay"]},
    }
    view._on_custom_msg(view, message, [])
    view._on_custom_msg(view, {"kind": "tdview:cancel", "v": 1, "id": 77}, [])
    busy.set()
    assert view._dispatcher.drain(60)
    (reply,) = [c for c, _ in recorder.sent if c["kind"] == "tdview:reply" and c["id"] == 77]
    assert reply["ok"] is False and reply["error"]["type"] == "Cancelled"


def test_selected_round_trip(view: TDView) -> None:
    view.selected = ["replay", "reward"]  # as the front end sets it
    assert view.selected == ("replay", "reward")
    view.set_state({"selected": ["rollout"]})
    assert view.selected == ("rollout",)
    view.selected = ()
    assert state(view)["selected"] == []


def test_repr_mimebundle(view: TDView) -> None:
    data, _ = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    text, page = data["text/plain"], data["text/html"]
    for key in ("model", "replay", "observation", "episodes", "tags"):
        assert key in text and key in page
    assert "[1000, 8]" in text and "bfloat16" in text
    assert "tiny-transformer-demo" in text
    assert page.startswith('<div class="tdview-static">') and "<table" in page


def test_static_renderings_escape_keys_and_cut_levels(tmp_path: Path) -> None:
    evil = "<img src=x onerror=alert(1)>"
    many = {f"k{i}": torch.zeros(1) for i in range(40)}
    TensorDict({evil: torch.zeros(2), "many": TensorDict(many)}).memmap(tmp_path / "ckpt")
    widget = TDView(tmp_path / "ckpt")
    data, _ = widget._repr_mimebundle_()
    assert evil not in data["text/html"] and "&lt;img src=x" in data["text/html"]
    assert evil in data["text/plain"]
    assert "10 more" in data["text/plain"] and "10 more" in data["text/html"]


def test_select_message_sets_selected_and_bad_ones_change_nothing(view: TDView) -> None:
    view._on_custom_msg(view, {"kind": "tdview:select", "v": 1, "path": ["replay"]}, [])
    assert view.selected == ("replay",)
    for bad in (
        {"kind": "tdview:select", "v": 1, "path": "replay"},
        {"kind": "tdview:select", "v": 1, "path": [1]},
        {"kind": "tdview:select", "v": 1},
    ):
        view._on_custom_msg(view, bad, [])
        assert view.selected == ("replay",)


def test_without_a_namespace_loads_keep_the_value_and_bind_nothing(view: TDView) -> None:
    """marimo: no IPython namespace. The form offers no variable (``can_bind``), a load
    without one keeps its value as ``view.value``; one with a variable is refused."""
    recorder = Recorder(view)
    assert view.namespace is None and view.options["can_bind"] is False
    reply = recorder.ask(
        "load", rid=7, path=["replay"], device="cpu", mode="r", allow_pickle=False, variable=None
    )
    assert reply["ok"], reply
    assert tuple(view.value.batch_size) == (1000,)
    reply = recorder.ask(
        "load",
        rid=8,
        path=["replay"],
        device="cpu",
        mode="r",
        allow_pickle=False,
        variable="replay",
    )
    assert not reply["ok"] and "no namespace" in reply["error"]["message"]
    namespace: dict = {}
    view.namespace = namespace
    assert view.options["can_bind"] is True
    reply = recorder.ask(
        "load",
        rid=9,
        path=["replay"],
        device="cpu",
        mode="r",
        allow_pickle=False,
        variable="replay",
    )
    assert reply["ok"] and namespace["replay"] is view.value


def test_python_load_updates_loaded(view: TDView) -> None:
    assert view.loaded == {}
    view.load("replay")
    view.load(("model", "layers"))
    assert view.loaded == {"path": ["model", "layers"], "count": 2}


def test_python_load_of_a_leaf_is_what_the_load_button_loads(view: TDView) -> None:
    """``view.load`` on a tensor leaf loads that tensor (the Load button's answer), where
    ``Checkpoint.load(subpath=...)`` raises that a leaf is no tensordict."""
    import torch
    from tensordict import TensorDict

    leaf = view.load(("replay", "observation"))
    assert isinstance(leaf, torch.Tensor) and view.value is leaf
    expected = TensorDict.load_memmap(view.checkpoint.path)["replay", "observation"]
    assert torch.equal(leaf, expected)
    assert view.loaded == {"path": ["replay", "observation"], "count": 1}


def test_front_end_is_one_es_module_with_no_amd_or_commonjs_probing() -> None:
    """VS Code's widget renderer (not testable here) and marimo load the standard
    anywidget module: an ES module whose default export has ``render``; nothing that
    looks for ``define``/``require`` (an AMD or CommonJS host) is in it."""
    js = (Path(__file__).resolve().parents[1] / "tdview" / "static" / "widget.js").read_text()
    assert re.search(r"export\s*\{[^}]*\bas default\b[^}]*\}|export default", js)
    for probe in ("typeof define", "define.amd", "typeof require", "require(", "module.exports"):
        assert probe not in js, probe
