"""The README's picture: the demo checkpoint in a notebook at 1280x720, the token
embedding's weight selected, its facts folded and previewed (statistics, histogram, first
rows).

The test checks what the picture shows (the demo's top-level keys in the tree, the
weight's shape and dtype in the details, its statistics against torch's) and saves light
and dark screenshots under ``test-artifacts/``. With ``TDVIEW_README_SCREENSHOT=<path>``
it also writes the light one, cropped to the cell, to that path:
``scripts/readme-screenshot.sh`` makes ``docs/tdview.png`` this way.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from .notebook import open_and_run, write_notebook
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import details, settle_theme

CODE = 'from tdview import TDView\nTDView("demo_ckpt.tdz")'
TOP_KEYS = ["model", "optimizer", "replay", "rollout", "episodes"]


@pytest.fixture
def screen(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    yield page
    context.close()


def weight_range(page: Any) -> dict[str, float]:
    out = run_cell(
        page,
        "import json, tdview\n"
        "w = tdview.load_memmap('demo_ckpt.tdz', subpath='model/embed')['weight']\n"
        "print('RANGE', json.dumps({'min': w.min().item(), 'max': w.max().item()}))",
    )
    line = next(x for x in out.splitlines() if x.startswith("RANGE "))
    return json.loads(line[6:])


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_readme_screenshot(lab, screen, artifacts, theme: str) -> None:
    page = screen
    name = f"readme_{theme}.ipynb"
    write_notebook(lab.root, name, [CODE])
    open_and_run(page, lab, name)
    if theme != "light":
        settle_theme(page, theme)
    # the file browser folded: the picture is the notebook cell
    page.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
    widget = page.locator(".tdview-root")
    for key in TOP_KEYS:
        row(page, key, 2).wait_for(timeout=TIMEOUT)
    # the root's totals, which need every meta.json, fill in after the first paint (waited
    # for before the clicks below: a click while they are on their way can lose them)
    page.wait_for_function(
        """() => [...document.querySelectorAll('.tdview-root [role="treeitem"][aria-level="1"]')]
            .some(r => / tensors/.test(r.textContent))""",
        timeout=TIMEOUT,
    )
    row(page, "model", 2).locator(".tdview-twisty").click()
    row(page, "embed", 3).locator(".tdview-twisty").click()
    row(page, "weight", 4).first.locator(".tdview-key").click()
    summary = details(widget).locator(".tdview-summary")
    summary.get_by_text("f32[512,64]", exact=False).wait_for(timeout=TIMEOUT)
    toggle = details(widget).locator(".tdview-facts-toggle")  # fold the facts: room to look
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "false"
    preview = details(widget).locator(".tdview-preview")
    preview.locator(".tdview-preview-button").click()
    preview.locator(".tdview-histogram svg").wait_for(timeout=TIMEOUT)
    preview.locator(".tdview-preview-table tbody tr").first.wait_for(timeout=TIMEOUT)
    page.wait_for_timeout(300)  # the histogram's bars settle
    cell = page.locator(".jp-Notebook .jp-CodeCell").first
    cell.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / f"readme-1280x720-{theme}.png"))
    shot = artifacts / f"readme-cell-{theme}.png"
    cell.screenshot(path=str(shot))
    target = os.environ.get("TDVIEW_README_SCREENSHOT")
    if target and theme == "light":
        shutil.copyfile(shot, target)

    # what the picture shows is the weight's: its range, as torch computes it
    shown = {
        label: float(value)
        for label, value in preview.locator(".tdview-stat").evaluate_all(
            "items => items.map(i => [i.querySelector('.tdview-stat-label').textContent,"
            " i.querySelector('.tdview-stat-value').textContent])"
        )
        if label in ("min", "max")
    }
    truth = weight_range(page)
    assert set(shown) == {"min", "max"}, shown
    assert math.isclose(shown["min"], truth["min"], abs_tol=5e-6), (shown, truth)
    assert math.isclose(shown["max"], truth["max"], abs_tol=5e-6), (shown, truth)
