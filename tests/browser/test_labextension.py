"""The prebuilt JupyterLab extension (``labextension/``) in a real JupyterLab: opening a
``.tdz`` from the file browser shows a tdview console without the contents API ever
sending the archive, the context menu opens checkpoint folders and inserts notebook
cells, and a load in the tdview console is usable from a notebook on the same kernel."""

from __future__ import annotations

import re
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from jupyter_core.paths import jupyter_path

from .notebook import RUN_TIMEOUT_MS, write_notebook

TIMEOUT = 60_000
EXTENSION = "tdview-jupyterlab"
WORKSPACE = "tdview-labextension-tests"


@pytest.fixture(autouse=True, scope="module")
def _extension_installed() -> None:
    found = [p for p in jupyter_path("labextensions") if (Path(p) / EXTENSION).is_dir()]
    if not found:
        pytest.fail(
            f"the JupyterLab extension {EXTENSION} is not installed: run "
            "scripts/bootstrap.sh (it builds labextension/ and links it)"
        )


class ContentRequests:
    """Every request for a path's bytes: the contents API with content, or /files/."""

    def __init__(self, page: Any, name: str) -> None:
        self.name, self.fetched, self.seen = name, [], []
        page.on("request", self._on_request)

    def _on_request(self, request: Any) -> None:
        url = urlsplit(request.url)
        if url.path.endswith(f"/api/contents/{self.name}"):
            self.seen.append(request.url)
            # The contents API sends content unless asked not to (content=0).
            if parse_qs(url.query).get("content", ["1"]) != ["0"]:
                self.fetched.append(request.url)
        elif url.path.endswith(f"/files/{self.name}"):
            self.fetched.append(request.url)


@pytest.fixture(autouse=True)
def _own_kernels(lab: Any) -> Iterator[None]:
    """Shut down the sessions (and kernels) a test started, so none outlive it."""
    before = {s["id"] for s in lab.api("/api/sessions")}
    yield
    for session in lab.api("/api/sessions"):
        if session["id"] not in before:
            request = urllib.request.Request(
                f"{lab.base_url}/api/sessions/{session['id']}",
                method="DELETE",
                headers={"Authorization": f"token {lab.token}"},
            )
            try:
                urllib.request.urlopen(request, timeout=10).close()
            except urllib.error.HTTPError as error:  # gone with a kernel it shared
                if error.code != 404:
                    raise


def open_lab(page: Any, lab: Any, theme: str = "light") -> None:
    # A workspace of its own, reset: other tests' layouts stay as they were.
    page.goto(lab.url(f"/lab/workspaces/{WORKSPACE}?reset"), wait_until="domcontentloaded")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=TIMEOUT)
    page.evaluate("() => window.jupyterapp.restored")
    assert page.evaluate("() => window.jupyterapp.commands.hasCommand('tdview:open')"), (
        "the tdview extension did not activate (see the browser console)"
    )
    if theme == "dark":
        page.evaluate(
            "() => window.jupyterapp.commands.execute('apputils:change-theme',"
            " {theme: 'JupyterLab Dark'})"
        )
        page.wait_for_function(
            "() => document.body.dataset.jpThemeLight === 'false'", timeout=TIMEOUT
        )
    browse_root(page)


def browse_root(page: Any) -> None:
    page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:go-to-path', {path: '/'})")
    listing_item(page, "demo_ckpt.tdz").wait_for(timeout=TIMEOUT)


def listing_item(page: Any, name: str) -> Any:
    text = page.locator(".jp-DirListing-itemText", has_text=re.compile(f"^{re.escape(name)}$"))
    return page.locator(".jp-FileBrowser .jp-DirListing-item", has=text)


def context_menu(page: Any, name: str, entry: str, attempts: int = 20) -> Any:
    """Right-click ``name`` in the file browser until the menu shows ``entry``.

    A folder's entry appears once its listing was checked for meta.json, which starts
    when the file browser shows the folder: allow a few tries.
    """
    for _ in range(attempts):
        listing_item(page, name).click(button="right")
        menu = page.locator(".lm-Menu").last
        menu.wait_for(timeout=TIMEOUT)
        item = menu.locator(".lm-Menu-item:visible", has_text=entry)
        if item.count():
            return item
        page.keyboard.press("Escape")
        page.wait_for_timeout(250)
    pytest.fail(f"the context menu of {name} never showed {entry!r}")


def menu_labels(page: Any, name: str) -> list[str]:
    listing_item(page, name).click(button="right")
    menu = page.locator(".lm-Menu").last
    menu.wait_for(timeout=TIMEOUT)
    labels = menu.locator(".lm-Menu-item:visible .lm-Menu-itemLabel").all_inner_texts()
    page.keyboard.press("Escape")
    return labels


def tdview_console(page: Any, label: str) -> Any:
    """The tdview console titled ``label``, once its tree shows the root's children."""
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=label)
    tab.wait_for(timeout=TIMEOUT)
    panel = page.locator(".jp-MainAreaWidget.tdview-console:visible")
    row(panel, "replay", 2).wait_for(timeout=RUN_TIMEOUT_MS)  # the root opens by itself
    return panel


def row(panel: Any, key: str, level: int) -> Any:
    rows = panel.locator(f'.tdview-root [role="treeitem"][aria-level="{level}"]')
    return rows.filter(has=panel.page.get_by_text(key, exact=True))


# Runs code in the current tdview console's prompt, as typing it and Shift+Enter would.
_RUN_IN_CONSOLE = """async (code) => {
    const app = window.jupyterapp;
    const panel = app.shell.currentWidget;
    if (!panel.hasClass('tdview-console')) throw new Error('not a tdview console');
    panel.console.promptCell.model.sharedModel.setSource(code);
    await app.commands.execute('console:run-forced');
}"""


def run_in_console(page: Any, panel: Any, code: str, marker: str) -> str:
    page.evaluate(_RUN_IN_CONSOLE, code)
    output = panel.locator(".jp-CodeConsole-content .jp-OutputArea-output", has_text=marker).last
    output.wait_for(timeout=RUN_TIMEOUT_MS)
    return output.inner_text()


def test_double_click_opens_tdz_without_fetching_it(lab, page, artifacts) -> None:
    requests = ContentRequests(page, "demo_ckpt.tdz")
    open_lab(page, lab)
    listing_item(page, "demo_ckpt.tdz").dblclick()
    panel = tdview_console(page, "tdview: demo_ckpt.tdz")
    assert row(panel, "replay", 2).count() == 1
    code = panel.locator(".jp-CodeConsole-content .jp-InputArea").all_inner_texts()
    assert any('view = TDView("demo_ckpt.tdz")' in text for text in code), code

    # Opening it again reveals the same console.
    listing_item(page, "demo_ckpt.tdz").dblclick()
    page.wait_for_timeout(500)
    assert page.locator(".jp-MainAreaWidget.tdview-console").count() == 1
    page.screenshot(path=str(artifacts / "labextension-tdz-light.png"))
    assert requests.fetched == [], requests.fetched


def test_context_menu_entries_only_where_they_apply(lab, page) -> None:
    (lab.root / "plain_folder").mkdir(exist_ok=True)
    (lab.root / "plain_folder" / "notes.txt").write_text("not a checkpoint\n")
    # a folder of checkpoints: no meta.json of its own, one in a sub-folder
    if not (lab.root / "runs_folder").exists():
        shutil.copytree(lab.root / "demo_ckpt", lab.root / "runs_folder" / "step_1")
    open_lab(page, lab)
    listing_item(page, "plain_folder").wait_for(timeout=TIMEOUT)
    context_menu(page, "demo_ckpt", "Open in tdview")  # the folder check has run
    page.keyboard.press("Escape")
    context_menu(page, "runs_folder", "Open in tdview")  # its sub-folders probed
    page.keyboard.press("Escape")
    assert "Open in tdview" in menu_labels(page, "demo_ckpt.tdz")
    assert "Open in tdview" not in menu_labels(page, "plain_folder")
    # Without an open notebook there is nowhere to insert a cell.
    assert "Insert TDView cell" not in menu_labels(page, "demo_ckpt.tdz")


def test_folder_load_then_use_in_notebook_on_same_kernel(lab, page, artifacts) -> None:
    requests = ContentRequests(page, "demo_ckpt/meta.json")
    open_lab(page, lab)
    context_menu(page, "demo_ckpt", "Open in tdview").click()
    panel = tdview_console(page, "tdview: demo_ckpt")

    # Select a subtree in the view, then load it into a variable in the console.
    row(panel, "replay", 2).locator(".tdview-key").click()
    out = run_in_console(page, panel, "print('SELECTED', view.selected)", "SELECTED")
    assert "('replay',)" in out
    out = run_in_console(
        page,
        panel,
        "replay_td = view.load(view.selected)\n"
        "print('LOADED', type(replay_td).__name__, list(replay_td.batch_size))",
        "LOADED",
    )
    assert "LOADED TensorDict [1000]" in out, out
    page.screenshot(path=str(artifacts / "labextension-folder-light.png"))

    # A notebook on the same kernel sees the variable.
    panel.locator(".tdview-open-notebook button, button.tdview-open-notebook").first.click()
    page.locator(".jp-NotebookPanel:visible .jp-Cell").first.wait_for(timeout=TIMEOUT)
    page.wait_for_function(
        """() => {
            const w = window.jupyterapp.shell.currentWidget;
            const k = w && w.sessionContext && w.sessionContext.session
                && w.sessionContext.session.kernel;
            return k && k.status === 'idle';
        }""",
        timeout=RUN_TIMEOUT_MS,
    )
    same_kernel = page.evaluate("""() => {
        const app = window.jupyterapp;
        const ids = [...app.shell.widgets('main')]
            .map(w => w.sessionContext && w.sessionContext.session
                 && w.sessionContext.session.kernel && w.sessionContext.session.kernel.id)
            .filter(Boolean);
        return ids.length === 2 && ids[0] === ids[1];
    }""")
    assert same_kernel
    page.evaluate(
        """async (code) => {
        const app = window.jupyterapp;
        app.shell.currentWidget.content.activeCell.model.sharedModel.setSource(code);
        await app.commands.execute('notebook:run-cell');
    }""",
        "import torch\n"
        "print('NOTEBOOK', torch.equal(replay_td['observation'], view.value['observation']),\n"
        "      replay_td.batch_size)",
    )
    output = page.locator(".jp-NotebookPanel:visible .jp-OutputArea-output", has_text="NOTEBOOK")
    output.wait_for(timeout=RUN_TIMEOUT_MS)
    assert "NOTEBOOK True torch.Size([1000])" in output.inner_text()
    assert requests.fetched == [], requests.fetched


def test_insert_cell_into_notebook_in_subfolder(lab, page) -> None:
    (lab.root / "sub").mkdir(exist_ok=True)
    name = write_notebook(lab.root / "sub", "insert.ipynb", ["1 + 1"])
    open_lab(page, lab)
    page.evaluate(
        "(path) => window.jupyterapp.commands.execute('docmanager:open', {path})", f"sub/{name}"
    )
    page.locator(".jp-NotebookPanel:visible .jp-Cell").first.wait_for(timeout=TIMEOUT)
    browse_root(page)
    context_menu(page, "demo_ckpt.tdz", "Insert TDView cell").click()
    source = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.activeCell"
        ".model.sharedModel.getSource()"
    )
    # The notebook's kernel runs in sub/: the path is relative to it, quoted as JSON.
    assert source == 'from tdview import TDView\nTDView("../demo_ckpt.tdz")'
    page.wait_for_function(
        """() => {
            const w = window.jupyterapp.shell.currentWidget;
            const k = w && w.sessionContext && w.sessionContext.session
                && w.sessionContext.session.kernel;
            return k && k.status === 'idle';
        }""",
        timeout=RUN_TIMEOUT_MS,
    )
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-cell')")
    notebook = page.locator(".jp-NotebookPanel:visible")
    row(notebook, "replay", 2).wait_for(timeout=RUN_TIMEOUT_MS)


def test_dark_theme_screenshot(lab, page, artifacts) -> None:
    open_lab(page, lab, theme="dark")
    try:
        listing_item(page, "demo_ckpt.tdz").dblclick()
        panel = tdview_console(page, "tdview: demo_ckpt.tdz")
        row(panel, "replay", 2).locator(".tdview-key").click()
        panel.locator(".tdview-details dl").get_by_text("[1000]", exact=True).first.wait_for(
            timeout=TIMEOUT
        )
        background = panel.locator(".tdview-root").evaluate(
            "el => getComputedStyle(el).backgroundColor"
        )
        assert background not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)")
        page.screenshot(path=str(artifacts / "labextension-tdz-dark.png"))
    finally:
        page.evaluate(
            "() => window.jupyterapp.commands.execute('apputils:change-theme',"
            " {theme: 'JupyterLab Light'})"
        )
