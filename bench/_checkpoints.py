"""Synthetic checkpoints for the benchmarks, written by tensordict's own writers."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from tensordict import TensorDict, lazy_stack, pack_memmap, tensorclass


def moe_state_dict(leaves: int, width: int = 16) -> TensorDict:
    """A mixture-of-experts-like state dict of about ``leaves`` bf16 leaves, 4 to 7 deep.

    ``model/layers/<i>/moe/experts/<j>/w1`` (7 levels), ``model/layers/<i>/attn/q`` (5),
    ``model/layers/<i>/norm`` (4) and so on, layer after layer until the count is reached.
    """
    experts_per_layer = 32
    attn_keys = ("q", "k", "v", "o", "q_norm", "k_norm", "rope")  # 7 leaves: the subpath case
    per_layer = experts_per_layer * 3 + 1 + len(attn_keys) + 2

    def weight(*shape: int) -> torch.Tensor:
        return torch.randn(*shape).bfloat16()

    layers: dict[str, TensorDict] = {}
    for i in range(max(1, -(-leaves // per_layer))):
        experts = {
            str(j): TensorDict({w: weight(width, width) for w in ("w1", "w2", "w3")})
            for j in range(experts_per_layer)
        }
        layers[str(i)] = TensorDict(
            moe=TensorDict(experts=TensorDict(experts), router=weight(experts_per_layer, width)),
            attn=TensorDict({p: weight(width, width) for p in attn_keys}),
            norm=torch.ones(width).bfloat16(),
            post_norm=torch.ones(width).bfloat16(),
        )
    return TensorDict(model=TensorDict(layers=TensorDict(layers)))


def flat_tree(leaves: int, fanout: int = 100) -> TensorDict:
    """``leaves`` tiny float32 leaves in groups of ``fanout`` (structure-cost scaling)."""
    groups = {}
    for g in range(-(-leaves // fanout)):
        count = min(fanout, leaves - g * fanout)
        groups[f"g{g:05d}"] = TensorDict({f"t{t:03d}": torch.zeros(4) for t in range(count)})
    return TensorDict(groups)


def write_flat_tree(leaves: int, path: Path, fanout: int = 100) -> Path:
    """Write ``flat_tree(leaves)`` to ``path`` the way ``memmap`` does, one group at a time.

    ``flat_tree(leaves).memmap(path)`` keeps every leaf mapped until it returns, and
    100,000 mappings pass Linux's default ``vm.max_map_count`` (65,530). Writing the
    skeleton first (the root ``meta.json`` with its collection records), then each group
    into its folder and dropping it, gives the same files with at most ``fanout`` maps.
    """
    tree = flat_tree(leaves, fanout)
    TensorDict({name: TensorDict() for name in tree.keys()}).memmap(path)
    for name, group in tree.items():
        group.memmap(path / name, existsok=True)
    return path


def replay_buffer(rows: int) -> TensorDict:
    """A replay buffer with a dozen leaves: 284 bytes a row, so 1,000,000 rows make the
    283 MB (about 284 MB) of the issue's case."""
    gen = torch.Generator().manual_seed(0)
    obs = lambda: torch.randn(rows, 28, generator=gen)  # noqa: E731
    return TensorDict(
        observation=obs(),
        next=TensorDict(
            observation=obs(),
            reward=torch.randn(rows, 1, generator=gen),
            done=torch.zeros(rows, 1, dtype=torch.bool),
            terminated=torch.zeros(rows, 1, dtype=torch.bool),
            batch_size=[rows],
        ),
        action=torch.randn(rows, 7, generator=gen),
        action_log_prob=torch.randn(rows, generator=gen),
        episode=torch.arange(rows) // 1000,
        step_count=torch.arange(rows) % 1000,
        done=torch.zeros(rows, 1, dtype=torch.bool),
        terminated=torch.zeros(rows, 1, dtype=torch.bool),
        index=torch.arange(rows, dtype=torch.int32),
        batch_size=[rows],
    )


@tensorclass
class Frames:
    """A tensorclass of camera frames, state and reward, with a non-tensor label (the
    tensorclass checkpoint of the issue: 804 bytes a row)."""

    pixels: torch.Tensor
    state: torch.Tensor
    reward: torch.Tensor
    label: str


FRAME_BYTES = 3 * 16 * 16 + 8 * 4 + 4


def frames(rows: int) -> Frames:
    """``rows`` rows of :class:`Frames` (120 rows: 94 KiB; 229,500 rows: 176 MiB)."""
    gen = torch.Generator().manual_seed(0)
    return Frames(
        pixels=torch.randint(0, 256, (rows, 3, 16, 16), dtype=torch.uint8, generator=gen),
        state=torch.randn(rows, 8, generator=gen),
        reward=torch.randn(rows, 1, generator=gen),
        label="camera 0",
        batch_size=[rows],
    )


@tensorclass
class Turn:
    """One message of a conversation, as torchrl's ``History`` keeps it (role and content
    strings) with its tokens: a lazy stack of them is ragged along the tokens."""

    tokens: torch.Tensor
    mask: torch.Tensor
    role: str
    content: str


def history(turns: int) -> object:
    """A lazy stack of ``turns`` :class:`Turn` of 16 to 64 tokens (torchrl's lazily
    stacked ``History``: ``lazy_stack`` of tensorclasses)."""
    members = []
    for i in range(turns):
        length = 16 * (i % 4 + 1)
        members.append(
            Turn(
                tokens=torch.arange(length),
                mask=torch.ones(length, dtype=torch.bool),
                role="assistant" if i % 2 else "user",
                content=f"message {i}: " + "word " * (i % 7),
                batch_size=[],
            )
        )
    return lazy_stack(members)


#: The torchrl version whose ``ReplayBuffer.dumps`` layout :func:`mirror_replay_dump` copies.
MIRRORED_TORCHRL = "0.14.1"


def write_replay_dump(rows: int, path: Path) -> str:
    """``TensorDictReplayBuffer(storage=LazyMemmapStorage(rows)).extend(...).dumps(path)``
    with torchrl, in a child process (torchrl's import is slow and noisy); where torchrl
    cannot be imported, the same layout written by tensordict (:func:`mirror_replay_dump`).
    Returns a note saying which of the two wrote it. The checkpoint is ``path/storage``."""
    code = (
        "import sys, torch\n"
        "from pathlib import Path\n"
        "from torchrl.data import LazyMemmapStorage, TensorDictReplayBuffer\n"
        "from bench._checkpoints import replay_buffer\n"
        "rows, path = int(sys.argv[1]), Path(sys.argv[2])\n"
        "rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(rows, scratch_dir=path.parent "
        "/ (path.name + '-scratch')))\n"
        "rb.extend(replay_buffer(rows))\n"
        "rb.dumps(path)\n"
        "import torchrl; print(torchrl.__version__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(rows), str(path)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[1],
        env={**os.environ, "RL_LOGGING_LEVEL": "WARNING"},
    )
    if done.returncode == 0 and (path / "storage" / "meta.json").exists():
        return f"written by torchrl {done.stdout.split()[-1]}"
    mirror_replay_dump(rows, path)
    return (
        f"torchrl did not run ({(done.stderr.strip().splitlines() or ['?'])[-1][:80]}): "
        f"the layout of torchrl {MIRRORED_TORCHRL}'s dumps, written by tensordict"
    )


def mirror_replay_dump(rows: int, path: Path) -> None:
    """What torchrl 0.14.1's ``dumps`` writes for a full ``LazyMemmapStorage``: the data
    (with the ``index`` key the buffer adds) memory-mapped in ``storage/`` beside its
    ``storage_metadata.json``, the buffer's and the writer's metadata, and the empty
    prefetch queue (the same ``storage/meta.json``, byte for byte)."""
    data = replay_buffer(rows)
    data["index"] = torch.arange(rows)
    data.memmap(path / "storage")
    (path / "storage" / "storage_metadata.json").write_text(
        json.dumps({"metadata": {}, "is_pytree": False, "len": rows})
    )
    (path / "writer").mkdir()
    (path / "writer" / "metadata.json").write_text(json.dumps({"cursor": 0, "write_count": rows}))
    (path / "buffer_metadata.json").write_text(
        json.dumps({"batch_size": None, "consume_after_n_samples": None})
    )
    (path / "prefetch.pkl").write_bytes(
        pickle.dumps({"version": 1, "capacity": 0, "queue": ()}, protocol=4)
    )


def write_hub_cache(td: object, root: Path, name: str) -> Path:
    """``td`` saved with ``memmap`` as a Hugging Face cache keeps a downloaded folder:
    ``models--bench--<name>/snapshots/<rev>/ckpt`` whose files are relative symlinks to
    ``blobs/<sha256>`` (what ``huggingface_hub.snapshot_download`` leaves). Returns the
    checkpoint folder."""
    repo = root / f"models--bench--{name}"
    rev = "0" * 40
    source = root / f"{name}-saved"
    td.memmap(source)  # type: ignore[attr-defined]
    blobs = repo / "blobs"
    blobs.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    ckpt = repo / "snapshots" / rev / "ckpt"
    for file in sorted(source.rglob("*")):
        if not file.is_file():
            continue
        data = file.read_bytes()
        blob = blobs / hashlib.sha256(data).hexdigest()
        if not blob.exists():
            os.replace(file, blob)
        link = ckpt / file.relative_to(source)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    shutil.rmtree(source)
    return ckpt


def deflate_many(leaves: int, leaf_bytes: int) -> TensorDict:
    """``leaves`` float32 leaves of ``leaf_bytes`` each, compressible (a smooth signal)."""
    n = leaf_bytes // 4
    base = torch.linspace(0, 100, n).round()
    return TensorDict({f"w{i:03d}": base + i for i in range(leaves)})


def deflate_one_big(big_bytes: int) -> TensorDict:
    n = big_bytes // 4
    return TensorDict(
        big=torch.linspace(0, 1000, n).round(),
        a=torch.zeros(10),
        b=torch.ones(10),
        c=torch.arange(10.0),
    )


def write_both(
    td: object, root: Path, name: str, compression: str | None = None
) -> dict[str, Path]:
    """Write ``td`` as a directory and as an archive (packed with ``compression``)."""
    directory = root / name
    td.memmap(directory)  # type: ignore[attr-defined]
    archive = root / f"{name}.tdz"
    pack_memmap(directory, archive, compression=compression)
    return {"directory": directory, "archive": archive}
