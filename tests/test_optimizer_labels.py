"""Optimizer state by parameter name: each ``optim/state/<i>`` of an
``optimizer.state_dict()`` saved beside its model is labelled with its parameter when the
mapping is unambiguous, from ``meta.json`` alone. The reference is torch's own numbering
(``state_dict()`` numbers the parameters of ``param_groups`` in order): a label is never
other than the parameter torch gave that number, and where the shapes cannot tell, there
is no label and the reason is said."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from tdview.index import Checkpoint, optimizer_map, param_label, search
from tdview.views import TreeOptions, render_tree

from .corpus import write_at


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(16, 32)
        self.blocks = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 32))
        self.bn = torch.nn.BatchNorm1d(32)  # buffers: running_mean, running_var, count
        self.head = torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.bn(torch.relu(self.blocks(torch.relu(self.embed(x)))))
        return self.head(hidden)


def trained(groups: str, kind: str = "adamw") -> tuple[Net, torch.optim.Optimizer]:
    torch.manual_seed(0)
    net = Net()
    order = {
        "one": [list(net.parameters())],
        "module_order": [
            [*net.embed.parameters(), *net.blocks.parameters()],
            [*net.bn.parameters(), *net.head.parameters()],
        ],
        # another order, each parameter's shape its own: the shapes decide
        "shapes_decide": [list(net.head.parameters()), [net.embed.weight]],
        # another order, blocks.0 and blocks.1 alike: the shapes cannot tell them apart
        "shapes_do_not": [
            [*net.head.parameters(), *net.blocks[1].parameters()],
            [*net.embed.parameters(), *net.blocks[0].parameters(), *net.bn.parameters()],
        ],
    }[groups]
    param_groups = [{"params": params} for params in order]
    if kind == "sgd":
        optimizer: torch.optim.Optimizer = torch.optim.SGD(param_groups, lr=0.1)
    else:
        optimizer = torch.optim.AdamW(param_groups, lr=1e-3)
    for _ in range(2):
        optimizer.zero_grad()
        net(torch.randn(8, 16)).pow(2).sum().backward()
        optimizer.step()
    return net, optimizer


def reference(net: Net, optimizer: torch.optim.Optimizer) -> dict[str, str]:
    """torch's numbering: id -> parameter name (``state_dict()`` numbers the groups'
    parameters in order)."""
    names = {id(p): n for n, p in net.named_parameters()}
    ids = [p for group in optimizer.param_groups for p in group["params"]]
    return {str(i): names[id(p)] for i, p in enumerate(ids)}


def saved(
    net: Net,
    optimizer: torch.optim.Optimizer,
    path: Path,
    *,
    model: str = "from_module",
    groups_as: str = "list",
) -> Path:
    state = optimizer.state_dict()
    optim = {
        "state": {str(i): dict(moments) for i, moments in state["state"].items()},
        "param_groups": (
            state["param_groups"]
            if groups_as == "list"
            else {str(g): group for g, group in enumerate(state["param_groups"])}
        ),
    }
    weights = (
        TensorDict.from_module(net).data
        if model == "from_module"
        else TensorDict(dict(net.state_dict()))
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        td = TensorDict({"model": weights, "optim": optim, "epoch": torch.tensor(3)})
    return write_at(td, path)


def labels(ckpt: Checkpoint) -> dict[str, str | None]:
    return {
        node.key: label.name
        for node in ckpt.children("optim/state")
        if (label := param_label(ckpt, node)) is not None
    }


@pytest.mark.parametrize("model", ["from_module", "state_dict"])
@pytest.mark.parametrize("groups_as", ["list", "dict"])
@pytest.mark.parametrize("suffix", ["", ".tdz"])
def test_adamw_one_group_every_state_is_labelled(
    tmp_path: Path, model: str, groups_as: str, suffix: str
) -> None:
    net, optimizer = trained("one")
    path = saved(net, optimizer, tmp_path / f"ck{suffix}", model=model, groups_as=groups_as)
    with Checkpoint(path) as ckpt:
        found = labels(ckpt)
        assert found == reference(net, optimizer)  # buffers (bn.running_*) left out
        mapping = optimizer_map(ckpt, ("optim",))
        assert mapping is not None and mapping.model == ("model",) and mapping.rule == "order"
        label = param_label(ckpt, ckpt.node("optim/state/0"))
        embed = ("embed", "weight") if model == "from_module" else ("embed.weight",)
        assert label is not None and label.path == ("model", *embed)
        assert param_label(ckpt, ckpt.node("optim/state/0/exp_avg")) is None
        assert param_label(ckpt, ckpt.node("model")) is None


def test_two_groups_in_module_order(tmp_path: Path) -> None:
    net, optimizer = trained("module_order")
    path = saved(net, optimizer, tmp_path / "ck")
    with Checkpoint(path) as ckpt:
        assert labels(ckpt) == reference(net, optimizer)


def test_two_groups_in_another_order_where_the_shapes_decide(tmp_path: Path) -> None:
    net, optimizer = trained("shapes_decide")
    path = saved(net, optimizer, tmp_path / "ck")
    with Checkpoint(path) as ckpt:
        found = labels(ckpt)
        assert found == reference(net, optimizer)
        assert found["0"] == "head.weight" and found["2"] == "embed.weight"
        mapping = optimizer_map(ckpt, ("optim",))
        assert mapping is not None and mapping.rule == "shape"


def test_two_groups_in_another_order_where_the_shapes_do_not(tmp_path: Path) -> None:
    net, optimizer = trained("shapes_do_not")
    path = saved(net, optimizer, tmp_path / "ck")
    expected = reference(net, optimizer)
    with Checkpoint(path) as ckpt:
        found = labels(ckpt)
        given = {key: name for key, name in found.items() if name is not None}
        assert given.items() <= expected.items()  # never a wrong label
        assert set(given.values()) == {"head.weight", "head.bias", "embed.weight"}
        ambiguous = next(k for k, name in expected.items() if name == "blocks.1.weight")
        label = param_label(ckpt, ckpt.node(("optim", "state", ambiguous)))
        assert label is not None and label.name is None
        assert label.reason is not None and "2 parameters have shape [32, 32]" in label.reason


def test_sgd_without_momentum_keeps_no_state(tmp_path: Path) -> None:
    net, optimizer = trained("one", kind="sgd")
    assert optimizer.state_dict()["state"] == {}
    path = saved(net, optimizer, tmp_path / "ck")
    with Checkpoint(path) as ckpt:
        assert labels(ckpt) == {}
        mapping = optimizer_map(ckpt, ("optim",))
        assert mapping is not None and mapping.labels == {}
        assert mapping.reason is not None and "no state" in mapping.reason


def test_two_models_that_fit_alike_give_no_label(tmp_path: Path) -> None:
    """A model and its EMA copy beside one optimizer: the shapes fit both."""
    net, optimizer = trained("one")
    state = optimizer.state_dict()
    weights = TensorDict.from_module(net).data
    td = TensorDict(
        model=weights,
        ema=weights.clone(),
        optim={"state": {str(i): dict(m) for i, m in state["state"].items()}},
    )
    td["optim", "param_groups"] = {"0": {"params": torch.arange(10)}}
    with Checkpoint(write_at(td, tmp_path / "ck")) as ckpt:
        label = param_label(ckpt, ckpt.node("optim/state/0"))
        assert label is not None and label.name is None
        assert label.reason is not None and "several models" in label.reason


def test_tree_and_search_show_the_parameter(tmp_path: Path) -> None:
    net, optimizer = trained("one")
    path = saved(net, optimizer, tmp_path / "ck")
    with Checkpoint(path) as ckpt:
        text = "\n".join(render_tree(ckpt, ckpt.root, TreeOptions(depth=None, limit=100)))
        assert "0 → embed.weight  TensorDict" in text
        found, _ = search(ckpt, "blocks.1.weight")
        numbered = next(k for k, n in reference(net, optimizer).items() if n == "blocks.1.weight")
        assert ("optim", "state", numbered) in found
        assert ("model", "blocks", "1", "weight") in found


def test_the_trainers_layout_by_name_needs_no_label(tmp_path: Path) -> None:
    """State keyed by parameter name (tests/training_steps.py): no number to label."""
    from .training_steps import write_training_steps

    first, _ = write_training_steps(tmp_path)
    with Checkpoint(first) as ckpt:
        assert optimizer_map(ckpt, ("optimizer",)) is None


def test_the_details_say_the_parameter_or_why_not(tmp_path: Path) -> None:
    """The protocol's node details carry ``param`` on an optimizer's state only."""
    from tdview.protocol import Session, handle

    net, optimizer = trained("shapes_do_not")
    path = saved(net, optimizer, tmp_path / "ck")
    expected = reference(net, optimizer)
    with Checkpoint(path) as ckpt:
        session = Session(ckpt, str(path), namespace={})

        def details(keys: list[str]) -> dict:
            message = {"kind": "tdview:request", "v": 1, "id": 1, "method": "node"}
            reply, _ = handle(session, {**message, "params": {"path": keys}})
            assert reply is not None and reply["ok"], reply
            return reply["result"]

        head = next(k for k, n in expected.items() if n == "head.weight")
        block = next(k for k, n in expected.items() if n == "blocks.0.weight")
        assert details(["optim", "state", head])["param"] == {
            "name": "head.weight",
            "path": ["model", "head", "weight"],
            "reason": None,
        }
        unknown = details(["optim", "state", block])["param"]
        assert unknown["name"] is None and unknown["path"] is None
        assert "shape [32, 32]" in unknown["reason"]
        assert "param" not in details(["optim", "state"])
        assert "param" not in details(["model", "head", "weight"])


@pytest.mark.parametrize(
    ("groups", "reason"),
    [
        ([{"params": [1, 0]}], "not numbered in order"),
        ([{"params": ["0", "1"]}], "without a list of params"),
        ([{"lr": 0.1}], "without a list of params"),
        ([{"params": [0]}], "state 1 is in no param group"),
    ],
)
def test_param_groups_that_do_not_number_the_states_give_no_label(
    tmp_path: Path, groups: list, reason: str
) -> None:
    """Hand-made or damaged ``param_groups``: no label, and the reason names it."""
    net, optimizer = trained("one")
    state = optimizer.state_dict()["state"]
    td = TensorDict(
        model=TensorDict.from_module(net).data,
        optim={"state": {str(i): dict(state[i]) for i in (0, 1)}, "param_groups": groups},
    )
    with Checkpoint(write_at(td, tmp_path / "ck")) as ckpt:
        assert labels(ckpt) == {"0": None, "1": None}
        label = param_label(ckpt, ckpt.node("optim/state/0"))
        assert label is not None and label.reason is not None and reason in label.reason


def test_in_a_folder_of_checkpoints_the_parameter_path_is_the_folders(tmp_path: Path) -> None:
    from tdview.protocol import Session, handle

    net, optimizer = trained("one")
    saved(net, optimizer, tmp_path / "run" / "step_1")
    with Checkpoint(tmp_path / "run") as folder:
        session = Session(folder, "run", namespace={})
        message = {"kind": "tdview:request", "v": 1, "id": 1, "method": "node"}
        reply, _ = handle(
            session, {**message, "params": {"path": ["step_1", "optim", "state", "0"]}}
        )
        assert reply is not None and reply["ok"], reply
        assert reply["result"]["param"] == {
            "name": "embed.weight",
            "path": ["step_1", "model", "embed", "weight"],
            "reason": None,
        }


def test_the_widgets_search_finds_the_moments_by_name(tmp_path: Path) -> None:
    """The protocol's ``search`` (the widget's box) pages and counts the states whose
    parameter matches, as :func:`search` does."""
    from tdview.protocol import Session, handle

    net, optimizer = trained("one")
    path = saved(net, optimizer, tmp_path / "ck.tdz")
    numbered = next(k for k, n in reference(net, optimizer).items() if n == "head.bias")
    with Checkpoint(path) as ckpt:
        session = Session(ckpt, str(path), namespace={})
        message = {"kind": "tdview:request", "v": 1, "id": 1, "method": "search"}
        reply, _ = handle(session, {**message, "params": {"pattern": "head.bias", "limit": 10}})
        assert reply is not None and reply["ok"], reply
        paths = reply["result"]["matches"]
        assert paths == [["model", "head", "bias"], ["optim", "state", numbered]]
        assert reply["result"]["total"] == 2
