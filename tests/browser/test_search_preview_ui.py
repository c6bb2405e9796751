"""Issue 15's UI in a real JupyterLab, driven through Chromium: the search by a dotted
state_dict key and by a ``/`` path (true match count, each match's shape, dtype and size,
a click selects the match), the first page shown while the count is still under way,
the tree filtered in place, non-tensor values inline in their rows, a preview slice past
row 50,000 checked against ``tdview.load_memmap`` in the next cell, the histogram's
log-count toggle and a 2-D leaf's heatmap; light and dark screenshots."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .notebook import open_and_run, write_notebook
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import details, settle_theme, wait_details

DEMO = 'from tdview import TDView\nv = TDView("demo_ckpt.tdz")\nv'
BIG_ROWS = 60_000
SLICE = (50_000, 50_010)


def shown_rows(widget: Any) -> Any:
    """The rows of the tree on show (the filtered tree replaces the whole one)."""
    return widget.locator('[role="tree"]:not([hidden]) [role="treeitem"]')


def subpath_text(widget: Any) -> str:
    return details(widget).locator("dd:has(.tdview-copy-subpath) .tdview-copy-text").inner_text()


def demo_paths_matching(root: Path, tail: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every node path of the demo (read with tensordict, not tdview) ending in ``tail``,
    in the checkpoint's depth-first order."""
    from tensordict import TensorDict

    td = TensorDict.load_memmap(root / "demo_ckpt", allow_pickle=True)  # the demo's tags
    found: list[tuple[str, ...]] = []

    def walk(node: Any, prefix: tuple[str, ...]) -> None:
        for key in node.keys():
            path = (*prefix, key)
            if path[-len(tail) :] == tail:
                found.append(path)
            child = node.get(key)
            if isinstance(child, TensorDict):
                walk(child, path)

    walk(td, ())
    return found


def check_search(
    page: Any, widget: Any, root: Path, pattern: str, tail: tuple[str, ...], meta: str
) -> None:
    """Search ``pattern``: the status gives the true count, the leaf matches their shape,
    dtype and size; clicking the first selects it."""
    expected = demo_paths_matching(root, tail)
    assert expected, tail
    search = widget.locator(".tdview-search-input")
    status = widget.locator(".tdview-search-status")
    search.fill("")  # no stale matches of an earlier pattern on show
    page.wait_for_function(
        "(el) => el.textContent === ''", arg=status.element_handle(), timeout=TIMEOUT
    )
    search.fill(pattern)
    count = len(expected)
    want = f"{count} match{'' if count == 1 else 'es'}"
    page.wait_for_function(
        "([el, want]) => el.textContent === want",
        arg=[status.element_handle(), want],
        timeout=TIMEOUT,
    )
    results = widget.locator(".tdview-search-result")
    # a row's path is cut in the middle when it does not fit: whole in its tooltip
    paths = results.locator(".tdview-search-path").evaluate_all(
        "spans => spans.map(s => s.title || s.textContent)"
    )
    shown = sorted(p.replace("\n", "").replace(" / ", "/") for p in paths)
    assert shown == sorted("/".join(p) for p in expected), paths
    leaf = results.filter(has_text="/".join(("model", *tail)))
    # the path wins: what gave way of shape, dtype and size is in the row's tooltip
    tip = leaf.get_attribute("title")
    shown = tip.split("\n")[-1] if tip else leaf.locator(".tdview-search-meta").inner_text()
    assert shown == meta
    leaf.click()
    key = "(" + ", ".join(f'"{k}"' for k in ("model", *tail)) + ")"
    wait_details(widget, key)
    assert subpath_text(widget) == "/".join(("model", *tail))


def bar_heights(preview: Any) -> list[float]:
    return preview.locator(".tdview-histogram-bar").evaluate_all(
        "bars => bars.map(b => Number(b.getAttribute('height')))"
    )


def test_search_filter_and_inline_values(lab, page, artifacts) -> None:
    write_notebook(lab.root, "tdview_search.ipynb", [DEMO])
    open_and_run(page, lab, "tdview_search.ipynb")
    widget = page.locator(".tdview-root")
    row(page, "replay", 2).wait_for(timeout=TIMEOUT)

    # Inline values: non-tensor rows show their value after the key.
    for key, text in (("run_name", '= "tiny-transformer-demo"'), ("step", "= 1200")):
        value = row(page, key, 2).locator(".tdview-inline-value")
        value.wait_for(timeout=TIMEOUT)
        page.wait_for_function(
            "([el, t]) => el.textContent === t", arg=[value.element_handle(), text], timeout=TIMEOUT
        )
    assert row(page, "model", 2).locator(".tdview-inline-value").count() == 0

    # A dotted state_dict key, then a / path.
    check_search(
        page,
        widget,
        lab.root,
        "layers.0.linear1.weight",
        ("layers", "0", "linear1", "weight"),
        "[256, 64] float32 · 65.5 KB",
    )
    check_search(
        page,
        widget,
        lab.root,
        "layers/1/self_attn/in_proj_weight",
        ("layers", "1", "self_attn", "in_proj_weight"),
        "[192, 64] float32 · 49.2 KB",
    )

    # Filter the tree in place: only the matches and their ancestors are left.
    pattern, tail = "layers.0.linear1.weight", ("layers", "0", "linear1", "weight")
    widget.locator(".tdview-search-input").fill(pattern)
    widget.locator(".tdview-search-result").filter(has_text="linear1").first.wait_for(
        timeout=TIMEOUT
    )
    widget.locator(".tdview-search-filter").check()
    matches = demo_paths_matching(lab.root, tail)
    wanted = {"demo_ckpt.tdz"} | {" / ".join(m[:i]) for m in matches for i in range(1, len(m) + 1)}
    page.wait_for_function(
        """(wanted) => {
            const tree = [...document.querySelectorAll('.tdview-root [role="tree"]')]
                .find(t => !t.hidden);
            if (!tree || tree.getAttribute('aria-label') !== 'Matches of the search') {
                return false;
            }
            const titles = [...tree.querySelectorAll('[role="treeitem"]')].map(r => r.title);
            return titles.length === wanted.length && wanted.every(t => titles.includes(t));
        }""",
        arg=sorted(wanted),
        timeout=TIMEOUT,
    )
    titles = set(shown_rows(widget).evaluate_all("rows => rows.map(r => r.title)"))
    assert titles == wanted, titles ^ wanted
    widget.screenshot(path=str(artifacts / "tdview-search-filter-light.png"))
    widget.locator(".tdview-search-filter").uncheck()
    # The whole tree again: rows that neither match nor lead to a match are back.
    # (The selection made before the filter is not asserted: ticking it selects the
    # filtered tree's root, and unticking reveals that root, not the earlier selection.)
    page.wait_for_function(
        """() => {
            const tree = [...document.querySelectorAll('.tdview-root [role="tree"]')]
                .find(t => !t.hidden);
            return tree && tree.getAttribute('aria-label') !== 'Matches of the search'
                && [...tree.querySelectorAll('[role="treeitem"]')]
                    .some(r => r.title === 'model / embed');
        }""",
        timeout=TIMEOUT,
    )
    assert widget.locator('[role="tree"]:not([hidden])').count() == 1

    try:
        settle_theme(page, "dark")
        widget.locator(".tdview-search-filter").check()
        page.wait_for_function(
            """() => [...document.querySelectorAll('.tdview-root [role="tree"]')].some(
                t => !t.hidden && t.getAttribute('aria-label') === 'Matches of the search')""",
            timeout=TIMEOUT,
        )
        widget.screenshot(path=str(artifacts / "tdview-search-filter-dark.png"))
    finally:
        settle_theme(page, "light")


# The hook of the counting test: the kernel's count-only searches (limit 0, which the
# widget asks after the first page) wait until the test sets ``release``, so the count
# comes after the page however fast the kernel is, with no timing in the test.
HOLD_COUNT = """
import threading
from tdview.protocol import _search
release = threading.Event()
_search_result = _search.search_result

def _held(ckpt, pattern, limit, **params):
    if limit == 0:
        release.wait(120)
    return _search_result(ckpt, pattern, limit, **params)

_search.search_result = _held
"""


def test_first_page_then_count(lab, page) -> None:
    """The first page comes with "50+ matches, counting…", then the true number; the
    pages follow it."""
    from tdview.index import Checkpoint, search_page

    with Checkpoint(lab.root / "demo_ckpt.tdz") as ckpt:
        total = search_page(ckpt, "*", limit=0).total
    assert total > 50, total  # more than one page
    write_notebook(lab.root, "tdview_search_count.ipynb", [HOLD_COUNT, DEMO])
    open_and_run(page, lab, "tdview_search_count.ipynb")
    widget = page.locator(".tdview-root")
    row(page, "replay", 2).wait_for(timeout=TIMEOUT)
    status = widget.locator(".tdview-search-status")
    widget.locator(".tdview-search-input").fill("*")
    want = "50+ matches, counting…"
    page.wait_for_function(
        "([el, want]) => el.textContent === want",
        arg=[status.element_handle(), want],
        timeout=TIMEOUT,
    )
    assert widget.locator(".tdview-search-result").count() == 50
    run_cell(page, "release.set()")
    want = f"matches 1–50 of {total}"
    page.wait_for_function(
        "([el, want]) => el.textContent === want",
        arg=[status.element_handle(), want],
        timeout=TIMEOUT,
    )
    widget.locator(".tdview-search-next").click()
    last = min(total, 100)
    want = f"matches 51–{last} of {total}"
    page.wait_for_function(
        "([el, want]) => el.textContent === want",
        arg=[status.element_handle(), want],
        timeout=TIMEOUT,
    )
    assert widget.locator(".tdview-search-result").count() == last - 50


def write_big(root: Path) -> None:
    import torch
    from tensordict import TensorDict

    if (root / "meta.json").exists():
        return
    gen = torch.Generator().manual_seed(15)
    TensorDict(
        {
            "observation": torch.randn(BIG_ROWS, 8, generator=gen),
            "action": torch.randint(0, 4, (BIG_ROWS,), generator=gen),
        },
        [BIG_ROWS],
    ).memmap(root)


CHECK_ROWS = """
import json, tdview
big = tdview.load_memmap("big")
print("ROWS", json.dumps(big["observation"][{a}:{b}].tolist()))
"""


# Where the view and the cell after it are, in the notebook's scrolled content (px).
_CELL_BOXES = """() => {
    const scroller = document.querySelector('.jp-WindowedPanel-outer');
    const view = document.querySelector('.tdview-root').getBoundingClientRect();
    const next = document.querySelectorAll('.jp-Notebook .jp-Cell')[1].getBoundingClientRect();
    const tree = document.querySelector('.tdview-tree').getBoundingClientRect();
    return {view: view.height, next_top: next.top + scroller.scrollTop, tree: tree.height};
}"""

# The mean of the heatmap canvas's drawn pixels (0 black to 255 white).
_CANVAS_BRIGHTNESS = """(c) => {
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let sum = 0, n = 0;
    for (let i = 0; i < data.length; i += 4) {
        if (data[i + 3]) { sum += data[i] + data[i + 1] + data[i + 2]; n += 3; }
    }
    return n ? sum / n : null;
}"""


def test_slice_log_counts_and_heatmap(lab, page, artifacts, tmp_path) -> None:
    write_big(lab.root / "big")
    write_notebook(
        lab.root,
        "tdview_slice.ipynb",
        ['from tdview import TDView\nv = TDView("big")\nv', '"the cell after"'],
    )
    open_and_run(page, lab, "tdview_slice.ipynb")
    widget = page.locator(".tdview-root")
    row(page, "observation", 2).locator(".tdview-key").click()
    wait_details(widget, '("observation",)')
    before = page.evaluate(_CELL_BOXES)
    assert before["tree"] == 360, before  # a cell keeps the compact height
    preview = details(widget).locator(".tdview-preview")
    preview.locator(".tdview-preview-button").click()
    preview.locator(".tdview-preview-table").wait_for(timeout=TIMEOUT)
    # The preview scrolls inside the details: the view and the cell below stay put.
    opened = page.evaluate(_CELL_BOXES)
    assert abs(opened["view"] - before["view"]) <= 1, (before, opened)
    assert abs(opened["next_top"] - before["next_top"]) <= 2, (before, opened)

    # A slice past row 50,000: row labels from 50,000, values as load_memmap reads them.
    index = preview.locator(".tdview-preview-index")
    index.fill(f"[{SLICE[0]}:{SLICE[1]}]")
    index.press("Enter")
    labels = preview.locator(".tdview-preview-table tbody th.tdview-index")
    page.wait_for_function(
        "(first) => { const th = document.querySelector("
        "'.tdview-root .tdview-preview-table tbody th.tdview-index');"
        " return th && th.textContent === first; }",
        arg=str(SLICE[0]),
        timeout=TIMEOUT,
    )
    assert labels.all_inner_texts() == [str(i) for i in range(*SLICE)]
    cells = preview.locator(".tdview-preview-table tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.querySelectorAll('td')].map(td => td.textContent))"
    )
    caption = preview.locator(".tdview-preview-caption").inner_text()
    assert caption == f"rows 50,000–50,010 of {BIG_ROWS:,}", caption
    widget.screenshot(path=str(artifacts / "tdview-slice-light.png"))

    out = run_cell(page, CHECK_ROWS.format(a=SLICE[0], b=SLICE[1]))
    line = next(x for x in out.splitlines() if x.startswith("ROWS "))
    truth = json.loads(line[5:])
    assert len(cells) == len(truth) == SLICE[1] - SLICE[0]
    for shown, real in zip(cells, truth, strict=True):
        assert len(shown) == len(real) == 8
        for text, value in zip(shown, real, strict=True):
            assert math.isclose(float(text), value, rel_tol=1e-5, abs_tol=1e-6), (text, value)

    # Log counts: the same bins, other bar heights, and the axis says so.
    linear = bar_heights(preview)
    assert len(linear) == 64
    assert "log scale" not in preview.locator(".tdview-histogram-max").inner_text()
    preview.locator(".tdview-preview-log").check()
    preview.locator(".tdview-histogram-max", has_text="log scale").wait_for(timeout=TIMEOUT)
    logged = bar_heights(preview)
    assert len(logged) == 64 and logged != linear
    assert max(logged) == max(linear)  # the tallest bar stays full height
    assert sum(logged) > sum(linear)  # the short bars grow

    # Heatmap of the 2-D leaf, of the rows shown.
    preview.locator(".tdview-preview-heatmap").check()
    canvas = preview.locator(".tdview-heatmap-canvas")
    canvas.wait_for(timeout=TIMEOUT)
    size = canvas.evaluate("c => [c.width, c.height]")
    assert size[0] > 0 and size[1] > 0, size
    assert labels.first.inner_text() == str(SLICE[0])  # the slice is kept
    canvas.scroll_into_view_if_needed()
    widget.screenshot(path=str(artifacts / "tdview-heatmap-light.png"))
    shown = page.evaluate(_CELL_BOXES)
    assert abs(shown["next_top"] - before["next_top"]) <= 2, (before, shown)
    light = canvas.evaluate(_CANVAS_BRIGHTNESS)
    assert light is not None and light > 150, light  # from white to the accent
    canvas.screenshot(path=str(tmp_path / "heatmap-light.png"))
    try:
        # The theme's switch redraws the canvas with the dark theme's colours.
        settle_theme(page, "dark")
        canvas.wait_for(timeout=TIMEOUT)
        page.wait_for_function(
            f"(c) => ({_CANVAS_BRIGHTNESS})(c) < {light} - 60",
            arg=canvas.element_handle(),
            timeout=TIMEOUT,
        )
        canvas.scroll_into_view_if_needed()
        widget.screenshot(path=str(artifacts / "tdview-heatmap-dark.png"))
        canvas.screenshot(path=str(tmp_path / "heatmap-dark.png"))
    finally:
        settle_theme(page, "light")
