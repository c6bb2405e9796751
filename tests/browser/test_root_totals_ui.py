"""The root's details, the root row and the header show the subtree totals the widget
asked for at first paint: one walk of the tree, which the details reuse instead of
asking again (``js/tests/render-app.test.ts`` counts the requests). Light and dark
screenshots."""

from __future__ import annotations

from pathlib import Path

from .notebook import open_and_run, write_notebook
from .test_widget import TIMEOUT, row
from .test_widget_ui import details, settle_theme

CKPT = "root_totals_ckpt"


def _write(root: Path) -> tuple[int, int]:
    """A checkpoint written by tensordict: its bytes and tensors, as tensordict counts."""
    import torch
    from tensordict import TensorDict

    td = TensorDict(
        model=TensorDict(weight=torch.ones(64, 32), bias=torch.zeros(32)),
        step=torch.tensor(3),
        batch_size=[],
    )
    if not (root / CKPT / "meta.json").exists():
        td.memmap(root / CKPT)
    leaves = list(TensorDict.load_memmap(root / CKPT).values(True, True))
    return sum(t.numel() * t.element_size() for t in leaves), len(leaves)


def test_the_root_shows_the_totals_of_its_first_paint(lab, page, artifacts) -> None:
    total, tensors = _write(lab.root)
    cell = f'from tdview import TDView\nTDView("{CKPT}")'
    write_notebook(lab.root, "tdview_root_totals.ipynb", [cell])
    open_and_run(page, lab, "tdview_root_totals.ipynb")
    widget = page.locator(".tdview-root")
    row(page, "model", 2).wait_for(timeout=TIMEOUT)  # the root opens by itself
    # the root stays selected: its details show the totals the first paint asked for
    size = details(widget).locator("dd", has_text=f"({total:,} B)")
    size.wait_for(state="attached", timeout=TIMEOUT)
    assert f"{tensors} tensors" in size.inner_text(), size.inner_text()
    header = widget.locator(".tdview-header .tdview-root-leaves").inner_text()
    assert header.endswith(f"in {tensors} tensors"), header
    root_size = row(page, CKPT, 1).locator(".tdview-bytes").inner_text()
    assert root_size in size.inner_text(), (root_size, size.inner_text())
    widget.screenshot(path=str(artifacts / "tdview-root-totals-light.png"))
    try:
        settle_theme(page, "dark")
        widget.screenshot(path=str(artifacts / "tdview-root-totals-dark.png"))
    finally:
        settle_theme(page, "light")
