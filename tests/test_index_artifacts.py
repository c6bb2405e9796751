"""The index shows what the loader loads, on real files written by the real writers.

tensordict's ``memmap``/``save`` (and torchrl's ``History`` where torchrl imports) write
each checkpoint; tensordict's own ``TensorDict.load_memmap`` is the reference for what a
node holds (its batch size and keys). Issue 14: a tensorclass over a lazy stack, ragged
stacks, pickled non-tensor entries, and the words the CLI and the widget use for them.
"""

from __future__ import annotations

import warnings
from collections import deque
from pathlib import Path

import pytest
import torch
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    TensorDict,
    is_tensorclass,
    lazy_stack,
    tensorclass,
)

from tdview.index import LEAF, TENSORCLASS, Checkpoint, rollup, search, stack_schema, walk

from ._optional import require_module

CONTAINERS = ["dir", "tdz"]


@tensorclass
class Episode:
    """A tensorclass to stack lazily (members of different lengths make it ragged)."""

    obs: torch.Tensor
    reward: torch.Tensor


def episode(length: int, fill: float = 0.0) -> Episode:
    return Episode(
        obs=torch.full((length, 4), fill), reward=torch.full((length, 1), fill), batch_size=[length]
    )


def write(obj: object, root: Path, name: str, container: str) -> Path:
    """Write ``obj`` with tensordict's own writer: ``memmap`` (a folder) or ``save``
    (a ``.tdz`` archive)."""
    path = root / (f"{name}.tdz" if container == "tdz" else name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if container == "tdz":
            obj.save(str(path))  # type: ignore[attr-defined]
        else:
            obj.memmap(path)  # type: ignore[attr-defined]
    return path


def reference(path: Path) -> object:
    """What tensordict's own loader gives for ``path`` (the reference)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TensorDict.load_memmap(path, allow_pickle=True)


def members_of(obj: object) -> list:
    """The members of a (tensorclass over a) lazy stack that tensordict loaded."""
    stack = obj._tensordict if hasattr(obj, "_tensordict") else obj  # type: ignore[attr-defined]
    assert isinstance(stack, LazyStackedTensorDict)
    return list(stack.tensordicts)


# -- a tensorclass over a lazy stack ---------------------------------------------------


@pytest.mark.parametrize("container", CONTAINERS)
def test_tensorclass_over_a_lazy_stack_shows_its_members(tmp_path: Path, container: str) -> None:
    """Its members, their leaves and sizes are in the index, and search finds its keys
    (the index showed no child and "0 B in 0 leaves", and search found nothing)."""
    stacked = lazy_stack([episode(3, 1.0), episode(3, 2.0)])
    path = write(stacked, tmp_path, "episodes", container)
    loaded = reference(path)
    members = members_of(loaded)
    with Checkpoint(path) as ckpt:
        root = ckpt.root
        assert root.kind == TENSORCLASS and root.class_name == "Episode"
        children = ckpt.children(root)
        assert [c.key for c in children] == [str(i) for i in range(len(members))]
        for child, member in zip(children, members, strict=True):
            assert [c.key for c in ckpt.children(child)] == list(member.keys())
            assert ckpt.batch_size(child) == tuple(member.batch_size)
        # a node found by path, without its siblings, is the same as the listed one
        assert ckpt.node("1/obs").record.shape == tuple(members[1]["obs"].shape)
        total = rollup(ckpt, root)
        leaves = [n for n in walk(ckpt, root) if n.kind == LEAF]
        assert total.leaves == len(leaves) == sum(len(list(m.keys())) for m in members)
        assert total.bytes == sum(t.numel() * t.element_size() for m in members for t in m.values())
        assert total.numel == sum(t.numel() for m in members for t in m.values())
        matches, _ = search(ckpt, "obs")
        assert matches == [("0", "obs"), ("1", "obs")]
        assert ckpt.batch_size(root) == tuple(loaded.batch_size)  # type: ignore[attr-defined]


def _history() -> type:
    torchrl = require_module(
        "torchrl.data.llm.history",
        "its History is the tensorclass-over-a-lazy-stack that real LLM checkpoints hold",
    )
    return torchrl.History


@pytest.mark.parametrize("container", CONTAINERS)
def test_a_stacked_torchrl_history_shows_its_conversations(tmp_path: Path, container: str) -> None:
    """torchrl's ``History``, stacked lazily as a batch of conversations, shows each
    conversation and its keys as tensordict loads them."""
    history = _history()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chats = lazy_stack(
            [
                history(role=["user", "assistant"], content=["hi", "hello"], batch_size=(2,)),
                history(
                    role=["user", "assistant", "user"], content=["a", "b", "c"], batch_size=(3,)
                ),
            ]
        )
    path = write(chats, tmp_path, "history", container)
    loaded = reference(path)
    members = members_of(loaded)
    with Checkpoint(path) as ckpt:
        assert ckpt.root.class_name == "History"
        children = ckpt.children(ckpt.root)
        assert len(children) == len(members) == 2
        for child, member in zip(children, members, strict=True):
            assert sorted(c.key for c in ckpt.children(child)) == sorted(member.keys())
            assert ckpt.batch_size(child) == tuple(member.batch_size)
        assert ckpt.node("1/content").value == ["a", "b", "c"]
        assert (
            ckpt.batch_size(ckpt.node("1/is_complete"))
            == tuple(members[1].get("is_complete").batch_size)
            == (3,)
        )
        matches, _ = search(ckpt, "role")
        assert matches == [("0", "role"), ("1", "role")]
        schema = {e.key[0]: e for e in stack_schema(ckpt, ckpt.root) or []}
        assert set(schema) == set(loaded._tensordict.keys())  # type: ignore[attr-defined]
        for key, entry in schema.items():
            assert entry.stacked_shape(2, 0) == tuple(loaded._tensordict.get_item_shape(key)), key  # type: ignore[attr-defined]


# -- ragged lazy stacks ----------------------------------------------------------------


def _ragged_stacks() -> dict[str, object]:
    """Stacks whose members differ in length, as tensordict writes them."""

    def member(*batch: int) -> TensorDict:
        return TensorDict(x=torch.zeros(*batch, 2), batch_size=list(batch))

    return {
        "episodes": lazy_stack([episode(3), episode(5), episode(3)]),
        "dim0": lazy_stack([member(3), member(5)]),
        "dim1": lazy_stack([member(2, 3), member(2, 5)], dim=1),
        "two_ragged_dims": lazy_stack([member(2, 3), member(4, 3), member(4, 5)]),
        "even": lazy_stack([member(3), member(3)]),  # no -1: members agree
    }


@pytest.mark.parametrize("container", CONTAINERS)
@pytest.mark.parametrize("name", sorted(_ragged_stacks()))
def test_a_ragged_stack_has_the_batch_size_tensordict_gives(
    tmp_path: Path, name: str, container: str
) -> None:
    """-1 in every dim where the members differ, in the index, the protocol and the CLI
    (the first member's batch size was shown: ``[2, 5]`` for ``[2, -1]``)."""
    from tdview.protocol._summaries import summary
    from tdview.views._tree import describe

    path = write(TensorDict(stack=_ragged_stacks()[name]), tmp_path, name, container)
    expected = tuple(reference(path)["stack"].batch_size)  # type: ignore[index]
    assert (-1 in expected) == (name != "even")
    with Checkpoint(path) as ckpt:
        node = ckpt.node("stack")
        assert ckpt.batch_size(node) == expected
        assert summary(ckpt, node)["batch_size"] == list(expected)
        assert f"batch [{', '.join(map(str, expected))}]" in describe(ckpt, node)


# -- the words -------------------------------------------------------------------------


def test_one_leaf_is_a_leaf(tmp_path: Path) -> None:
    """``tdview tree`` says "in 1 leaf" (it said "in 1 leaves")."""
    from tdview.views._tree import describe

    path = write(
        TensorDict(
            one=TensorDict(w=torch.ones(3)), two=TensorDict(a=torch.ones(2), b=torch.ones(2))
        ),
        tmp_path,
        "words",
        "dir",
    )
    with Checkpoint(path) as ckpt:
        assert describe(ckpt, ckpt.node("one")).endswith("12 B in 1 leaf")
        assert describe(ckpt, ckpt.node("two")).endswith("16 B in 2 leaves")


# -- pickled non-tensor entries in rollups ---------------------------------------------


def _adam_state() -> dict:
    """A real optimizer's state dict: Adam after one step on a small model."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 8))
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 32)).sum().backward()
    optimizer.step()
    return optimizer.state_dict()


@pytest.mark.parametrize("container", CONTAINERS)
def test_a_pickled_optimizer_state_counts_in_the_rollups(tmp_path: Path, container: str) -> None:
    """A torchrl trainer's optimizer part (``_state_dict_to_td(optimizer.state_dict())``):
    its pickled Adam state adds its file's bytes to the rollups, as a pickle, not a leaf
    (it showed "0 B in 0 leaves")."""
    trainers = require_module(
        "torchrl.trainers.trainers", "its Trainer writes the optimizer part this way"
    )
    from tdview._units import human_bytes
    from tdview.protocol._summaries import details, summary
    from tdview.views._tree import describe

    part = trainers._state_dict_to_td(_adam_state())
    path = write(
        TensorDict(optimizer=part, model=TensorDict(w=torch.ones(3))),
        tmp_path,
        "trainer",
        container,
    )
    assert set(reference(path)["optimizer"].keys()) == {"state", "param_groups"}  # type: ignore[index]
    with Checkpoint(path) as ckpt:
        state = ckpt.node("optimizer/state")
        size = ckpt.store.entry(state.dirkey + "/other.pickle").size
        assert size > 10_000  # the exp_avg and exp_avg_sq tensors, pickled
        optimizer = rollup(ckpt, ckpt.node("optimizer"))
        assert (optimizer.bytes, optimizer.pickle_bytes, optimizer.pickles) == (size, size, 1)
        assert (optimizer.leaves, optimizer.numel, optimizer.by_dtype) == (0, 0, {})
        root = rollup(ckpt, ckpt.root)
        assert (root.bytes, root.leaves, root.numel, root.pickles) == (size + 12, 1, 3, 1)
        assert sum(root.by_dtype.values()) + root.pickle_bytes == root.bytes
        line = describe(ckpt, ckpt.node("optimizer"))
        assert line.endswith(f"{human_bytes(size)} in 1 pickled value"), line
        assert describe(ckpt, ckpt.root).endswith("in 1 leaf and 1 pickled value")
        # the protocol: a pickled value alone has a size and no element count
        assert (summary(ckpt, state)["bytes"], summary(ckpt, state)["numel"]) == (size, None)
        reply = details(ckpt, ckpt.node("optimizer"))["rollup"]
        assert (reply["pickles"], reply["pickle_bytes"], reply["leaves"]) == (1, size, 0)
        assert "pickles" not in details(ckpt, ckpt.node("model"))["rollup"]  # sent if any


def test_a_pickled_value_says_when_it_is_unpickled(tmp_path: Path) -> None:
    """Not "pickled, locked" (which reads like tensordict's is_locked and hides that the
    default allow_pickle=None unpickles, with a FutureWarning): its size, what it imports
    and when it is unpickled; the protocol says the same."""
    from tdview.loader import load_memmap
    from tdview.protocol._summaries import PICKLE_PROBLEM, details
    from tdview.views._tree import PICKLE_POLICY, describe

    path = write(TensorDict(state=NonTensorData(deque([1, 2]))), tmp_path, "od", "dir")
    with Checkpoint(path) as ckpt:
        node = ckpt.node("state")
        size = ckpt.store.entry("state/other.pickle").size
        line = describe(ckpt, node)
        assert "locked" not in line
        assert line.endswith(
            f"pickled {size} B (imports collections.deque): "
            "unpickled only on load with allow_pickle=True, or None with "
            "a warning"
        ), line
        assert PICKLE_POLICY in PICKLE_PROBLEM and PICKLE_PROBLEM in details(ckpt, node)["problems"]
    # what it says is what the loader does
    with pytest.warns(FutureWarning, match="pickled"):
        assert load_memmap(path)["state"] == deque([1, 2])
    assert load_memmap(path, allow_pickle=True)["state"] == deque([1, 2])
    with pytest.raises(RuntimeError, match="Refusing"):
        load_memmap(path, allow_pickle=False)


# -- the merged schema of a lazy stack -------------------------------------------------


def _schema_stacks() -> dict[str, object]:
    def member(n: int, *, extra: bool = False, wide: bool = False) -> TensorDict:
        td = TensorDict(
            obs=torch.zeros(n, 4),
            done=torch.zeros(n, dtype=torch.bool),
            next=TensorDict(obs=torch.zeros(n, 4), batch_size=[n]),
            info=NonTensorData("x"),
            batch_size=[n],
        )
        if extra:
            td["extra"] = torch.zeros(n, 2)
        if wide:
            td["obs"] = torch.zeros(n, 4, 2)  # one more dim: the ranks differ
        return td

    return {
        "ragged": lazy_stack([member(3), member(5, extra=True), member(3)]),
        "ranks": lazy_stack([member(3), member(3, wide=True)]),
        "dim1": lazy_stack(
            [
                TensorDict(a=torch.zeros(2, 3, 7), batch_size=[2, 3]),
                TensorDict(a=torch.zeros(2, 5, 7), batch_size=[2, 5]),
            ],
            dim=1,
        ),
        "episodes": lazy_stack([episode(3), episode(5)]),
        # a stacked tensorclass in each member: its keys too, stacked twice
        "nested": lazy_stack(
            [TensorDict(a=torch.zeros(n), eps=lazy_stack([episode(2), episode(n)])) for n in (3, 4)]
        ),
    }


@pytest.mark.parametrize("container", CONTAINERS)
@pytest.mark.parametrize("name", sorted(_schema_stacks()))
def test_the_schema_of_a_lazy_stack_is_what_tensordict_sees(
    tmp_path: Path, name: str, container: str
) -> None:
    """Each key's dtype, and its shape with -1 where the members differ: stacked, it is
    tensordict's ``get_item_shape``; a key only some members hold says how many."""
    from tdview.index import stack_members

    path = write(TensorDict(stack=_schema_stacks()[name]), tmp_path, name, container)
    loaded = reference(path)["stack"]  # type: ignore[index]
    stack = loaded._tensordict if hasattr(loaded, "_tensordict") else loaded
    with Checkpoint(path) as ckpt:
        node = ckpt.node("stack")
        members, dim = stack_members(ckpt, node)  # type: ignore[misc]
        assert (len(members), dim) == (len(stack.tensordicts), stack.stack_dim)
        entries = stack_schema(ckpt, node)
        assert entries is not None
        every = [e for e in entries if e.members == len(members)]
        assert {e.key for e in every} == {
            k if isinstance(k, tuple) else (k,) for k in stack.keys(True)
        }
        for entry in every:
            key = entry.key if len(entry.key) > 1 else entry.key[0]
            stacked = entry.stacked_shape(len(members), dim)
            try:
                assert stacked == tuple(stack.get_item_shape(key)), key
            except RuntimeError:  # tensordict cannot stack a ragged stack's keys twice
                assert name == "nested" and stacked == (2, 2, -1, 4 if key[1] == "obs" else 1)
            if entry.kind == LEAF:
                assert entry.dtype == str(_first_tensor(stack, entry.key).dtype), key
        exclusive = {e.key: e.members for e in entries if e.members < len(members)}
        assert exclusive == ({("extra",): 1} if name == "ragged" else {})
        if name == "ragged":
            lines = [e.text() for e in entries]
            assert "obs: float32[-1, 4]" in lines and "next/obs: float32[-1, 4]" in lines
            assert "done: bool[-1]" in lines and "info: NonTensorData[-1]" in lines
        if name == "ranks":
            obs = next(e for e in entries if e.key == ("obs",))
            assert obs.ranks_differ and obs.stacked_shape(2, 0) == (-1,)


def _first_tensor(td: object, key: tuple[str, ...]) -> torch.Tensor:
    """The tensor at ``key`` in the first member (of the first member...) of a stack."""
    for name in key:
        while is_tensorclass(td) or isinstance(td, LazyStackedTensorDict):
            td = td.tensordicts[0] if isinstance(td, LazyStackedTensorDict) else td._tensordict  # type: ignore[attr-defined]
        td = td.get(name)  # type: ignore[attr-defined]
    assert isinstance(td, torch.Tensor)
    return td


def test_the_schema_is_in_the_details_of_a_lazy_stack_only(tmp_path: Path) -> None:
    """An optional ``schema`` in the protocol's details: for a lazy stack (or a
    tensorclass over one), with the subtree totals; absent for other nodes."""
    from tdview.protocol._summaries import details

    path = write(
        TensorDict(stack=lazy_stack([episode(3), episode(5)]), plain=TensorDict(a=torch.ones(2))),
        tmp_path,
        "d",
        "dir",
    )
    with Checkpoint(path) as ckpt:
        first = details(ckpt, ckpt.node("stack"), totals=False)
        assert first["schema"] is None  # not walked for the first paint
        schema = details(ckpt, ckpt.node("stack"))["schema"]
        assert schema == {
            "members": 2,
            "stack_dim": 0,
            "truncated": False,
            "entries": [
                {
                    "key": ["obs"],
                    "kind": "leaf",
                    "class_name": "Tensor",
                    "dtype": "float32",
                    "shape": [-1, 4],
                    "members": 2,
                },
                {
                    "key": ["reward"],
                    "kind": "leaf",
                    "class_name": "Tensor",
                    "dtype": "float32",
                    "shape": [-1, 1],
                    "members": 2,
                },
            ],
        }
        assert "schema" not in details(ckpt, ckpt.node("plain"))
        assert "schema" not in details(ckpt, ckpt.node("stack/0"))


@pytest.mark.parametrize("container", CONTAINERS)
def test_a_non_tensor_value_has_its_parents_batch_size(tmp_path: Path, container: str) -> None:
    """A NonTensorData saves no batch size; tensordict gives it its parent's on load (the
    index said ``[]``)."""
    td = TensorDict(
        x=torch.zeros(4),
        s=NonTensorData("hi"),
        sub=TensorDict(t=NonTensorData(1), batch_size=[4, 2]),
        batch_size=[4],
    )
    path = write(TensorDict(td=td, top=NonTensorData(2.5)), tmp_path, "values", container)
    loaded = reference(path)
    with Checkpoint(path) as ckpt:
        for key in (("td", "s"), ("td", "sub", "t"), ("top",)):
            node = ckpt.node("/".join(key))
            assert node.kind == "non_tensor"
            assert ckpt.batch_size(node) == tuple(loaded.get(key).batch_size), key  # type: ignore[attr-defined]
        assert ckpt.batch_size(ckpt.node("td/sub/t")) == (4, 2)
