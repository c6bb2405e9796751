"""The compare view's kernel side (tdview.protocol._diff) on checkpoints written by
tensordict: pages of the union tree, details, refining a subtree, side-by-side preview."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tdview.errors import Cancelled, RequestError, SubpathError
from tdview.protocol._diff import handle, open_view, summary

from .corpus import write_diff_pair


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return write_diff_pair(tmp_path / "a", tmp_path / "b.tdz")


def _json(value: object) -> object:
    return json.loads(json.dumps(value, allow_nan=False))  # strict JSON: every number finite


def test_pages_of_the_union_tree(pair: tuple[Path, Path]) -> None:
    view = open_view(*pair)
    try:
        state = _json(summary(view))
        assert state["level"] == "metadata" and state["equal"] is False
        assert state["summary"]["added"] == 2 and state["summary"]["removed"] == 1
        page, buffers = handle(view, "diff_children", {"path": [], "offset": 0, "limit": 10})
        assert buffers == []
        page = _json(page)
        assert [i["key"] for i in page["items"]] == ["step", "same", "extra", "model"]
        model = page["items"][-1]
        assert model["has_children"] and model["rollup"]["added"] == 1
        assert page["items"][2]["status"] == "added" and page["items"][2]["a"] is None
        first, _ = handle(view, "diff_children", {"path": ["model"], "offset": 1, "limit": 2})
        assert first["total"] == 4 and [i["key"] for i in first["items"]] == ["b", "new"]
        changed, _ = handle(
            view, "diff_children", {"path": [], "offset": 0, "limit": 10, "only_changed": True}
        )
        # the weights' values are unread; step's two numbers are read (1 and 2)
        assert [i["key"] for i in changed["items"]] == ["step", "extra", "model"]
        node, _ = handle(view, "diff_node", {"path": ["model", "w"]})
        assert _json(node)["rollup"]["same"] == 1 and node["a"]["dtype"] == "float32"
    finally:
        view.close()


def test_refine_a_subtree_to_values(pair: tuple[Path, Path]) -> None:
    view = open_view(*pair)
    calls: list[tuple[int, int, str]] = []
    try:
        state, _ = handle(
            view,
            "diff_refine",
            {"path": ["model"], "level": "values"},
            progress=lambda *args: calls.append(args),
        )
        state = _json(state)
        assert state["level"] == "mixed"
        assert calls and calls[-1][0] == calls[-1][1]
        page, _ = handle(view, "diff_children", {"path": ["model"], "offset": 0, "limit": 10})
        by_key = {i["key"]: i for i in _json(page)["items"]}
        assert by_key["w"]["status"] == "changed"
        assert by_key["w"]["values"]["max_abs"] == pytest.approx(0.5)
        assert by_key["w"]["values"]["differing"] == 12
        assert by_key["new"]["status"] == "renamed"
        assert by_key["new"]["renamed_from"] == ["model", "old"]
        assert "old" not in by_key
        assert by_key["b"]["values"]["equal"] is True
        # the rest of the tree keeps its metadata rows
        top, _ = handle(view, "diff_children", {"path": [], "offset": 0, "limit": 10})
        assert {i["key"]: i["values"] for i in top["items"]}["step"] is None
        with pytest.raises(Cancelled):

            def cancel() -> None:
                raise Cancelled("request 1 was cancelled")

            handle(view, "diff_refine", {"path": [], "level": "values"}, check=cancel)
    finally:
        view.close()


def test_preview_of_both_sides(pair: tuple[Path, Path]) -> None:
    view = open_view(*pair)
    try:
        result, buffers = handle(view, "diff_preview", {"path": ["model", "w"], "rows": 2})
        result = _json(result)
        a_slice, b_slice = result["a"]["slice"], result["b"]["slice"]
        assert b_slice["buffer"] > a_slice["buffer"]
        a_rows = torch.frombuffer(bytearray(buffers[a_slice["buffer"]]), dtype=torch.float32)
        b_rows = torch.frombuffer(bytearray(buffers[b_slice["buffer"]]), dtype=torch.float32)
        assert torch.allclose(b_rows - a_rows, torch.full_like(a_rows, 0.5))
        added, _ = handle(view, "diff_preview", {"path": ["extra"], "rows": 2})
        assert added["a"] is None and added["b"]["shape"] == [2]
    finally:
        view.close()


def test_bad_requests(pair: tuple[Path, Path]) -> None:
    view = open_view(*pair)
    try:
        with pytest.raises(RequestError, match="method"):
            handle(view, "diff_everything", {"path": []})
        with pytest.raises(RequestError, match="offset"):
            handle(view, "diff_children", {"path": [], "offset": -1, "limit": 1})
        with pytest.raises(RequestError, match="level"):
            handle(view, "diff_refine", {"path": [], "level": "bytes"})
        with pytest.raises(RequestError, match="rtol"):
            handle(view, "diff_refine", {"path": [], "level": "values", "rtol": float("nan")})
        with pytest.raises(SubpathError, match="no key"):
            handle(view, "diff_node", {"path": ["nope"]})
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
        top, _ = handle(dview, "diff_children", {"path": [], "offset": 0, "limit": 50})
        items = {i["key"]: i for i in _json(top)["items"]}
        assert items["step"]["status"] == "changed" and items["step"]["scalars"] == [1000, 2000]
        assert items["lr"]["scalars"] is None  # a JSON value: its facts hold it
        assert items["model"]["scalars"] is None and items["model"]["unverified"] is False
        path = ["optimizer", "state", "head.bias"]
        moments, _ = handle(dview, "diff_children", {"path": path, "offset": 0, "limit": 50})
        by_key = {i["key"]: i for i in _json(moments)["items"]}
        assert by_key["step"]["scalars"] == [3.0, 6.0]  # AdamW's own step count
        assert by_key["exp_avg"]["scalars"] is None
        assert by_key["exp_avg"]["fingerprint"] == "differs"
        norm, _ = handle(dview, "diff_node", {"path": ["model", "norm", "weight"]})
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
        page, _ = handle(view, "diff_children", {"path": ["model"], "offset": 0, "limit": 10})
        b = {i["key"]: i for i in _json(page)["items"]}["b"]
        assert b["status"] == "same" and b["unverified"] is True and b["fingerprint"] is None
        handle(view, "diff_refine", {"path": [], "level": "values"})
        again = _json(summary(view))["summary"]
        assert again["same_metadata"] == 0 and again["same_crc"] == 0
        top, _ = handle(view, "diff_children", {"path": [], "offset": 0, "limit": 10})
        step = {i["key"]: i for i in _json(top)["items"]}["step"]
        assert step["scalars"] == [1, 2] and step["status"] == "changed"
    finally:
        view.close()


def _refused(*args: object, **kwargs: object) -> None:
    raise AssertionError("a payload was read")
