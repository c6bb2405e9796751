"""The built-in demo checkpoint: a realistic training snapshot written by tensordict.

It holds what users keep in real checkpoints, so that the tour and the tests meet every
node kind: a small transformer's weights nested by module, an Adam optimizer state, a
replay buffer with 100,000 rows, a tensorclass, a lazy stack of episodes of different
lengths, non-tensor metadata (strings, numbers, a config dict) and one pickled value.
It is written with tensordict's own writers, as a directory and as a ``.tdz`` archive.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from tensordict import LazyStackedTensorDict, MetaData, NonTensorData, TensorDict, tensorclass

REPLAY_ROWS = 100_000


@tensorclass
class Trajectory:
    """A short rollout kept as a tensorclass (its class is recorded in the checkpoint)."""

    observation: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    policy_name: str


class TinyTransformer(torch.nn.Module):
    """Two encoder layers between an embedding and an output head."""

    def __init__(self, vocab: int = 512, width: int = 64, depth: int = 2) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.layers = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(width, 4, 4 * width, batch_first=True)
            for _ in range(depth)
        )
        self.norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def _model_and_optimizer() -> tuple[TensorDict, TensorDict]:
    model = TinyTransformer()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    tokens = torch.randint(0, 512, (4, 16))
    model(tokens).logsumexp(-1).mean().backward()
    optimizer.step()
    weights = TensorDict.from_module(model, as_module=False).data
    names = [name for name, _ in model.named_parameters()]
    state = optimizer.state_dict()
    # Optimizer state per parameter, nested by module like the weights.
    per_param = TensorDict(
        {name: TensorDict(state["state"][i]) for i, name in enumerate(names)}
    ).unflatten_keys(".")
    group = state["param_groups"][0]
    hyper = {k: v for k, v in group.items() if k != "params"}
    optim = TensorDict(
        state=per_param,
        param_groups=MetaData({k: _jsonable(v) for k, v in hyper.items()}),
    )
    return weights, optim


def _jsonable(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def _replay_buffer(rows: int) -> TensorDict:
    gen = torch.Generator().manual_seed(1)
    obs = torch.randn(rows, 8, generator=gen)
    return TensorDict(
        observation=obs,
        action=torch.randint(0, 4, (rows,), generator=gen),
        reward=torch.randn(rows, generator=gen).to(torch.bfloat16),
        done=torch.rand(rows, generator=gen) < 0.01,
        next=TensorDict(observation=obs.roll(-1, 0), batch_size=[rows]),
        batch_size=[rows],
        names=["row"],
    )


def _episodes() -> LazyStackedTensorDict:
    lengths = (5, 9, 3)
    members = [
        TensorDict(observation=torch.randn(n, 4), action=torch.randint(0, 4, (n,))) for n in lengths
    ]
    return LazyStackedTensorDict(*members, stack_dim=0)


def demo_tensordict(replay_rows: int = REPLAY_ROWS) -> TensorDict:
    """Build the demo tensordict in memory (deterministic).

    Examples
    --------
    >>> td = demo_tensordict(replay_rows=10)
    >>> td["replay", "observation"].shape
    torch.Size([10, 8])
    """
    torch.manual_seed(0)
    weights, optim = _model_and_optimizer()
    rollout = Trajectory(  # type: ignore[call-arg]  # batch_size: tensorclass's own
        observation=torch.randn(3, 8),
        action=torch.randint(0, 4, (3,)),
        reward=torch.randn(3),
        policy_name="epsilon-greedy",
        batch_size=[3],
    )
    return TensorDict(
        model=weights,
        optimizer=optim,
        replay=_replay_buffer(replay_rows),
        rollout=rollout,
        episodes=_episodes(),
        run_name=NonTensorData("tiny-transformer-demo"),
        step=NonTensorData(1200),
        learning_rate=NonTensorData(3e-4),
        config=MetaData({"width": 64, "depth": 2, "tokenizer": "bytes", "seed": 0}),
        # A set is not JSON, so tensordict pickles it: the demo's one pickled value.
        tags=NonTensorData({"demo", "tdview", "transformer"}),
    )


def write_demo(out: str | Path, replay_rows: int = REPLAY_ROWS) -> dict[str, Path]:
    """Write the demo checkpoint as ``<out>/demo_ckpt/`` and ``<out>/demo_ckpt.tdz``.

    Existing demo files under ``out`` are replaced; nothing else is touched.

    Examples
    --------
    >>> import tempfile
    >>> paths = write_demo(tempfile.mkdtemp(), replay_rows=10)
    >>> sorted(paths)
    ['archive', 'directory']
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    directory, archive = out / "demo_ckpt", out / "demo_ckpt.tdz"
    if directory.exists():
        shutil.rmtree(directory)
    archive.unlink(missing_ok=True)
    td = demo_tensordict(replay_rows)
    td.memmap(directory)
    td.save(str(archive))
    return {"directory": directory, "archive": archive}
