"""Every number range-checked: a stack dim, a view's dims, a sub-tensordict's index and a
leaf's shape against the batch dims they apply to.

For each bad number: the index reports a problem on the node (``tdview tree`` prints
it) and the loader raises a CheckpointFormatError naming the file, the key and the
value, on any device (tensordict ends in an ``OverflowError`` or ``IndexError`` naming
no file, or builds a view that fails on first use).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.utils import set_lazy_legacy

import tdview
from tdview.errors import CheckpointFormatError
from tdview.format import index_problem
from tdview.index import Checkpoint, range_problem
from tdview.protocol import Session, handle


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lazy stack of two [2] TensorDicts, views and a sub-tensordict of a [2, 3]
    source, and a nested [2] TensorDict, written by tensordict."""
    root = tmp_path_factory.mktemp("ranges") / "ckpt"
    source = TensorDict(a=torch.arange(6.0).reshape(2, 3), batch_size=[2, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with set_lazy_legacy(True):
            permuted, unsqueezed = source.permute(1, 0), source.unsqueeze(0)
            transposed = source.transpose(0, 1)
        sub = source._get_sub_tensordict((slice(0, 1), torch.tensor([0, 2])))
        TensorDict(
            ls=LazyStackedTensorDict(
                TensorDict(x=torch.zeros(2), batch_size=[2]),
                TensorDict(x=torch.ones(2), batch_size=[2]),
            ),
            permuted=permuted,
            unsqueezed=unsqueezed,
            transposed=transposed,
            sub=sub,
            nested=TensorDict(y=torch.zeros(2, 4), batch_size=[2]),
        ).memmap(root)
    return root


@pytest.fixture
def ckpt_dir(written: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(written, tmp_path / "ckpt"))


def edit(root: Path, folder: str, change: Callable[[dict], None]) -> None:
    meta_path = root / folder / "meta.json"
    meta = json.loads(meta_path.read_text())
    change(meta)
    meta_path.write_text(json.dumps(meta))


def problems_of(root: Path, key: str) -> list[str]:
    with Checkpoint(root) as ckpt:
        node = ckpt.node(key)
        ckpt.children(node)  # a stack's or view's numbers are checked when it is read
        return list(node.problems)


def load_fails(root: Path, *names: str) -> str:
    messages = []
    for device in ("cpu", "meta"):
        with pytest.raises(CheckpointFormatError) as caught:
            tdview.load(str(root), device=device)
        text = str(caught.value)
        for name in names:
            assert name in text, (name, text)
        messages.append(text)
    return messages[0]


def tree(root: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "tdview", "tree", str(root), "--depth", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


# ------------------------------------------------------------------ stack dims


def test_stack_dim_beyond_any_batch(ckpt_dir: Path):
    edit(ckpt_dir, "ls", lambda m: m.update(stack_dim=10**30))
    (problem,) = problems_of(ckpt_dir, "ls")
    assert "ls/meta.json" in problem and '"stack_dim"' in problem and str(10**30) in problem
    load_fails(ckpt_dir, "ls/meta.json", "stack_dim", str(10**30))
    line = next(ln for ln in tree(ckpt_dir).splitlines() if "── ls" in ln)
    assert "PROBLEM" in line


@pytest.mark.parametrize("dim", [2, 5, -3, -4])
def test_stack_dim_out_of_its_members_range(ckpt_dir: Path, dim: int):
    edit(ckpt_dir, "ls", lambda m: m.update(stack_dim=dim))
    (problem,) = problems_of(ckpt_dir, "ls")
    assert f'"stack_dim" is {dim}, out of range for members of 1 batch dim' in problem
    assert "'ls'" in problem and "ls/meta.json" in problem
    load_fails(ckpt_dir, "ls/meta.json", "'ls'", f"is {dim}")
    with Checkpoint(ckpt_dir) as ckpt:
        assert ckpt.batch_size(ckpt.node("ls")) is None  # not a made-up batch size
        summary = handle(
            Session(ckpt, "c"),
            {
                "kind": "tdview:request",
                "v": 1,
                "id": 1,
                "method": "node",
                "params": {"path": ["ls"]},
            },
        )
    reply = summary[0]
    assert reply is not None and any("stack_dim" in p for p in reply["result"]["problems"])


@pytest.mark.parametrize("dim", [-2, -1, 0, 1])
def test_stack_dims_in_range_load(ckpt_dir: Path, dim: int):
    edit(ckpt_dir, "ls", lambda m: m.update(stack_dim=dim))
    assert problems_of(ckpt_dir, "ls") == []
    assert tdview.load(str(ckpt_dir))["ls"].stack_dim == dim % 2


# ------------------------------------------------------------------ views and indices


@pytest.mark.parametrize(
    "folder, change, shown",
    [
        ("permuted", lambda m: m["custom_op_kwargs"].update(dims=[2**62, 0]), "no permutation"),
        ("permuted", lambda m: m["custom_op_kwargs"].update(dims=[0, 0]), "no permutation"),
        ("unsqueezed", lambda m: m["custom_op_kwargs"].update(dim=7), "dim 7 is out of range"),
        ("transposed", lambda m: m["custom_op_kwargs"].update(dim1=-3), "dim -3 is out of range"),
        ("permuted", lambda m: m.update(shape=[2, 3]), "permute of its source's batch [2, 3]"),
    ],
)
def test_view_dims_against_the_source(ckpt_dir: Path, folder, change, shown):
    edit(ckpt_dir, folder, change)
    (problem,) = problems_of(ckpt_dir, folder)
    assert shown in problem and f"{folder}/meta.json" in problem
    load_fails(ckpt_dir, f"{folder}/meta.json", shown)


@pytest.mark.parametrize(
    "index, shown",
    [
        (["tuple", [2**62]], "index 4611686018427387904 is out of range for dim 0 of size 2"),
        (["tuple", [-3]], "index -3 is out of range for dim 0 of size 2"),
        (["tuple", [0, ["tensor", [0, 3], None]]], "index 3 is out of range for dim 1 of size 3"),
        (["tuple", [["range", {"start": 0, "stop": 2**62, "step": 1}]]], "out of range for dim 0"),
        (["tuple", [["slice", {"start": 0, "stop": 1, "step": -1}]]], "step -1 of dim 0"),
        (["tuple", [["tensor", [True, False, True], None]]], "a boolean index of shape [3]"),
        (["tuple", [0, 0, 0]], "3 indices for 2 batch dims"),
    ],
)
def test_sub_index_against_the_source(ckpt_dir: Path, index, shown):
    edit(ckpt_dir, "sub", lambda m: m.update(index=index))
    (problem,) = problems_of(ckpt_dir, "sub")
    assert shown in problem and "sub/meta.json" in problem and "[2, 3]" in problem
    load_fails(ckpt_dir, "sub/meta.json", shown)


def test_index_problem_accepts_what_torch_accepts():
    shape = (2, 3)
    for index in [
        (0,),
        (-2, -3),
        (slice(None, None, 2),),
        (Ellipsis, 2),
        (None, 1, 2),
        ([0, 1],),
        ([True, False],),
        (range(0, 2),),
        True,
    ]:
        assert index_problem(index, shape) is None, index
        torch.zeros(shape)[index]  # torch agrees


# ------------------------------------------------------------------ batch sizes


def test_leaf_shape_must_start_with_the_batch_size(ckpt_dir: Path):
    edit(ckpt_dir, "nested", lambda m: m.update(shape=[3]))
    (problem,) = problems_of(ckpt_dir, "nested")
    assert "nested/meta.json" in problem and "leaf 'y' shape" in problem and "[3]" in problem
    load_fails(ckpt_dir, "nested/meta.json", "'y'", "[2, 4]")


def test_nested_batch_must_start_with_the_parent_batch(ckpt_dir: Path):
    edit(ckpt_dir, "", lambda m: m.update(shape=[3]))  # the root: its children are [2...]
    edit(
        ckpt_dir,
        "",
        lambda m: [m.pop(k) for k in ("ls", "permuted", "unsqueezed", "transposed", "sub")],
    )
    with Checkpoint(ckpt_dir) as ckpt:
        (nested,) = ckpt.children(ckpt.root)
        (problem,) = nested.problems
    assert "does not start with the batch size [3] of its parent" in problem
    assert "nested/meta.json" in problem
    load_fails(ckpt_dir, "'nested'", "does not fit")


def test_negative_format_version(ckpt_dir: Path):
    edit(ckpt_dir, "nested", lambda m: m.update(_format_version=-5))
    (problem,) = problems_of(ckpt_dir, "nested")
    assert '"_format_version"' in problem and "-5" in problem
    load_fails(ckpt_dir, "nested/meta.json", "-5")


def test_no_problem_on_the_checkpoint_as_written(written: Path):
    with Checkpoint(written) as ckpt:
        for key in ("ls", "permuted", "unsqueezed", "transposed", "sub", "nested"):
            node = ckpt.node(key)
            ckpt.children(node)
            assert node.problems == [] and range_problem(ckpt, node) is None, key
    tdview.load(str(written))
