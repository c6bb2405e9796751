"""Reading ahead on a slow file system (``tdview/index/_ahead.py``): threads read the
``meta.json`` files and probe the leaf files a walk is about to need, and the walk gets
exactly what it would have read itself: the same tensors, the same errors.

The file system is made slow by sleeping before every ``os.open``, ``os.lstat`` and
``os.stat`` (as a network file system's round trip would); the calls are counted by the
thread that makes them.
"""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict, lazy_stack, tensorclass
from torch import nn

import tdview
from tdview.errors import TDViewError
from tdview.index import Checkpoint
from tdview.index._ahead import ENV, SLOW_READ_S, read_ahead_wanted

from .compare import assert_same


@tensorclass
class Step:
    obs: torch.Tensor
    note: str


def model_checkpoint(path: Path) -> Path:
    """A module-shaped tree (a folder per module, distinct shapes), a tensorclass and a
    lazy stack beside it."""
    torch.manual_seed(0)
    model = nn.Sequential(*(nn.Linear(4 + i, 5 + i) for i in range(6)), nn.LayerNorm(11))
    TensorDict(
        model=TensorDict.from_module(model).detach(),
        step=Step(obs=torch.arange(6.0).reshape(3, 2), note="n", batch_size=[3]),
        stack=lazy_stack([TensorDict(x=torch.ones(2)), TensorDict(x=torch.zeros(2))]),
    ).memmap(path)
    return path


@pytest.fixture
def slow_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter]:
    """``os.open``, ``os.lstat`` and ``os.stat`` sleep 0.3 ms first; the counter holds
    how many each thread (``main`` or ``worker``) made, and how many of them opened a
    ``meta.json`` (``main meta.json``, ``worker meta.json``)."""
    calls: Counter = Counter()
    main = threading.main_thread()

    def slow(call):  # type: ignore[no-untyped-def]
        def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
            who = "main" if threading.current_thread() is main else "worker"
            calls[who] += 1
            if call is opened and str(args[0]).endswith("meta.json"):
                calls[f"{who} meta.json"] += 1
            time.sleep(0.3e-3)
            return call(*args, **kwargs)

        return wrapped

    opened = os.open
    for name in ("open", "lstat", "stat"):
        monkeypatch.setattr(os, name, slow(getattr(os, name)))
    yield calls


def _load(path: Path, **kwargs: object) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tdview.load_memmap(path, **kwargs)


def _reference(path: Path, **kwargs: object) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TensorDict.load_memmap(path, **kwargs)


def test_the_switch() -> None:
    """A root ``meta.json`` read slower than the bound switches it on; the variable
    forces it either way."""
    saved = os.environ.pop(ENV, None)
    try:
        assert read_ahead_wanted(SLOW_READ_S * 2)
        assert not read_ahead_wanted(SLOW_READ_S / 2)
        os.environ[ENV] = "0"
        assert not read_ahead_wanted(1.0)
        os.environ[ENV] = "1"
        assert read_ahead_wanted(0.0)
    finally:
        os.environ.pop(ENV, None)
        if saved is not None:
            os.environ[ENV] = saved


@pytest.mark.parametrize("device", [None, "meta"])
def test_a_slow_file_system_reads_ahead_and_loads_the_same(
    tmp_path: Path, slow_calls: Counter, monkeypatch: pytest.MonkeyPatch, device: str | None
) -> None:
    """With every call slow, the root read switches reading ahead on by itself; the
    threads read most of the ``meta.json`` files (the walk still opens the leaves it
    maps), and the load is tensordict's."""
    path = model_checkpoint(tmp_path / "ckpt")
    monkeypatch.delenv(ENV, raising=False)
    with Checkpoint(path) as ckpt:
        assert ckpt._ahead is not None  # the switch, seen from the index
    slow_calls.clear()
    got = _load(path, device=device)
    assert slow_calls["worker meta.json"] > 2 * slow_calls["main meta.json"], slow_calls
    monkeypatch.undo()  # the reference reads at full speed
    assert_same(got, _reference(path, device=device))


def test_off_by_default_reads_nothing_in_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = model_checkpoint(tmp_path / "ckpt")
    monkeypatch.setenv(ENV, "0")
    with Checkpoint(path) as ckpt:
        assert ckpt._ahead is None
        ckpt.load()


def test_the_same_errors_where_the_walk_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sub-folder whose meta.json is not JSON, and one that is a symlink out of the
    root: the load raises, or leaves out, as it does without reading ahead."""
    broken = model_checkpoint(tmp_path / "broken")
    meta = broken / "model" / "3" / "meta.json"
    meta.write_text(meta.read_text()[:-5])
    linked = model_checkpoint(tmp_path / "linked")
    outside = tmp_path / "outside"
    os.rename(linked / "model" / "2", outside)
    (linked / "model" / "2").symlink_to(outside)
    for path in (broken, linked):
        outcomes = []
        for mode in ("0", "1"):
            monkeypatch.setenv(ENV, mode)
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                try:
                    td = tdview.load_memmap(path)
                    outcomes.append(("loaded", sorted(td.keys(True, True)), []))
                except (TDViewError, OSError, ValueError) as error:
                    outcomes.append((type(error).__name__, str(error), []))
                outcomes[-1][2].extend(sorted(str(w.message) for w in seen))
        assert outcomes[0] == outcomes[1], path


def test_close_leaves_no_read_running(
    tmp_path: Path, slow_calls: Counter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint closed with reads still queued (only the root looked at): no thread
    touches its store after close returns."""
    path = model_checkpoint(tmp_path / "ckpt")
    monkeypatch.setenv(ENV, "1")
    ckpt = Checkpoint(path)
    ckpt.read_ahead("", ckpt.root.meta)  # type: ignore[arg-type]
    ckpt.close()
    after = slow_calls["worker"]
    time.sleep(0.05)
    assert slow_calls["worker"] == after


def test_a_changed_meta_json_is_read_as_it_is_when_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a thread read is what the walk parses: the index's node is the file's."""
    path = model_checkpoint(tmp_path / "ckpt")
    monkeypatch.setenv(ENV, "1")
    with Checkpoint(path) as ckpt:
        node = ckpt.node("model/0")
        on_disk = json.loads((path / "model" / "0" / "meta.json").read_text())
        assert [e.key for e in node.meta.entries] == [  # type: ignore[union-attr]
            k for k, v in on_disk.items() if isinstance(v, dict)
        ]


def test_search_and_totals_read_ahead_and_agree(
    tmp_path: Path, slow_calls: Counter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search and a subtree's totals (the tree view's walks) read ahead too, and find
    what they find without it."""
    from tdview.index import rollup, search

    path = model_checkpoint(tmp_path / "ckpt")
    answers = []
    for mode in ("0", "1"):
        monkeypatch.setenv(ENV, mode)
        slow_calls.clear()
        with Checkpoint(path) as ckpt:
            found = search(ckpt, "weight", limit=1000)
        with Checkpoint(path) as ckpt:
            total = rollup(ckpt, ckpt.root)
        answers.append((found, total.bytes, total.leaves, total.by_dtype))
        if mode == "1":
            assert slow_calls["worker meta.json"] > 0, slow_calls
        else:
            assert slow_calls["worker"] == 0, slow_calls
    assert answers[0] == answers[1]
    assert len(answers[0][0][0]) == 7  # the six Linear layers' weights, the LayerNorm's


def test_one_slow_read_is_a_hiccup_not_a_slow_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The root's meta.json read slowly once (a busy disk) and then fast: no threads."""
    path = model_checkpoint(tmp_path / "ckpt")
    monkeypatch.delenv(ENV, raising=False)
    opened = os.open
    slow_once = [True]

    def hiccup(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        if slow_once[0] and str(file).endswith("meta.json"):
            slow_once[0] = False
            time.sleep(SLOW_READ_S * 4)
        return opened(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", hiccup)
    with Checkpoint(path) as ckpt:
        assert not slow_once[0]  # the slow read happened
        assert ckpt._ahead is None
