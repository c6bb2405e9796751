"""TDView in Jupyter Notebook 7 (not only JupyterLab): the tree renders, expands by
click, and the selection made in the UI reaches Python."""

from __future__ import annotations

from .notebook import open_and_run, write_notebook
from .test_widget import OPEN, TIMEOUT, row, run_cell


def test_widget_in_notebook7(notebook7, page, artifacts) -> None:
    from playwright.sync_api import expect

    name = write_notebook(notebook7.root, "tdview_notebook7.ipynb", [OPEN])
    open_and_run(page, notebook7, name, url=f"/notebooks/{name}")
    assert page.evaluate("() => window.jupyterapp.name") == "Jupyter Notebook"
    widget = page.locator(".tdview-root")
    widget.wait_for(timeout=TIMEOUT)
    assert row(page, "demo_ckpt.tdz", 1).count() == 1

    # Expand by clicking the twisty.
    replay = row(page, "replay", 2)
    replay.wait_for(timeout=TIMEOUT)
    replay.locator(".tdview-twisty").click()
    for child in ("observation", "action", "reward"):
        row(page, child, 3).first.wait_for(timeout=TIMEOUT)
    assert replay.get_attribute("aria-expanded") == "true"

    # Select in the UI; the selection reaches Python.
    replay.locator(".tdview-key").click()
    expect(replay).to_have_attribute("aria-selected", "true", timeout=TIMEOUT)
    page.screenshot(path=str(artifacts / "notebook7-light.png"))
    assert "('replay',)" in run_cell(page, "print(v.selected)")
