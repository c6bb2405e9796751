"""Hostile input, bounded: the work a request does and the size of what comes back.

A few kilobytes of deflate can hold tens of megabytes of pickle opcodes; a request can
nest 10,000 deep or carry a 50 MB key. Each test feeds one such input and checks that
the work (pickle opcodes decoded, counted, never timed), the reply and the error message
stay bounded, and that other requests keep being answered meanwhile.
"""

from __future__ import annotations

import json
import pickle
import pickletools
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from tensordict import NonTensorData, TensorDict

from tdview.errors import Cancelled
from tdview.format import SCAN_STOPPED, ScanLimits, scan_pickle
from tdview.index import Checkpoint, cancel_point, cancellable, pickle_info
from tdview.protocol import Dispatcher, Session, handle
from tdview.protocol import _messages as messages
from tdview.protocol._dispatch import LANES, lane


#: A dense pickle: one opcode every byte or two (NONE, POP, ... STOP).
def dense_pickle(size: int) -> bytes:
    return b"\x80\x04" + b"N0" * ((size - 4) // 2) + b"N."


def request(method: str, params: dict, rid: int = 7) -> dict:
    return {"kind": "tdview:request", "v": 1, "id": rid, "method": method, "params": params}


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A .tdz whose non-tensor entry holds 8 MiB of dense pickle in a few KB of deflate."""
    root = tmp_path_factory.mktemp("bomb")
    TensorDict(a=torch.zeros(3), s=NonTensorData({1, 2}), batch_size=[]).save(str(root / "src.tdz"))
    path = root / "bomb.tdz"
    with zipfile.ZipFile(root / "src.tdz") as src, zipfile.ZipFile(path, "w") as out:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("other.pickle"):
                out.writestr(info.filename, dense_pickle(8 << 20), zipfile.ZIP_DEFLATED)
            else:
                out.writestr(info, data)
    assert path.stat().st_size < 64 << 10
    return path


# ------------------------------------------------------------------ the pickle scan


def test_scan_stops_after_its_opcode_budget():
    info = scan_pickle(dense_pickle(1 << 20), "p", ScanLimits(opcodes=1000))
    assert not info.complete and not info.is_plain_data and info.end is None
    assert info.unknown == f"{SCAN_STOPPED}; stopped after 1,000 opcodes"


@pytest.fixture
def opcodes_walked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``[n]``: the pickle opcodes decoded by every scan meanwhile, the work a hostile
    pickle costs (a dense 8 MiB one holds about 4 million)."""
    walked = [0]
    genops = pickletools.genops

    def counted(data: bytes) -> Iterator:
        for item in genops(data):
            walked[0] += 1
            yield item

    monkeypatch.setattr(pickletools, "genops", counted)
    return walked


def test_scan_stops_after_its_time_budget(monkeypatch: pytest.MonkeyPatch):
    """The scan reads its clock every few thousand opcodes: a clock that moves 0.02 s a
    reading passes a 0.05 s budget at its fourth reading, three batches in."""
    from tdview.format import _pickle_scan

    readings: list[float] = []

    def clock() -> float:
        readings.append(len(readings) * 0.02 + 0.02)
        return readings[-1]

    monkeypatch.setattr(_pickle_scan, "time", SimpleNamespace(monotonic=clock))
    info = scan_pickle(dense_pickle(8 << 20), "p", ScanLimits(seconds=0.05))
    batch = _pickle_scan._CLOCK_EVERY
    assert info.stopped == f"stopped after 0.05 s, at opcode {3 * batch:,}"
    assert len(readings) == 4


def test_scan_refuses_more_bytes_than_its_budget():
    info = scan_pickle(pickle.dumps(b"x" * 5000), "p", ScanLimits(bytes=4096))
    assert info.unknown == f"{SCAN_STOPPED}; larger than 0.00390625 MiB"
    assert info.globals == () and not info.is_plain_data


def test_scan_keeps_the_globals_found_before_it_stopped():
    data = pickle.dumps([torch.Size, *range(10_000)])
    info = scan_pickle(data, "p", ScanLimits(opcodes=100))
    assert ("torch", "Size") in info.globals and not info.complete


def test_a_complete_scan_is_unchanged():
    info = scan_pickle(pickle.dumps({"a": 1}), "p")
    assert info.complete and info.unknown is None and info.is_plain_data and info.end


def test_dense_pickle_archive_tree_scans_once_and_says_so(bomb: Path, opcodes_walked, capsys):
    """One scan, stopped at its opcode budget (it walked all 4 million, 10 s for 8 MiB)."""
    from tdview.__main__ import main

    assert main(["tree", str(bomb)]) == 0
    assert f"({SCAN_STOPPED}; stopped after" in capsys.readouterr().out
    assert 0 < opcodes_walked[0] <= ScanLimits().opcodes + 1


def test_dense_pickle_node_reply_says_imports_unknown(bomb: Path, opcodes_walked):
    session = Session(Checkpoint(bomb), str(bomb))
    reply, _ = handle(session, request("node", {"path": ["s"]}))
    assert 0 < opcodes_walked[0] <= ScanLimits().opcodes + 1  # one scan, within its budget
    assert reply is not None and reply["ok"]
    result = reply["result"]
    assert result["pickle"]["stopped"].startswith(SCAN_STOPPED)
    assert any(SCAN_STOPPED in p and "other.pickle" in p for p in result["problems"])


def test_pickle_info_does_not_read_a_pickle_larger_than_its_budget(bomb: Path, monkeypatch):
    from tdview.index import _facts

    monkeypatch.setattr(_facts, "MAX_PICKLE_BYTES", 1 << 20)
    with Checkpoint(bomb) as ckpt:
        info = pickle_info(ckpt.store, ckpt.node("s"))
    assert info is not None and info.unknown == f"{SCAN_STOPPED}; larger than 1 MiB"


def test_collection_side_pickle_is_bounded(tmp_path: Path):
    from tdview.views._collection import describe_own

    TensorDict(a=torch.zeros(1)).memmap(tmp_path / "ckpt")
    (tmp_path / "state.pkl").write_bytes(pickle.dumps({"step": 3}))
    (tmp_path / "big.pkl").write_bytes(dense_pickle(3 << 20))
    with Checkpoint(tmp_path) as coll:
        texts = {n.key: describe_own(coll, n, rollups=False) for n in coll.children(coll.root)}
        assert f"({SCAN_STOPPED}; larger than 1 MiB)" in texts["big.pkl"]
        assert "(no imports; never unpickled by tdview)" in texts["state.pkl"]
        session = Session(coll, str(tmp_path))
        reply, _ = handle(session, request("node", {"path": ["big.pkl"]}))
    assert reply is not None and reply["result"]["pickle"]["stopped"].startswith(SCAN_STOPPED)


# ------------------------------------------------------------------ no request freezes another


def test_lanes_split_clicks_from_walks():
    assert lane(request("node", {"path": [], "totals": False})) == "browse"
    assert lane(request("children", {"path": []})) == "walk"
    assert lane(request("search", {"pattern": "x"})) == "walk"
    assert lane(request("preview", {})) == "preview" and lane(request("load", {})) == "load"
    assert lane("junk") == lane({"method": 3}) == "browse"


def test_slow_requests_do_not_freeze_browsing(demo_paths, monkeypatch):
    """Both walk threads busy with searches that never end, a slow node (a pickle scan):
    a click's children and node are answered at once, and the searches end when
    cancelled."""
    from tdview.protocol import _search, _summaries

    release = threading.Event()

    def endless_search(ckpt, pattern, limit, **_):
        while True:
            cancel_point()
            time.sleep(0.01)

    real_details = _summaries.details

    def slow_details(ckpt, node, *, totals=True):
        if node.path == ("replay",):
            release.wait(30)
        return real_details(ckpt, node, totals=totals)

    monkeypatch.setattr(_search, "search_result", endless_search)
    monkeypatch.setattr(_summaries, "details", slow_details)
    sent: list[dict] = []
    got = threading.Condition()

    def send(content: dict, buffers: list) -> None:
        with got:
            sent.append(content)
            got.notify_all()

    path = demo_paths["directory"]
    dispatcher = Dispatcher(Session(Checkpoint(path), str(path)), send)
    for rid in range(LANES["walk"]):
        dispatcher.receive(request("search", {"pattern": "x", "limit": 5}, rid=100 + rid))
    dispatcher.receive(request("node", {"path": ["replay"], "totals": False}, rid=200))
    dispatcher.receive(
        request("children", {"path": [], "offset": 0, "limit": 5, "totals": False}, rid=1)
    )
    dispatcher.receive(request("node", {"path": ["model"], "totals": False}, rid=2))

    def answered(*ids: int) -> bool:
        with got:
            return got.wait_for(lambda: {1, 2, *ids} <= {m.get("id") for m in sent}, 30)

    assert answered()  # while both searches and the slow node still run
    for rid in range(LANES["walk"]):
        dispatcher.receive({"kind": "tdview:cancel", "v": 1, "id": 100 + rid})
    release.set()
    assert answered(100, 101, 200)
    dispatcher.close()
    by_id = {m["id"]: m for m in sent}
    assert by_id[1]["ok"] and by_id[2]["ok"] and by_id[200]["ok"]
    assert by_id[100]["error"]["type"] == by_id[101]["error"]["type"] == "Cancelled"


def test_a_cancelled_search_stops_walking(tmp_path: Path, monkeypatch):
    keys = {f"k{i}": TensorDict(x=torch.zeros(1)) for i in range(200)}
    TensorDict(keys).memmap(tmp_path / "ckpt")
    session = Session(Checkpoint(tmp_path / "ckpt"), "ckpt")
    calls = []
    real = session.check

    def check(request_id: int) -> None:  # what every cancel point of the walk calls
        calls.append(request_id)
        if len(calls) == 10:  # the client cancels while the walk is at its 10th folder
            session.cancel(request_id)
        real(request_id)

    monkeypatch.setattr(session, "check", check)
    reply, _ = handle(session, request("search", {"pattern": "nothing", "limit": 5}, rid=9))
    assert reply is not None and reply["error"]["type"] == "Cancelled"
    assert len(calls) == 10  # it stopped at once (of 200 folders)


def test_cancel_point_outside_a_request_does_nothing():
    cancel_point()

    def stop() -> None:
        raise Cancelled("request 1 was cancelled")

    with pytest.raises(Cancelled), cancellable(stop):
        cancel_point()
    cancel_point()  # the check is gone with the block


# ------------------------------------------------------------------ bounded messages


def _deep(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "params",
    [
        {"path": _deep(10_000)},
        {"path": ["a"], "extra": {"x": _deep(10_000)}},  # unknown keys are bounded too
        {"path": ["k" * (2 << 20)]},
        {"path": ["a"] * 5000},
    ],
)
def test_over_deep_or_large_params_get_an_error_reply(demo_paths, params):
    session = Session(Checkpoint(demo_paths["directory"]), "demo")
    reply, _ = handle(session, request("node", params))
    assert reply is not None and reply["ok"] is False
    assert reply["error"]["type"] == "RequestError"
    assert len(json.dumps(reply)) < 1000


def test_deep_params_through_the_widget_handler(demo_paths):
    from tdview import TDView

    view = TDView(demo_paths["directory"])
    sent: list[dict] = []
    view._dispatcher._send = lambda content, buffers: sent.append(content)
    view._on_custom_msg(
        view, request("children", {"path": _deep(10_000), "offset": 0, "limit": 1}, rid=5), []
    )
    assert view._dispatcher.drain(30)
    view.close()
    assert sent and sent[0]["id"] == 5 and sent[0]["error"]["type"] == "RequestError"


def test_a_long_key_is_not_echoed_whole(demo_paths):
    """A key of 900,000 characters (under the message bound): no reply echoes it whole."""
    session = Session(Checkpoint(demo_paths["archive"]), "demo")
    key = "k" * 900_000
    for method, params in [
        ("node", {"path": [key]}),
        ("children", {"path": [key], "offset": 0, "limit": 5}),
        ("preview", {"path": [key], "rows": 5}),
        (
            "load",
            {"path": [key], "device": "cpu", "mode": "r", "allow_pickle": False, "variable": None},
        ),
    ]:
        reply, _ = handle(session, request(method, params))
        assert reply is not None and reply["ok"] is False
        assert len(reply["error"]["message"]) <= messages.MAX_MESSAGE + 100, method
        assert reply["error"]["path"] == [key]  # the request's path, as it came


def test_every_reply_has_a_size_cap(demo_paths, monkeypatch):
    monkeypatch.setattr(messages, "MAX_REPLY_BYTES", 2000)
    session = Session(Checkpoint(demo_paths["directory"]), "demo")
    reply, buffers = handle(session, request("children", {"path": [], "offset": 0, "limit": 100}))
    assert reply is not None and reply["ok"] is False and buffers == []
    error = reply["error"]
    assert error["type"] == "LimitExceededError"
    assert "2,000 bytes (MAX_REPLY_BYTES)" in error["message"]


def test_integers_beyond_javascript_are_clamped():
    reply, _ = messages.bound_reply(messages.reply_ok(1, {"n": [2**60, -(2**70), 3]}), [], "x")
    assert reply["result"] == {"n": [2**53 - 1, -(2**53 - 1), 3]}


def test_an_error_whose_text_cannot_be_made_still_gets_a_reply(demo_paths, monkeypatch):
    from tdview.protocol import _summaries

    class Nasty(Exception):
        def __str__(self) -> str:
            raise RecursionError("maximum recursion depth exceeded")

    def fail(*args, **kwargs):
        raise Nasty

    monkeypatch.setattr(_summaries, "details", fail)
    session = Session(Checkpoint(demo_paths["directory"]), "demo")
    reply, _ = handle(session, request("node", {"path": []}))
    assert reply is not None and reply["error"]["type"] == "Nasty"
