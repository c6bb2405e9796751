"""A module-shaped checkpoint: ``TensorDict.from_module(model).memmap(path)`` of a real
``torch.nn`` transformer, one folder per module (issue 18).

The model is a decoder of the Llama/Qwen kind, built from ``torch.nn`` modules: per layer
an attention (``q_proj``, ``k_proj``, ``v_proj``, ``o_proj`` linears without bias,
``q_norm`` and ``k_norm`` RMS norms and a rotary ``inv_freq`` buffer: 7 leaves), an MLP
(``gate_proj``, ``up_proj``, ``down_proj``) and two RMS norms: 12 leaves in 14 folders a
layer. Each layer has its own MLP width, so its MLP folders hold a ``meta.json`` of their
own (a checkpoint saved from a model repeats a file only where shapes repeat).
"""

from __future__ import annotations

from pathlib import Path

import torch
from tensordict import TensorDict
from torch import nn

HIDDEN = 8
LEAVES_PER_LAYER = 12
SUBPATH = "model/layers/1/self_attn"  # 7 leaves


class Attention(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.q_norm = nn.RMSNorm(hidden // 2)
        self.k_norm = nn.RMSNorm(hidden // 2)
        self.register_buffer("inv_freq", torch.arange(hidden // 4, dtype=torch.float32))


class MLP(nn.Module):
    def __init__(self, hidden: int, width: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, width, bias=False)
        self.up_proj = nn.Linear(hidden, width, bias=False)
        self.down_proj = nn.Linear(width, hidden, bias=False)


class Block(nn.Module):
    def __init__(self, hidden: int, width: int) -> None:
        super().__init__()
        self.self_attn = Attention(hidden)
        self.mlp = MLP(hidden, width)
        self.input_layernorm = nn.RMSNorm(hidden)
        self.post_attention_layernorm = nn.RMSNorm(hidden)


def _width(i: int) -> int:
    """Layer ``i``'s MLP width: distinct from its neighbours', repeating every 509 layers
    (a million-leaf tree stays small on disk)."""
    return 8 + i % 509


def layer_count(leaves: int) -> int:
    return max(2, (leaves - 3) // LEAVES_PER_LAYER)


def block(i: int) -> TensorDict:
    """Layer ``i`` as ``from_module`` gives it (bfloat16: small files)."""
    return TensorDict.from_module(Block(HIDDEN, _width(i)).bfloat16()).detach()


def write_module_tree(leaves: int, path: Path) -> Path:
    """About ``leaves`` leaves of a decoder saved as ``from_module(model).memmap(path)``.

    A model of 10,000 leaves is built whole and saved with one ``memmap`` call. A larger
    one would keep a mapping per leaf open until ``memmap`` returns (past Linux's default
    ``vm.max_map_count``) and build an ``nn.Module`` of a million parameters: the same
    files are written layer by layer (the skeleton's ``meta.json`` files first, as
    :func:`bench._checkpoints.write_flat_tree` does).
    """
    layers = layer_count(leaves)
    head = dict(
        embed_tokens=TensorDict.from_module(nn.Embedding(16, HIDDEN).bfloat16()),
        norm=TensorDict.from_module(nn.RMSNorm(HIDDEN).bfloat16()),
        lm_head=TensorDict.from_module(nn.Linear(HIDDEN, 16, bias=False).bfloat16()),
    )
    if layers <= 1000:
        blocks = TensorDict({str(i): block(i) for i in range(layers)})
        TensorDict(model=TensorDict(layers=blocks, **head)).detach().memmap(path)
        return path
    TensorDict(
        model=TensorDict(layers=TensorDict({str(i): TensorDict() for i in range(layers)}), **head)
    ).detach().memmap(path)
    for i in range(layers):
        block(i).memmap(path / "model" / "layers" / str(i), existsok=True)
    return path


def meta_files(path: Path) -> list[str]:
    """Every ``meta.json`` of a checkpoint directory, found from the ``meta.json`` files
    themselves (no listing): the floor's list of paths, made before it is timed."""
    import json

    found, todo = [], [str(path)]
    while todo:
        folder = todo.pop()
        file = folder + "/meta.json"
        found.append(file)
        with open(file, "rb") as handle:
            meta = json.loads(handle.read())
        todo.extend(
            f"{folder}/{key}"
            for key, value in meta.items()
            if isinstance(value, dict) and "type" in value
        )
    return found
