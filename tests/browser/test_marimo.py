"""TDView in marimo (``mo.ui.anywidget``), served by ``marimo run`` and driven through
Chromium: render, expand, select, preview, load with no variable to bind, and a cell that
reads the loaded value runs again after the load, not after each click."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .._optional import require_module
from .marimo_app import MarimoApp, start_marimo

require_module("marimo", "these tests run the widget in a marimo app")

TIMEOUT = 60_000

NOTEBOOK = """import marimo

app = marimo.App(width="full")


@app.cell
def _():
    import marimo as mo
    from tdview import TDView

    view = TDView("demo_ckpt.tdz")
    widget = mo.ui.anywidget(view)
    widget
    return mo, view, widget


@app.cell
def _(mo, view, widget):
    import builtins

    # Reads the widget's value: marimo runs this cell again when the view loads.
    builtins.tdview_runs = getattr(builtins, "tdview_runs", 0) + 1
    _loaded = widget.value["loaded"]
    _value = view.value
    _shape = list(_value.batch_size) if _value is not None else None
    mo.md(f"RUNS {builtins.tdview_runs} LOADED {type(_value).__name__} {_shape} "
          f"AT {_loaded.get('path')}")
    return


if __name__ == "__main__":
    app.run()
"""


@pytest.fixture(scope="module")
def marimo_app(
    tmp_path_factory: pytest.TempPathFactory, demo_paths: dict[str, Path]
) -> Iterator[MarimoApp]:
    root = tmp_path_factory.mktemp("marimo")
    shutil.copy2(demo_paths["archive"], root / "demo_ckpt.tdz")
    (root / "tdview_app.py").write_text(NOTEBOOK)
    # The theme follows the browser's colour scheme, so that one server shows both.
    config = root / "marimo-config" / "marimo"
    config.mkdir(parents=True)
    (config / "marimo.toml").write_text('[display]\ntheme = "system"\n')
    app = start_marimo(root / "tdview_app.py", root / "marimo.log")
    yield app
    app.stop()


def row(page: Any, key: str, level: int) -> Any:
    rows = page.locator(f'.tdview-root [role="treeitem"][aria-level="{level}"]')
    return rows.filter(has=page.get_by_text(key, exact=True))


def runs(page: Any) -> str:
    return page.get_by_text(re.compile(r"^RUNS \d+")).first.inner_text()


def open_app(page: Any, app: MarimoApp, scheme: str) -> Any:
    page.emulate_media(color_scheme=scheme)
    page.goto(app.url, wait_until="domcontentloaded")
    widget = page.locator(".tdview-root")  # inside marimo's shadow root
    widget.wait_for(timeout=TIMEOUT)
    row(page, "replay", 2).wait_for(timeout=TIMEOUT)  # the root opens by itself
    page.get_by_text(re.compile(r"^RUNS \d+")).first.wait_for(timeout=TIMEOUT)
    return widget


def test_marimo_render_select_preview_load(marimo_app, page, artifacts) -> None:
    widget = open_app(page, marimo_app, "light")
    assert "LOADED NoneType None" in runs(page)
    first = runs(page)

    # Expand, select a leaf, preview it: none of this re-runs the cell.
    row(page, "replay", 2).locator(".tdview-twisty").click()
    row(page, "observation", 3).wait_for(timeout=TIMEOUT)
    row(page, "observation", 3).locator(".tdview-key").click()
    details = widget.locator(".tdview-details")
    details.get_by_text("replay / observation").first.wait_for(timeout=TIMEOUT)
    preview = details.locator(".tdview-preview")
    preview.locator(".tdview-preview-button").click()
    preview.locator(".tdview-preview-table").wait_for(timeout=TIMEOUT)
    assert preview.locator(".tdview-preview-table tbody tr").count() > 0

    # Load the replay subtree: no variable is offered (marimo has no IPython namespace).
    row(page, "replay", 2).locator(".tdview-key").click()
    details.locator("dl").get_by_text("[1000]", exact=True).first.wait_for(timeout=TIMEOUT)
    form = details.locator(".tdview-load")
    form.locator(".tdview-disclosure").click()
    assert form.locator(".tdview-variable-field").is_hidden()
    assert not form.locator(".tdview-code").inner_text().startswith("replay =")
    page.wait_for_timeout(500)
    assert runs(page) == first, "a click re-ran the cell that reads the widget"
    form.locator(".tdview-load-button").click()
    form.locator(".tdview-load-status").get_by_text("Loaded", exact=False).wait_for(timeout=TIMEOUT)
    page.get_by_text(re.compile(r"LOADED TensorDict \[1000\]")).first.wait_for(timeout=TIMEOUT)
    text = runs(page)
    assert "AT ['replay']" in text, text
    assert int(text.split()[1]) == int(first.split()[1]) + 1, (first, text)
    assert form.locator(".tdview-error").count() == 0
    page.screenshot(path=str(artifacts / "marimo-light.png"))


def test_marimo_dark(marimo_app, page, artifacts) -> None:
    widget = open_app(page, marimo_app, "dark")
    page.wait_for_function("() => document.body.classList.contains('dark')", timeout=TIMEOUT)
    row(page, "replay", 2).locator(".tdview-key").click()
    widget.locator(".tdview-details dl").get_by_text("[1000]", exact=True).first.wait_for(
        timeout=TIMEOUT
    )
    background = widget.evaluate("el => getComputedStyle(el).backgroundColor")
    assert background not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)"), background
    page.screenshot(path=str(artifacts / "marimo-dark.png"))
