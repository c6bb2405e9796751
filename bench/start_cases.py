"""Cases 13 and 14 (issue 32): a fresh kernel's first rows, and the load form's cost.

13. From a fresh interpreter to the first rows of ``TDView(path)`` (the view built,
    its first ``children`` page answered through its dispatcher) on the demo
    checkpoint (``python -m tdview demo --out DIR``), beside ``import torch`` alone: a
    view that only browses imports neither torch nor tensordict.
14. The load form's ``load`` (the request through the view's dispatcher: progress
    messages, the summary, the variable bound) against ``Checkpoint.load`` of the same
    subtree and tensordict's ``load_memmap`` of it, on a model's AdamW state saved as a
    TensorDict folder (one folder per parameter name, three leaves each).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from tensordict import TensorDict

from tdview import Checkpoint, TDView
from tdview._demo import write_demo

from ._harness import Result, compare
from .cases import Sizes

#: What a fresh interpreter runs for case 13, up to the first page of rows.
FIRST_ROWS = textwrap.dedent(
    """
    import sys
    from tdview import TDView
    view = TDView(sys.argv[1])
    sent = []
    view.send = lambda content, buffers=None: sent.append(content)
    request = {"kind": "tdview:request", "v": 1, "id": 1, "method": "children",
               "params": {"path": [], "offset": 0, "limit": 200, "totals": False}}
    view._on_custom_msg(view, request, [])
    assert view._dispatcher.drain(60) and sent[-1]["ok"], sent
    """
)


def _fresh(*args: str) -> None:
    subprocess.run([sys.executable, *args], check=True, capture_output=True)


def first_rows_cases(root: Path, reps: int) -> list[Result]:
    demo = write_demo(root / "start-demo")
    return [
        compare(
            "13 first rows",
            f"fresh interpreter to the first rows, demo {kind}",
            {
                "import torch": lambda: _fresh("-c", "import torch"),
                "TDView + first page": lambda p=path: _fresh("-c", FIRST_ROWS, str(p)),
            },
            baseline="import torch",
            reps=reps,
            note="a view that browses imports neither torch nor tensordict",
        )
        for kind, path in (("directory", demo["directory"]), ("archive", demo["archive"]))
    ]


def adamw_run(path: Path, layers: int = 6, width: int = 256) -> int:
    """A decoder's weights and its AdamW state keyed by parameter name, as a TensorDict
    folder (``model``, ``optimizer``); the optimizer's leaf count."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerDecoderLayer(width, 8, 4 * width, batch_first=True)
    model = torch.nn.TransformerDecoder(layer, layers)
    optimizer = torch.optim.AdamW(model.parameters())
    x = torch.randn(2, 4, width)
    model(x, x).sum().backward()
    optimizer.step()
    names = [name for name, _ in model.named_parameters()]
    state = {names[i]: dict(s) for i, s in optimizer.state_dict()["state"].items()}
    run = TensorDict(
        {"model": TensorDict.from_module(model).clone(), "optimizer": TensorDict(state, [])}, []
    )
    run.memmap(path)
    return len(list(run["optimizer"].keys(True, True)))


def form_load_cases(root: Path, reps: int) -> list[Result]:
    path = root / "adamw-run"
    leaves = adamw_run(path)
    view = TDView(path)
    view.namespace = {}
    sent: list[dict] = []
    view.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
    ckpt = Checkpoint(path)
    ids = iter(range(1, 1 << 30))

    def form_load() -> object:
        rid = next(ids)
        params = {"path": ["optimizer"], "device": "cpu", "mode": "r", "allow_pickle": False}
        request = {"kind": "tdview:request", "v": 1, "id": rid, "method": "load"}
        request["params"] = {**params, "variable": "opt", "replace": True}
        view._on_custom_msg(view, request, [])
        assert view._dispatcher.drain(60)
        return sent[-1]

    try:
        return [
            compare(
                "14 form load",
                f"AdamW state folder, {leaves} leaves",
                {
                    "tensordict": lambda: TensorDict.load_memmap(path / "optimizer"),
                    "Checkpoint.load": lambda: ckpt.load("optimizer", device="cpu", mode="r"),
                    "form load": form_load,
                },
                baseline="Checkpoint.load",
                reps=reps,
                note="the form's request: progress, summary and binding included",
            )
        ]
    finally:
        view.close()


def start_cases(root: Path, sizes: Sizes) -> list[Result]:
    """Cases 13 and 14."""
    return first_rows_cases(root, sizes.reps) + form_load_cases(root, sizes.reps)
