"""JupyterLab's file browser and issue 35's HDF5 and zarr files, at 1280x720: a double
click on ``episodes.h5`` (``td.to_h5``) opens it in a tdview console as it opens a
``.tdz`` or a ``.safetensors`` file, never fetching the file through the contents API;
a ``episodes.zarr`` folder (``td.to_zarr``) gets "Open in tdview" in its context menu,
which opens it the same way. Light and dark screenshots."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .test_h5_zarr_ui import FORMATS, write_files
from .test_labextension import (  # the kernels a double click starts are shut down after
    ContentRequests,
    _own_kernels,  # noqa: F401 - the module's autouse cleanup
    context_menu,
    listing_item,
    open_lab,
)
from .test_widget import TIMEOUT
from .test_widget_ui import settle_theme

FOLDER = "formats35"


@pytest.fixture
def small_page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    yield page
    context.close()


def _console_rows(page: Any, label: str) -> list[str]:
    """The keys of the tdview console titled ``label``, once its root shows them."""
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=label)
    tab.wait_for(timeout=TIMEOUT)
    panel = page.locator(".jp-MainAreaWidget.tdview-console:visible")
    rows = panel.locator('.tdview-root [role="treeitem"][aria-level="2"] .tdview-key')
    rows.first.wait_for(timeout=TIMEOUT * 4)
    code = panel.locator(".jp-CodeConsole-content .jp-InputArea").all_inner_texts()
    assert any(f'TDView("{FOLDER}/{label}")' in text for text in code), code
    return rows.all_inner_texts()


def _screenshots(page: Any, artifacts: Any, name: str) -> None:
    page.screenshot(path=str(artifacts / f"labextension-{name}-1280x720-light.png"))
    try:
        settle_theme(page, "dark")
        page.screenshot(path=str(artifacts / f"labextension-{name}-1280x720-dark.png"))
    finally:
        settle_theme(page, "light")


def _go_to_folder(page: Any) -> None:
    page.evaluate(
        f"() => window.jupyterapp.commands.execute('filebrowser:go-to-path', {{path: '/{FOLDER}'}})"
    )


WANT = {"observation", "action", "done", "next", "policy", "phase"}


def test_a_double_click_opens_an_h5_file_in_tdview(lab, small_page, artifacts) -> None:
    page = small_page
    write_files(lab.root)
    requests = ContentRequests(page, f"{FOLDER}/{FORMATS['h5']}")
    open_lab(page, lab)
    _go_to_folder(page)
    listing_item(page, FORMATS["h5"]).wait_for(timeout=TIMEOUT)
    listing_item(page, FORMATS["h5"]).dblclick()
    assert set(_console_rows(page, FORMATS["h5"])) == WANT
    assert requests.fetched == [], requests.fetched
    _screenshots(page, artifacts, "h5")


def test_open_in_tdview_opens_a_zarr_folder(lab, small_page, artifacts) -> None:
    page = small_page
    write_files(lab.root)
    open_lab(page, lab)
    _go_to_folder(page)
    listing_item(page, FORMATS["zarr"]).wait_for(timeout=TIMEOUT)
    context_menu(page, FORMATS["zarr"], "Open in tdview").click()
    assert set(_console_rows(page, FORMATS["zarr"])) == WANT
    _screenshots(page, artifacts, "zarr")
