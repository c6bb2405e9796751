"""Issue 32's "room to look" in a real JupyterLab at 1280x720 and 1440x900 (the file browser
open): a preview of a [256, 64] float32 weight shows its statistics, histogram and first table
rows without scrolling inside the widget once the facts are folded; the details' one-line
summary (and the row's tooltip) against torch's own statistics; the whole width; the
height set by the handle and by ``TDView.height``; "Stored in" wrapping at its slashes
with no offset for a directory leaf, Copy buttons on their rows, a pickled value's size
at first paint. Light and dark screenshots at 1280x720 and 1440x900."""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .notebook import open_and_run, write_notebook
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import details, settle_theme

MODEL = "room_model.tdz"
MODEL_DIR = "room_model"
SIZES = {"1280x720": (1280, 720), "1440x900": (1440, 900)}
SUMMARY = re.compile(r"^f32\[256,64\] n=16,384 65\.5 KB x∈\[(\S+), (\S+)\] μ=(\S+) σ=(\S+)$")


def write_model(root: Path) -> None:
    """A small MLP saved by tensordict (``from_module``): ``0/weight`` is [256, 64]."""
    import torch
    from tensordict import TensorDict

    torch.manual_seed(32)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    with torch.no_grad():
        model[0].weight.uniform_(-0.125, 0.125)
    params = TensorDict.from_module(model).data.clone()
    params["note"] = {"a", "set"}  # a pickled value (not JSON)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not (root / MODEL).exists():
            params.save(str(root / MODEL))
        if not (root / MODEL_DIR).exists():
            params.memmap(root / MODEL_DIR)


@pytest.fixture
def small_page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    width, height = SIZES[getattr(request, "param", "1280x720")]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    yield page
    context.close()


def open_model(page: Any, lab: Any, name: str, source: str, theme: str = "light") -> Any:
    write_model(lab.root)
    write_notebook(lab.root, name, [f'from tdview import TDView\nv = TDView("{source}")\nv'])
    open_and_run(page, lab, name)
    if theme != "light":
        settle_theme(page, theme)
    # the file browser is open beside the notebook, as a new user has it
    page.locator(".jp-FileBrowser").first.wait_for(state="visible", timeout=TIMEOUT)
    widget = page.locator(".tdview-root")
    row(page, "0", 2).wait_for(timeout=TIMEOUT)
    return widget


def select_weight(page: Any, widget: Any) -> None:
    row(page, "0", 2).locator(".tdview-twisty").click()
    row(page, "weight", 3).first.locator(".tdview-key").click()
    details(widget).locator(".tdview-details-name").get_by_text("weight", exact=True).wait_for(
        timeout=TIMEOUT
    )


def open_preview(widget: Any) -> Any:
    preview = details(widget).locator(".tdview-preview")
    preview.locator(".tdview-preview-button").click()
    preview.locator(".tdview-preview-table tbody tr").first.wait_for(timeout=TIMEOUT)
    return preview


_BOXES = """(root) => {
    const box = (el) => { const r = el.getBoundingClientRect();
                          return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
    const d = root.querySelector('.tdview-details');
    const rows = [...root.querySelectorAll('.tdview-preview-table tbody tr')].slice(0, 3);
    const status = document.querySelector('#jp-main-statusbar');
    return {
        details: box(d), scrollTop: d.scrollTop, view: box(root),
        stats: box(root.querySelector('.tdview-stats')),
        histogram: box(root.querySelector('.tdview-histogram svg')),
        head: box(root.querySelector('.tdview-preview-table thead')),
        rows: rows.map(box),
        viewport: {bottom: status ? status.getBoundingClientRect().top : innerHeight,
                   right: innerWidth},
    };
}"""


def assert_seen_without_scrolling(widget: Any) -> dict[str, Any]:
    """Statistics, histogram, the table's head and first 3 rows lie inside the details
    panel (not scrolled) and inside the visible page."""
    boxes = widget.evaluate(_BOXES)
    assert boxes["scrollTop"] == 0, boxes
    assert len(boxes["rows"]) == 3, boxes
    inner, page = boxes["details"], boxes["viewport"]
    for name in ("stats", "histogram", "head"):
        b = boxes[name]
        assert b["bottom"] - b["top"] > 0, (name, boxes)
        assert inner["top"] <= b["top"] and b["bottom"] <= inner["bottom"] + 0.5, (name, boxes)
        # (the table scrolls sideways inside its box: its left end is what shows)
        assert b["bottom"] <= page["bottom"] and b["left"] < page["right"], (name, boxes)
    for r in boxes["rows"]:
        assert inner["top"] <= r["top"] and r["bottom"] <= inner["bottom"] + 0.5, boxes
        assert r["bottom"] <= page["bottom"], boxes
    return boxes


# the table's columns seen whole without scrolling it sideways
_SHOWN_COLUMNS = """(box) => { const right = box.getBoundingClientRect().right;
    return [...box.querySelectorAll('thead th')]
        .filter(th => th.getBoundingClientRect().right <= right).length; }"""


def weight_stats(page: Any) -> dict[str, float]:
    out = run_cell(
        page,
        "import json, torch\n"
        f"w = TDView('{MODEL}').checkpoint.load_leaf(('0', 'weight')).float()\n"
        "print('STATS', json.dumps({'min': w.min().item(), 'max': w.max().item(),"
        " 'mean': w.mean().item(), 'std': w.std().item()}))",
    )
    line = next(x for x in out.splitlines() if x.startswith("STATS "))
    return json.loads(line[6:])


def check_summary(text: str, truth: dict[str, float]) -> None:
    """The summary's numbers are torch's, to the digits it shows."""
    found = SUMMARY.match(text)
    assert found, text
    lo, hi, mean, std = (float(g) for g in found.groups())
    assert math.isclose(lo, truth["min"], abs_tol=5e-4), (text, truth)
    assert math.isclose(hi, truth["max"], abs_tol=5e-4), (text, truth)
    assert math.isclose(mean, truth["mean"], rel_tol=0.05, abs_tol=5e-6), (text, truth)
    assert math.isclose(std, truth["std"], abs_tol=5e-4), (text, truth)


@pytest.mark.parametrize("small_page", ["1280x720", "1440x900"], indirect=True)
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_preview_fits_a_notebook_cell(lab, small_page, artifacts, theme: str, request) -> None:
    page = small_page
    size = request.node.callspec.params["small_page"]
    widget = open_model(page, lab, f"tdview_room_{theme}_{size}.ipynb", MODEL, theme)
    select_weight(page, widget)
    head = details(widget).locator(".tdview-summary")
    assert head.inner_text() == "f32[256,64] n=16,384 65.5 KB"  # no statistics yet
    toggle = details(widget).locator(".tdview-facts-toggle")
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "false"
    assert details(widget).locator("dl.tdview-facts").is_hidden()
    open_preview(widget)
    page.wait_for_function(
        "(el) => el.textContent.includes('x∈')", arg=head.element_handle(), timeout=TIMEOUT
    )
    page.screenshot(path=str(artifacts / f"tdview-room-{size}-{theme}.png"))
    assert_seen_without_scrolling(widget)

    # the summary is torch's statistics; the weight's row says it as its tooltip
    summary = head.inner_text()
    check_summary(summary, weight_stats(page))
    title = row(page, "weight", 3).first.get_attribute("title") or ""
    assert title.split("\n") == ["0 / weight", summary], title

    # the facts stay folded on the next leaf; the preview follows it
    row(page, "bias", 3).first.locator(".tdview-key").click()
    page.wait_for_function(
        "(el) => el.textContent.startsWith('f32[256]')",
        arg=head.element_handle(),
        timeout=TIMEOUT,
    )
    assert details(widget).locator("dl.tdview-facts").is_hidden()
    assert toggle.get_attribute("aria-expanded") == "false"


@pytest.mark.parametrize("small_page", ["1280x720", "1440x900"], indirect=True)
def test_whole_width_and_height(lab, small_page, artifacts, request) -> None:
    page = small_page
    size = request.node.callspec.params["small_page"]
    widget = open_model(page, lab, f"tdview_room_wide_{size}.ipynb", MODEL)
    select_weight(page, widget)
    open_preview(widget)
    table = widget.locator(".tdview-preview-table")
    split_width = table.bounding_box()["width"]
    split_columns = table.evaluate(_SHOWN_COLUMNS)

    # the whole width: the details lie over the tree's column, the table gets wider
    widen = details(widget).locator(".tdview-maximize")
    widen.click()
    assert widen.get_attribute("aria-pressed") == "true"
    body = widget.locator(".tdview-body").bounding_box()
    panel = details(widget).bounding_box()
    assert panel["width"] >= body["width"] - 2, (panel, body)
    assert (
        widget.locator(".tdview-browser").evaluate("el => getComputedStyle(el).visibility")
        == "hidden"
    )
    assert table.bounding_box()["width"] > 1.5 * split_width
    assert table.evaluate(_SHOWN_COLUMNS) > 1.5 * split_columns  # seen without scrolling
    for theme in ("light", "dark"):
        settle_theme(page, theme)
        page.screenshot(path=str(artifacts / f"tdview-room-wide-{size}-{theme}.png"))
    settle_theme(page, "light")
    widen.click()
    assert widen.get_attribute("aria-pressed") == "false"
    assert widget.locator(".tdview-browser").is_visible()

    # the handle below the view sets its height, and the kernel's trait keeps it
    handle = page.locator(".tdview-resize-handle")
    before = widget.bounding_box()
    grip = handle.bounding_box()
    x, y = grip["x"] + grip["width"] / 2, grip["y"] + grip["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x, y + 60, steps=4)
    page.mouse.move(x, y + 120, steps=4)
    page.mouse.up()
    after = widget.bounding_box()
    assert abs(after["height"] - (before["height"] + 120)) <= 2, (before, after)
    out = run_cell(page, "print('HEIGHT', v.height)")
    assert f"HEIGHT {round(after['height'])}" in out, (out, after)
    # and the trait set from Python sizes the view (the tree and the details follow)
    run_cell(page, "v.height = 300")
    page.wait_for_function(
        "() => Math.round(document.querySelector('.tdview-root').getBoundingClientRect()"
        ".height) === 300",
        timeout=TIMEOUT,
    )
    tree = widget.locator('[role="tree"]').bounding_box()
    assert tree["y"] + tree["height"] <= widget.bounding_box()["y"] + 300 + 1
    page.screenshot(path=str(artifacts / f"tdview-room-height-{size}-light.png"))


_WRAP_BREAKS = """(span) => {
    // the characters after which the text goes on to a new line
    const text = span.textContent; const breaks = [];
    const range = document.createRange();
    let walker = document.createTreeWalker(span, NodeFilter.SHOW_TEXT), node, last = null, at = 0;
    while ((node = walker.nextNode())) {
        for (let i = 0; i < node.length; i++, at++) {
            range.setStart(node, i); range.setEnd(node, i + 1);
            const top = Math.round(range.getBoundingClientRect().top);
            if (last !== null && top > last + 2) breaks.push(text[at - 1]);
            last = top;
        }
    }
    return breaks;
}"""


# The root's size as tensordict reads it: its tensors' bytes and its pickle file's.
ROOT_SIZE = f"""
import os, torch
from tensordict import TensorDict
from tdview._units import human_bytes
td = TensorDict.load_memmap("{MODEL_DIR}", allow_pickle=True)
n = sum(t.numel() * t.element_size() for t in td.values(True, True)
        if isinstance(t, torch.Tensor))
n += os.path.getsize("{MODEL_DIR}/note/other.pickle")
print("ROOT", human_bytes(n), n)
"""


def fact(widget: Any, label: str) -> Any:
    return details(widget).locator(f"dt:text-is('{label}') + dd")


def test_small_things(lab, small_page, artifacts) -> None:
    page = small_page
    widget = open_model(page, lab, "tdview_room_small.ipynb", MODEL_DIR)
    # a pickled value shows its size at first paint: its file's, as the widget says sizes
    note = row(page, "note", 2)
    size = note.locator(".tdview-bytes")
    size.wait_for(timeout=TIMEOUT)
    out = run_cell(
        page,
        "import os\nfrom tdview._units import human_bytes\n"
        f"print('SIZE', human_bytes(os.path.getsize('{MODEL_DIR}/note/other.pickle')))",
    )
    assert f"SIZE {size.inner_text()}" in out, (out, size.inner_text())

    # a directory leaf: where it is stored, wrapped at its slashes only, and no "@ 0"
    select_weight(page, widget)
    stored = fact(widget, "Stored in")
    text = stored.inner_text().replace("\n", "")
    assert text.endswith(f"{MODEL_DIR}/0/weight.memmap") and "@" not in text, text
    breaks = stored.locator(".tdview-path-text").evaluate(_WRAP_BREAKS)
    assert breaks and set(breaks) == {"/"}, breaks  # it wraps, and only after a slash

    # each Copy button sits on the row of the key it copies
    for label in ("Key", "Subpath"):
        term = details(widget).locator(f"dt:text-is('{label}')").bounding_box()
        button = fact(widget, label).locator(".tdview-copy-button").bounding_box()
        middle = button["y"] + button["height"] / 2
        assert term["y"] <= middle <= term["y"] + term["height"], (label, term, button)
        assert button["height"] <= term["height"] + 1, (label, term, button)
    for theme in ("light", "dark"):
        settle_theme(page, theme)
        details(widget).screenshot(path=str(artifacts / f"tdview-room-facts-{theme}.png"))

    # the root's details give its size (its tensors' bytes and its pickle's), in the head too
    row(page, MODEL_DIR, 1).locator(".tdview-key").click()
    size_fact = fact(widget, "Size")
    size_fact.wait_for(timeout=TIMEOUT)
    out = run_cell(page, ROOT_SIZE)
    line = next(x for x in out.splitlines() if x.startswith("ROOT "))
    shown, total = line[5:].rsplit(" ", 1)
    expected = f"{shown} ({int(total):,} B) in 4 tensors and 1 pickled value"
    assert size_fact.inner_text() == expected
    summary = details(widget).locator(".tdview-summary").inner_text()
    assert summary == f"TensorDict · {shown} in 4 tensors and 1 pickled value", summary
