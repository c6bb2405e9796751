"""The protocol's ``check`` method: the golden reply's shape, progress while payloads are
read, problems named by their keys from the root, and a cancel that stops it."""

from __future__ import annotations

import json
import shutil
import struct
import threading
import zipfile
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from tdview.index import Checkpoint
from tdview.protocol import Session, handle

from .test_protocol_golden import golden, same_shape


def request(**params) -> dict:
    return {"kind": "tdview:request", "v": 1, "id": 8589934593, "method": "check", "params": params}


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An archive with tied weights saved twice, a NaN, and a leaf written with r+."""
    root = tmp_path_factory.mktemp("check_protocol")
    embed = torch.randn(32, 16)
    td = TensorDict(
        {
            "model": {
                "embed": {"weight": embed},
                "head": {"weight": embed.clone()},
                "layers": {"1": {"w": torch.randn(8, 8)}},
                "bias": torch.tensor([1.0, float("nan"), 2.0]),
            }
        }
    )
    path = root / "ckpt.tdz"
    td.save(path)
    TensorDict.load_memmap(path, mode="r+")["model", "layers", "1", "w"].add_(1)
    return path


def test_the_reply_has_the_golden_shape(damaged: Path) -> None:
    session = Session(Checkpoint(damaged), str(damaged), namespace={})
    progress: list[tuple[int, int, str]] = []
    reply, buffers = handle(
        session,
        request(path=["model"], values=True),
        None,
        lambda done, total, label: progress.append((done, total, label)),
    )
    json.dumps(reply, allow_nan=False)
    assert reply["ok"], reply
    same_shape(reply, golden("reply_check")["message"])
    result = reply["result"]
    assert buffers == [] and result["healthy"] is False and result["more"] == 0
    assert [(p["path"], p["kind"]) for p in result["problems"]] == [
        (["model", "layers", "1", "w"], "stale_crc"),
        (["model", "bias"], "nan"),
    ]
    assert result["duplicates"] == [[["model", "embed", "weight"], ["model", "head", "weight"]]]
    assert result["checked"]["values"] == 4
    assert progress and progress[-1][0] == progress[-1][1]  # bytes read, to the end
    assert {label for _, _, label in progress} >= {"CRC-32", "values"}


def test_a_leaf_and_integrity_only(damaged: Path) -> None:
    session = Session(Checkpoint(damaged), str(damaged), namespace={})
    reply, _ = handle(session, request(path=["model", "bias"]))
    result = reply["result"]
    assert result["healthy"] and result["values"] is False and result["checked"]["leaves"] == 1


def test_bad_params_name_the_key(damaged: Path) -> None:
    session = Session(Checkpoint(damaged), str(damaged), namespace={})
    reply, _ = handle(session, request(path=["model"], values="yes"))
    assert not reply["ok"] and reply["error"]["type"] == "RequestError"
    assert "check params.values" in reply["error"]["message"]


def test_a_cancelled_check_stops(tmp_path: Path) -> None:
    path = tmp_path / "big.tdz"
    TensorDict({f"w{i}": torch.randn(1 << 18) for i in range(16)}).save(path)
    session = Session(Checkpoint(path), str(path), namespace={})
    started = threading.Event()

    def on_progress(done: int, total: int, label: str) -> None:
        started.set()
        session.cancel(8589934593)

    session.expect(8589934593)  # received, not answered: it can be cancelled
    reply, _ = handle(session, request(path=[], values=True), None, on_progress, expected=True)
    assert started.is_set()
    assert not reply["ok"] and reply["error"]["type"] == "Cancelled", reply


def _flip_payload(path: Path, name: str) -> None:
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    with open(path, "r+b") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = struct.unpack("<HH", f.read(4))
        f.seek(info.header_offset + 30 + name_len + extra_len)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 1]))


def test_a_damaged_meta_json_is_a_problem_not_an_error(damaged: Path, tmp_path: Path) -> None:
    path = tmp_path / "meta.tdz"
    shutil.copyfile(damaged, path)
    _flip_payload(path, "model/layers/meta.json")
    session = Session(Checkpoint(path), str(path), namespace={})
    reply, _ = handle(session, request(path=[]))
    assert reply["ok"], reply
    kinds = {(tuple(p["path"]), p["kind"]) for p in reply["result"]["problems"]}
    assert (("model", "layers"), "crc") in kinds


def test_in_a_folder_of_checkpoints_paths_are_the_folders(damaged: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copyfile(damaged, runs / "step_1.tdz")
    session = Session(Checkpoint(runs), str(runs), namespace={})
    reply, _ = handle(session, request(path=["step_1.tdz", "model"], values=True))
    assert reply["ok"], reply
    result = reply["result"]
    assert result["path"] == ["step_1.tdz", "model"]
    assert [p["path"] for p in result["problems"]] == [
        ["step_1.tdz", "model", "layers", "1", "w"],
        ["step_1.tdz", "model", "bias"],
    ]
    assert result["duplicates"] == [
        [["step_1.tdz", "model", "embed", "weight"], ["step_1.tdz", "model", "head", "weight"]]
    ]
    reply, _ = handle(session, request(path=[]))  # the folder itself: its members
    assert reply["ok"] and reply["result"]["checked"]["checkpoints"] == 1
    assert [p["path"] for p in reply["result"]["problems"]] == [
        ["step_1.tdz", "model", "layers", "1", "w"]
    ]
