"""A ``.safetensors`` file (``safetensors.torch.save_file`` of a transformer's state dict)
in ``TDView`` in a real JupyterLab at 1280x720: the tree groups the dotted keys as the
modules nest (``model`` / ``layers`` / ``0`` ... in their numbers' order), the root's
details show the file's ``__metadata__``, a preview reads
a bfloat16 weight, the Load button binds a layer equal to ``load_file``'s tensors, and
the load line the form shows, pasted, loads the same. Light and dark screenshots."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .notebook import open_and_run, write_notebook
from .test_labextension import (  # the kernels a double click starts are shut down after
    ContentRequests,
    _own_kernels,  # noqa: F401 - the module's autouse cleanup
    listing_item,
    open_lab,
)
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import details, load_through_form, marked, select, settle_theme

NAME = "st35/model.safetensors"


def write_file(root: Path) -> None:
    import torch
    from safetensors.torch import save_file

    path = root / NAME
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(35)
    state = {"model.embed_tokens.weight": torch.randn(32, 8, generator=g)}
    for i in range(12):
        state[f"model.layers.{i}.self_attn.q_proj.weight"] = torch.randn(8, 8, generator=g)
        state[f"model.layers.{i}.mlp.up_proj.weight"] = torch.randn(16, 8, generator=g).to(
            torch.bfloat16
        )
    state["model.norm.weight"] = torch.ones(8)
    state["lm_head.weight"] = torch.randn(32, 8, generator=g)
    save_file(state, path, metadata={"format": "pt"})


@pytest.fixture
def small_page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    yield page
    context.close()


CHECK = """import json
import torch
from safetensors.torch import load_file
ref = load_file("st35/model.safetensors")
pasted = {{"tdview": __import__("tdview")}}
exec({code!r}, pasted)
same = lambda td: all(torch.equal(td[tuple(k.split("."))], ref["model.layers.1." + k])
                      for k in ("self_attn.q_proj.weight", "mlp.up_proj.weight"))
print("SAME", json.dumps({{"bound": same(layer1), "pasted": same(pasted["layer1"]),
    "keys": sorted(".".join(k) for k in layer1.keys(True, True))}}))"""


def test_a_safetensors_file_opens_previews_and_loads(lab, small_page, artifacts) -> None:
    page = small_page
    write_file(lab.root)
    write_notebook(lab.root, "st35.ipynb", [f'from tdview import TDView\nv = TDView("{NAME}")\nv'])
    open_and_run(page, lab, "st35.ipynb")
    widget = page.locator(".tdview-root").first
    row(page, "model", 2).wait_for(timeout=TIMEOUT)
    keys = widget.locator('.tdview-tree [role="treeitem"][aria-level="2"] .tdview-key')
    assert set(keys.all_inner_texts()) == {"model", "lm_head"}

    # the root's details: the file's __metadata__
    page.locator('.tdview-root [role="treeitem"][aria-level="1"] .tdview-key').first.click()
    details(widget).get_by_text("format: pt", exact=True).wait_for(timeout=TIMEOUT)
    assert "Metadata" in details(widget).inner_text()
    page.screenshot(path=str(artifacts / "tdview-safetensors-metadata-1280x720-light.png"))
    settle_theme(page, "dark")
    page.screenshot(path=str(artifacts / "tdview-safetensors-metadata-1280x720-dark.png"))
    settle_theme(page, "light")

    row(page, "model", 2).locator(".tdview-twisty").click()
    row(page, "layers", 3).first.wait_for(timeout=TIMEOUT)
    row(page, "layers", 3).locator(".tdview-twisty").click()
    row(page, "11", 4).first.wait_for(timeout=TIMEOUT)
    layers = widget.locator('.tdview-tree [role="treeitem"][aria-level="4"] .tdview-key')
    assert layers.all_inner_texts()[:12] == [str(i) for i in range(12)]

    row(page, "1", 4).locator(".tdview-twisty").click()
    row(page, "mlp", 5).first.wait_for(timeout=TIMEOUT)
    row(page, "mlp", 5).locator(".tdview-twisty").click()
    row(page, "up_proj", 6).first.wait_for(timeout=TIMEOUT)
    row(page, "up_proj", 6).locator(".tdview-twisty").click()
    row(page, "weight", 7).first.wait_for(timeout=TIMEOUT)
    select(page, widget, "weight", 7, '("model", "layers", "1", "mlp", "up_proj", "weight")')
    text = details(widget).inner_text()
    assert "bfloat16" in text and "model.layers.1.mlp.up_proj.weight" in text, text
    preview = details(widget).locator(".tdview-preview")
    preview.locator(".tdview-preview-button").click()
    preview.locator(".tdview-preview-table").wait_for(timeout=TIMEOUT)
    shown = preview.inner_text()
    assert "stored as bfloat16" in shown and "128 values" in shown, shown

    select(page, widget, "1", 4, '("model", "layers", "1")')
    form = widget.locator(".tdview-load")
    if (
        form.locator(".tdview-variable").count() == 0
        or not form.locator(".tdview-variable").is_visible()
    ):
        form.locator(".tdview-disclosure").click()
    load_through_form(widget, "layer1")
    assert "into layer1" in form.locator(".tdview-load-done").inner_text(), form.inner_text()
    code = form.locator(".tdview-load-code, code").first.inner_text()
    assert code.startswith("layer1 = tdview.Checkpoint("), code
    out = run_cell(page, CHECK.format(code=code))
    assert marked(out, "SAME") == {
        "bound": True,
        "pasted": True,
        "keys": ["mlp.up_proj.weight", "self_attn.q_proj.weight"],
    }

    widget.scroll_into_view_if_needed()
    select(page, widget, "weight", 7, '("model", "layers", "1", "mlp", "up_proj", "weight")')
    preview.locator(".tdview-preview-button").click()
    preview.locator(".tdview-preview-table").wait_for(timeout=TIMEOUT)
    preview.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "tdview-safetensors-1280x720-light.png"))
    try:
        settle_theme(page, "dark")
        background = widget.evaluate("el => getComputedStyle(el).backgroundColor")
        assert background not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)"), background
        page.screenshot(path=str(artifacts / "tdview-safetensors-1280x720-dark.png"))
    finally:
        settle_theme(page, "light")


def test_the_file_browser_opens_a_safetensors_file_in_tdview(lab, small_page, artifacts) -> None:
    """A double click on ``model.safetensors`` in JupyterLab's file browser opens it in a
    tdview console (its tree grouped), never fetching the file through the contents API."""
    page = small_page
    write_file(lab.root)
    requests = ContentRequests(page, NAME)
    open_lab(page, lab)
    page.evaluate(
        "() => window.jupyterapp.commands.execute('filebrowser:go-to-path', {path: '/st35'})"
    )
    listing_item(page, "model.safetensors").wait_for(timeout=TIMEOUT)
    listing_item(page, "model.safetensors").dblclick()
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="model.safetensors")
    tab.wait_for(timeout=TIMEOUT)
    panel = page.locator(".jp-MainAreaWidget.tdview-console:visible")
    rows = panel.locator('.tdview-root [role="treeitem"][aria-level="2"] .tdview-key')
    rows.first.wait_for(timeout=TIMEOUT * 4)
    assert set(rows.all_inner_texts()) == {"model", "lm_head"}
    code = panel.locator(".jp-CodeConsole-content .jp-InputArea").all_inner_texts()
    assert any('TDView("st35/model.safetensors")' in text for text in code), code
    page.screenshot(path=str(artifacts / "labextension-safetensors-1280x720-light.png"))
    assert requests.fetched == [], requests.fetched
    try:
        settle_theme(page, "dark")
        page.screenshot(path=str(artifacts / "labextension-safetensors-1280x720-dark.png"))
    finally:
        settle_theme(page, "light")
