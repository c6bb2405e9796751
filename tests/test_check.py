"""``tdview.check``: checkpoints written by tensordict (and torchrl), then damaged in
each way issue 34 lists; each problem is found and named by its key, and a healthy
checkpoint is reported healthy. The reference for values is torch over tensordict's own
load of the same checkpoint."""

from __future__ import annotations

import os
import shutil
import struct
import zipfile
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict, refresh_archive_checksums
from tensordict._archive import pack_memmap

from tdview.answers import KINDS, check
from tdview.errors import Cancelled, NotACheckpointError
from tdview.index import Checkpoint, cancellable

from ._optional import require_module


def model() -> TensorDict:
    generator = torch.Generator().manual_seed(34)
    return TensorDict(
        {
            "weight": torch.randn(64, 32, generator=generator),
            "bias": torch.randn(64, generator=generator).half(),
            "layers": {
                "0": {"w": torch.randn(16, 16, generator=generator).bfloat16()},
                "1": {"w": torch.randn(16, 16, generator=generator, dtype=torch.float64)},
            },
            "step": torch.tensor(1000),
            "ids": torch.arange(100),
        }
    )


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same tensordict as a folder, a stored archive and a deflated one."""
    root = tmp_path_factory.mktemp("check")
    folder = root / "ckpt"
    model().memmap(folder, num_threads=0)
    model().save(root / "ckpt.tdz")
    pack_memmap(folder, root / "deflated.zip", compression="deflate")
    return {"dir": folder, "tdz": root / "ckpt.tdz", "deflate": root / "deflated.zip"}


def copy(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copyfile(source, target)
    return target


def entry_span(archive: Path, name: str) -> tuple[int, int, zipfile.ZipInfo]:
    """``(offset of the stored bytes, stored size, info)`` of an entry."""
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo(name)
    with open(archive, "rb") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = struct.unpack("<HH", f.read(4))
    return info.header_offset + 30 + name_len + extra_len, info.compress_size, info


def flip(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0x5A]))


def kinds(report) -> list[tuple[tuple[str, ...], str]]:
    return [(p.path, p.kind) for p in report.problems]


@pytest.mark.parametrize("container", ["dir", "tdz", "deflate"])
def test_a_healthy_checkpoint_is_reported_healthy(saved: dict[str, Path], container: str) -> None:
    report = check(saved[container], values=True)
    assert report.problems == [] and report.healthy and report.exit_status == 0
    assert report.checked["leaves"] == 6 and report.checked["values"] == 6
    if container != "dir":  # every entry: 6 leaves and 4 meta.json
        assert report.checked["entries"] == 10


def test_a_flipped_byte_in_a_stored_leaf_entry_is_named_by_its_key(
    saved: dict[str, Path], tmp_path: Path
) -> None:
    archive = copy(saved["tdz"], tmp_path)
    offset, size, _ = entry_span(archive, "layers/1/w.memmap")
    flip(archive, offset + size // 2)
    report = check(archive)
    # the local header and the central directory agree: the bytes cannot tell a write
    # with mode="r+" from damage, and the message says both
    assert kinds(report) == [(("layers", "1", "w"), "stale_crc")]
    message = report.problems[0].message
    assert "refresh_archive_checksums" in message and "damaged" in message
    assert "its local header too" in message
    assert "layers/1/w.memmap" in message


def test_a_flipped_byte_in_a_stored_meta_json_is_damage(
    saved: dict[str, Path], tmp_path: Path
) -> None:
    archive = copy(saved["tdz"], tmp_path)
    offset, size, _ = entry_span(archive, "layers/0/meta.json")
    # a byte inside a JSON string: still parses, only the CRC-32 tells
    text = archive.read_bytes()[offset : offset + size]
    flip(archive, offset + text.index(b"cpu") + 1)
    report = check(archive)
    assert (("layers", "0"), "crc") in kinds(report)
    assert "mode='r+' writes only leaf payloads" in report.problems[-1].message


def test_a_local_header_that_disagrees_with_the_central_directory_is_damage(
    saved: dict[str, Path], tmp_path: Path
) -> None:
    archive = copy(saved["tdz"], tmp_path)
    offset, size, info = entry_span(archive, "weight.memmap")
    flip(archive, offset)  # the payload
    flip(archive, info.header_offset + 14)  # the CRC-32 of its local header
    report = check(archive)
    assert kinds(report) == [(("weight",), "crc")]
    assert "local header" in report.problems[0].message


def test_a_flipped_byte_in_a_deflated_entry_is_corrupt(
    saved: dict[str, Path], tmp_path: Path
) -> None:
    archive = copy(saved["deflate"], tmp_path)
    offset, size, _ = entry_span(archive, "weight.memmap")
    flip(archive, offset + size // 2)
    report = check(archive)
    assert (("weight",), "corrupt") in kinds(report)
    assert all(path == ("weight",) for path, _ in kinds(report))
    with pytest.raises(Exception, match="weight"):  # the reference refuses it too
        zipfile.ZipFile(archive).read("weight.memmap")


def test_stale_crcs_after_writes_with_r_plus_then_refreshed(
    saved: dict[str, Path], tmp_path: Path
) -> None:
    archive = copy(saved["tdz"], tmp_path)
    written = TensorDict.load_memmap(archive, mode="r+")
    written["ids"].add_(1)
    written["layers", "0", "w"].mul_(2)
    del written
    assert zipfile.ZipFile(archive).testzip() is not None  # the reference sees them stale
    report = check(archive)
    assert sorted(kinds(report)) == [(("ids",), "stale_crc"), (("layers", "0", "w"), "stale_crc")]
    assert all("refresh_archive_checksums" in p.message for p in report.problems)
    refresh_archive_checksums(archive)
    assert check(archive).healthy


def test_a_truncated_leaf_file_and_a_longer_one(saved: dict[str, Path], tmp_path: Path) -> None:
    folder = copy(saved["dir"], tmp_path)
    weight = folder / "weight.memmap"
    os.truncate(weight, weight.stat().st_size - 100)
    with open(folder / "layers" / "1" / "w.memmap", "ab") as f:
        f.write(b"\0" * 8)
    report = check(folder, values=True)
    assert kinds(report) == [(("weight",), "size"), (("layers", "1", "w"), "size")]
    assert "shorter" in report.problems[0].message and "8092" in report.problems[0].message
    assert "longer" in report.problems[1].message
    assert report.checked["values"] == 5  # the short one is not read


def test_a_zero_length_file_and_a_missing_file(saved: dict[str, Path], tmp_path: Path) -> None:
    folder = copy(saved["dir"], tmp_path)
    os.truncate(folder / "bias.memmap", 0)
    (folder / "layers" / "0" / "w.memmap").unlink()
    report = check(folder)
    assert kinds(report) == [(("bias",), "empty"), (("layers", "0", "w"), "missing")]
    assert "bias.memmap has 0 bytes" in report.problems[0].message


def test_a_truncated_archive(saved: dict[str, Path], tmp_path: Path) -> None:
    archive = tmp_path / "cut.tdz"
    data = saved["tdz"].read_bytes()
    archive.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(zipfile.BadZipFile):  # the reference cannot open it either
        zipfile.ZipFile(archive)
    report = check(archive)
    assert kinds(report) == [((), "truncated")] and report.exit_status == 1
    not_zip = tmp_path / "text.tdz"
    not_zip.write_bytes(b"not a checkpoint at all")
    with pytest.raises(NotACheckpointError):  # nothing to check: exit status 2
        check(not_zip)


@pytest.mark.parametrize("container", ["dir", "deflate"])
def test_nan_and_inf_are_counted_per_leaf(container: str, tmp_path: Path) -> None:
    td = model()
    td["weight"][3, :5] = float("nan")
    td["weight"][7, 1] = float("-inf")
    td["layers", "0", "w"][0, 0] = float("inf")
    td["layers", "1", "w"].zero_()
    folder = tmp_path / "ckpt"
    td.memmap(folder, num_threads=0)
    path = folder
    if container == "deflate":
        path = tmp_path / "ckpt.zip"
        pack_memmap(folder, path, compression="deflate")
    assert check(path).healthy  # values are read only when asked
    report = check(path, values=True)
    assert kinds(report) == [
        (("weight",), "nan"),
        (("weight",), "inf"),
        (("layers", "0", "w"), "inf"),
        (("layers", "1", "w"), "zeros"),
    ]
    reference = TensorDict.load_memmap(path)
    nan = int(torch.isnan(reference["weight"]).sum())
    assert report.problems[0].message == f"{nan} of 2048 values are NaN"
    assert report.problems[1].message.startswith(f"{int(torch.isinf(reference['weight']).sum())} ")


def test_a_partly_written_replay_buffer_counts_the_rows_written(tmp_path: Path) -> None:
    data = require_module("torchrl.data", "the buffer is written by torchrl itself")
    rows = 20
    buffer = data.TensorDictReplayBuffer(storage=data.LazyMemmapStorage(100))
    batch = TensorDict(
        {"obs": torch.randn(rows, 3), "next": {"reward": torch.ones(rows, 1)}}, batch_size=[rows]
    )
    batch["obs"][4, 1] = float("nan")
    buffer.extend(batch)
    buffer.dumps(tmp_path / "rb")
    storage = tmp_path / "rb" / "storage"
    report = check(storage, values=True)
    # the 80 rows never written are zeros in a LazyMemmapStorage: they count for nothing
    assert kinds(report) == [(("obs",), "nan")]
    assert report.problems[0].message == f"1 of {rows * 3} values are NaN"
    reference = TensorDict.load_memmap(storage)
    assert int(torch.isnan(reference["obs"]).sum()) == 1
    assert not reference["obs"][rows:].any()


def test_a_subpath_checks_its_subtree_only(saved: dict[str, Path], tmp_path: Path) -> None:
    archive = copy(saved["tdz"], tmp_path)
    offset, size, _ = entry_span(archive, "weight.memmap")
    flip(archive, offset + 1)
    below = check(archive, "layers/1")
    assert below.healthy and below.checked["leaves"] == 1 and below.checked["entries"] == 2
    assert kinds(check(archive, ("weight",))) == [(("weight",), "stale_crc")]


def test_an_open_checkpoint_is_left_open_and_a_check_is_cancellable(
    saved: dict[str, Path],
) -> None:
    with Checkpoint(saved["tdz"]) as ckpt:
        assert check(ckpt).healthy
        assert ckpt.node(("weight",)).is_leaf  # still open

        def stop() -> None:
            raise Cancelled("cancelled")

        with cancellable(stop), pytest.raises(Cancelled):
            check(ckpt, values=True)


def test_every_kind_is_documented() -> None:
    docs = (Path(__file__).parents[1] / "docs" / "check.md").read_text()
    for kind in KINDS:
        assert f"`{kind}`" in docs, kind


def test_tdview_check_is_the_answer(saved: dict[str, Path]) -> None:
    import tdview
    import tdview.answers

    assert tdview.check is tdview.answers.check
    assert tdview.check(saved["tdz"]).healthy


def test_what_the_index_flags_a_refused_link_and_a_broken_meta_json(
    saved: dict[str, Path], tmp_path: Path
) -> None:
    folder = copy(saved["dir"], tmp_path)
    outside = tmp_path / "elsewhere.memmap"
    shutil.copyfile(folder / "bias.memmap", outside)
    (folder / "bias.memmap").unlink()
    (folder / "bias.memmap").symlink_to(outside)  # out of the root: no rule trusts it
    (folder / "layers" / "1" / "meta.json").write_text('{"shape": [], "broken')
    report = check(folder)
    found = kinds(report)
    assert (("bias",), "refused") in found
    assert (("layers", "1"), "metadata") in found
    refused = next(p for p in report.problems if p.kind == "refused")
    assert "elsewhere.memmap" in refused.message or "bias.memmap" in refused.message
    with pytest.raises(Exception):  # noqa: B017 - the reference cannot load it either
        TensorDict.load_memmap(folder / "layers" / "1")


def test_a_remote_archive_is_checked_by_ranged_reads(
    saved: dict[str, Path], tmp_path: Path
) -> None:
    from .remote_servers import RangeServer

    archive = copy(saved["tdz"], tmp_path)
    offset, size, _ = entry_span(archive, "layers/1/w.memmap")
    flip(archive, offset + size // 3)
    server = RangeServer(str(tmp_path))
    try:
        report = check(f"{server.url}/{archive.name}", values=True)
    finally:
        server.stop()
    # over HTTP the local header is not read: the leaf's CRC-32 is stale or damaged alike
    assert kinds(report) == [(("layers", "1", "w"), "stale_crc")]
    assert "its local header unread" in report.problems[0].message
    assert report.checked["entries"] == 10 and report.checked["values"] == 6
