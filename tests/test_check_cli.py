"""``tdview check`` on the command line: exit status as diff(1), ``--json``'s shape, one
line per problem naming its key, and hostile bytes that never make a traceback."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensordict import TensorDict
from tensordict._archive import pack_memmap

from tdview.__main__ import main


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("check_cli")
    td = TensorDict(
        {"w": torch.randn(32, 8), "sub": {"b": torch.arange(16), "nan": torch.tensor([1.0, 0.0])}}
    )
    td["sub", "nan"][1] = float("nan")
    td.memmap(root / "ckpt", num_threads=0)
    td.save(root / "ckpt.tdz")
    pack_memmap(root / "ckpt", root / "deflated.zip", compression="deflate")
    return {"dir": root / "ckpt", "tdz": root / "ckpt.tdz", "deflate": root / "deflated.zip"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["check", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_exit_status_is_diffs(archives: dict[str, Path], capsys, tmp_path: Path) -> None:
    status, out, _ = run(capsys, str(archives["tdz"]))
    assert status == 0 and out.startswith("healthy: checked 3 leaves, 5 archive entries")
    status, out, _ = run(capsys, str(archives["tdz"]), "--values")
    assert status == 1
    assert out.splitlines()[0] == "sub/nan: nan: 1 of 2 values are NaN"
    status, out, err = run(capsys, str(tmp_path / "nothing.tdz"))
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("tdview: ") and "nothing.tdz" in err


def test_json_shape(archives: dict[str, Path], capsys) -> None:
    status, out, _ = run(capsys, str(archives["dir"]), "--values", "--json")
    found = json.loads(out)
    assert status == 1 and set(found) == {"problems", "duplicates", "checked"}
    assert found["problems"] == [
        {"path": ["sub", "nan"], "kind": "nan", "message": "1 of 2 values are NaN"}
    ]
    assert found["duplicates"] == []
    assert found["checked"] == {
        "checkpoints": 1,
        "nodes": 5,
        "leaves": 3,
        "entries": 0,
        "bytes": 32 * 8 * 4 + 16 * 8 + 2 * 4,
        "values": 3,
        "no_crc": 3,  # a directory's files: sizes checked, no CRC-32 to check
    }


def test_subpath_and_progress_bar_on_stderr(archives: dict[str, Path], capsys) -> None:
    status, out, err = run(capsys, str(archives["deflate"]), "sub/b", "--progress")
    assert status == 0 and "checked 1 leaves, 1 archive entries" in out
    assert "[" in err and "CRC-32" in err  # the diff's bar, cleared at the end
    status, _, err = run(capsys, str(archives["deflate"]), "--no-progress")
    assert status == 0 and err == ""


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_damaged_bytes_are_problems_never_tracebacks(
    archives: dict[str, Path], capsys, tmp_path_factory: pytest.TempPathFactory, data
) -> None:
    name = data.draw(st.sampled_from(["tdz", "deflate"]))
    raw = bytearray(archives[name].read_bytes())
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    path = tmp_path_factory.mktemp("fuzz") / "damaged.tdz"
    path.write_bytes(bytes(raw))
    status, out, err = run(capsys, str(path), "--values", "--json")
    assert "Traceback" not in out + err and "internal error" not in err
    assert status in (0, 1, 2)
    if status == 2:
        assert out == "" and len(err.strip().splitlines()) == 1
    else:
        report = json.loads(out)
        same = bytes(raw) == archives[name].read_bytes()
        assert (status == 0) == (report["problems"] == [])
        if status == 0 and not same:  # what check calls healthy, zipfile reads whole
            with zipfile.ZipFile(path) as zf:
                assert zf.testzip() is None
