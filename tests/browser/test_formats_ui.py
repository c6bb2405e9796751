"""Issue 35's consolidated files in a real JupyterLab at 1280x720: a file written by
tensordict's ``td.consolidate(filename=...)`` opens in ``TDView``; the tree shows its
levels (nested tensordicts with their batch sizes, a lazy stack, non-tensor data) and its
leaves, a preview reads a leaf from the file, the Load button binds a variable equal to
that subtree of ``TensorDict.from_consolidated``. Light and dark screenshots at
1280x720."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .notebook import open_and_run, write_notebook
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import details, load_through_form, marked, select, settle_theme

NAME = "formats35c/rollout.td"


def write_file(root: Path) -> None:
    """A rollout consolidated into one file by tensordict."""
    import torch
    from tensordict import LazyStackedTensorDict, TensorDict

    path = root / NAME
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(35)
    td = TensorDict(
        observation=torch.randn(200, 8, generator=g),
        action=torch.randint(0, 4, (200,), generator=g),
        done=torch.rand(200, generator=g) > 0.9,
        next=TensorDict(
            observation=torch.randn(200, 8, generator=g),
            reward=torch.randn(200, 1, generator=g).to(torch.bfloat16),
            batch_size=[200],
        ),
        batch_size=[200],
        names=["step"],
    )
    td["policy"] = "ppo"
    td["agents"] = LazyStackedTensorDict(
        *[TensorDict(q=torch.randn(3, generator=g)) for _ in range(200)], stack_dim=0
    )
    td.consolidate(filename=path)


@pytest.fixture
def small_page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    yield page
    context.close()


CHECK = """import json, warnings
import torch
from tensordict import TensorDict
warnings.simplefilter("ignore")
ref = TensorDict.from_consolidated("{name}")
print("SAME", json.dumps({{"obs": bool(torch.equal(nxt["observation"], ref["next", "observation"])),
    "reward": bool(torch.equal(nxt["reward"], ref["next", "reward"])),
    "batch": list(nxt.batch_size), "names": nxt.names}}))"""


def test_a_consolidated_file_opens_previews_and_loads(lab, small_page, artifacts) -> None:
    page = small_page
    write_file(lab.root)
    write_notebook(
        lab.root, "formats35c.ipynb", [f'from tdview import TDView\nv = TDView("{NAME}")\nv']
    )
    open_and_run(page, lab, "formats35c.ipynb")
    widget = page.locator(".tdview-root").first
    row(page, "next", 2).wait_for(timeout=TIMEOUT)
    keys = widget.locator('.tdview-tree [role="treeitem"][aria-level="2"] .tdview-key')
    assert set(keys.all_inner_texts()) == {
        "observation", "action", "done", "next", "policy", "agents"
    }  # fmt: skip

    row(page, "next", 2).locator(".tdview-twisty").click()
    row(page, "reward", 3).first.wait_for(timeout=TIMEOUT)
    select(page, widget, "reward", 3, '("next", "reward")')
    assert "bfloat16" in details(widget).inner_text()
    preview = details(widget).locator(".tdview-preview")
    preview.locator(".tdview-preview-button").click()
    preview.locator(".tdview-preview-table").wait_for(timeout=TIMEOUT)
    assert "rows 0–20 of 200" in preview.locator(".tdview-preview-rows").inner_text()

    select(page, widget, "next", 2, '("next",)')
    form = widget.locator(".tdview-load")
    if (
        form.locator(".tdview-variable").count() == 0
        or not form.locator(".tdview-variable").is_visible()
    ):
        form.locator(".tdview-disclosure").click()
    load_through_form(widget, "nxt")
    assert "into nxt" in form.locator(".tdview-load-done").inner_text(), form.inner_text()
    out = run_cell(page, CHECK.format(name=NAME))
    assert marked(out, "SAME") == {"obs": True, "reward": True, "batch": [200], "names": ["step"]}

    widget.scroll_into_view_if_needed()
    select(page, widget, "reward", 3, '("next", "reward")')
    preview.locator(".tdview-preview-button").click()
    preview.locator(".tdview-preview-table").wait_for(timeout=TIMEOUT)
    preview.locator(".tdview-preview-table").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "tdview-consolidated-1280x720-light.png"))
    try:
        settle_theme(page, "dark")
        background = widget.evaluate("el => getComputedStyle(el).backgroundColor")
        assert background not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)"), background
        page.screenshot(path=str(artifacts / "tdview-consolidated-1280x720-dark.png"))
    finally:
        settle_theme(page, "light")
