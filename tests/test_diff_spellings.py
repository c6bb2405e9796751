"""A module's weights in two spellings, diffed: the ``/`` tree of
``TensorDict.from_module(m)`` and the dotted keys of ``m.state_dict()``.

Three pairs, each written by the real writers: (a) ``from_module(m).memmap(d)`` against
``safetensors.torch.save_file(m.state_dict(), f)``; (b) a flat ``TensorDict(m.state_dict())``
saved with ``memmap`` (one file per dotted key) against the same file; (c) the ``.tdz`` of
(a) against a sharded safetensors folder. ``tdview.diff``, ``tdview diff`` and the compare
view (protocol ``diff_*``) pair every key and agree; a changed tensor is named in each
side's own spelling (``Row.path_a``, ``Row.path_b``)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from tensordict import TensorDict
from torch import nn

import tdview
from tdview.diff._spelling import dotted
from tdview.protocol._diff import DiffView, open_view

from .test_protocol_diff import ask
from .test_safetensors_shards import write_shards

CHANGED = "2.0.weight"


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(4, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2))
    )


def _state() -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in _model().state_dict().items()}


def _write(tmp: Path, case: str, state: dict[str, torch.Tensor], name: str) -> tuple[Path, Path]:
    """``(tensordict side, safetensors side)`` of a case, the safetensors side from ``state``."""
    model = _model()
    if case == "a":
        td_side = tmp / "model_dir"
        if not td_side.exists():
            TensorDict.from_module(model).memmap(td_side)
    elif case == "b":
        td_side = tmp / "flat_dir"
        if not td_side.exists():
            TensorDict(dict(model.state_dict()), batch_size=[]).memmap(td_side)
    else:
        td_side = tmp / "model.tdz"
        if not td_side.exists():
            TensorDict.from_module(model).save(str(td_side))
    if case == "c":
        return td_side, write_shards(tmp / f"{name}_shards", state)
    save_file(state, tmp / f"{name}.safetensors")
    return td_side, tmp / f"{name}.safetensors"


def _spelled(case: str, side: str, key: str) -> tuple[str, ...]:
    """How one side spells a state_dict key: the flat folder keeps it whole."""
    return (key,) if case == "b" and side == "td" else tuple(key.split("."))


CASES = ["a", "b", "c"]


@pytest.mark.parametrize("order", ["td_first", "safetensors_first"])
@pytest.mark.parametrize("case", CASES)
def test_identical_weights_are_the_same_in_both_spellings(
    tmp_path: Path, case: str, order: str
) -> None:
    state = _state()
    td_side, st_side = _write(tmp_path, case, state, "same")
    a, b = (td_side, st_side) if order == "td_first" else (st_side, td_side)
    found = tdview.diff(a, b, level="values")
    assert found.equal, [row for row in found.rows if row.status != "same"]
    leaves = [row for row in found.rows if row.is_leaf]
    assert {dotted(row.path) for row in leaves} == set(state)
    sides = ("td", "st") if order == "td_first" else ("st", "td")
    for row in leaves:
        key = dotted(row.path)
        assert row.path_a == _spelled(case, sides[0], key)
        assert row.path_b == _spelled(case, sides[1], key)
        assert row.values is not None and row.values.equal and row.values.numel > 0

    run = _cli(a, b)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"0 changed, 0 added, 0 removed, 0 renamed, {len(found.rows)} same" in run.stdout


@pytest.mark.parametrize("case", CASES)
def test_a_changed_tensor_is_named_in_each_spelling(tmp_path: Path, case: str) -> None:
    state = _state()
    state[CHANGED] = state[CHANGED] + 1
    td_side, st_side = _write(tmp_path, case, state, "changed")
    found = tdview.diff(td_side, st_side, level="values")
    assert not found.equal
    changed = found.changed()
    assert [dotted(row.path) for row in changed] == [CHANGED]
    row = changed[0]
    assert row.status == "changed" and row.values is not None
    assert row.values.differing == state[CHANGED].numel()
    assert row.path_a == _spelled(case, "td", CHANGED)
    assert row.path_b == _spelled(case, "st", CHANGED)

    run = _cli(td_side, st_side)
    assert run.returncode == 1, run.stdout + run.stderr
    lines = [line for line in run.stdout.splitlines() if line.startswith("~ ")]
    assert len(lines) == 1
    assert lines[0].startswith(f"~ 2/0/weight{' (a: 2.0.weight)' if case == 'b' else ''}  ")
    assert "1 changed, 0 added, 0 removed" in run.stdout


def test_a_flat_folder_pairs_only_by_the_dotted_form(tmp_path: Path) -> None:
    """Keys that spell no node of the other side stay added and removed: ``0.w`` pairs
    with ``0/w``, not with a ``0/x`` or ``x`` of the same shape."""
    flat = tmp_path / "flat"
    TensorDict({"0.w": torch.ones(2), "x.y": torch.zeros(3)}, batch_size=[]).memmap(flat)
    save_file({"0.w": torch.ones(2), "0.x": torch.zeros(3)}, tmp_path / "m.safetensors")
    found = tdview.diff(flat, tmp_path / "m.safetensors")
    by_path = {row.path: row for row in found.rows}
    assert by_path["0", "w"].status == "same" and by_path["0", "w"].path_a == ("0.w",)
    assert by_path["x.y",].status == "removed" and by_path["x.y",].path_b is None
    assert by_path["0", "x"].status == "added" and by_path["0", "x"].path_a is None
    group = by_path["0",]
    assert group.status == "same" and group.a is None and group.path_a is None
    assert group.path_b == ("0",) and "a: keys named 0." in group.note


# -- the compare view ---------------------------------------------------------------------


@pytest.fixture
def flat_view(tmp_path: Path) -> Iterator[DiffView]:
    """Case (b), a flat folder against a safetensors file whose ``2.0.weight`` changed."""
    state = _state()
    state[CHANGED] = state[CHANGED] + 1
    view = open_view(*_write(tmp_path, "b", state, "changed"))
    yield view
    view.close()


def test_the_compare_view_agrees_with_the_python_diff(flat_view: DiffView, tmp_path: Path) -> None:
    ask(flat_view, "diff_refine", {"path": [], "level": "values"})
    python = tdview.diff(tmp_path / "flat_dir", tmp_path / "changed.safetensors", level="values")
    assert _page_rows(flat_view, []) == [
        (row.path, row.status, row.path_a, row.path_b) for row in python.rows[1:]
    ]
    node, _ = ask(flat_view, "diff_node", {"path": ["2", "0", "weight"]})
    assert node["status"] == "changed" and node["values"]["differing"] == 6
    assert node["path_a"] == [CHANGED] and node["path_b"] == ["2", "0", "weight"]


def test_the_compare_view_previews_and_loads_each_side_by_its_own_path(
    flat_view: DiffView,
) -> None:
    state, changed = _state(), _state()[CHANGED] + 1
    preview, buffers = ask(flat_view, "diff_preview", {"path": ["2", "0", "weight"], "rows": 4})
    for side, want in (("a", state[CHANGED]), ("b", changed)):
        shown = preview[side]["slice"]
        got = torch.frombuffer(bytearray(buffers[shown["buffer"]]), dtype=torch.float32)
        assert torch.equal(got.reshape(shown["shape"]), want)
    for side, path, want in (
        ("a", [CHANGED], state[CHANGED]),
        ("b", ["2", "0", "weight"], changed),
    ):
        params = {
            "side": side,
            "path": path,
            "device": "cpu",
            "mode": "r",
            "allow_pickle": False,
            "variable": f"w_{side}",
            "replace": True,
        }
        namespace: dict = {}
        _load_into(flat_view, params, namespace)
        assert torch.equal(namespace[f"w_{side}"], want)


def test_a_refine_of_a_node_one_side_spells_in_names_refines_what_holds_it(
    flat_view: DiffView,
) -> None:
    """``2/0`` is a node of the safetensors side only (the flat folder spells it in
    ``2.0.weight``, ``2.0.bias``): refining it compares the nearest node both sides
    have, and its leaves get their values."""
    result, _ = ask(flat_view, "diff_refine", {"path": ["2", "0"], "level": "values"})
    assert result["summary"]["changed"] == 1
    bias, _ = ask(flat_view, "diff_node", {"path": ["2", "0", "bias"]})
    assert bias["values"]["equal"] is True and bias["path_a"] == ["2.0.bias"]
    group, _ = ask(flat_view, "diff_node", {"path": ["2", "0"]})
    assert group["status"] == "same" and group["a"] is None and group["path_a"] is None
    assert group["rollup"]["changed"] == 1


def test_a_refine_of_a_leaf_spelled_otherwise_keeps_its_paths(flat_view: DiffView) -> None:
    ask(flat_view, "diff_refine", {"path": ["2", "0", "weight"], "level": "values"})
    node, _ = ask(flat_view, "diff_node", {"path": ["2", "0", "weight"]})
    assert node["status"] == "changed" and node["values"]["differing"] == 6
    assert node["path_a"] == [CHANGED] and node["path_b"] == ["2", "0", "weight"]
    row = flat_view.result.row(("2", "0", "weight"))
    assert row.path_a == (CHANGED,) and row.values is not None


def _page_rows(view: DiffView, path: list[str]) -> list[tuple]:
    """Every row below ``path``, as the view pages them, depth first."""
    page, _ = ask(view, "diff_children", {"path": path, "offset": 0, "limit": 100})
    found = []
    for item in page["items"]:
        found.append(
            (
                tuple(item["path"]),
                item["status"],
                None if item["path_a"] is None else tuple(item["path_a"]),
                None if item["path_b"] is None else tuple(item["path_b"]),
            )
        )
        if item["has_children"]:
            found.extend(_page_rows(view, item["path"]))
    return found


def _load_into(view: DiffView, params: dict, namespace: dict) -> None:
    from tdview.protocol._compare import Comparison
    from tdview.protocol._dispatch import handle
    from tdview.protocol._session import Session

    a, b = str(view.result.a), str(view.result.b)
    session = Session(None, a, namespace=namespace, diff=Comparison(view, a, b))
    message = {"kind": "tdview:request", "v": 1, "id": 1, "method": "diff_load", "params": params}
    reply, _ = handle(session, message)
    assert reply is not None and reply["ok"], reply


def _cli(a: Path, b: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tdview", "diff", "--level", "values", str(a), str(b)],
        capture_output=True,
        text=True,
        check=False,
    )
