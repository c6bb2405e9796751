"""Browser test harness: JupyterLab started by the tests, Debian's Chromium driven by
Playwright (``executablePath`` set; Playwright cannot download its own browser here).

Without Chromium or Playwright the browser tests skip with a message saying how to enable
them, except under ``CI=true``, where either missing is a failure (``tests/_optional.py``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from .._optional import missing, require_module
from .jupyter import JupyterLabServer, start_jupyterlab, start_server

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def chromium_executable() -> str:
    path = os.environ.get("TDVIEW_CHROMIUM") or shutil.which("chromium")
    if path:
        return path
    missing(
        "Chromium not found: browser tests need Debian's chromium "
        "(apt-get install chromium) or TDVIEW_CHROMIUM=/path/to/chromium"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def lab_root(tmp_path_factory: pytest.TempPathFactory, demo_paths: dict[str, Path]) -> Path:
    root = tmp_path_factory.mktemp("lab")
    for path in demo_paths.values():
        target = root / path.name
        if path.is_dir():
            shutil.copytree(path, target)
        else:
            shutil.copy2(path, target)
    return root


@pytest.fixture(scope="session")
def lab(lab_root: Path) -> Iterator[JupyterLabServer]:
    server = start_jupyterlab(lab_root, lab_root.parent / "jupyterlab.log")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def notebook7(lab_root: Path) -> Iterator[JupyterLabServer]:
    """Jupyter Notebook 7 serving the same root as ``lab``."""
    server = start_server("notebook", lab_root, lab_root.parent / "notebook7.log")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    executable = chromium_executable()
    sync_api = require_module("playwright.sync_api", "it drives Chromium")

    with sync_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
