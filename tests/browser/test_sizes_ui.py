"""The Sizes view in a real JupyterLab at 1280x720: a trainer's checkpoint (a model and
its AdamW state, ``tests/training_steps.py``) as a treemap whose cells' areas are the
bytes ``tdview.answers.sizes`` gives in the kernel, its totals by section beside it, a
zoom by click and by keyboard, breadcrumbs, Escape back out, labels inside their cells.
Light and dark screenshots."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import expect

from ..training_steps import write_training_steps
from .notebook import RUN_TIMEOUT_MS, open_and_run, write_notebook
from .test_labextension import (
    _extension_installed,  # noqa: F401 - the module's autouse check
    _own_kernels,  # noqa: F401 - the module's autouse cleanup
    context_menu,
    open_lab,
)
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import details, settle_theme

CKPT = "run/step_1000.tdz"


@pytest.fixture
def page_1280(browser: Any) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    yield page
    context.close()


def open_sizes(page: Any, lab: Any, name: str, theme: str) -> Any:
    if not (lab.root / CKPT).exists():
        write_training_steps(lab.root / "run")
    write_notebook(lab.root, name, [f'from tdview import TDView\nv = TDView("{CKPT}")\nv'])
    open_and_run(page, lab, name)
    if theme != "light":
        settle_theme(page, theme)
    widget = page.locator(".tdview-root")
    row(page, "step_1000.tdz", 1).first.locator(".tdview-key").click()
    toggle = details(widget).locator(".tdview-sizes-toggle")
    toggle.wait_for(timeout=TIMEOUT)
    toggle.click()
    assert toggle.get_attribute("aria-pressed") == "true"
    widget.locator(".tdview-sizes-cell").first.wait_for(timeout=TIMEOUT)
    return widget


def kernel_sizes(page: Any, subpath: str = "") -> dict[str, Any]:
    out = run_cell(
        page,
        "import json\nfrom tdview.answers import sizes\n"
        f"r = sizes({CKPT!r}, {subpath!r} or ())\n"
        "print('SIZES', json.dumps({'bytes': r.bytes, 'by_section': r.by_section,"
        " 'entries': {e.key: e.bytes for e in r.entries}}))",
    )
    line = next(x for x in out.splitlines() if x.startswith("SIZES "))
    return json.loads(line[6:])


def kernel_wasted(page: Any) -> int:
    out = run_cell(
        page,
        "from tdview.answers import find_duplicates\n"
        f"print('WASTED', find_duplicates({CKPT!r}).wasted_bytes)",
    )
    return int(next(x for x in out.splitlines() if x.startswith("WASTED "))[7:])


_CELLS = """(map) => { const m = map.getBoundingClientRect();
    return [...map.querySelectorAll('.tdview-sizes-cell')].map((c) => {
        const r = c.getBoundingClientRect();
        const label = c.querySelector('.tdview-sizes-label');
        const l = label ? label.getBoundingClientRect() : null;
        return {name: c.getAttribute('aria-label').split(':')[0], w: r.width, h: r.height,
                inside: r.left >= m.left - 0.5 && r.right <= m.right + 0.5 &&
                        r.top >= m.top - 0.5 && r.bottom <= m.bottom + 0.5,
                label: l && {fits: l.left >= r.left - 0.5 && l.right <= r.right + 0.5 &&
                                    l.top >= r.top - 0.5 && l.bottom <= r.bottom + 0.5}};
    }); }"""


def cells(widget: Any) -> list[dict[str, Any]]:
    return widget.locator(".tdview-sizes-map").evaluate(_CELLS)


def check_cells(widget: Any, truth: dict[str, Any]) -> None:
    """Areas are the kernel's bytes; cells and labels stay inside."""
    found = cells(widget)
    whole = sum(c["w"] * c["h"] for c in found)
    for cell in found:
        assert cell["inside"], cell
        assert cell["label"] is None or cell["label"]["fits"], cell
        if cell["name"] in truth["entries"]:
            share = truth["entries"][cell["name"]] / truth["bytes"]
            assert abs(cell["w"] * cell["h"] / whole - share) < 0.01, (cell, share)


def focused(page: Any) -> str:
    label = page.evaluate("() => (document.activeElement.getAttribute('aria-label') || '')")
    return label.split(":")[0]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_sizes_of_a_trainer_checkpoint(lab, page_1280, artifacts, theme: str) -> None:
    page = page_1280
    widget = open_sizes(page, lab, f"tdview_sizes_{theme}.ipynb", theme)
    sizes = widget.locator(".tdview-sizes")
    labels = sizes.locator(".tdview-sizes-label").all_inner_texts()
    assert labels[:2] == ["optimizer", "model"], labels
    assert "The optimizer's state is 2.0× the model." in sizes.inner_text()
    assert details(widget).locator("dl.tdview-facts").is_hidden()  # the view takes the panel
    sizes.locator(".tdview-sizes-find").click()
    stored_twice = sizes.locator(".tdview-sizes-duplicates")
    stored_twice.wait_for(timeout=TIMEOUT)
    page.screenshot(path=str(artifacts / f"tdview-sizes-1280x720-{theme}.png"))

    # the areas and totals are the kernel's; the bytes stored twice (the optimizer's 0-d
    # steps) are what find_duplicates finds
    truth = kernel_sizes(page)
    check_cells(widget, truth)
    sections = sizes.locator(".tdview-sizes-legend").first.locator("li").all_inner_texts()
    assert [s.split()[0] for s in sections] == list(truth["by_section"]), sections
    wasted = kernel_wasted(page)
    assert wasted > 0
    assert stored_twice.inner_text() == f"{wasted} B in duplicates"
    widget.evaluate("(el) => el.scrollIntoView()")

    # the keyboard: one tab stop, arrows between the cells, Enter zooms, Escape back out
    first = sizes.locator(".tdview-sizes-cell").first
    first.focus()
    assert focused(page) == "optimizer"
    # the model lies below or beside the optimizer, as the map's shape has it
    optimizer_box = first.bounding_box()
    model_box = sizes.locator(".tdview-sizes-cell").nth(1).bounding_box()
    below = model_box["y"] >= optimizer_box["y"] + optimizer_box["height"] - 1
    page.keyboard.press("ArrowDown" if below else "ArrowRight")
    assert focused(page) == "model"
    page.keyboard.press("ArrowUp" if below else "ArrowLeft")
    assert focused(page) == "optimizer"
    page.keyboard.press("ArrowDown" if below else "ArrowRight")
    page.keyboard.press("Enter")
    crumbs = sizes.locator(".tdview-sizes-crumbs")
    crumbs.locator("[aria-current]").get_by_text("model", exact=True).wait_for(timeout=TIMEOUT)
    assert crumbs.inner_text().replace("\n", "") == "step_1000.tdz›model"
    page.wait_for_function(
        "() => document.activeElement.classList.contains('tdview-sizes-cell')", timeout=TIMEOUT
    )
    check_cells(widget, kernel_sizes(page, "model"))
    sizes.locator(".tdview-sizes-cell").first.focus()
    widget.evaluate("(el) => el.scrollIntoView()")
    page.screenshot(path=str(artifacts / f"tdview-sizes-zoomed-1280x720-{theme}.png"))
    page.keyboard.press("Escape")
    crumbs.locator("[aria-current]").get_by_text("step_1000.tdz").wait_for(timeout=TIMEOUT)
    page.wait_for_function(
        "() => (document.activeElement.getAttribute('aria-label') || '').startsWith('model')",
        timeout=TIMEOUT,
    )

    # a click zooms too; the breadcrumb goes back; colour by dtype
    sizes.locator(".tdview-sizes-cell", has_text="optimizer").first.click()
    crumbs.locator("[aria-current]").get_by_text("optimizer").wait_for(timeout=TIMEOUT)
    crumbs.locator("button").first.click()
    crumbs.locator("[aria-current]").get_by_text("step_1000.tdz").wait_for(timeout=TIMEOUT)
    sizes.locator(".tdview-sizes-colour").click()
    legend = sizes.locator(".tdview-sizes-legend-active .tdview-sizes-legend-title")
    assert legend.inner_text() == "By dtype"

    # the whole width gives the map room
    narrow = widget.locator(".tdview-sizes-map").bounding_box()
    details(widget).locator(".tdview-maximize").click()
    page.wait_for_timeout(300)
    wide = widget.locator(".tdview-sizes-map").bounding_box()
    assert wide["width"] > 1.5 * narrow["width"], (narrow, wide)
    check_cells(widget, truth)
    widget.evaluate("(el) => el.scrollIntoView()")
    page.screenshot(path=str(artifacts / f"tdview-sizes-wide-1280x720-{theme}.png"))

    # a double-click selects the cell's node in the tree: the view follows it
    sizes.locator(".tdview-sizes-cell", has_text="model").first.dblclick()
    details(widget).locator(".tdview-details-name").get_by_text("model", exact=True).wait_for(
        timeout=TIMEOUT
    )
    assert row(page, "model", 2).first.get_attribute("aria-selected") == "true"
    # the map zooms to the cell first, then roots itself at the selected node
    expect(crumbs).to_have_text("model", timeout=TIMEOUT)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_sizes_in_the_tdview_panel(lab, page_1280, artifacts, theme: str) -> None:
    """The demo checkpoint opened in a tdview panel: the view fills the panel's height,
    its cells inside the map, the replay buffer a section of its own."""
    page = page_1280
    open_lab(page, lab, theme)
    context_menu(page, "demo_ckpt", "Open in tdview").click()
    panel = page.locator(".jp-MainAreaWidget.tdview-console:visible")
    root = panel.locator('.tdview-root [role="treeitem"][aria-level="1"]').first
    root.wait_for(timeout=RUN_TIMEOUT_MS)
    root.locator(".tdview-key").click()
    toggle = details(panel).locator(".tdview-sizes-toggle")
    toggle.wait_for(timeout=TIMEOUT)
    toggle.click()
    sizes = panel.locator(".tdview-sizes")
    sizes.locator(".tdview-sizes-cell").first.wait_for(timeout=TIMEOUT)
    for cell in cells(panel):
        assert cell["inside"], cell
        assert cell["label"] is None or cell["label"]["fits"], cell
    sections = sizes.locator(".tdview-sizes-legend").first.locator("li").all_inner_texts()
    assert [s.split()[0] for s in sections] == ["optimizer", "model", "buffers", "rest"]
    box = panel.locator(".tdview-sizes-map").bounding_box()
    assert box["height"] > 300, box  # the panel's height, not a fixed box
    panel.locator(".tdview-root").evaluate("(el) => el.scrollIntoView({block: 'end'})")
    page.wait_for_timeout(200)
    page.screenshot(path=str(artifacts / f"tdview-sizes-panel-1280x720-{theme}.png"))
