"""``check`` and duplicates on a folder of checkpoints' own node: every member below it.

A training run as users keep it (two steps saved by tensordict's ``save``, a third
memory-mapped in a sub-folder, one archive cut short by a full disk), under a ``.ci``
temp dir as CI runners make them, and a torchrl archive (``torchrl.checkpoint``'s
``format="archive"``, written by torchrl). The reference is tensordict's
``load_memmap`` of each member (``zipfile`` for the archives' CRC-32s): problems are
named from the folder's root, member first, and the groups stored twice span members.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from tdview.__main__ import main
from tdview.answers import check, find_duplicates, sizes
from tdview.errors import Cancelled, SubpathError
from tdview.index import Checkpoint
from tdview.protocol import Session, handle

from ._optional import require_module
from .test_check_protocol import _flip_payload
from .test_protocol_golden import golden, same_shape
from .training_steps import FROZEN, write_training_steps

Leaves = dict[tuple[str, ...], torch.Tensor]
#: The leaf of the memory-mapped member cut short.
CUT = ("model", "head", "weight")


def _load(path: Path) -> TensorDict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TensorDict.load_memmap(str(path))


def tensor_leaves(td: TensorDict, prefix: tuple[str, ...]) -> Leaves:
    """Every tensor leaf of ``td`` with at least one byte, its path under ``prefix``."""
    return {
        prefix + (key if isinstance(key, tuple) else (key,)): value
        for key, value in td.items(include_nested=True, leaves_only=True)
        if isinstance(value, torch.Tensor) and value.numel() > 0
    }


def reference_groups(leaves: Leaves) -> list[set[tuple[str, ...]]]:
    """Groups of leaves with the same dtype and bytes, each pair compared."""
    groups: list[set[tuple[str, ...]]] = []
    for (ka, a), (kb, b) in itertools.combinations(leaves.items(), 2):
        if a.dtype != b.dtype or a.nbytes != b.nbytes:
            continue
        if bytes(a.reshape(-1).contiguous().numpy()) != bytes(b.reshape(-1).contiguous().numpy()):
            continue
        group = next((g for g in groups if ka in g or kb in g), None)
        if group is None:
            groups.append({ka, kb})
        else:
            group |= {ka, kb}
    return groups


def as_sets(groups: list) -> list[list[tuple[str, ...]]]:
    return sorted(sorted(tuple(p) for p in group) for group in groups)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """``.ci/tmp/run``: ``step_1000.tdz``, ``step_2000.tdz``, ``sub/step_3000`` (the
    second step memory-mapped, its ``CUT`` leaf then cut short), ``broken.tdz`` (an
    archive cut in half) and a side ``config.json``. Returns the paths, and the
    reference leaves of what tensordict loads whole, from the run's root."""
    root = tmp_path_factory.mktemp("answers_folders") / ".ci" / "tmp" / "run"
    first, second = write_training_steps(root)
    third = root / "sub" / "step_3000"
    loaded = _load(second)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded.memmap(third, num_threads=0)
    reference = {
        **tensor_leaves(_load(first).clone(), ("step_1000.tdz",)),
        **tensor_leaves(_load(second).clone(), ("step_2000.tdz",)),
        **tensor_leaves(_load(third).clone(), ("sub", "step_3000")),
    }
    leaf = third.joinpath(*CUT[:-1], CUT[-1] + ".memmap")
    os.truncate(leaf, leaf.stat().st_size - 12)
    del reference[("sub", "step_3000", *CUT)]  # what the check finds cut: in no group
    data = first.read_bytes()
    (root / "broken.tdz").write_bytes(data[: len(data) // 2])
    (root / "config.json").write_text(json.dumps({"lr": 0.01}))
    return {"root": root, "reference": reference}


def kinds(report) -> list[tuple[tuple[str, ...], str]]:
    return [(p.path, p.kind) for p in report.problems]


def test_a_folder_is_checked_member_by_member(run: dict) -> None:
    root = run["root"]
    with pytest.raises(zipfile.BadZipFile):  # the reference cannot open the cut archive
        zipfile.ZipFile(root / "broken.tdz")
    # tensordict's loader would grow the cut file back (numpy's memmap, mode r+): the
    # member it was mapped from says what it needs
    need = _load(root / "step_2000.tdz")[CUT].nbytes
    assert root.joinpath("sub", "step_3000", *CUT[:-1], CUT[-1] + ".memmap").stat().st_size < need
    report = check(root)
    assert kinds(report) == [
        (("broken.tdz",), "truncated"),
        (("sub", "step_3000", *CUT), "size"),
    ]
    assert "broken.tdz" in report.problems[0].message
    assert "shorter" in report.problems[1].message
    assert report.exit_status == 1 and report.path == str(root)
    c = report.checked
    assert c["checkpoints"] == 3
    members = [_load(root / "step_1000.tdz"), _load(root / "step_2000.tdz")]
    members.append(members[1])  # sub/step_3000 was mapped from step_2000
    assert c["leaves"] == sum(
        len(list(td.keys(include_nested=True, leaves_only=True))) for td in members
    )
    # the archives' entries, each CRC-32 computed and matching what zipfile reads
    for name in ("step_1000.tdz", "step_2000.tdz"):
        with zipfile.ZipFile(root / name) as zf:
            assert zf.testzip() is None
    entries = sum(
        len(zipfile.ZipFile(root / n).namelist()) for n in ("step_1000.tdz", "step_2000.tdz")
    )
    assert c["entries"] == entries
    assert c["no_crc"] == len(list(members[2].keys(include_nested=True, leaves_only=True)))
    assert "3 checkpoints of" in report.summary()


def test_duplicates_span_the_members(run: dict) -> None:
    root, reference = run["root"], run["reference"]
    expected = reference_groups(reference)
    # the frozen layer is the same bytes at the three steps
    for key in FROZEN:
        group = next(g for g in expected if ("step_1000.tdz", *key) in g)
        assert {("step_2000.tdz", *key), ("sub", "step_3000", *key)} <= group
    found = find_duplicates(root)
    assert as_sets(found.groups) == as_sets(expected)
    assert found.confirmed
    assert [path for path, _ in found.skipped] == [("broken.tdz",), ("sub", "step_3000", *CUT)]
    with_values = check(root, values=True)
    assert as_sets(with_values.duplicates) == as_sets(expected)
    # without values, an archive's recorded CRC-32s group the two archives only
    unread = check(root).duplicates
    archives = {k: v for k, v in reference.items() if k[0] != "sub"}
    assert as_sets(unread) == as_sets(reference_groups(archives))
    # the sizes view's "N MB in duplicates" of the folder
    wasted = sum(reference[min(g)].nbytes * (len(g) - 1) for g in expected)
    assert sizes(root, duplicates=True).duplicates_bytes == wasted


def test_a_sub_folder_and_the_command_line(run: dict, capsys, tmp_path: Path) -> None:
    root = run["root"]
    report = check(root, "sub")
    assert kinds(report) == [(("sub", "step_3000", *CUT), "size")]
    assert report.checked["checkpoints"] == 1
    assert main(["check", str(root), "--no-progress"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("broken.tdz: truncated:")
    assert out[1].startswith("sub/step_3000/model/head/weight: size:")
    assert main(["check", str(root), "step_2000.tdz", "--json", "--no-progress"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["problems"] == [] and found["checked"]["checkpoints"] == 1
    empty = tmp_path / "empty"
    (empty / "logs").mkdir(parents=True)
    (empty / "config.json").write_text("{}")
    assert main(["check", str(empty)]) == 2  # nothing could be checked
    assert "no checkpoint" in capsys.readouterr().err
    with pytest.raises(SubpathError, match="no checkpoint"):
        check(empty)


def request(method: str, **params) -> dict:
    return {"kind": "tdview:request", "v": 1, "id": 8589934595, "method": method, "params": params}


def test_the_protocol_on_the_folder_s_own_node(run: dict) -> None:
    root, reference = run["root"], run["reference"]
    progress: list[str] = []
    with Checkpoint(root) as folder:
        session = Session(folder, str(root), namespace={})
        reply, _ = handle(
            session,
            request("check", path=[], values=True),
            None,
            lambda d, t, label: progress.append(label),
        )
        assert reply["ok"], reply
        same_shape(reply, golden("reply_check")["message"])
        result = reply["result"]
        zeros = {(path, "zeros") for path, value in reference.items() if not value.any()}
        assert zeros  # the norm's bias, as trained, at each step
        assert {(tuple(p["path"]), p["kind"]) for p in result["problems"]} == {
            (("broken.tdz",), "truncated"),
            (("sub", "step_3000", *CUT), "size"),
            *zeros,
        }
        assert as_sets(result["duplicates"]) == as_sets(reference_groups(reference))
        assert any(label.startswith("step_1000.tdz: ") for label in progress)
        # a leaf's "same bytes as": the other steps' copies, from the folder's root
        leaf = ["step_2000.tdz", *FROZEN[0]]
        reply, _ = handle(session, request("duplicates", path=leaf, read=True))
        assert reply["ok"], reply
        assert reply["result"]["path"] == leaf
        assert sorted(reply["result"]["same"]) == [
            ["step_1000.tdz", *FROZEN[0]],
            ["sub", "step_3000", *FROZEN[0]],
        ]
        assert reply["result"]["confirmed"] is True
        reply, _ = handle(session, request("sizes", path=[], duplicates=True))
        wasted = sum(reference[min(g)].nbytes * (len(g) - 1) for g in reference_groups(reference))
        assert reply["ok"] and reply["result"]["duplicates_bytes"] == wasted


def test_a_folder_check_is_cancelled(run: dict) -> None:
    with Checkpoint(run["root"]) as folder:
        session = Session(folder, str(run["root"]), namespace={})
        session.expect(8589934595)

        def on_progress(done: int, total: int, label: str) -> None:
            session.cancel(8589934595)

        reply, _ = handle(
            session, request("check", path=[], values=True), None, on_progress, expected=True
        )
        assert not reply["ok"] and reply["error"]["type"] == Cancelled.__name__


# -- torchrl's archive: a zip of checkpoints ---------------------------------------------


def _torchrl_archive(path: Path) -> Path:
    torchrl_checkpoint = require_module("torchrl.checkpoint", "torchrl writes the archive")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 3))
    model[2].weight.data.copy_(torch.eye(3))  # two equal layers...
    target = torch.nn.Sequential(torch.nn.Linear(3, 3))
    target[0].load_state_dict(model[2].state_dict())  # ...a target network's copy
    ckpt = torchrl_checkpoint.Checkpoint(format="archive")
    ckpt.register("policy", model)
    ckpt.register("target", target)
    ckpt.save(path)
    return path


def _member_leaves(extracted: Path) -> Leaves:
    """Each member of the extracted zip (a folder holding ``meta.json`` whose parent
    holds none), loaded by tensordict, its leaves under its path."""
    leaves: Leaves = {}
    for meta in sorted(extracted.rglob("meta.json")):
        folder = meta.parent
        if (folder.parent / "meta.json").exists():
            continue
        prefix = folder.relative_to(extracted).parts
        leaves.update(tensor_leaves(_load(folder).clone(), prefix))
    return leaves


def test_a_torchrl_archive_is_checked_member_by_member(tmp_path: Path) -> None:
    archive = _torchrl_archive(tmp_path / "ckpt.zip")
    extracted = tmp_path / "extracted"
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(extracted)
        names = zf.namelist()
    reference = _member_leaves(extracted)
    report = check(archive, values=True)
    assert report.healthy, report.problems
    assert report.checked["checkpoints"] == 2
    assert report.checked["entries"] == len(names)  # every entry's CRC-32, side files too
    assert report.checked["leaves"] == len(reference) and report.checked["no_crc"] == 0
    expected = reference_groups(reference)
    assert any(len({path[:3] for path in group}) == 2 for group in expected)  # across
    assert as_sets(report.duplicates) == as_sets(expected)
    assert as_sets(find_duplicates(archive).groups) == as_sets(expected)
    damaged = tmp_path / "damaged.zip"
    shutil.copyfile(archive, damaged)
    leaf = next(n for n in names if n.endswith(".memmap") and "policy" in n)
    _flip_payload(damaged, leaf)
    with zipfile.ZipFile(damaged) as zf:
        assert zf.testzip() == leaf  # the reference finds it too
    found = check(damaged)
    assert [p.kind for p in found.problems] == ["stale_crc"]
    member = leaf.split("/")[:3]
    assert list(found.problems[0].path[:3]) == member
    assert leaf in found.problems[0].message and len(found.problems[0].path) == 4
