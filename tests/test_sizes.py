"""Sizes: where the bytes of a checkpoint go (``tdview.answers.sizes``, ``tdview du``, the
``sizes`` method), checked against the files tensordict wrote: the sizes of the
``.memmap`` files on disk and of the archive's entries, and the tensors tensordict's own
loader gives."""

from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from tdview.__main__ import main
from tdview.answers import sizes, walk_sizes
from tdview.errors import Cancelled
from tdview.index import Checkpoint, cancellable
from tdview.protocol import Session, handle

from .corpus import write_at
from .test_protocol_golden import golden, request, same_shape
from .test_replay_buffers import dump_buffer
from .training_steps import write_training_steps


def _trainer() -> TensorDict:
    """A model and its AdamW state after one step, as a trainer saves them."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(3, 8)).sum().backward()
    optimizer.step()
    names = {id(p): n for n, p in model.named_parameters()}
    state = TensorDict({names[id(p)]: TensorDict(dict(m)) for p, m in optimizer.state.items()})
    return TensorDict(
        model=TensorDict.from_module(model).data.clone(),
        optim=TensorDict(state=state),
        step=torch.tensor(7),
        mask=torch.ones(10, dtype=torch.bool),
    )


@pytest.fixture(scope="module")
def trainer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_at(_trainer(), tmp_path_factory.mktemp("sizes") / "trainer")


@pytest.fixture(scope="module")
def steps(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_training_steps(tmp_path_factory.mktemp("steps"))


def files_under(folder: Path) -> int:
    """Bytes of the .memmap files below ``folder`` (or of the file itself)."""
    if folder.is_file():
        return folder.stat().st_size
    return sum(
        os.path.getsize(os.path.join(top, name))
        for top, _, names in os.walk(folder)
        for name in names
        if name.endswith(".memmap")
    )


def reference_by_dtype(path: Path) -> dict[str, int]:
    """Bytes by dtype of the tensors tensordict's own loader gives."""
    loaded = TensorDict.load_memmap(str(path))
    found: dict[str, int] = {}
    for leaf in loaded.values(include_nested=True, leaves_only=True):
        if isinstance(leaf, torch.Tensor):
            name = str(leaf.dtype).removeprefix("torch.")
            found[name] = found.get(name, 0) + leaf.numel() * leaf.element_size()
    return found


def test_each_key_is_the_bytes_of_its_files_on_disk(trainer_dir: Path) -> None:
    report = sizes(str(trainer_dir))
    assert [e.key for e in report.entries] == sorted(
        ["model", "optim", "step", "mask"],
        key=lambda k: (
            -files_under(trainer_dir / k)
            if (trainer_dir / k).is_dir()
            else -files_under(trainer_dir / f"{k}.memmap")
        ),
    )
    for entry in report.entries:
        folder = trainer_dir / entry.key
        on_disk = files_under(folder if folder.is_dir() else trainer_dir / f"{entry.key}.memmap")
        assert entry.bytes == on_disk, entry
    assert report.bytes == files_under(trainer_dir)
    assert report.by_dtype == reference_by_dtype(trainer_dir)
    assert sum(report.by_section.values()) == report.bytes


def test_sections_of_a_trainer_checkpoint(trainer_dir: Path) -> None:
    report = sizes(str(trainer_dir))
    assert report.by_section == {
        "optimizer": files_under(trainer_dir / "optim"),
        "model": files_under(trainer_dir / "model"),
        "rest": files_under(trainer_dir / "step.memmap") + files_under(trainer_dir / "mask.memmap"),
    }
    assert report.section == "mixed"
    sections = {e.key: e.section for e in report.entries}
    assert sections == {"model": "model", "optim": "optimizer", "step": "rest", "mask": "rest"}
    # the optimizer's state is 2 moments of each parameter, and a step each
    assert report.by_section["optimizer"] > 2 * report.by_section["model"]
    dtypes = {e.key: e.dtype for e in report.entries}
    assert dtypes == {"model": "float32", "optim": "float32", "step": "int64", "mask": "bool"}


def test_an_archive_sums_its_entries(steps: tuple[Path, Path]) -> None:
    archive = steps[0]
    with zipfile.ZipFile(archive) as zf:
        entries = [i for i in zf.infolist() if i.filename.endswith(".memmap")]
    report = sizes(str(archive))
    for entry in report.entries:
        prefix = "/".join(entry.path)
        stored = sum(
            i.file_size
            for i in entries
            if i.filename == f"{prefix}.memmap" or i.filename.startswith(f"{prefix}/")
        )
        assert entry.bytes == stored, entry
    assert report.bytes == sum(i.file_size for i in entries)
    assert report.by_dtype == reference_by_dtype(archive)
    level = sizes(str(archive), "model/blocks")
    assert level.path == ("model", "blocks")
    assert level.by_section == {"model": level.bytes}
    assert [e.path[:2] for e in level.entries] == [("model", "blocks")] * len(level.entries)


def test_sections_below_a_key_that_names_none(tmp_path: Path) -> None:
    """``trainer/model`` and ``trainer/optimizer``: the level without a name splits by its
    children; an optimizer's state_dict is known by its keys; unknown keys are the rest."""
    torch.manual_seed(0)
    td = TensorDict(
        trainer=TensorDict(
            model=TensorDict(w=torch.randn(16, 16)),
            optimizer=TensorDict(m=torch.randn(16, 16), v=torch.randn(16, 16)),
        ),
        extra=TensorDict(
            state=TensorDict(w=torch.randn(4)), param_groups=TensorDict(lr=torch.ones(1))
        ),
        things=TensorDict(w=torch.randn(5)),
    )
    path = write_at(td, tmp_path / "nested")
    report = sizes(str(path))
    trainer = next(e for e in report.entries if e.key == "trainer")
    assert trainer.section == "mixed"
    assert report.by_section == {
        "optimizer": files_under(path / "trainer" / "optimizer") + files_under(path / "extra"),
        "model": files_under(path / "trainer" / "model"),
        "rest": files_under(path / "things"),
    }
    assert sizes(str(path), "extra").section == "optimizer"
    assert sizes(str(path), "things/w").section == "rest"


def test_a_folder_with_a_replay_buffer(tmp_path: Path, trainer_dir: Path) -> None:
    """A folder of checkpoints: each member judged from its root; torchrl's storage is
    a buffer whatever its name."""
    folder = tmp_path / "run"
    folder.mkdir()
    write_at(_trainer(), folder / "ckpt")
    dump_buffer(folder / "data")
    report = sizes(str(folder))
    storage = folder / "data" / "storage"
    assert report.by_section["buffers"] == files_under(storage)
    assert report.by_section["model"] == files_under(folder / "ckpt" / "model")
    ckpt = next(e for e in report.entries if e.key == "ckpt")
    assert ckpt.section == "mixed" and ckpt.bytes == files_under(folder / "ckpt")
    data = sizes(str(folder), "data")
    side = [p for p in (folder / "data").rglob("*.*") if p.is_file() and storage not in p.parents]
    assert side  # torchrl's writer state and its prefetch.pkl: side files, the rest
    assert data.by_section == {
        "buffers": files_under(storage),
        "rest": sum(p.stat().st_size for p in side),
    }
    inside = sizes(str(folder), "data/storage")
    assert [e.path[:2] for e in inside.entries] == [("data", "storage")] * len(inside.entries)
    assert sum(e.bytes for e in inside.entries) == files_under(storage)


def test_small_entries_are_gathered(tmp_path: Path) -> None:
    td = TensorDict({f"k{i}": torch.zeros(1000 if i < 10 else 1) for i in range(40)})
    report = sizes(str(write_at(td, tmp_path / "many")))
    shown, count, nbytes = report.gathered(20, 0.01)
    assert [e.bytes for e in shown] == [4000] * 10  # the 30 of 4 B are under 1%
    assert (count, nbytes) == (30, 120)
    shown, count, nbytes = report.gathered(5)
    assert len(shown) == 5 and (count, nbytes) == (35, 5 * 4000 + 120)


def test_walk_sizes_goes_depth_first(steps: tuple[Path, Path]) -> None:
    with Checkpoint(steps[0]) as ckpt:
        paths = [e.path for e in walk_sizes(ckpt, (), 2)]
    assert paths[:2] == [("optimizer",), ("optimizer", "state")]
    model = paths.index(("model",))
    assert all(p[0] == "model" for p in paths[model : model + 6])
    assert ("model", "blocks", "0") not in paths


# ---------------------------------------------------------------- tdview du


def test_du_lists_keys_largest_first(steps, capsys) -> None:
    assert main(["du", str(steps[0]), "-d", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    with Checkpoint(steps[0]) as ckpt:
        entries = sorted(walk_sizes(ckpt, (), 2), key=lambda e: -e.bytes)
    assert [line.split("  ")[-1] for line in lines[1:]] == ["/".join(e.path) for e in entries]
    assert lines[0].endswith(f"  {steps[0]}")
    # the sizes right-aligned in one column, then two spaces and the key
    ends = {m.end() for m in (re.match(r" *[\d.]+ [KMGTP]?B  ", line) for line in lines) if m}
    assert len(ends) == 1, lines
    assert main(["du", str(steps[0]), "-b"]) == 0
    first = capsys.readouterr().out.splitlines()
    assert first[0].split()[0] == str(sizes(str(steps[0])).bytes)


def test_du_by_dtype_and_section_and_json(steps, capsys) -> None:
    archive = steps[0]
    assert main(["du", str(archive), "--by", "dtype", "-b"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert {name: int(n) for n, name in rows} == reference_by_dtype(archive)
    assert main(["du", str(archive), "model", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["path"] == ["model"] and doc["by_section"] == {"model": doc["bytes"]}
    assert [e["key"] for e in doc["entries"]] == ["blocks", "embed", "head", "probe", "norm"]
    assert main(["du", str(archive.parent), "--by", "section", "-b"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    both = [sizes(str(p)).by_section for p in steps]
    assert int(rows[0][0]) == sum(sum(s.values()) for s in both)
    assert {name: int(n) for n, name in rows[1:]} == {
        k: both[0].get(k, 0) + both[1].get(k, 0) for k in both[0]
    }


def test_du_says_what_is_wrong(steps, capsys) -> None:
    assert main(["du", str(steps[0]), "no/such"]) == 2
    assert "has no key 'no'" in capsys.readouterr().err
    assert main(["du", str(steps[0]), "-d", "-1"]) == 2
    assert "--depth" in capsys.readouterr().err


# ---------------------------------------------------------------- the sizes method


def ask(tree: Checkpoint, **params) -> dict:
    reply, buffers = handle(Session(tree, tree.path, namespace={}), request("sizes", params))
    assert reply["ok"], reply
    assert buffers == []
    json.dumps(reply, allow_nan=False)
    return reply["result"]


def test_the_reply_has_the_golden_shape(demo_paths) -> None:
    with Checkpoint(demo_paths["archive"]) as ckpt:
        result = ask(ckpt, path=[], limit=3)
        expected = sizes(ckpt)
    same_shape(result, golden("reply_sizes")["message"]["result"])
    assert result["bytes"] == expected.bytes and result["by_section"] == expected.by_section
    sent = sum(c["bytes"] for c in result["children"])
    assert sent + result["other"]["bytes"] == result["bytes"]
    assert len(result["children"]) == 3
    assert result["other"]["count"] == len(expected.entries) - 3


def test_a_member_answers_with_its_path_in_the_folder(steps) -> None:
    with Checkpoint(steps[0].parent) as folder:
        top = ask(folder, path=[])
        assert {c["key"] for c in top["children"]} == {p.name for p in steps}
        level = ask(folder, path=[steps[0].name, "model"])
    assert level["path"] == [steps[0].name, "model"]
    assert [c["path"][:2] for c in level["children"]] == [[steps[0].name, "model"]] * 5
    assert level["by_section"] == {"model": level["bytes"]}


def test_a_cancelled_walk_stops(steps) -> None:
    def stop() -> None:
        raise Cancelled("cancelled")

    with Checkpoint(steps[1]) as ckpt, cancellable(stop), pytest.raises(Cancelled):
        sizes(ckpt)


@pytest.mark.parametrize("suffix", ["", ".tdz"])
def test_bytes_stored_twice(tmp_path: Path, suffix: str, capsys) -> None:
    """Tied weights saved twice (a decoder's weight is the embedding's): the bytes one
    copy would save, only when asked (it reads payloads); none for equal-sized others."""
    torch.manual_seed(0)
    embed = torch.randn(64, 16)
    td = TensorDict(
        model=TensorDict(embed=embed, decoder=embed.clone(), other=torch.randn(64, 16)),
        step=torch.tensor(3),
    )
    path = write_at(td, tmp_path / f"tied{suffix}")
    assert sizes(str(path)).duplicates_bytes is None  # not looked for: no payload read
    assert sizes(str(path), duplicates=True).duplicates_bytes == embed.numel() * 4
    assert sizes(str(path), "step", duplicates=True).duplicates_bytes == 0
    with Checkpoint(path) as ckpt:
        result = ask(ckpt, path=["model"], duplicates=True)
        assert result["duplicates_bytes"] == embed.numel() * 4
        assert ask(ckpt, path=["model"])["duplicates_bytes"] is None
    assert main(["du", str(path), "--duplicates", "-b"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split() == [
        str(embed.numel() * 4),
        "(stored",
        "twice:",
        "in",
        "duplicates)",
    ]


def test_a_member_of_a_folder_is_looked_into_alone(steps) -> None:
    """Below a member, its own leaves only (the folder's own node: all its members,
    ``test_answers_folders.py::test_duplicates_span_the_members``)."""
    member = sizes(str(steps[0].parent), (steps[0].name, "model"), duplicates=True)
    assert member.duplicates_bytes == 0


def test_the_model_an_optimizer_was_mapped_to(tmp_path: Path) -> None:
    """A model under a name no rule knows (``agent``) is the model when the optimizer's
    states were mapped to its parameters (tdview.index.optimizer_map); a sibling of the
    same name pattern with no optimizer stays the rest."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 4))
    optimizer = torch.optim.AdamW(net.parameters())
    net(torch.randn(3, 8)).sum().backward()
    optimizer.step()
    state = optimizer.state_dict()
    td = TensorDict(
        agent=TensorDict.from_module(net).data.clone(),
        other=TensorDict(w=torch.randn(7)),
        solver=TensorDict(
            state={str(i): dict(m) for i, m in state["state"].items()},
            param_groups=state["param_groups"],
        ),
    )
    path = write_at(td, tmp_path / "agent")
    report = sizes(str(path))
    assert {e.key: e.section for e in report.entries} == {
        "agent": "model",
        "solver": "optimizer",
        "other": "rest",
    }
    assert report.by_section["model"] == files_under(path / "agent")


def test_what_cannot_be_read_is_said_not_counted(tmp_path: Path, capsys) -> None:
    """A sub-folder whose meta.json is damaged: its bytes are not counted, the report
    says how many nodes could not be read, and du says so on stderr, exit 0."""
    td = TensorDict(model=TensorDict(a=torch.zeros(10), b=TensorDict(c=torch.ones(3))))
    path = write_at(td, tmp_path / "damaged")
    (path / "model" / "b" / "meta.json").write_text("{not json")
    report = sizes(str(path))
    assert report.problems == 1
    assert report.bytes == files_under(path / "model" / "a.memmap")
    assert main(["du", str(path), "-d", "2"]) == 0
    out, err = capsys.readouterr()
    assert "  model/a" in out
    assert "1 node(s) below could not be read and are not counted" in err
    with Checkpoint(path) as ckpt:
        assert ask(ckpt, path=[])["problems"] == 1
