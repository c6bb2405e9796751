"""Case 12: search over a million keys (issue 15).

Two checkpoints of about 1,000,000 keys (20,000 in quick mode), written as tensordict
writes them: a flat one (10,000 folders of 100 leaves) and a model's state with its Adam
state (``model/layers/<i>/attn/q_proj/weight``..., ``optimizer/state/<j>/exp_avg``...:
23 folders per layer, about 300,000 in all). Their leaves are empty tensors, for which
tensordict writes a record in ``meta.json`` and no file: a search reads metadata only,
so the tree is the same to it as one of full tensors, at a fraction of the disk.

Each row times one pattern on an open checkpoint whose metadata was read (what the
widget searches): the first page of 50 and the count of every match.

* ``node walk`` (the baseline): a node per key through the index, each tested, which is
  what counting every match cost before (the search used to stop at the limit);
* ``search``: :func:`tdview.index.search_page`;
* ``protocol reply``: the ``search`` request as the widget sends it, answered with the
  page's 50 node summaries.

One more row per checkpoint times the first search of a checkpoint opened afresh (every
``meta.json`` read and parsed, the files in the page cache), and the row after it the
widget's first page of that checkpoint: the protocol reply asked with ``count: false``
(the walk stops at the 51st match; the widget asks the count after it) against the same
reply counting every match.

tensordict has no search: loading the structure of a million keys to filter them
(``load_memmap(device="meta")``) takes about a minute, so it is left out.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch
from tensordict import TensorDict

from tdview.index import Checkpoint, path_matcher, search_page, walk
from tdview.protocol import Session, handle

from ._harness import Result, compare

#: Keys of each checkpoint, full and quick.
KEYS = {"full": 1_000_000, "quick": 20_000}
PAGE = 50

Spec = dict[str, "Spec | None"]  # a folder: its keys, None for a leaf


def _templates(root: Path) -> tuple[dict, dict, dict]:
    """A leaf record, a collection record and the node fields of a ``meta.json``, as
    tensordict writes them (taken from a checkpoint it writes)."""
    TensorDict({"x": torch.zeros(0), "c": TensorDict()}).memmap(root)
    meta = json.loads((root / "meta.json").read_text())
    return meta.pop("x"), meta.pop("c"), meta


def write_spec(spec: Spec, root: Path, scratch: Path) -> Path:
    """Write the folders of ``spec`` (nested dicts, ``None`` a leaf) with the
    ``meta.json`` files tensordict would write for them (no leaf file: each is empty)."""
    leaf, collection, fields = _templates(scratch)
    cache: dict[int, bytes] = {}
    stack: list[tuple[Path, Spec]] = [(root, spec)]
    while stack:
        folder, node = stack.pop()
        folder.mkdir(parents=True, exist_ok=True)
        data = cache.get(id(node))
        if data is None:
            entries = {k: leaf if v is None else collection for k, v in node.items()}
            data = cache[id(node)] = json.dumps({**entries, **fields}).encode()
        (folder / "meta.json").write_bytes(data)
        stack.extend((folder / k, v) for k, v in node.items() if v is not None)
    return root


def flat_spec(keys: int) -> Spec:
    """Folders ``g00000/`` of 100 leaves ``t000``...: about ``keys`` keys."""
    group: Spec = {f"t{t:03d}": None for t in range(100)}
    return {f"g{g:05d}": group for g in range(max(1, keys // 101))}


def model_spec(keys: int) -> Spec:
    """A transformer's layers and their Adam state: 75 keys (23 folders) a layer."""
    pair: Spec = {"weight": None, "bias": None}
    layer: Spec = {
        "attn": {p: pair for p in ("q_proj", "k_proj", "v_proj", "o_proj")},
        "mlp": {"fc1": pair, "fc2": pair},
        "norm1": pair,
        "norm2": pair,
    }
    state: Spec = {"exp_avg": None, "exp_avg_sq": None, "step": None}
    layers = max(1, keys // 75)
    return {
        "model": {"layers": {str(i): layer for i in range(layers)}},
        "optimizer": {"state": {str(j): state for j in range(12 * layers)}},
    }


PATTERNS = {
    "flat": ("t042", "g00100/t001", "g0*/t04?", "*"),
    "model": (
        "fc1.weight",
        "model/layers/100",
        "layers/*/norm1/*",
        "**/exp_avg",
        "*.bias",
        "weight",
    ),
}
#: The pattern of the first search of a fresh checkpoint (every ``meta.json`` parsed).
COLD = {"flat": "t042", "model": "weight"}


def _node_walk(ckpt: Checkpoint, pattern: str) -> int:
    """The count of matches by testing a node per key (what counting cost before)."""
    match = path_matcher(pattern)
    return sum(1 for node in walk(ckpt, ckpt.root) if match(node.path))


def _count(ckpt: Checkpoint, pattern: str) -> int:
    return search_page(ckpt, pattern, limit=PAGE).total


def _fresh(run: Callable[[Checkpoint, str], int], path: Path, pattern: str) -> int:
    with Checkpoint(path) as ckpt:
        return run(ckpt, pattern)


def _reply(session: Session, pattern: str) -> int:
    reply, _ = handle(
        session,
        {
            "kind": "tdview:request",
            "v": 1,
            "id": 1,
            "method": "search",
            "params": {"pattern": pattern, "limit": PAGE},
        },
    )
    assert reply is not None and reply["ok"], reply
    return int(reply["result"]["total"])


def _fresh_reply(path: Path, pattern: str, count: bool) -> int:
    """The ``search`` reply of a fresh checkpoint, counted or the first page only."""
    with Checkpoint(path) as ckpt:
        params = {"pattern": pattern, "limit": PAGE, "count": count}
        reply, _ = handle(
            Session(ckpt, str(path)),
            {"kind": "tdview:request", "v": 1, "id": 1, "method": "search", "params": params},
        )
    assert reply is not None and reply["ok"], reply
    assert reply["result"]["counted"] is count and len(reply["result"]["matches"]) == PAGE
    return int(reply["result"]["total"])


def _rows(name: str, path: Path, reps: int) -> list[Result]:
    warm = Checkpoint(path)
    session = Session(Checkpoint(path), str(path))
    keys = search_page(warm, "*", limit=0).total
    _reply(session, "*")  # both warm
    rows = []
    for pattern in PATTERNS[name]:
        found = search_page(warm, pattern, limit=PAGE).total
        assert _node_walk(warm, pattern) == found, pattern
        rows.append(
            compare(
                "12 search",
                f"{name}, {keys:,} keys: {pattern!r} ({found:,} matches)",
                {
                    "node walk": partial(_node_walk, warm, pattern),
                    "search": partial(_count, warm, pattern),
                    "protocol reply": partial(_reply, session, pattern),
                },
                baseline="node walk",
                reps=reps,
                note="warm index: the first page of 50 and the count of every match",
            )
        )
    pattern = COLD[name]
    rows.append(
        compare(
            "12 search",
            f"{name}, {keys:,} keys: {pattern!r}, a fresh checkpoint",
            {
                "node walk": partial(_fresh, _node_walk, path, pattern),
                "search": partial(_fresh, _count, path, pattern),
            },
            baseline="node walk",
            reps=reps,
            warmup=0,
            note="cold index: every meta.json read and parsed (the files in the page cache)",
        )
    )
    rows.append(
        compare(
            "12 search",
            f"{name}, {keys:,} keys: {pattern!r}, a fresh checkpoint's first page",
            {
                "counted reply": partial(_fresh_reply, path, pattern, True),
                "count off": partial(_fresh_reply, path, pattern, False),
            },
            baseline="counted reply",
            reps=reps,
            warmup=0,
            note="cold index: the protocol reply of 50 matches, counting all or count: false",
        )
    )
    return rows


def search_cases(root: Path, sizes: object) -> list[Result]:
    """Case 12 (see the module docstring); ``sizes`` says full or quick."""
    from .cases import QUICK

    mode = "quick" if sizes is QUICK else "full"
    results = []
    for name, spec in (("flat", flat_spec(KEYS[mode])), ("model", model_spec(KEYS[mode]))):
        path = write_spec(spec, root / f"search_{name}", root / f"search_{name}_template")
        results += _rows(name, path, reps=3)
    return results
