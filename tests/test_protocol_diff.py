"""The compare view's kernel side (tdview.protocol._diff) on checkpoints written by
tensordict: pages of the union tree, details, refining a subtree, side-by-side preview,
each asked as the widget asks it (the dispatcher's ``handle``, through the table of
methods)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tdview.errors import Cancelled, RequestError, SubpathError
from tdview.protocol import Session, handle
from tdview.protocol._compare import Comparison
from tdview.protocol._diff import DiffView, open_view, summary

from .corpus import write_diff_pair


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return write_diff_pair(tmp_path / "a", tmp_path / "b.tdz")


_ERRORS = {error.__name__: error for error in (Cancelled, RequestError, SubpathError)}


def ask(
    view: DiffView,
    method: str,
    params: dict,
    progress: Callable[[int, int, str], None] | None = None,
    *,
    cancel: bool = False,
) -> tuple[dict, list[bytes]]:
    """``(result, buffers)`` of a compare-view request, answered as the widget's
    dispatcher answers it; an error reply is raised as its class (``cancel``: the
    request is cancelled at its first progress report)."""
    a, b = str(view.result.a), str(view.result.b)
    session = Session(None, a, namespace={}, diff=Comparison(view, a, b))

    def cancel_it(done: int, total: int, label: str) -> None:
        session.cancel(1)

    message = {"kind": "tdview:request", "v": 1, "id": 1, "method": method, "params": params}
    reply, buffers = handle(session, message, progress_fn=cancel_it if cancel else progress)
    assert reply is not None
    if not reply["ok"]:
        raise _ERRORS[reply["error"]["type"]](reply["error"]["message"])
    return reply["result"], buffers


def _json(value: object) -> object:
    return json.loads(json.dumps(value, allow_nan=False))  # strict JSON: every number finite


def test_pages_of_the_union_tree(pair: tuple[Path, Path]) -> None:
    view = open_view(*pair)
    try:
        state = _json(summary(view))
        assert state["level"] == "metadata" and state["equal"] is False
        assert state["summary"]["added"] == 2 and state["summary"]["removed"] == 1
        page, buffers = ask(view, "diff_children", {"path": [], "offset": 0, "limit": 10})
        assert buffers == []
        page = _json(page)
        assert [i["key"] for i in page["items"]] == ["step", "same", "extra", "model"]
        model = page["items"][-1]
        assert model["has_children"] and model["rollup"]["added"] == 1
        assert page["items"][2]["status"] == "added" and page["items"][2]["a"] is None
        first, _ = ask(view, "diff_children", {"path": ["model"], "offset": 1, "limit": 2})
        assert first["total"] == 4 and [i["key"] for i in first["items"]] == ["b", "new"]
        changed, _ = ask(
            view, "diff_children", {"path": [], "offset": 0, "limit": 10, "only_changed": True}
        )
        # the weights' values are unread; step's two numbers are read (1 and 2)
        assert [i["key"] for i in changed["items"]] == ["step", "extra", "model"]
        node, _ = ask(view, "diff_node", {"path": ["model", "w"]})
        assert _json(node)["rollup"]["same"] == 1 and node["a"]["dtype"] == "float32"
    finally:
        view.close()


def test_refine_a_subtree_to_values(pair: tuple[Path, Path]) -> None:
    view = open_view(*pair)
    calls: list[tuple[int, int, str]] = []
    try:
        state, _ = ask(
            view,
            "diff_refine",
            {"path": ["model"], "level": "values"},
            progress=lambda *args: calls.append(args),
        )
        state = _json(state)
        assert state["level"] == "mixed"
        assert calls and calls[-1][0] == calls[-1][1]
        page, _ = ask(view, "diff_children", {"path": ["model"], "offset": 0, "limit": 10})
        by_key = {i["key"]: i for i in _json(page)["items"]}
        assert by_key["w"]["status"] == "changed"
        assert by_key["w"]["values"]["max_abs"] == pytest.approx(0.5)
        assert by_key["w"]["values"]["differing"] == 12
        assert by_key["new"]["status"] == "renamed"
        assert by_key["new"]["renamed_from"] == ["model", "old"]
        assert "old" not in by_key
        assert by_key["b"]["values"]["equal"] is True
        # the rest of the tree keeps its metadata rows
        top, _ = ask(view, "diff_children", {"path": [], "offset": 0, "limit": 10})
        assert {i["key"]: i["values"] for i in top["items"]}["step"] is None
        with pytest.raises(Cancelled):
            ask(view, "diff_refine", {"path": [], "level": "values"}, cancel=True)
    finally:
        view.close()


def test_preview_of_both_sides(pair: tuple[Path, Path]) -> None:
    view = open_view(*pair)
    try:
        result, buffers = ask(view, "diff_preview", {"path": ["model", "w"], "rows": 2})
        result = _json(result)
        a_slice, b_slice = result["a"]["slice"], result["b"]["slice"]
        assert b_slice["buffer"] > a_slice["buffer"]
        a_rows = torch.frombuffer(bytearray(buffers[a_slice["buffer"]]), dtype=torch.float32)
        b_rows = torch.frombuffer(bytearray(buffers[b_slice["buffer"]]), dtype=torch.float32)
        assert torch.allclose(b_rows - a_rows, torch.full_like(a_rows, 0.5))
        added, _ = ask(view, "diff_preview", {"path": ["extra"], "rows": 2})
        assert added["a"] is None and added["b"]["shape"] == [2]
    finally:
        view.close()


def test_bad_requests(pair: tuple[Path, Path]) -> None:
    view = open_view(*pair)
    try:
        with pytest.raises(RequestError, match="method"):
            ask(view, "diff_everything", {"path": []})
        with pytest.raises(RequestError, match="offset"):
            ask(view, "diff_children", {"path": [], "offset": -1, "limit": 1})
        with pytest.raises(RequestError, match="level"):
            ask(view, "diff_refine", {"path": [], "level": "bytes"})
        with pytest.raises(RequestError, match="rtol"):
            ask(view, "diff_refine", {"path": [], "level": "values", "rtol": float("nan")})
        with pytest.raises(SubpathError, match="no key"):
            ask(view, "diff_node", {"path": ["nope"]})
    finally:
        view.close()


def test_two_archives_open_by_their_crcs_and_read_only_the_scalars(
    tmp_path: Path, monkeypatch
) -> None:
    """``TDView(step_1000.tdz, compare=step_2000.tdz)``: every tensor is compared by the
    CRC-32 the central directory records; the only payload bytes read are those of the
    one-element leaves (the run's ``step``, AdamW's per-parameter ``step``), whose
    numbers show in their rows."""
    from tdview import TDView
    from tdview.storage import ArchiveStore

    from .training_steps import write_training_steps

    a, b = write_training_steps(tmp_path)
    read: list[str] = []
    real = ArchiveStore.read_bytes

    def counted(self: ArchiveStore, key: str, limit: int) -> bytes:
        if not key.endswith(".json"):
            read.append(key)
            assert limit <= 8, (key, limit)
        return real(self, key, limit)

    monkeypatch.setattr(ArchiveStore, "read_bytes", counted)
    for name in ("raw_payload", "payload", "decompress", "read_into", "read_ranges"):
        monkeypatch.setattr(ArchiveStore, name, _refused)
    view = TDView(str(a), compare=str(b))
    try:
        state = view.compare
        assert state is not None and state["summary"]["level"] == "fingerprint"
        totals = state["summary"]["summary"]
        assert totals["same_metadata"] == 0 and totals["same_crc"] == 2
        scalars = {r.path for r in view.diff if r.scalars is not None}
        assert ("step",) in scalars and len(scalars) > 1
        assert all(r.path[-1] == "step" for r in view.diff if r.scalars is not None)
        steps = [k for k in read if k.endswith("step.memmap")]
        assert sorted(read) == sorted(steps) and len(read) <= 2 * len(scalars)
        dview = view.comparison.view
        top, _ = ask(dview, "diff_children", {"path": [], "offset": 0, "limit": 50})
        items = {i["key"]: i for i in _json(top)["items"]}
        assert items["step"]["status"] == "changed" and items["step"]["scalars"] == [1000, 2000]
        assert items["lr"]["scalars"] is None  # a JSON value: its facts hold it
        assert items["model"]["scalars"] is None and items["model"]["unverified"] is False
        path = ["optimizer", "state", "head.bias"]
        moments, _ = ask(dview, "diff_children", {"path": path, "offset": 0, "limit": 50})
        by_key = {i["key"]: i for i in _json(moments)["items"]}
        assert by_key["step"]["scalars"] == [3.0, 6.0]  # AdamW's own step count
        assert by_key["exp_avg"]["scalars"] is None
        assert by_key["exp_avg"]["fingerprint"] == "differs"
        norm, _ = ask(dview, "diff_node", {"path": ["model", "norm", "weight"]})
        assert norm["status"] == "same" and norm["fingerprint"] == "crc_equal"
        assert norm["unverified"] is False
        assert (
            "~ step  int64 [] 8 B content changed; differs; 1000 -> 2000"
            in (view._repr_mimebundle_()[0]["text/plain"])
        )
    finally:
        view.close()


def test_a_directory_against_an_archive_says_what_was_not_compared(
    pair: tuple[Path, Path],
) -> None:
    view = open_view(*pair)
    try:
        totals = _json(summary(view))["summary"]
        # same and model/b: the same by shape and dtype alone (model/w too: values
        # unread); step holds 1 and 2, read: changed
        assert totals["same_metadata"] == totals["same_leaves"] == 3 and totals["same"] == 5
        page, _ = ask(view, "diff_children", {"path": ["model"], "offset": 0, "limit": 10})
        b = {i["key"]: i for i in _json(page)["items"]}["b"]
        assert b["status"] == "same" and b["unverified"] is True and b["fingerprint"] is None
        ask(view, "diff_refine", {"path": [], "level": "values"})
        again = _json(summary(view))["summary"]
        assert again["same_metadata"] == 0 and again["same_crc"] == 0
        top, _ = ask(view, "diff_children", {"path": [], "offset": 0, "limit": 10})
        step = {i["key"]: i for i in _json(top)["items"]}["step"]
        assert step["scalars"] == [1, 2] and step["status"] == "changed"
    finally:
        view.close()


def _refused(*args: object, **kwargs: object) -> None:
    raise AssertionError("a payload was read")
