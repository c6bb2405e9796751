"""``python -m bench.format_cases [--quick] [--only NAMES]``: tdview on the other formats
(issue 35), side by side with each format's own reader on the same file in one run.

Each case is a function of :data:`CASES` (a name -> ``(root, sizes) -> [Result]``):
append one for a new format. Cases:

* ``safetensors-open``: open a 10,000-tensor ``.safetensors`` (a transformer's state dict,
  1,000 layers of ten named weights) and list every key: ``tdview.Checkpoint`` and a walk
  of the whole tree (12,000 folders), and ``tdview.Checkpoint`` and its top level (what
  the widget shows first), against ``safetensors.safe_open(...).keys()`` and
  ``.metadata()``, and against ``json.loads`` of the header (what a Python reader
  cannot avoid: the second row's baseline);
* ``safetensors-subtree``: load one layer (``subpath="model/layers/7"``): tdview's load of
  the subtree against ``safe_open`` and ``get_tensor`` of each of its keys;
* ``consolidated-open``: open a 10,000-leaf consolidated file (``td.consolidate(filename=)``
  of the same names, nested) and list every leaf: ``tdview.Checkpoint`` and a walk, against
  ``TensorDict.from_consolidated`` and its ``keys(True, True)`` (and tdview's first paint:
  the file opened and its top level listed);
* ``consolidated-subtree``: load one layer: tdview's ``load(subpath=)`` against
  ``from_consolidated`` then that subtree (tensordict reads no subtree alone);
* ``h5-subtree``: load one layer of a 2,000-leaf HDF5 file (``td.to_h5``): tdview's
  ``load(subpath=)`` against h5py reading that layer's datasets, and
  ``TensorDict.from_h5`` then the subtree ``.to_tensordict()``;
* ``zarr-open``: open a 2,000-array zarr store (``td.to_zarr``) and list every leaf:
  tdview's walk and top level against zarr's ``members(max_depth=None)`` and
  ``TensorDict.from_zarr`` and its keys.

Warm page cache (the file was just written). Writes
``bench/results/format-latest.json`` (``format-latest-quick.json`` with ``--quick``) and
prints a markdown table: ratio = tdview's time / the reference's (median over
repetitions, interleaved).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from tdview.index import Checkpoint, walk

from ._harness import Result, compare
from ._machine import machine_facts

RESULTS = Path(__file__).parent / "results"


@dataclass(frozen=True)
class Sizes:
    tensors: int  # tensors of the safetensors file
    reps: int
    groups: int  # leaves of the HDF5 file and the zarr store (one file or folder each)


FULL = Sizes(tensors=10_000, reps=7, groups=2_000)
QUICK = Sizes(tensors=1_000, reps=3, groups=300)
#: the names of one layer's tensors (a transformer block's), each a few KiB
_LAYER = (
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
    "self_attn.q_proj.bias",
)


def state_dict(tensors: int) -> dict[str, torch.Tensor]:
    """``tensors`` tensors named as a transformer's (``model.layers.<i>.<name>``)."""
    out: dict[str, torch.Tensor] = {"model.embed_tokens.weight": torch.zeros(64, 16)}
    layer = 0
    while len(out) < tensors:
        for name in _LAYER:
            if len(out) < tensors:
                out[f"model.layers.{layer}.{name}"] = torch.full((16, 16), float(layer))
        layer += 1
    return out


def write_safetensors(root: Path, tensors: int) -> Path:
    from safetensors.torch import save_file

    path = root / f"model-{tensors}.safetensors"
    if not path.exists():
        save_file(state_dict(tensors), path, metadata={"format": "pt"})
    return path


def _tdview_list(path: Path) -> int:
    with Checkpoint(path) as ckpt:
        return sum(1 for node in walk(ckpt, ckpt.root) if node.is_leaf)


def _tdview_top(path: Path) -> int:
    """What the widget's first paint asks: the top level's children."""
    with Checkpoint(path) as ckpt:
        return len(ckpt.children())


def _safe_list(path: Path) -> int:
    from safetensors import safe_open

    with safe_open(path, "pt") as f:
        f.metadata()
        return len(f.keys())


def _json_floor(path: Path) -> int:
    """What any Python reader of the header pays: its bytes read, then ``json.loads``
    (safe_open parses the same JSON in Rust)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return len(json.loads(f.read(n))) - 1  # (less __metadata__)


#: the floor side of :func:`safetensors_open`, and the baseline of its second row
FLOOR = "json.loads of the header (the floor)"


def safetensors_open(root: Path, sizes: Sizes) -> list[Result]:
    """One run of every side; two rows of it: the ratios to ``safe_open``, and to
    :data:`FLOOR`."""
    path = write_safetensors(root, sizes.tensors)
    assert _tdview_list(path) == _safe_list(path) == _json_floor(path) == sizes.tensors
    result = compare(
        "safetensors open and list",
        f"{sizes.tensors:,} tensors, {path.stat().st_size / 1e6:.1f} MB",
        {
            "safe_open keys() + metadata()": lambda: _safe_list(path),
            FLOOR: lambda: _json_floor(path),
            "tdview Checkpoint + walk": lambda: _tdview_list(path),
            "tdview Checkpoint + top level": lambda: _tdview_top(path),
        },
        baseline="safe_open keys() + metadata()",
        reps=sizes.reps,
    )
    to_floor = replace(result, variant=f"{result.variant}, against the floor", baseline=FLOOR)
    return [result, to_floor]


def _tdview_subtree(path: Path) -> int:
    with Checkpoint(path) as ckpt:
        return len(ckpt.load(subpath="model/layers/7").keys(include_nested=True))


def _safe_subtree(path: Path) -> int:
    from safetensors import safe_open

    with safe_open(path, "pt") as f:
        found = {k: f.get_tensor(k) for k in f.keys() if k.startswith("model.layers.7.")}
    return len(found)


def safetensors_subtree(root: Path, sizes: Sizes) -> list[Result]:
    path = write_safetensors(root, sizes.tensors)
    return [
        compare(
            "safetensors subtree load",
            f"one layer of {len(_LAYER)} tensors, of {sizes.tensors:,}",
            {
                "safe_open get_tensor per key": lambda: _safe_subtree(path),
                "tdview load(subpath=)": lambda: _tdview_subtree(path),
            },
            baseline="safe_open get_tensor per key",
            reps=sizes.reps,
        )
    ]


def write_consolidated(root: Path, leaves: int) -> Path:
    """A consolidated file of ``leaves`` leaves, nested as :func:`state_dict` names them
    (``model/layers/<i>/...``), written by tensordict's ``consolidate(filename=)``."""
    from tensordict import TensorDict

    path = root / f"model-{leaves}.td"
    if not path.exists():
        flat = {tuple(k.split(".")): v for k, v in state_dict(leaves).items()}
        TensorDict(flat).consolidate(filename=path)
    return path


def _consolidated_list(path: Path) -> int:
    from tensordict import TensorDict

    return len(TensorDict.from_consolidated(path).keys(True, True))


def consolidated_open(root: Path, sizes: Sizes) -> list[Result]:
    path = write_consolidated(root, sizes.tensors)
    assert _tdview_list(path) == _consolidated_list(path) == sizes.tensors
    return [
        compare(
            "consolidated open and list",
            f"{sizes.tensors:,} leaves, {path.stat().st_size / 1e6:.1f} MB",
            {
                "TensorDict.from_consolidated + keys": lambda: _consolidated_list(path),
                "tdview Checkpoint + walk": lambda: _tdview_list(path),
                "tdview Checkpoint + top level": lambda: _tdview_top(path),
            },
            baseline="TensorDict.from_consolidated + keys",
            reps=sizes.reps,
        )
    ]


def _consolidated_subtree(path: Path) -> int:
    from tensordict import TensorDict

    return len(TensorDict.from_consolidated(path)["model", "layers", "7"].keys(True, True))


def consolidated_subtree(root: Path, sizes: Sizes) -> list[Result]:
    path = write_consolidated(root, sizes.tensors)
    return [
        compare(
            "consolidated subtree load",
            f"one layer of {len(_LAYER)} leaves, of {sizes.tensors:,}",
            {
                "from_consolidated, then the subtree": lambda: _consolidated_subtree(path),
                "tdview load(subpath=)": lambda: _tdview_subtree(path),
            },
            baseline="from_consolidated, then the subtree",
            reps=sizes.reps,
        )
    ]


def write_groups(root: Path, leaves: int, suffix: str) -> Path:
    """An HDF5 file (``suffix`` ``.h5``) or a zarr store (``.zarr``) of ``leaves``
    leaves nested as :func:`state_dict` names them, written by tensordict's ``to_h5`` /
    ``to_zarr``."""
    from tensordict import TensorDict

    path = root / f"model-{leaves}{suffix}"
    if not path.exists():
        td = TensorDict({tuple(k.split(".")): v for k, v in state_dict(leaves).items()})
        td.to_h5(path) if suffix == ".h5" else td.to_zarr(path)
    return path


def _h5py_layer(path: Path) -> int:
    """h5py's own read of one layer: the file opened, each dataset below read whole."""
    import h5py

    found: list[object] = []
    with h5py.File(path, "r") as f:
        f["model/layers/7"].visititems(
            lambda _, obj: found.append(obj[()]) if isinstance(obj, h5py.Dataset) else None
        )
    return len(found)


def _from_h5_layer(path: Path) -> int:
    from tensordict import TensorDict

    td = TensorDict.from_h5(path)
    try:
        return len(td["model", "layers", "7"].to_tensordict().keys(True, True))
    finally:
        td.close()


def h5_subtree(root: Path, sizes: Sizes) -> list[Result]:
    path = write_groups(root, sizes.groups, ".h5")
    return [
        compare(
            "HDF5 subtree load",
            f"one layer of {len(_LAYER)} datasets, of {sizes.groups:,}",
            {
                "h5py: the layer's datasets read": lambda: _h5py_layer(path),
                "TensorDict.from_h5, then the subtree": lambda: _from_h5_layer(path),
                "tdview load(subpath=)": lambda: _tdview_subtree(path),
            },
            baseline="h5py: the layer's datasets read",
            reps=sizes.reps,
        )
    ]


def _zarr_list(path: Path) -> int:
    """zarr's own listing: every member of the store, to any depth."""
    import zarr

    group = zarr.open_group(path, mode="r")
    return sum(1 for _, member in group.members(max_depth=None) if isinstance(member, zarr.Array))


def _from_zarr_list(path: Path) -> int:
    from tensordict import TensorDict

    return len(TensorDict.from_zarr(path).keys(True, True))


def zarr_open(root: Path, sizes: Sizes) -> list[Result]:
    path = write_groups(root, sizes.groups, ".zarr")
    assert _tdview_list(path) == _zarr_list(path) == sizes.groups
    return [
        compare(
            "zarr open and list",
            f"{sizes.groups:,} arrays",
            {
                "zarr members(max_depth=None)": lambda: _zarr_list(path),
                "TensorDict.from_zarr + keys": lambda: _from_zarr_list(path),
                "tdview Checkpoint + walk": lambda: _tdview_list(path),
                "tdview Checkpoint + top level": lambda: _tdview_top(path),
            },
            baseline="zarr members(max_depth=None)",
            reps=sizes.reps,
        )
    ]


#: name -> case; a format's engineer appends theirs
CASES: dict[str, Callable[[Path, Sizes], list[Result]]] = {
    "safetensors-open": safetensors_open,
    "safetensors-subtree": safetensors_subtree,
    "consolidated-open": consolidated_open,
    "consolidated-subtree": consolidated_subtree,
    "h5-subtree": h5_subtree,
    "zarr-open": zarr_open,
}


def render(report: dict) -> str:
    lines = [
        "| case | variant | side | min | median | ratio vs reference |",
        "|---|---|---|---|---|---|",
    ]
    for row in report["timing"]:
        for side, stats in row["stats"].items():
            ratio = "reference" if side == row["baseline"] else f"{row['ratios'][side]:.2f}×"
            lines.append(
                f"| {row['case']} | {row['variant']} | {side} | {stats['min'] * 1e3:.2f} ms | "
                f"{stats['median'] * 1e3:.2f} ms | {ratio} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.format_cases")
    parser.add_argument("--quick", action="store_true", help="small files, few repetitions")
    parser.add_argument("--root", type=Path, help="keep the files written in this folder")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--only", help=f"comma-separated cases of: {', '.join(CASES)}")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(CASES)
    if set(names) - set(CASES):
        parser.error(f"--only takes {', '.join(CASES)}, not {args.only!r}")
    sizes = QUICK if args.quick else FULL
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="tdview-format-bench-") as tmp:
        root = args.root or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        timing = [result for name in names for result in CASES[name](root, sizes)]
    report = {
        "machine": machine_facts(),
        "mode": "quick" if args.quick else "full",
        "seconds": round(time.time() - started, 1),
        "timing": [r.as_json() for r in timing],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = "format-latest-quick.json" if args.quick else "format-latest.json"
    (args.out / name).write_text(json.dumps(report, indent=1))
    print(render(report))


if __name__ == "__main__":
    main()
