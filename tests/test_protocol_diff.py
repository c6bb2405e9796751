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
        assert [i["key"] for i in changed["items"]] == ["extra", "model"]  # values unread
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
