"""Two checkpoints of one training run, as a user saves them: ``step_1000.tdz`` and
``step_2000.tdz`` (tensordict's own ``save``), a small model and its AdamW state a few
optimizer steps apart.

The model (``TensorDict.from_module``): ``embed``, two ``blocks``, a ``norm`` that is
frozen (its bytes do not change) and a ``head``; the optimizer's state is keyed by
parameter name (``optimizer/state/blocks.0.weight/exp_avg`` …, each with its 0-d
``step``). The run's ``step`` is 1000, then 2000, and ``lr`` a JSON value kept in
``meta.json``. Between the two, the ``probe`` layer is dropped (2 keys removed) and an
``adapter`` added (2 keys added).
"""

from __future__ import annotations

from pathlib import Path

import torch
from tensordict import NonTensorData, TensorDict

from .corpus import write_at

#: Leaves whose bytes do not change between the steps (the frozen norm).
FROZEN = (("model", "norm", "weight"), ("model", "norm", "bias"))
ADDED = (("model", "adapter", "weight"), ("model", "adapter", "bias"))
REMOVED = (("model", "probe", "weight"), ("model", "probe", "bias"))


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(16, 32)
        self.blocks = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 32))
        self.norm = torch.nn.LayerNorm(32)
        self.head = torch.nn.Linear(32, 8)
        self.probe = torch.nn.Linear(32, 2)
        self.norm.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.norm(torch.relu(self.blocks(torch.relu(self.embed(x)))))
        return self.head(hidden).sum() + self.probe(hidden).sum()


def _checkpoint(model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int) -> TensorDict:
    names = {id(p): n for n, p in model.named_parameters()}
    state = TensorDict()
    for param, moments in optimizer.state.items():
        state[names[id(param)]] = TensorDict({k: v.clone() for k, v in moments.items()})
    return TensorDict(
        model=TensorDict.from_module(model).data.clone(),
        optimizer=TensorDict(state=state),
        step=torch.tensor(step),
        lr=NonTensorData(optimizer.param_groups[0]["lr"]),
    )


def write_training_steps(folder: Path) -> tuple[Path, Path]:
    """``folder/step_1000.tdz`` and ``folder/step_2000.tdz`` (see the module docstring)."""
    torch.manual_seed(0)
    model = _Model()
    optimizer = torch.optim.AdamW((p for p in model.parameters() if p.requires_grad), lr=1e-2)
    data = torch.randn(64, 16)

    def train(steps: int) -> None:
        for _ in range(steps):
            optimizer.zero_grad()
            model(data).pow(2).backward()
            optimizer.step()

    train(3)
    first = _checkpoint(model, optimizer, 1000)
    train(3)
    optimizer.param_groups[0]["lr"] = 5e-3
    second = _checkpoint(model, optimizer, 2000)
    del second["model", "probe"]
    second["model", "adapter"] = TensorDict(weight=torch.randn(4, 32), bias=torch.zeros(4))
    for key in [k for k in second["optimizer", "state"].keys() if k.startswith("probe.")]:
        del second["optimizer", "state", key]
    folder.mkdir(parents=True, exist_ok=True)
    return (
        write_at(first, folder / "step_1000.tdz"),
        write_at(second, folder / "step_2000.tdz"),
    )
