"""Fuzz: damaged metadata and archives never make the index raise anything but a clear
tdview error at open, and never during a full walk afterwards."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict

from tdview.errors import TDViewError
from tdview.index import Checkpoint

from .test_index_safety import visit_everything


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz-src")
    td = TensorDict(
        a=torch.arange(6.0).reshape(2, 3),
        b=TensorDict(c=torch.ones(2, 1), batch_size=[2]),
        s=NonTensorData("x"),
        ls=LazyStackedTensorDict(TensorDict(x=torch.zeros(1)), TensorDict(x=torch.ones(1))),
        batch_size=[2],
    )
    td.memmap(root / "dir")
    td.save(str(root / "x.tdz"))
    return root


def _mutate(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    buf = bytearray(data)
    for at, value in edits:
        if buf:
            buf[at % len(buf)] = value
    return bytes(buf[:cut] if cut is not None else buf)


edits = st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=6)
cuts = st.one_of(st.none(), st.integers(0, 4096))
SETTINGS = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _survives(path: Path) -> None:
    try:
        ckpt = Checkpoint(path)
    except (TDViewError, OSError):
        return
    with ckpt:
        visit_everything(ckpt)


@SETTINGS
@given(
    which=st.sampled_from(["meta.json", "b/meta.json", "ls/0/meta.json", "s/meta.json"]),
    edits=edits,
    cut=cuts,
)
def test_damaged_meta_json(source: Path, tmp_path_factory, which: str, edits, cut) -> None:
    work = tmp_path_factory.mktemp("fuzz")
    shutil.copytree(source / "dir", work / "dir")
    target = work / "dir" / which
    target.write_bytes(_mutate(target.read_bytes(), edits, cut))
    _survives(work / "dir")


@SETTINGS
@given(edits=edits, cut=st.one_of(st.none(), st.integers(0, 1 << 16)))
def test_damaged_archive(source: Path, tmp_path_factory, edits, cut) -> None:
    work = tmp_path_factory.mktemp("fuzz")
    data = (source / "x.tdz").read_bytes()
    (work / "x.tdz").write_bytes(_mutate(data, edits, cut))
    _survives(work / "x.tdz")
