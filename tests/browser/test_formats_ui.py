"""Issue 35 in a real JupyterLab at 1280x720. A consolidated file written by
tensordict's ``td.consolidate(filename=...)`` opens in ``TDView``; the tree shows its
levels (nested tensordicts with their batch sizes, a lazy stack, non-tensor data) and its
leaves, a preview reads a leaf from the file, the Load button binds a variable equal to
that subtree of ``TensorDict.from_consolidated``. A torchrl archive checkpoint (a zip
without a top-level ``meta.json``) opens as a folder of checkpoints: its components'
states are members, ``manifest.json`` a side file, a member loads equal to tensordict's
load of it. Light and dark screenshots at 1280x720 of each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .notebook import open_and_run, write_notebook
from .test_collection_ui import show
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


ARCHIVE = "formats35t/checkpoint.zip"


def write_archive(root: Path) -> None:
    """A torchrl archive checkpoint: a policy and its optimizer, zipped by torchrl."""
    import torch
    from torch import nn
    from torchrl.checkpoint import Checkpoint

    path = root / ARCHIVE
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    optim = torch.optim.Adam(model.parameters())
    model(torch.randn(5, 8)).sum().backward()
    optim.step()
    Checkpoint(format="archive").register("optim", optim).register("policy", model).save(path)


CHECK_ARCHIVE = """import json, zipfile, tempfile, torch
from tensordict import TensorDict
with tempfile.TemporaryDirectory() as d:
    zipfile.ZipFile("{name}").extractall(d)
    ref = TensorDict.load_memmap(d + "/components/0001-policy/state").to_tensordict()
print("SAME", json.dumps({{k: bool(torch.equal(state[k], ref[k])) for k in ref.keys()}}))"""


def test_a_torchrl_archive_opens_as_a_folder_of_checkpoints(lab, small_page, artifacts) -> None:
    page = small_page
    write_archive(lab.root)
    write_notebook(
        lab.root, "formats35t.ipynb", [f'from tdview import TDView\nv = TDView("{ARCHIVE}")\nv']
    )
    open_and_run(page, lab, "formats35t.ipynb")
    widget = page.locator(".tdview-root").first
    row(page, "components", 2).wait_for(timeout=TIMEOUT)
    keys = widget.locator('.tdview-tree [role="treeitem"][aria-level="2"] .tdview-key')
    assert set(keys.all_inner_texts()) == {"components", "manifest.json"}
    row(page, "components", 2).locator(".tdview-twisty").click()
    row(page, "0001-policy", 3).wait_for(timeout=TIMEOUT)
    row(page, "0001-policy", 3).locator(".tdview-twisty").click()
    row(page, "state", 4).wait_for(timeout=TIMEOUT)
    row(page, "state", 4).locator(".tdview-twisty").click()
    row(page, "tensor_00000000", 5).wait_for(timeout=TIMEOUT)
    text = show(page, widget, "state", 4, "components / 0001-policy / state")
    assert "checkpoint" in text, text
    form = widget.locator(".tdview-load")
    if (
        form.locator(".tdview-variable").count() == 0
        or not form.locator(".tdview-variable").is_visible()
    ):
        form.locator(".tdview-disclosure").click()
    load_through_form(widget, "state")
    assert "into state" in form.locator(".tdview-load-done").inner_text(), form.inner_text()
    out = run_cell(page, CHECK_ARCHIVE.format(name=ARCHIVE))
    assert marked(out, "SAME") == {f"tensor_0000000{i}": True for i in range(4)}

    widget.scroll_into_view_if_needed()
    show(page, widget, "tensor_00000000", 5, "components / 0001-policy / state / tensor_00000000")
    preview = details(widget).locator(".tdview-preview")
    preview.locator(".tdview-preview-button").click()
    preview.locator(".tdview-preview-table").wait_for(timeout=TIMEOUT)
    page.screenshot(path=str(artifacts / "tdview-torchrl-archive-1280x720-light.png"))
    try:
        settle_theme(page, "dark")
        page.screenshot(path=str(artifacts / "tdview-torchrl-archive-1280x720-dark.png"))
    finally:
        settle_theme(page, "light")
