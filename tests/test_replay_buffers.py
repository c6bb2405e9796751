"""torchrl replay buffers: the rows of a storage that were written (``storage_metadata.json``).

The buffers are written by torchrl itself (0.14.1: ``ReplayBuffer.dumps``); tdview never
imports torchrl. torchrl's prioritized sampler needs its C++ extension, which does not
load on torch 2.13, so the prioritized layout writes ``sampler/`` here the way torchrl
0.14.1's ``PrioritizedSampler.dumps`` (``samplers/prioritized.py``) does. Without
torchrl those tests skip with the reason (under ``CI=true``, where ``make test``
installs it, they fail instead). The hostile ``storage_metadata.json`` files need only
tensordict.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest
import torch
from tensordict import LazyStackedTensorDict, MemoryMappedTensor, TensorDict

from tdview.index import Checkpoint, rows_of_leaf, storage_rows
from tdview.protocol import Session, handle, parse_request
from tdview.protocol._preview import statistics
from tdview.views._tree import describe

from ._optional import require_module
from .test_protocol_golden import golden, same_shape

ROWS, CAPACITY = 20, 100


def _torchrl():
    """torchrl.data, or a skip that says why it is not here (a failure under ``CI=true``)."""
    return require_module("torchrl.data", "the buffers here are written by torchrl itself")


def request(method: str, **params) -> dict:
    return {"kind": "tdview:request", "v": 1, "id": 1, "method": method, "params": params}


def ask(ckpt: Checkpoint, method: str, **params) -> tuple[dict, list[bytes]]:
    reply, buffers = handle(Session(ckpt, ckpt.path, namespace={}), request(method, **params))
    assert reply["ok"], reply
    json.dumps(reply, allow_nan=False)
    return reply["result"], buffers


def rows_data() -> TensorDict:
    """ROWS rows: step counts 5.., observations, a nested reward."""
    return TensorDict(
        {
            "step_count": torch.arange(ROWS) + 5,
            "observation": torch.linspace(-1, 1, ROWS * 3).reshape(ROWS, 3),
            "next": {"reward": torch.full((ROWS, 1), 0.5)},
        },
        batch_size=[ROWS],
    )


def dump_buffer(path: Path, storage_class: str = "LazyMemmapStorage") -> Path:
    """``TensorDictReplayBuffer(storage=<storage_class>(CAPACITY))`` with ROWS rows, dumped
    by torchrl to ``path``; returns ``path``."""
    data = _torchrl()
    buffer = data.TensorDictReplayBuffer(storage=getattr(data, storage_class)(CAPACITY))
    buffer.extend(rows_data())
    buffer.dumps(path)
    return path


@pytest.fixture(scope="module")
def buffer_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return dump_buffer(tmp_path_factory.mktemp("rb") / "buffer")


# ---------------------------------------------------------------- torchrl's own files


def test_torchrl_writes_the_layout_this_reads(buffer_path: Path) -> None:
    meta = json.loads((buffer_path / "storage" / "storage_metadata.json").read_text())
    assert meta == {"metadata": {}, "is_pytree": False, "len": ROWS}
    assert json.loads((buffer_path / "storage" / "meta.json").read_text())["shape"] == [CAPACITY]
    assert json.loads((buffer_path / "writer" / "metadata.json").read_text())["cursor"] == ROWS


def test_storage_rows_of_a_real_buffer(buffer_path: Path) -> None:
    ckpt = Checkpoint(buffer_path / "storage")
    rows = storage_rows(ckpt, ckpt.root)
    assert rows is not None and (rows.written, rows.capacity) == (ROWS, CAPACITY)
    assert rows.where.endswith("storage_metadata.json")
    assert storage_rows(ckpt, ckpt.node("next")) is None  # a sub-tensordict is no storage
    assert storage_rows(ckpt, ckpt.node("step_count")) is None
    assert rows_of_leaf(ckpt, ("next", "reward")) == rows


def test_details_and_tree_say_how_many_rows_were_written(buffer_path: Path) -> None:
    ckpt = Checkpoint(buffer_path / "storage")
    result, _ = ask(ckpt, "node", path=[])
    assert result["rows"] == {"written": ROWS, "capacity": CAPACITY}
    assert result["problems"] == []
    same_shape({"result": result}, {"result": golden("reply_node_storage")["message"]["result"]})
    assert ask(ckpt, "node", path=["next"])[0]["rows"] is None
    assert ask(ckpt, "node", path=["observation"])[0]["rows"] is None
    line = describe(ckpt, ckpt.root)
    assert f"batch [{CAPACITY}]  {ROWS} of {CAPACITY} rows written" in line, line
    assert "rows written" not in describe(ckpt, ckpt.node("next"))


def test_preview_covers_the_written_rows_by_default(buffer_path: Path) -> None:
    ckpt = Checkpoint(buffer_path / "storage")
    expected = TensorDict.load_memmap(buffer_path / "storage")
    result, buffers = ask(ckpt, "preview", path=["step_count"], rows=100)
    same_shape({"result": result}, {"result": golden("reply_preview_storage")["message"]["result"]})
    assert result["rows"] == {"written": ROWS, "capacity": CAPACITY, "scope": "written"}
    assert result["shape"] == [CAPACITY]  # the leaf's own
    assert result["slice"]["shape"] == [ROWS]
    shown = torch.frombuffer(bytearray(buffers[0]), dtype=torch.int64)
    assert torch.equal(shown, expected["step_count"][:ROWS])
    stats, _ = statistics(expected["step_count"][:ROWS])
    assert result["stats"] == stats
    assert (result["stats"]["min"], result["stats"]["max"], result["stats"]["count"]) == (
        5.0,
        ROWS + 4.0,
        ROWS,
    )
    nested, _ = ask(ckpt, "preview", path=["next", "reward"], rows=4)
    assert nested["stats"]["count"] == ROWS and nested["stats"]["min"] == 0.5


def test_preview_of_all_rows_when_asked(buffer_path: Path) -> None:
    ckpt = Checkpoint(buffer_path / "storage")
    result, _ = ask(ckpt, "preview", path=["step_count"], rows=100, rows_scope="all")
    assert result["rows"] == {"written": ROWS, "capacity": CAPACITY, "scope": "all"}
    assert result["slice"]["shape"] == [CAPACITY]
    assert result["stats"]["count"] == CAPACITY
    assert result["stats"]["min"] == 0.0  # LazyMemmapStorage's unwritten rows are zeros


def test_a_buffer_opened_at_its_dump_folder(buffer_path: Path) -> None:
    """``Checkpoint(path)`` of the folder ``dumps`` wrote is a collection whose member
    ``storage`` is the checkpoint: its rows and previews are the same as opened alone,
    and every node of the collection's own tree has ``rows`` (null) in its details."""
    ckpt = Checkpoint(buffer_path)
    assert ask(ckpt, "node", path=["storage"])[0]["rows"] == {"written": ROWS, "capacity": CAPACITY}
    written, _ = ask(ckpt, "preview", path=["storage", "step_count"], rows=100)
    assert written["stats"]["count"] == ROWS and written["rows"]["scope"] == "written"
    everything, _ = ask(ckpt, "preview", path=["storage", "step_count"], rows=100, rows_scope="all")
    assert everything["stats"]["count"] == CAPACITY
    keys = set(golden("reply_node")["message"]["result"])
    for path in ([], ["writer"], ["writer", "metadata.json"], ["buffer_metadata.json"]):
        result, _ = ask(ckpt, "node", path=path)
        assert keys <= set(result) and result["rows"] is None, path


def test_a_buffer_dumped_from_memory_and_archived(tmp_path: Path) -> None:
    """A ``LazyTensorStorage`` (rows in memory, saved by torchrl as a memmap), packed into
    a zip archive as a user would ship it: the rows come from the archive's entry."""
    path = dump_buffer(tmp_path / "buffer", "LazyTensorStorage")
    archive = tmp_path / "storage.tdz"
    with zipfile.ZipFile(archive, "w") as zf:
        for file in sorted((path / "storage").rglob("*")):
            if file.is_file():
                zf.write(file, file.relative_to(path / "storage").as_posix())
    ckpt = Checkpoint(archive)
    assert ckpt.store.kind == "archive"
    assert ask(ckpt, "node", path=[])[0]["rows"] == {"written": ROWS, "capacity": CAPACITY}
    result, _ = ask(ckpt, "preview", path=["step_count"], rows=4)
    assert result["stats"]["count"] == ROWS and result["stats"]["min"] == 5.0


# ---------------------------------------------------------------- prioritized layout


def write_prioritized_sampler(path: Path, capacity: int, priorities: torch.Tensor) -> None:
    """``path/sampler/`` as torchrl 0.14.1's ``PrioritizedSampler.dumps`` writes it: the sum
    and min trees as float64 memmaps of shape ``(_max_capacity,)`` and its floats
    (``tree_map(float, ...)``: the capacity too) with ``_schema_version``."""
    folder = path / "sampler"
    folder.mkdir()
    for name, values in (("sumtree", priorities), ("mintree", priorities)):
        tree = MemoryMappedTensor.empty(
            (capacity,), dtype=torch.float64, filename=folder / f"{name}.memmap"
        )
        tree.copy_(values.to(torch.float64))
    written = int((priorities > 0).sum())
    metadata = {
        "_alpha": 0.7,
        "_beta": 0.9,
        "_eps": 1e-8,
        "_max_priority": [float(priorities.max()), float(written - 1)],
        "_max_capacity": float(capacity),
        "_schema_version": 1,
    }
    (folder / "sampler_metadata.json").write_text(json.dumps(metadata))


@pytest.fixture(scope="module")
def prioritized_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prioritized buffer's dump: torchrl's storage (LazyTensorStorage: rows never
    written are whatever memory held, here made the int64 minimum torch.empty gave the
    demo) and writer, the sampler written as torchrl 0.14.1 does."""
    path = dump_buffer(tmp_path_factory.mktemp("prb") / "buffer", "LazyTensorStorage")
    step = MemoryMappedTensor.from_filename(
        path / "storage" / "step_count.memmap", dtype=torch.int64, shape=(CAPACITY,)
    )
    step[ROWS:] = torch.iinfo(torch.int64).min  # uninitialised memory, made repeatable
    del step
    priorities = torch.zeros(CAPACITY, dtype=torch.float64)
    priorities[:ROWS] = 1.0
    write_prioritized_sampler(path, CAPACITY, priorities)
    return path


def test_prioritized_layout_on_disk(prioritized_path: Path) -> None:
    sampler = prioritized_path / "sampler"
    assert sorted(p.name for p in sampler.iterdir()) == [
        "mintree.memmap",
        "sampler_metadata.json",
        "sumtree.memmap",
    ]
    assert (sampler / "sumtree.memmap").stat().st_size == CAPACITY * 8
    assert {p.name for p in prioritized_path.iterdir()} >= {
        "storage",
        "writer",
        "sampler",
        "buffer_metadata.json",
    }


def test_prioritized_buffer_statistics_leave_out_unwritten_memory(
    prioritized_path: Path,
) -> None:
    ckpt = Checkpoint(prioritized_path / "storage")
    written, _ = ask(ckpt, "preview", path=["step_count"], rows=4)
    assert written["stats"]["min"] == 5.0 and written["stats"]["max"] == ROWS + 4.0
    assert written["stats"]["count"] == ROWS
    everything, _ = ask(ckpt, "preview", path=["step_count"], rows=4, rows_scope="all")
    assert everything["stats"]["min"] == pytest.approx(-9.223372036854776e18)
    assert "20 of 100 rows written" in describe(ckpt, ckpt.root)


# ---------------------------------------------------------------- any folder, hostile files


def storage_folder(root: Path, text: str | bytes | None, *, batch=(10,), name="st") -> Path:
    """A tensordict memmap folder of batch size ``batch`` (tensordict's writer) with
    ``text`` as its ``storage_metadata.json`` (None: no such file)."""
    n = 1
    for size in batch:
        n *= size
    td = TensorDict(
        {"a": torch.arange(n).reshape(*batch) + 1, "sub": {"b": torch.ones(*batch, 2)}},
        batch_size=list(batch),
    )
    folder = root / name
    td.memmap(folder)
    if text is not None:
        data = text.encode() if isinstance(text, str) else text
        (folder / "storage_metadata.json").write_bytes(data)
    return folder


def test_any_tensordict_folder_can_be_a_storage(tmp_path: Path) -> None:
    """A storage below the checkpoint root (the buffer's folder saved as a tensordict
    entry): the rows hold for the leaves below it, not for its siblings."""
    td = TensorDict(
        {"buffer": TensorDict({"x": torch.arange(10.0)}, [10]), "y": torch.arange(10.0)}, [10]
    )
    td.memmap(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "buffer" / "storage_metadata.json").write_text('{"len": 3}')
    ckpt = Checkpoint(tmp_path / "ckpt")
    assert ask(ckpt, "node", path=["buffer"])[0]["rows"] == {"written": 3, "capacity": 10}
    assert ask(ckpt, "node", path=[])[0]["rows"] is None
    x, _ = ask(ckpt, "preview", path=["buffer", "x"], rows=10)
    assert x["stats"]["count"] == 3 and x["rows"]["written"] == 3
    y, _ = ask(ckpt, "preview", path=["y"], rows=10)
    assert y["stats"]["count"] == 10 and y["rows"] is None


@pytest.mark.parametrize("written", [0, 10])
def test_len_at_the_bounds_is_believed(tmp_path: Path, written: int) -> None:
    ckpt = Checkpoint(storage_folder(tmp_path, json.dumps({"len": written})))
    rows = storage_rows(ckpt, ckpt.root)
    assert rows is not None and (rows.written, rows.capacity) == (written, 10)
    result, _ = ask(ckpt, "preview", path=["a"], rows=100)
    assert result["stats"]["count"] == written
    assert (result["histogram"] is None) == (written == 0)


HOSTILE = {
    "len above the capacity": ('{"len": 11}', "outside [0, 10]"),
    "negative len": ('{"len": -1}', "outside [0, 10]"),
    "huge len": ('{"len": 100000000000000000000000000}', "outside [0, 10]"),
    "boolean len": ('{"len": true}', "must be an integer"),
    "float len": ('{"len": 4.0}', "must be an integer"),
    "string len": ('{"len": "4"}', "must be an integer"),
    "NaN len": ('{"len": NaN}', "must be an integer"),
    "no len": ('{"metadata": {}, "is_pytree": false}', "must be an integer"),
    "a pytree": ('{"metadata": {}, "is_pytree": true, "len": 4}', "is_pytree"),
    "is_pytree not a boolean": ('{"is_pytree": 0, "len": 4}', "is_pytree"),
    "metadata not an object": ('{"metadata": [], "len": 4}', "metadata"),
    "not JSON": ("len = 4", "invalid JSON"),
    "not UTF-8": (b'{"len": 4, "x": "\xff"}', "UTF-8"),
    "a list": ("[4]", "must be an object"),
    "empty": ("", "invalid JSON"),
    "deeply nested": ('{"len": 4, "x": ' + "[" * 5000 + "]" * 5000 + "}", "nested"),
    "too large": ('{"len": 4, "x": "' + "y" * (64 * 1024) + '"}', "limit"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_bad_storage_metadata_is_a_problem_of_its_node(tmp_path: Path, case: str) -> None:
    text, says = HOSTILE[case]
    ckpt = Checkpoint(storage_folder(tmp_path, text))
    result, _ = ask(ckpt, "node", path=[])
    assert result["rows"] is None
    assert len(result["problems"]) == 1, result["problems"]
    assert "storage_metadata.json" in result["problems"][0]
    assert says in result["problems"][0], result["problems"][0]
    line = describe(ckpt, ckpt.root)
    assert "PROBLEM: " in line and "storage_metadata.json" in line
    assert "of 10 rows written" not in line
    assert rows_of_leaf(ckpt, ("a",)) is None
    preview, _ = ask(ckpt, "preview", path=["a"], rows=100)  # every row, as without the file
    assert preview["rows"] is None and preview["stats"]["count"] == 10


def test_no_storage_metadata_is_no_storage(tmp_path: Path) -> None:
    ckpt = Checkpoint(storage_folder(tmp_path, None))
    result, _ = ask(ckpt, "node", path=[])
    assert result["rows"] is None and result["problems"] == []
    assert "rows written" not in describe(ckpt, ckpt.root)


def test_a_folder_named_storage_metadata_is_no_storage(tmp_path: Path) -> None:
    folder = storage_folder(tmp_path, None)
    (folder / "storage_metadata.json").mkdir()
    ckpt = Checkpoint(folder)
    assert storage_rows(ckpt, ckpt.root) is None
    assert ask(ckpt, "node", path=[])[0]["problems"] == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_is_never_opened(tmp_path: Path) -> None:
    folder = storage_folder(tmp_path, None)
    os.mkfifo(folder / "storage_metadata.json")  # opening it to read would block
    ckpt = Checkpoint(folder)
    assert storage_rows(ckpt, ckpt.root) is None
    assert ask(ckpt, "node", path=[])[0]["rows"] is None


def test_a_symlink_out_of_the_checkpoint_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text('{"len": 4}')
    folder = storage_folder(tmp_path, None)
    (folder / "storage_metadata.json").symlink_to(outside)
    ckpt = Checkpoint(folder)
    result, _ = ask(ckpt, "node", path=[])
    assert result["rows"] is None
    assert any("storage_metadata.json" in p for p in result["problems"]), result["problems"]


def test_an_archive_entry_is_read_too(tmp_path: Path) -> None:
    td = TensorDict({"a": torch.arange(10)}, [10])
    td.save(str(tmp_path / "x.tdz"))
    with zipfile.ZipFile(tmp_path / "x.tdz", "a") as zf:
        zf.writestr("storage_metadata.json", '{"len": 4}')
    ckpt = Checkpoint(tmp_path / "x.tdz")
    assert ask(ckpt, "node", path=[])[0]["rows"] == {"written": 4, "capacity": 10}
    assert ask(ckpt, "preview", path=["a"], rows=10)[0]["stats"]["count"] == 4


def test_no_batch_dimension_is_a_problem(tmp_path: Path) -> None:
    folder = tmp_path / "st"
    TensorDict({"a": torch.arange(10)}, []).memmap(folder)
    (folder / "storage_metadata.json").write_text('{"len": 4}')
    ckpt = Checkpoint(folder)
    result, _ = ask(ckpt, "node", path=[])
    assert result["rows"] is None
    assert any("no batch dimension" in p for p in result["problems"]), result["problems"]


def test_more_batch_dims_leave_len_unread(tmp_path: Path) -> None:
    """``LazyMemmapStorage(ndim=2)`` counts elements over two dims, and ndim is saved
    nowhere: ``len`` 4 of a [10, 2] storage may be 4 rows or 2. No claim, no problem;
    a ``len`` above every element is still a problem."""
    ckpt = Checkpoint(storage_folder(tmp_path, '{"len": 4}', batch=(10, 2)))
    result, _ = ask(ckpt, "node", path=[])
    assert result["rows"] is None and result["problems"] == []
    assert ask(ckpt, "preview", path=["a"], rows=100)[0]["stats"]["count"] == 20
    bad = Checkpoint(storage_folder(tmp_path, '{"len": 21}', batch=(10, 2), name="bad"))
    assert any("outside [0, 20]" in p for p in ask(bad, "node", path=[])[0]["problems"])


def test_a_leaf_below_a_lazy_stack_keeps_all_its_rows(tmp_path: Path) -> None:
    """The members of a stack along dim 0 are rows of the storage, their leaves' dim 0
    is not (though it has the capacity's length here): a member's leaf is previewed
    whole."""
    members = [TensorDict({"x": torch.arange(10.0)}, [10]) for _ in range(10)]
    td = TensorDict({"stack": LazyStackedTensorDict(*members, stack_dim=0)}, [10])
    td.memmap(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "storage_metadata.json").write_text('{"len": 3}')
    ckpt = Checkpoint(tmp_path / "ckpt")
    assert ask(ckpt, "node", path=[])[0]["rows"] == {"written": 3, "capacity": 10}
    member = next(c for c in ckpt.children("stack") if c.kind != "leaf")
    leaf = (*member.path, "x")
    assert rows_of_leaf(ckpt, leaf) is None
    assert ask(ckpt, "preview", path=list(leaf), rows=100)[0]["stats"]["count"] == 10


# ---------------------------------------------------------------- the request param


def test_rows_scope_is_written_unless_all_is_asked() -> None:
    assert parse_request(request("preview", path=[], rows=4)).params["rows_scope"] == "written"
    parsed = parse_request(request("preview", path=[], rows=4, rows_scope="all"))
    assert parsed.params["rows_scope"] == "all"


@pytest.mark.parametrize("scope", ["All", "", None, 1, True, ["all"]])
def test_a_bad_rows_scope_is_refused(tmp_path: Path, scope: object) -> None:
    ckpt = Checkpoint(storage_folder(tmp_path, '{"len": 4}'))
    reply, _ = handle(
        Session(ckpt, ckpt.path, namespace={}),
        request("preview", path=["a"], rows=4, rows_scope=scope),
    )
    assert not reply["ok"]
    assert reply["error"]["type"] == "RequestError"
    assert "rows_scope" in reply["error"]["message"]


def test_a_storage_over_a_ragged_stack_makes_no_rows_claim(tmp_path: Path) -> None:
    """A ragged lazy stack's batch size holds -1: there is no capacity to check ``len``
    against, so no rows are claimed and no problem is made up."""
    from tensordict import lazy_stack

    ragged = lazy_stack(
        [TensorDict({"obs": torch.zeros(3, 2)}, [3]), TensorDict({"obs": torch.zeros(5, 2)}, [5])]
    )
    ragged.memmap(tmp_path / "storage")
    (tmp_path / "storage" / "storage_metadata.json").write_text(
        json.dumps({"metadata": {}, "is_pytree": False, "len": 2})
    )
    with Checkpoint(tmp_path / "storage") as ckpt:
        assert ckpt.batch_size(ckpt.root) == (2, -1)
        assert storage_rows(ckpt, ckpt.root) is None
