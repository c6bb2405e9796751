"""tdview.diff on checkpoints written by tensordict: every tier, every container, renames,
the CRC shortcut proved without payload reads, pickles, and the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from tensordict import NonTensorData, TensorDict, pack_memmap

import tdview
from tdview.__main__ import main
from tdview.diff import CRC_EQUAL, DIFFERS, EQUAL, Diff
from tdview.errors import SubpathError
from tdview.storage import ArchiveStore

from . import corpus
from .corpus import write_at as _write
from .training_steps import ADDED, FROZEN, REMOVED, write_training_steps


def _model_pair() -> tuple[TensorDict, TensorDict]:
    """A small model's parameters before and after one Adam step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    before = TensorDict.from_module(model).data.clone()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model(torch.randn(32, 8)).pow(2).mean().backward()
    optimizer.step()
    after = TensorDict.from_module(model).data.clone()
    return before, after


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("diff-model")
    before, after = _model_pair()
    paths = {
        "before": _write(before, root / "before"),
        "before.tdz": _write(before, root / "before.tdz"),
        "after": _write(after, root / "after"),
        "after.tdz": _write(after, root / "after.tdz"),
    }
    pack_memmap(paths["after"], root / "after.deflate.zip", compression="deflate")
    paths["after.deflate"] = root / "after.deflate.zip"
    edited = before.clone()
    edited["extra"] = torch.arange(5)  # added
    del edited["2", "bias"]  # removed
    edited["head_weight"] = edited.pop(("2", "weight"))  # renamed (moved up a level)
    edited["0", "bias"] = edited["0", "bias"].double()  # dtype changed
    edited["0", "weight"] = torch.zeros(16, 9)  # shape changed
    nan = edited["2", "bias"] if ("2", "bias") in edited.keys(True) else None
    assert nan is None
    weights = edited["0"].get("weight").clone()
    edited["0", "weight"] = weights
    with_nan = before.clone()
    with_nan["0", "bias"][3] = float("nan")
    paths["edited"] = _write(edited, root / "edited")
    paths["edited.tdz"] = _write(edited, root / "edited.tdz")
    paths["nan"] = _write(with_nan, root / "nan")
    return paths


def _statuses(result: Diff) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {"/".join(row.path): (row.status, row.changes) for row in result}


# -- metadata -------------------------------------------------------------------------


@pytest.mark.parametrize("b_name", ["edited", "edited.tdz"])
@pytest.mark.parametrize("a_name", ["before", "before.tdz"])
def test_metadata_finds_added_removed_dtype_shape(
    model: dict[str, Path], a_name: str, b_name: str, monkeypatch
) -> None:
    from tdview.diff import _pool

    monkeypatch.setattr(_pool, "open_source", _no_payload)
    result = tdview.diff(model[a_name], model[b_name])
    rows = _statuses(result)
    assert rows["extra"] == ("added", ())
    assert rows["head_weight"] == ("added", ())  # renames need fingerprints
    assert rows["2/weight"] == ("removed", ())
    assert rows["2/bias"] == ("removed", ())
    assert rows["0/bias"] == ("changed", ("dtype",))
    assert rows["0/weight"] == ("changed", ("shape",))
    assert rows["2"] == ("same", ())
    assert not result.equal
    total = result.rollup()
    assert (total.added, total.removed, total.changed) == (2, 2, 2)
    assert total.bytes_added == 5 * 8 + 4 * 16 * 4
    assert result.rollup("2").removed == 2
    assert result.rollup("0").changed == 2


def test_metadata_equal_for_directory_and_its_archive(model: dict[str, Path]) -> None:
    result = tdview.diff(model["before"], model["before.tdz"])
    assert result.equal
    assert all(row.status == "same" for row in result)
    assert [row.path for row in result][:3] == [(), ("0",), ("0", "weight")]


def test_metadata_never_reads_payloads(model: dict[str, Path], monkeypatch) -> None:
    from tdview.diff import _pool

    monkeypatch.setattr(_pool, "open_source", _no_payload)
    _forbid_archive_payloads(monkeypatch)
    result = tdview.diff(model["before.tdz"], model["after.tdz"])
    assert result.equal  # the values changed; the metadata did not


# -- fingerprints ---------------------------------------------------------------------


def test_fingerprint_of_two_archives_reads_no_payload(model: dict[str, Path], monkeypatch) -> None:
    from tdview.diff import _pool

    monkeypatch.setattr(_pool, "open_source", _no_payload)
    _forbid_archive_payloads(monkeypatch)
    same = tdview.diff(model["before.tdz"], model["before.tdz"], level="fingerprint")
    assert same.equal
    assert {row.fingerprint for row in same if row.is_leaf} == {CRC_EQUAL}
    changed = tdview.diff(model["before.tdz"], model["after.tdz"], level="fingerprint")
    assert {row.fingerprint for row in changed if row.is_leaf} == {DIFFERS}
    assert all(row.changes == ("content",) for row in changed if row.is_leaf)


def test_equal_crcs_answer_even_when_the_payload_is_corrupted(
    model: dict[str, Path], tmp_path: Path
) -> None:
    """Payload bytes overwritten after the central directory was written: the CRCs still
    match the other side's, so the fingerprint tier (which reads no payload) says "CRC
    equal"; the value tier reads the bytes and finds the difference."""
    corrupted = tmp_path / "corrupted.tdz"
    shutil.copyfile(model["before.tdz"], corrupted)
    with ArchiveStore(corrupted) as store:
        key = "0/weight.memmap"
        offset, size = store.payload_offset(key), store.entry(key).size
    with open(corrupted, "r+b") as file:
        file.seek(offset)
        file.write(b"\xff" * 64)
    fingerprint = tdview.diff(model["before.tdz"], corrupted, level="fingerprint")
    assert fingerprint.equal
    assert fingerprint.row("0/weight").fingerprint == CRC_EQUAL
    assert (
        "CRC equal" in _cli([str(model["before.tdz"]), str(corrupted), "--level", "fingerprint"])[1]
    )
    values = tdview.diff(model["before.tdz"], corrupted, level="values")
    row = values.row("0/weight")
    assert row.status == "changed" and row.values is not None
    assert row.values.differing == 16  # 64 bytes of float32
    assert size == 16 * 8 * 4


def test_fingerprint_of_a_directory_and_an_archive_reads_only_the_file(
    model: dict[str, Path], monkeypatch
) -> None:
    _forbid_archive_payloads(monkeypatch)
    same = tdview.diff(model["before"], model["before.tdz"], level="fingerprint")
    assert same.equal
    assert {row.fingerprint for row in same if row.is_leaf} == {CRC_EQUAL}
    changed = tdview.diff(model["before"], model["after.tdz"], level="fingerprint")
    assert {row.fingerprint for row in changed if row.is_leaf} == {DIFFERS}


def test_fingerprint_of_two_directories_compares_bytes(model: dict[str, Path]) -> None:
    same = tdview.diff(model["before"], model["before"], level="fingerprint")
    assert {row.fingerprint for row in same if row.is_leaf} == {EQUAL}
    changed = tdview.diff(model["before"], model["after"], level="fingerprint")
    assert not changed.equal
    assert changed.rollup().changed == 4


@pytest.mark.parametrize("b_name", ["edited", "edited.tdz"])
@pytest.mark.parametrize("level", ["fingerprint", "values"])
def test_renamed_key(model: dict[str, Path], b_name: str, level: str) -> None:
    result = tdview.diff(model["before"], model[b_name], level=level)
    row = result.row("head_weight")
    assert row.status == "renamed"
    assert row.renamed_from == ("2", "weight")
    assert row.fingerprint == CRC_EQUAL
    with pytest.raises(KeyError):
        result.row("2/weight")
    assert result.row("2/bias").status == "removed"
    assert result.rollup().renamed == 1
    if level == "values":
        assert row.values is not None and row.values.equal


# -- auto: the most that reads no payload byte ---------------------------------------


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """step_1000.tdz and step_2000.tdz of one training run (tests/training_steps.py)."""
    return write_training_steps(tmp_path_factory.mktemp("run"))


def test_auto_of_two_archives_compares_their_crcs_without_a_payload_byte(
    run: tuple[Path, Path], monkeypatch
) -> None:
    """Every trained weight, moment and step differs by the CRC-32 the central
    directory records, with no tensor's payload read (the stores refuse one): the only
    bytes read are the numbers of the one-element leaves, at most 8 bytes each."""
    from tdview.diff import _pool

    monkeypatch.setattr(_pool, "open_source", _no_payload)
    _forbid_archive_payloads(monkeypatch)
    scalars: list[str] = []
    refusing = ArchiveStore.read_bytes

    def read_bytes(self: ArchiveStore, key: str, limit: int) -> bytes:
        if limit > 8 or self.entry(key).size > 8:
            return refusing(self, key, limit)  # meta.json, or refused
        scalars.append(key)
        return _REAL_READ_BYTES(self, key, limit)

    monkeypatch.setattr(ArchiveStore, "read_bytes", read_bytes)
    metadata_only = tdview.diff(*run, level="metadata")
    assert scalars == [] and metadata_only.row("step").status == "same"
    result = tdview.diff(*run, level="auto")
    numbers = [v for row in result if row.scalars for v in row.scalars if v is not None]
    assert len(scalars) == len(numbers) and all(k.endswith("step.memmap") for k in scalars)
    assert result.row("step").scalars == (1000, 2000)
    assert result.row("optimizer/state/embed.weight/step").scalars == (3.0, 6.0)
    assert result.level == "fingerprint"
    changed = {row.path for row in result if row.status == "changed"}
    trained = {
        row.path
        for row in result
        if row.is_leaf and row.a is not None and row.b is not None and row.path not in FROZEN
    }
    assert ("step",) in trained and ("model", "head", "weight") in trained
    assert ("optimizer", "state", "blocks.0.weight", "exp_avg") in trained
    assert trained <= changed
    for path in trained:
        assert result.row(path).fingerprint == DIFFERS, path
    for path in FROZEN:
        row = result.row(path)
        assert row.status == "same" and row.fingerprint == CRC_EQUAL and row.crc_only
    assert {r.path for r in result if r.status == "added" and r.is_leaf} == set(ADDED)
    assert set(REMOVED) <= {r.path for r in result if r.status == "removed"}
    total = result.rollup()
    assert total.same_metadata == 0  # nothing is called same for its shape alone
    assert total.same_crc == total.same_leaves == len(FROZEN)


def test_auto_of_a_directory_is_metadata_and_says_values_were_not_compared(
    run: tuple[Path, Path], tmp_path: Path
) -> None:
    """A directory records no CRC-32: "auto" reads no payload, so it compares metadata,
    and every leaf it calls the same says that its values were not compared."""
    with tdview.Checkpoint(run[0]) as ckpt:
        directory = _write(ckpt.load(), tmp_path / "step_1000")
    result = tdview.diff(directory, run[1], level="auto")
    assert result.level == "metadata"
    leaves_same = [r for r in result if r.is_leaf and r.status == "same"]
    assert leaves_same and all(r.unverified and r.fingerprint is None for r in leaves_same)
    assert result.row("model/head/weight").status == "same"  # its values changed, unread
    assert result.rollup().same_metadata == len(leaves_same)
    code, text = _cli([str(directory), str(run[1])])
    lines = text.splitlines()
    assert code == 1 and lines[-1].startswith("metadata: ")
    assert f"{len(leaves_same):,} leaves by shape and dtype only: values not compared" in lines[-1]
    head = next(line for line in lines if line.startswith("  model/head/weight"))
    assert head.endswith("same shape and dtype, values not compared")
    by_values = tdview.diff(directory, run[1], level="values")
    assert by_values.rollup().same_metadata == 0
    assert by_values.row("model/head/weight").status == "changed"


def test_cli_default_of_two_archives_reads_their_crcs(run: tuple[Path, Path]) -> None:
    code, text = _cli([str(run[0]), str(run[1]), "--only-changed"])
    lines = text.splitlines()
    assert code == 1 and lines[-1].startswith("fingerprint: ")
    assert "~ step  int64 [] 8 B content changed; differs; 1000 -> 2000" in lines
    assert "~ model/head/weight  float32 [8, 32] 1.02 KB content changed; differs" in lines
    same = _cli([str(run[0]), str(run[0])])
    assert same[0] == 0 and "leaves by size and CRC-32 only" in same[1].splitlines()[-1]
    assert (
        _cli([str(run[0]), str(run[1]), "--level", "metadata"])[1]
        .splitlines()[-1]
        .startswith("metadata: ")
    )


# -- values ---------------------------------------------------------------------------


@pytest.mark.parametrize("b_name", ["after", "after.tdz", "after.deflate"])
@pytest.mark.parametrize("threads", [1, 3])
def test_values_after_one_optimizer_step(model: dict[str, Path], b_name: str, threads: int) -> None:
    before, after = _model_pair()
    calls: list[tuple[int, int, str]] = []
    result = tdview.diff(
        model["before"],
        model[b_name],
        level="values",
        num_threads=threads,
        progress=lambda *args: calls.append(args),
    )
    assert not result.equal
    for key, old in before.items(True, True):
        new = after[key].double()
        old = old.double()
        row = result.row(key)
        stats = row.values
        assert row.status == "changed" and row.changes == ("content",)
        assert stats is not None
        assert stats.numel == old.numel()
        assert stats.differing == int((old != new).sum())
        assert stats.max_abs == pytest.approx(float((old - new).abs().max()), rel=1e-12)
        assert stats.mean_abs == pytest.approx(float((old - new).abs().mean()), rel=1e-9)
        assert stats.rel_l2 == pytest.approx(float((old - new).norm() / old.norm()), rel=1e-9)
        cosine = float(torch.nn.functional.cosine_similarity(old.flatten(), new.flatten(), 0))
        assert stats.cosine == pytest.approx(cosine, rel=1e-9)
        assert stats.nan_appeared == stats.inf_appeared == 0
    done = [c[0] for c in calls]
    assert done == sorted(done) and calls[-1][0] == calls[-1][1] > 0


def test_values_equal_for_directory_and_its_archive(model: dict[str, Path]) -> None:
    result = tdview.diff(model["before"], model["before.tdz"], level="values")
    assert result.equal
    for row in result:
        if row.is_leaf:
            assert row.values is not None and row.values.equal and row.values.differing == 0
            assert row.values.max_abs == 0 and row.values.cosine == pytest.approx(1.0)


def test_values_with_a_nan_introduced(model: dict[str, Path]) -> None:
    result = tdview.diff(model["before"], model["nan"], level="values")
    row = result.row("0/bias")
    assert row.status == "changed"
    assert row.values is not None
    assert (row.values.nan_appeared, row.values.nan_disappeared) == (1, 0)
    assert row.values.differing == 1
    assert row.values.max_abs == 0.0  # over the positions finite on both sides
    back = tdview.diff(model["nan"], model["before"], level="values").row("0/bias")
    assert back.values is not None and back.values.nan_disappeared == 1
    same = tdview.diff(model["nan"], model["nan"], level="values").row("0/bias")
    assert same.status == "same" and same.values is not None and same.values.nan_a == 1


def test_values_tolerance(tmp_path: Path) -> None:
    a = _write(TensorDict(x=torch.tensor([1.0, 2.0, 100.0])), tmp_path / "a")
    b = _write(TensorDict(x=torch.tensor([1.0, 2.001, 100.5])), tmp_path / "b")
    assert tdview.diff(a, b, level="values").row("x").values.differing == 2
    assert tdview.diff(a, b, level="values", atol=0.01).row("x").values.differing == 1
    loose = tdview.diff(a, b, level="values", atol=0.01, rtol=0.01)
    assert loose.equal and loose.row("x").values.max_abs == pytest.approx(0.5)
    with pytest.raises(ValueError, match="non-negative"):
        tdview.diff(a, b, rtol=-1)


def test_values_of_a_large_leaf_split_among_threads(tmp_path: Path, monkeypatch) -> None:
    """Pieces and chunks much smaller than the leaf: the partial sums and CRCs combine to
    the one-pass answer."""
    from tdview.diff import _pool

    torch.manual_seed(1)
    x = torch.randn(10_000)
    y = x.clone()
    y[::7] += 1.0
    y[5] = float("inf")
    a = _write(TensorDict(x=x, moved=torch.arange(5000.0)), tmp_path / "a")
    b = _write(TensorDict(x=y, other=torch.arange(5000.0)), tmp_path / "b")
    whole = tdview.diff(a, b, level="values").row("x").values
    monkeypatch.setattr(_pool, "SEGMENT", 4096)
    monkeypatch.setattr(_pool, "CHUNK", 100)
    monkeypatch.setattr(_pool, "CHUNK_BYTES", 1000)
    result = tdview.diff(a, b, level="values", num_threads=4)
    split = result.row("x").values
    assert split is not None and whole is not None
    assert split.differing == whole.differing == len(range(0, 10_000, 7)) + (5 % 7 != 0)
    assert split.inf_appeared == 1
    assert split.max_abs == whole.max_abs
    assert split.rel_l2 == pytest.approx(whole.rel_l2, rel=1e-12)
    assert result.row("other").status == "renamed"  # its CRC, combined from pieces
    assert tdview.diff(a, b, level="fingerprint").row("x").fingerprint == DIFFERS


def _exact_stats(old: torch.Tensor, new: torch.Tensor) -> dict[str, float]:
    """The statistics over the positions finite on both sides, from correctly rounded
    sums (``math.fsum``) of float64 terms that are exact for these dtypes; ``1 - cosine``
    from the norms' difference, so that it keeps its digits when the two nearly agree."""
    import math

    a, b = old.double().flatten(), new.double().flatten()
    both_nan = a.isnan() & b.isnan()
    fin = a.isfinite() & b.isfinite()
    x, y = a[fin], b[fin]
    d = (x - y).abs()
    a2, b2, d2 = (math.fsum((v * v).tolist()) for v in (x, y, d))
    na, nb = math.sqrt(a2), math.sqrt(b2)
    gap = math.fsum((x * x - y * y).tolist()) / (na + nb)  # |a| - |b|
    return {
        "differing": int(((a != b) & ~both_nan).sum()),
        "max_abs": float(d.max()),
        "mean_abs": math.fsum(d.tolist()) / d.numel(),
        "rel_l2": math.sqrt(d2) / na,
        "one_minus_cosine": (d2 - gap * gap) / (2 * na * nb),
    }


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32]
)
@pytest.mark.parametrize("odd", [False, True])
def test_values_of_a_partly_equal_leaf(tmp_path: Path, dtype: torch.dtype, odd: bool) -> None:
    """Some chunks byte-equal (their norms take a shortcut), some nearly equal: every
    statistic against exact sums, the cosine's distance from 1 included; ``odd`` puts a
    NaN in a changed chunk and an infinity in an equal one."""
    from tdview.diff._stats import CHUNK

    if odd and not dtype.is_floating_point:
        pytest.skip("an integer has no NaN")
    torch.manual_seed(3)
    n = 4 * CHUNK + 1000
    if dtype.is_floating_point:
        old = (torch.randn(n) * 3).to(dtype)
        new = old.clone()
        part = slice(CHUNK, 2 * CHUNK)  # one chunk nearly equal, some of it unchanged
        step = (1e-3 * torch.randn(CHUNK)).to(dtype) * (torch.rand(CHUNK) < 0.9)
        new[part] = (old[part].double() + step.double()).to(dtype)
        new[-10:] += 1
    else:
        old = torch.randint(-1000, 1000, (n,), dtype=dtype)
        new = old.clone()
        new[CHUNK : 2 * CHUNK : 3] += 1
    if odd:
        new[CHUNK + 5] = float("nan")
        old[3 * CHUNK + 7] = new[3 * CHUNK + 7] = float("inf")
    a = _write(TensorDict(x=old), tmp_path / "a")
    b = _write(TensorDict(x=new), tmp_path / "b")
    stats = tdview.diff(a, b, level="values").row("x").values
    want = _exact_stats(old, new)
    assert stats is not None and stats.cosine is not None
    assert stats.differing == want["differing"]
    assert stats.max_abs == pytest.approx(want["max_abs"], rel=1e-12)
    assert stats.mean_abs == pytest.approx(want["mean_abs"], rel=1e-9)
    assert stats.rel_l2 == pytest.approx(want["rel_l2"], rel=1e-7)
    assert 1 - stats.cosine == pytest.approx(want["one_minus_cosine"], rel=1e-5, abs=1e-15)
    assert (stats.nan_appeared, stats.inf_a, stats.inf_b) == ((1, 1, 1) if odd else (0, 0, 0))


@pytest.mark.parametrize("scale", [1e-30, 1e30])
def test_values_of_equal_chunks_too_small_or_large_for_float32_squares(
    tmp_path: Path, scale: float
) -> None:
    """Squares of these float32 values underflow or overflow in float32: the equal
    chunks' norms are taken in float64, and the leaf keeps its cosine and norm."""
    from tdview.diff._stats import CHUNK

    torch.manual_seed(4)
    old = torch.randn(2 * CHUNK) * scale
    new = old.clone()
    new[-1] *= 1.5
    a = _write(TensorDict(x=old, same=old[:CHUNK].clone()), tmp_path / "a")
    b = _write(TensorDict(x=new, same=old[:CHUNK].clone()), tmp_path / "b")
    result = tdview.diff(a, b, level="values")
    same = result.row("same").values
    assert same is not None and same.equal and same.cosine == 1.0 and same.rel_l2 == 0.0
    stats = result.row("x").values
    want = _exact_stats(old, new)
    assert stats is not None and stats.differing == 1
    assert stats.rel_l2 == pytest.approx(want["rel_l2"], rel=1e-9)
    assert stats.cosine is not None
    assert 1 - stats.cosine == pytest.approx(want["one_minus_cosine"], rel=1e-6)


def test_values_of_every_corpus_checkpoint_against_its_archives(tmp_path: Path) -> None:
    """Every node kind and dtype (extra dtypes: bytes only), every container."""
    for name, build in corpus.BUILDERS.items():
        td = build()
        if name == "dtypes":
            td = corpus.dtypes(corpus.REFERENCE_DTYPES + corpus.EXTRA_DTYPES)
        directory = corpus.write(td, tmp_path, name, "dir")
        containers = {"legacy_views": ["dir"], "dtypes": ["packed", "deflate", "lzma"]}.get(
            name, ["tdz", "deflate", "lzma"]
        )  # td.save refuses the extra dtypes
        for container in containers:
            other = corpus.write(td, tmp_path, name, container)
            for level in ("metadata", "fingerprint", "values"):
                result = tdview.diff(directory, other, level=level)
                assert result.equal, (name, container, level, result.changed())
    bits = tdview.diff(tmp_path / "dtypes.dir", tmp_path / "dtypes.packed.zip", level="values")
    assert bits.row("bits8").values.bytes_only
    nested = tdview.diff(
        tmp_path / "edge_leaves.dir", tmp_path / "edge_leaves.deflate.zip", level="values"
    ).row("jagged")
    assert nested.values is not None and nested.values.numel == 10


def test_non_tensor_values(tmp_path: Path) -> None:
    a = _write(
        TensorDict(
            text=NonTensorData("hello"),
            lr=NonTensorData(0.1),
            nan=NonTensorData(float("nan")),
            obj=NonTensorData({"x", "y"}),
        ),
        tmp_path / "a",
    )
    b = _write(
        TensorDict(
            text=NonTensorData("hello"),
            lr=NonTensorData(0.2),
            nan=NonTensorData(float("nan")),
            obj=NonTensorData({"x", "z"}),
        ),
        tmp_path / "b",
    )
    c = _write(
        TensorDict(
            text=NonTensorData("hello"),
            lr=NonTensorData(0.1),
            nan=NonTensorData(float("nan")),
            obj=NonTensorData({"y", "x"}),
        ),
        tmp_path / "c",
    )
    meta = tdview.diff(a, b)  # JSON values are metadata
    assert meta.row("lr").changes == ("value",)
    assert meta.row("text").status == meta.row("nan").status == "same"
    refused = tdview.diff(a, b, level="values")
    row = refused.row("obj")
    assert "allow_pickle=True" in row.note and row.value_equal is None
    assert row.status == "changed" and row.fingerprint == DIFFERS  # the bytes differ
    allowed = tdview.diff(a, b, level="values", allow_pickle=True).row("obj")
    assert allowed.value_equal is False and allowed.status == "changed"
    assert "value" in allowed.changes
    equal = tdview.diff(a, c, level="values", allow_pickle=True)
    assert equal.row("obj").value_equal is True
    assert equal.equal


# -- sides ----------------------------------------------------------------------------


def test_subpaths_on_each_side(model: dict[str, Path]) -> None:
    result = tdview.diff(
        model["before"], model["after.tdz"], subpath_a="0", subpath_b="0", level="values"
    )
    assert [row.path for row in result] == [(), ("weight",), ("bias",)]
    assert result.a.endswith("::0")
    leaf = tdview.diff(
        model["before"], model["before"], subpath_a="0/bias", subpath_b="2/bias", level="values"
    )
    assert leaf.rows[0].status == "changed" and leaf.rows[0].changes == ("shape",)
    with pytest.raises(SubpathError):
        tdview.diff(model["before"], model["after"], subpath="nope")


def test_collections_diff_members_named_by_subpath(model: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copytree(model["before"], run / "step_1")
    shutil.copyfile(model["after.tdz"], run / "step_2.tdz")
    with pytest.raises(SubpathError, match="folder of checkpoints"):
        tdview.diff(run, run)
    result = tdview.diff(run, run, subpath_a="step_1", subpath_b="step_2.tdz", level="fingerprint")
    assert result.rollup().changed == 4
    with tdview.Checkpoint(run) as opened:
        assert tdview.diff(opened, model["before"], subpath_a="step_1/0", subpath_b="0").equal


def test_result_serializes(model: dict[str, Path]) -> None:
    result = tdview.diff(model["nan"], model["edited.tdz"], level="values")
    data = json.loads(result.to_json())
    assert data["level"] == "values" and data["equal"] is False
    assert data["summary"]["renamed"] == 1
    by_key = {row["key"]: row for row in data["rows"]}
    assert by_key["head_weight"]["renamed_from"] == ["2", "weight"]
    assert by_key["0/bias"]["a"]["dtype"] == "float32"
    assert by_key["0/bias"]["b"]["dtype"] == "float64"
    only = json.loads(result.to_json(only_changed=True))["rows"]
    assert all(row["status"] != "same" for row in only)
    assert "same" in repr(result)


def test_to_pandas(model: dict[str, Path]) -> None:
    result = tdview.diff(model["before"], model["after"], level="values")
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pandas"):
            result.to_pandas()
        return
    frame = result.to_pandas()
    assert len(frame) == len(result) and "max_abs" in frame.columns


# -- command line ---------------------------------------------------------------------


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str] | None = None) -> tuple[int, str]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["diff", *argv])
    return code, out.getvalue()


def test_cli_exit_codes_and_output(model: dict[str, Path], capsys) -> None:
    code, text = _cli([str(model["before"]), str(model["before.tdz"])])
    assert code == 0 and text.splitlines()[-1].startswith("metadata: 0 changed")
    code, text = _cli([str(model["before"]), str(model["edited"]), "--only-changed"])
    assert code == 1
    lines = text.splitlines()
    assert "+ extra  added: int64 [5] 40 B" in lines
    assert "~ 0/bias  dtype float32 -> float64" in lines
    assert not any(line.startswith("  ") for line in lines)
    code, text = _cli(
        [str(model["before"]), str(model["edited"]), "--level", "fingerprint", "--only-changed"]
    )
    assert code == 1 and "R 2/weight -> head_weight  renamed" in text
    code, text = _cli(
        [str(model["before"]), str(model["after.tdz"]), "--level", "values", "--json", "--progress"]
    )
    assert code == 1
    data = json.loads(text)
    assert data["summary"]["changed"] == 4
    assert "values" in capsys.readouterr().err  # the progress bar's label
    assert _cli([str(model["before"]), str(model["before"] / "missing")])[0] == 2
    assert _cli([str(model["before"]), str(model["after"]), "--subpath", "nope"])[0] == 2


def test_cli_unreadable_leaf_is_trouble(model: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(model["before"], broken)
    (broken / "0" / "bias.memmap").unlink()
    code, text = _cli([str(model["before"]), str(broken), "--level", "values"])
    assert code == 2 and "! 0/bias" in text


# -- helpers --------------------------------------------------------------------------


_REAL_READ_BYTES = ArchiveStore.read_bytes


def _no_payload(*args: object, **kwargs: object) -> None:
    raise AssertionError("a payload was read")


def _forbid_archive_payloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """An archive store that fails on every payload read (its central directory and
    ``meta.json`` entries stay readable)."""
    for name in ("raw_payload", "payload", "decompress", "verify"):
        monkeypatch.setattr(ArchiveStore, name, _no_payload)
    real_read = ArchiveStore.read_bytes

    def read_bytes(self: ArchiveStore, key: str, limit: int) -> bytes:
        if not key.endswith(".json"):
            raise AssertionError(f"a payload was read: {key}")
        return real_read(self, key, limit)

    monkeypatch.setattr(ArchiveStore, "read_bytes", read_bytes)


def test_node_changes_kind_class_batch_size_names(tmp_path: Path) -> None:
    from tensordict import LazyStackedTensorDict

    def stack(n: int) -> LazyStackedTensorDict:
        return LazyStackedTensorDict(
            *(TensorDict(a=torch.full((2,), float(i))) for i in range(n)), stack_dim=0
        )

    a = TensorDict(
        sub=TensorDict(v=torch.zeros(2, 3), batch_size=[2], names=["n"]),
        stack=stack(2),
        was_leaf=torch.zeros(3),
        point=corpus.Point(
            pos=torch.zeros(2, 3),
            vel=torch.zeros(2, 3),
            label="p",
            count=1,
            tags=["t", "u"],
            inner=TensorDict(batch_size=[2]),
            batch_size=[2],
        ),
    )
    b = TensorDict(
        sub=TensorDict(v=torch.zeros(2, 3), batch_size=[2, 3], names=["m", "k"]),
        stack=stack(3),
        was_leaf=TensorDict(now=torch.zeros(3)),
        point=TensorDict(pos=torch.zeros(2, 3), vel=torch.zeros(2, 3), batch_size=[2]),
    )
    result = tdview.diff(_write(a, tmp_path / "a"), _write(b, tmp_path / "b"))
    rows = _statuses(result)
    assert rows["sub"] == ("changed", ("batch_size", "names"))
    assert rows["stack"] == ("changed", ("batch_size",))
    assert rows["stack/2"][0] == rows["stack/2/a"][0] == "added"
    assert rows["was_leaf"] == ("changed", ("kind", "class"))
    assert rows["was_leaf/now"][0] == "added"
    assert rows["point"][1][:2] == ("kind", "class")
    assert rows["point/label"][0] == "removed"  # a field of the tensorclass only
    code, text = _cli([str(tmp_path / "a"), str(tmp_path / "b"), "--only-changed"])
    assert "~ sub  batch size [2] -> [2, 3]; names ['n'] -> ['m', 'k']" in text.splitlines()


def test_corrupt_compressed_entry_is_a_problem(model: dict[str, Path], tmp_path: Path) -> None:
    """A deflated entry is checked by its CRC-32 as it streams: a corrupted one is a row
    not read (exit status 2), not a silent answer."""
    broken = tmp_path / "broken.zip"
    shutil.copyfile(model["after.deflate"], broken)
    with ArchiveStore(broken) as store:
        offset = store.payload_offset("0/weight.memmap")
        stored = store.entry("0/weight.memmap").stored_size
    with open(broken, "r+b") as file:
        file.seek(offset + stored // 2)
        file.write(b"\x00\x01\x02\x03")
    result = tdview.diff(model["after"], broken, level="values")
    row = result.row("0/weight")
    assert row.problem and ("CRC" in row.problem or "corrupt" in row.problem)
    assert not result.equal
    assert _cli([str(model["after"]), str(broken), "--level", "values"])[0] == 2


def test_keys_are_escaped_in_the_text(tmp_path: Path) -> None:
    a = _write(TensorDict({"w\x1b[2J": torch.zeros(2)}), tmp_path / "a")
    b = _write(TensorDict({"w\x1b[2J": torch.ones(2)}), tmp_path / "b")
    code, text = _cli([str(a), str(b), "--level", "values", "--only-changed"])
    assert code == 1 and "\x1b" not in text and "w\\x1b[2J" in text


def test_auto_of_two_archives_imports_no_torch(run: tuple[Path, Path]) -> None:
    """The CRC-32s of two archives make no payload job: the diff needs no torch."""
    import subprocess
    import sys

    code = (
        "import sys, tdview\n"
        f"d = tdview.diff({str(run[0])!r}, {str(run[1])!r}, level='auto')\n"
        "print(d.level, d.rollup().changed, 'torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert out[0] == "fingerprint" and int(out[1]) > 0 and out[2] == "False", out
