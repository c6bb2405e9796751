"""TDView in a real JupyterLab, driven through Chromium: the tree renders, expands by
click and by keyboard, shows details, finds keys, syncs the selection to Python, and a
load binds a variable that the next cell uses."""

from __future__ import annotations

from typing import Any

import pytest

from .notebook import RUN_TIMEOUT_MS, open_and_run, write_notebook

TIMEOUT = 60_000
OPEN = 'from tdview import TDView\nv = TDView("demo_ckpt.tdz")\nv'

# Appends a code cell at the end of the open notebook, sets its source and runs it.
_APPEND_AND_RUN = """async (code) => {
    const app = window.jupyterapp;
    const notebook = app.shell.currentWidget.content;
    notebook.activeCellIndex = notebook.widgets.length - 1;
    await app.commands.execute('notebook:insert-cell-below');
    notebook.activeCell.model.sharedModel.setSource(code);
    await app.commands.execute('notebook:run-cell');
    return notebook.widgets.length;
}"""


def run_cell(page: Any, code: str) -> str:
    """Run ``code`` in a new last cell; return the text of its output."""
    count = page.evaluate(_APPEND_AND_RUN, code)
    cell = page.locator(".jp-Notebook .jp-CodeCell").nth(count - 1)
    page.wait_for_function(
        """(n) => {
            const cells = document.querySelectorAll('.jp-Notebook .jp-CodeCell');
            const prompt = cells[n - 1] && cells[n - 1].querySelector('.jp-InputPrompt');
            return prompt && /\\[\\d+\\]/.test(prompt.textContent);
        }""",
        arg=count,
        timeout=RUN_TIMEOUT_MS,
    )
    return cell.locator(".jp-OutputArea").inner_text()


def row(page: Any, key: str, level: int) -> Any:
    """The tree row of ``key`` at aria-level ``level`` (the root is level 1)."""
    rows = page.locator(f'.tdview-root [role="treeitem"][aria-level="{level}"]')
    return rows.filter(has=page.get_by_text(key, exact=True))


def set_theme(page: Any, theme: str) -> None:
    """Switch JupyterLab's theme once its command exists (it is registered late)."""
    page.wait_for_function(
        "() => window.jupyterapp.commands.hasCommand('apputils:change-theme')", timeout=TIMEOUT
    )
    name = "JupyterLab Dark" if theme == "dark" else "JupyterLab Light"
    page.evaluate(
        "(theme) => window.jupyterapp.commands.execute('apputils:change-theme', {theme})", name
    )
    light = "false" if theme == "dark" else "true"
    page.wait_for_function(
        "(light) => document.body.dataset.jpThemeLight === light", arg=light, timeout=TIMEOUT
    )


def open_widget(page: Any, lab: Any, name: str, theme: str = "light") -> Any:
    write_notebook(lab.root, name, [OPEN])
    open_and_run(page, lab, name)
    if theme != "light":
        set_theme(page, theme)
    widget = page.locator(".tdview-root")
    widget.wait_for(timeout=TIMEOUT)
    row(page, "replay", 2).wait_for(timeout=TIMEOUT)  # the root opens by itself
    return widget


def test_tree_details_search_and_load(lab, page, artifacts) -> None:
    widget = open_widget(page, lab, "tdview_widget.ipynb")
    assert widget.locator('[role="tree"]').count() == 1
    assert row(page, "demo_ckpt.tdz", 1).count() == 1
    assert row(page, "model", 2).get_attribute("aria-expanded") == "false"

    # Expand by clicking the twisty.
    replay = row(page, "replay", 2)
    replay.locator(".tdview-twisty").click()
    row(page, "observation", 3).first.wait_for(timeout=TIMEOUT)
    assert replay.get_attribute("aria-expanded") == "true"
    assert "[1000] bfloat16" in row(page, "reward", 3).inner_text()

    # Expand by keyboard: select a row, then ArrowRight.
    row(page, "episodes", 2).locator(".tdview-key").click()
    page.keyboard.press("ArrowRight")
    row(page, "2", 3).wait_for(timeout=TIMEOUT)
    assert row(page, "episodes", 2).get_attribute("aria-expanded") == "true"
    page.keyboard.press("ArrowDown")  # "0", the first episode
    assert row(page, "0", 3).get_attribute("aria-selected") == "true"

    # Select a leaf and see its details.
    row(page, "reward", 3).locator(".tdview-key").click()
    details = widget.locator(".tdview-details dl")
    details.get_by_text("bfloat16", exact=True).wait_for(timeout=TIMEOUT)
    text = details.inner_text()
    assert "replay / reward" in text and "map" in text
    page.screenshot(path=str(artifacts / "tdview-details-light.png"))

    # Search reveals a match in a closed subtree.
    search = widget.locator(".tdview-search-input")
    search.fill("policy")
    result = widget.locator(".tdview-search-result").filter(has_text="policy_name")
    result.click(timeout=TIMEOUT)
    selected = row(page, "policy_name", 3)
    selected.wait_for(timeout=TIMEOUT)
    page.wait_for_function(
        """() => [...document.querySelectorAll('.tdview-root [aria-selected="true"]')]
                 .some(r => r.textContent.includes('policy_name'))""",
        timeout=TIMEOUT,
    )
    assert row(page, "rollout", 2).get_attribute("aria-expanded") == "true"
    widget.locator(".tdview-details").get_by_text("epsilon-greedy").first.wait_for(timeout=TIMEOUT)
    widget.screenshot(path=str(artifacts / "tdview-light.png"))

    # The selection reached Python.
    assert "('rollout', 'policy_name')" in run_cell(page, "print(v.selected)")

    # Select a subtree in the UI and load it from Python.
    row(page, "replay", 2).locator(".tdview-key").click()
    out = run_cell(page, "print(v.selected)")
    assert "('replay',)" in out
    check = run_selected_load(page)
    assert "LOADED TensorDict [1000] True" in check, check


def run_selected_load(page: Any) -> str:
    """Load the selection through the widget's protocol handler with a variable name (as
    the view's load action does), then use the variable in a new cell."""
    load = (
        "import torch\n"
        "msg = {'kind': 'tdview:request', 'v': 1, 'id': 1, 'method': 'load',\n"
        "       'params': {'path': list(v.selected), 'device': 'cpu', 'mode': 'r',\n"
        "                  'allow_pickle': False, 'variable': 'replay_td'}}\n"
        "v._on_custom_msg(v, msg, [])\n"
        "assert v._dispatcher.drain(60)\n"
    )
    run_cell(page, load)
    use = (
        "from tensordict import TensorDict\n"
        "ref = TensorDict.load_memmap('demo_ckpt/replay')\n"
        "same = all(torch.equal(replay_td.get(k), ref.get(k))\n"
        "           for k in ref.keys(True, True))\n"
        "print('LOADED', type(replay_td).__name__, list(replay_td.batch_size),\n"
        "      same and v.value is replay_td)"
    )
    return run_cell(page, use)


@pytest.mark.parametrize("theme", ["dark"])
def test_dark_theme_screenshot(lab, page, artifacts, theme: str) -> None:
    widget = open_widget(page, lab, "tdview_dark.ipynb", theme)
    try:
        row(page, "replay", 2).locator(".tdview-twisty").click()
        row(page, "reward", 3).locator(".tdview-key").click()
        widget.locator(".tdview-details dl").get_by_text("bfloat16", exact=True).wait_for(
            timeout=TIMEOUT
        )
        background = widget.evaluate("el => getComputedStyle(el).backgroundColor")
        assert background not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)")
        widget.screenshot(path=str(artifacts / f"tdview-{theme}.png"))
    finally:
        set_theme(page, "light")  # the theme is saved in the server's settings
