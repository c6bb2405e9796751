"""What is stored twice (``tdview.answers.find_duplicates``): tied embeddings saved twice
by tensordict's own writers, a state dict with two equal tensors, in a folder and in a
``.tdz``; the groups are compared with the reference, tensordict's load and a brute-force
comparison of every pair of leaves' bytes."""

from __future__ import annotations

import itertools
import os
import warnings
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from tdview.answers import duplicates_of, find_duplicates
from tdview.errors import Cancelled
from tdview.index import Checkpoint

from .corpus import write_at

SUFFIXES = ["", ".tdz"]


class TiedLM(torch.nn.Module):
    """A language model whose decoder weight is the embedding (tied weights)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(64, 16)
        self.block = torch.nn.Linear(16, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.decoder = torch.nn.Linear(16, 64, bias=False)
        self.decoder.weight = self.embed.weight


def tied_checkpoint() -> TensorDict:
    torch.manual_seed(0)
    model = TiedLM()
    with torch.no_grad():
        model.norm.weight.normal_()  # no accidental equal leaves (ones, zeros)
        model.norm.bias.normal_()
    return TensorDict(model=TensorDict.from_module(model).data, step=torch.tensor(3))


def state_dict_checkpoint() -> TensorDict:
    """A state dict with two equal tensors, and one of the same size and dtype that differs
    only in its last byte (no false group), and one of the same bytes but another dtype."""
    torch.manual_seed(1)
    weight = torch.randn(32, 8)
    near = weight.clone()
    near.view(torch.int32)[-1, -1] ^= 1  # one bit of the last element
    state = {
        "encoder.weight": weight,
        "encoder.bias": torch.randn(32),
        "decoder.weight": weight.clone(),
        "other.weight": near,
        "as_int": weight.view(torch.int32).clone(),
        "decoder.bias": torch.randn(32),
    }
    return TensorDict.from_dict({"model": state, "extra": {"copy": weight.clone()}})


def write(td: TensorDict, path: Path) -> Path:
    return write_at(td, path)


def reference_groups(path: Path, subpath: tuple[str, ...] = ()) -> list[set[tuple[str, ...]]]:
    """Groups of leaves with the same dtype and bytes, by tensordict's load and a
    comparison of every pair."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = TensorDict.load_memmap(str(path))
    if subpath:
        loaded = loaded[subpath]
    leaves = {
        key if isinstance(key, tuple) else (key,): value
        for key, value in loaded.items(include_nested=True, leaves_only=True)
        if isinstance(value, torch.Tensor) and value.numel() > 0
    }
    groups: list[set[tuple[str, ...]]] = []
    for (ka, a), (kb, b) in itertools.combinations(leaves.items(), 2):
        if a.dtype != b.dtype or a.nbytes != b.nbytes:
            continue
        if bytes(a.contiguous().view(torch.uint8).flatten().numpy()) != bytes(
            b.contiguous().view(torch.uint8).flatten().numpy()
        ):
            continue
        for group in groups:
            if ka in group or kb in group:
                group |= {ka, kb}
                break
        else:
            groups.append({ka, kb})
    return groups


def found_groups(found, prefix: tuple[str, ...] = ()) -> list[set[tuple[str, ...]]]:
    return [{tuple(path[len(prefix) :]) for path in group} for group in found.groups]


def same_groups(a: list[set], b: list[set]) -> bool:
    return sorted(map(sorted, a)) == sorted(map(sorted, b))


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_tied_embeddings_saved_twice_are_one_group(tmp_path: Path, suffix: str) -> None:
    path = write(tied_checkpoint(), tmp_path / f"tied{suffix}")
    found = find_duplicates(path)
    expected = reference_groups(path)
    assert same_groups(found_groups(found), expected)
    assert {("model", "embed", "weight"), ("model", "decoder", "weight")} in found_groups(found)
    assert found.confirmed and found.unread == 0 and not found.skipped
    assert found.nbytes == [64 * 16 * 4] == [len(expected) * 64 * 16 * 4]
    assert found.wasted_bytes == 64 * 16 * 4  # one copy too many
    group = found.group_of("model/decoder/weight")
    assert group == [("model", "embed", "weight"), ("model", "decoder", "weight")]  # load order


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_state_dict_with_two_equal_tensors(tmp_path: Path, suffix: str) -> None:
    path = write(state_dict_checkpoint(), tmp_path / f"sd{suffix}")
    found = find_duplicates(path)
    expected = reference_groups(path)
    assert same_groups(found_groups(found), expected)
    groups = found_groups(found)
    assert {("model", "encoder.weight"), ("model", "decoder.weight"), ("extra", "copy")} in groups
    flat = {p for g in groups for p in g}
    assert ("model", "other.weight") not in flat  # equal size and dtype, one bit apart
    assert ("model", "as_int") not in flat  # the same bytes as another dtype: not one group
    assert ("model", "encoder.bias") not in flat and ("model", "decoder.bias") not in flat


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_below_a_subpath_and_from_an_open_checkpoint(tmp_path: Path, suffix: str) -> None:
    path = write(state_dict_checkpoint(), tmp_path / f"sd{suffix}")
    with Checkpoint(path) as ckpt:
        found = find_duplicates(ckpt, "model")
        assert same_groups(found_groups(found, ("model",)), reference_groups(path, ("model",)))
        assert found_groups(found, ("model",)) == [{("encoder.weight",), ("decoder.weight",)}]
        ckpt.node("model")  # still open


def test_equal_size_different_tensors_make_no_group(tmp_path: Path) -> None:
    torch.manual_seed(2)
    td = TensorDict({f"w{i}": torch.randn(16, 16) for i in range(6)})
    for suffix in SUFFIXES:
        path = write(td, tmp_path / f"distinct{suffix}")
        assert reference_groups(path) == []
        assert find_duplicates(path).groups == []


def test_reading_nothing_groups_archives_by_crc_and_counts_unread_files(tmp_path: Path) -> None:
    """``read=False``: an archive's groups come from its central directory; a folder's
    candidates are counted, not read."""
    archive = write(tied_checkpoint(), tmp_path / "tied.tdz")
    folder = write(tied_checkpoint(), tmp_path / "tied")
    free = find_duplicates(archive, read=False)
    assert same_groups(found_groups(free), reference_groups(archive))
    assert not free.confirmed and free.unread == 0
    unread = find_duplicates(folder, read=False)
    assert unread.groups == [] and unread.unread >= 2


def test_duplicates_of_one_leaf(tmp_path: Path) -> None:
    for suffix in SUFFIXES:
        path = write(state_dict_checkpoint(), tmp_path / f"sd{suffix}")
        with Checkpoint(path) as ckpt:
            found = duplicates_of(ckpt, ("model", "decoder.weight"))
            assert found.groups == [
                [("model", "encoder.weight"), ("model", "decoder.weight"), ("extra", "copy")]
            ]
            assert duplicates_of(ckpt, ("model", "other.weight")).groups == []
            free = duplicates_of(ckpt, ("model", "decoder.weight"), read=False)
            assert (free.groups != []) == (suffix == ".tdz")


def test_a_truncated_file_is_in_no_group(tmp_path: Path) -> None:
    path = write(state_dict_checkpoint(), tmp_path / "sd")
    victim = path / "extra" / "copy.memmap"
    os.truncate(victim, 16)
    found = find_duplicates(path)
    assert found_groups(found) == [{("model", "encoder.weight"), ("model", "decoder.weight")}]
    assert [p for p, _ in found.skipped] == [("extra", "copy")]


def test_progress_and_cancel(tmp_path: Path) -> None:
    path = write(state_dict_checkpoint(), tmp_path / "sd")
    seen: list[tuple[int, int, str]] = []
    find_duplicates(path, progress=lambda d, t, label: seen.append((d, t, label)))
    assert {label for _, _, label in seen} == {"hashing", "confirming"}
    assert all(done <= total for done, total, _ in seen)

    def stop() -> None:
        raise Cancelled("stopped")

    with pytest.raises(Cancelled):
        find_duplicates(path, cancel=stop)


# ------------------------------------------------------------------------- the protocol


def _ask(session, path: list[str], read: bool) -> dict:
    from tdview.protocol import handle

    message = {
        "kind": "tdview:request",
        "v": 1,
        "id": 8589934593,
        "method": "duplicates",
        "params": {"path": path, "read": read},
    }
    reply, buffers = handle(session, message)
    assert buffers == [] and reply is not None and reply["ok"], reply
    return reply


def test_the_duplicates_method_browses_free_and_reads_when_asked(tmp_path: Path) -> None:
    """An archive answers from its CRC-32s without reading; a directory says it did not
    search until asked to read, then confirms byte by byte (the golden reply's shape)."""
    import json

    from tdview.protocol import Session

    from .test_protocol_golden import golden, same_shape

    gold = golden("reply_duplicates")["message"]
    for suffix in SUFFIXES:
        path = write(tied_checkpoint(), tmp_path / f"tied{suffix}")
        with Checkpoint(path) as ckpt:
            session = Session(ckpt, str(path), namespace={})
            leaf = ["model", "decoder", "weight"]
            free = _ask(session, leaf, read=False)
            same_shape(free, gold)
            json.dumps(free, allow_nan=False)
            if suffix == ".tdz":
                assert free["result"]["same"] == [["model", "embed", "weight"]]
                assert free["result"]["searched"] and not free["result"]["confirmed"]
            else:
                assert free["result"]["same"] == [] and not free["result"]["searched"]
            read = _ask(session, leaf, read=True)
            same_shape(read, gold)
            assert read["result"] == gold["result"]  # the golden is this answer
            alone = _ask(session, ["model", "block", "weight"], read=True)["result"]
            assert alone["same"] == [] and alone["bytes"] is None and alone["searched"]


def test_a_deflated_archive_is_read_through_its_stream(tmp_path: Path) -> None:
    """Entries compressed with deflate (tensordict's ``pack_memmap``): grouped by their
    recorded CRC-32s, confirmed by inflating both (their CRC-32 checked at the end)."""
    from tensordict import pack_memmap

    folder = write(state_dict_checkpoint(), tmp_path / "sd")
    archive = tmp_path / "sd.deflate.zip"
    pack_memmap(folder, archive, compression="deflate")
    found = find_duplicates(archive)
    assert found.confirmed and not found.skipped
    assert same_groups(found_groups(found), reference_groups(archive))
    assert same_groups(found_groups(found), reference_groups(folder))


def test_a_second_leaf_asked_walks_nothing(tmp_path: Path, monkeypatch) -> None:
    """``duplicates_of`` walks the index once per checkpoint (a click asks for one leaf)."""
    import tdview.answers._duplicates as module

    path = write(state_dict_checkpoint(), tmp_path / "sd.tdz")
    with Checkpoint(path) as ckpt:
        first = duplicates_of(ckpt, ("model", "decoder.weight"), read=False)

        def no_walk(*args: object) -> None:
            raise AssertionError("walked again")

        monkeypatch.setattr(module, "walk_below", no_walk)
        again = duplicates_of(ckpt, ("extra", "copy"), read=False)
        assert again.groups == first.groups
        assert duplicates_of(ckpt, ("extra", "copy")).groups == first.groups  # read too


def test_in_a_folder_of_checkpoints_the_paths_are_the_folders(tmp_path: Path) -> None:
    """A member's answer names the other leaves from the folder's root, as its path, in
    every member (the same state dict saved twice: each leaf's copy in the other)."""
    from tdview.protocol import Session

    root = tmp_path / "run"
    write(state_dict_checkpoint(), root / "step_1")
    write(state_dict_checkpoint(), root / "step_2.tdz")
    with Checkpoint(root) as folder:
        session = Session(folder, "run", namespace={})
        for member in ("step_1", "step_2.tdz"):
            leaf = [member, "model", "decoder.weight"]
            result = _ask(session, leaf, read=True)["result"]
            assert result["path"] == leaf
            copies = ("model", "encoder.weight"), ("model", "decoder.weight"), ("extra", "copy")
            expected = [[m, *copy] for m in ("step_1", "step_2.tdz") for copy in copies]
            assert sorted(result["same"]) == sorted(p for p in expected if p != leaf)
        own = _ask(session, [], read=True)["result"]  # the folder's own node: no leaf
        assert own["same"] == [] and own["bytes"] is None
