"""The widget's user-facing features in a real JupyterLab, driven through Chromium:
details with copyable keys, the pickle lock, preview on demand, loading and exporting a
subtree through the form, light and dark screenshots; and the time a checkpoint with
100,000 leaves takes to paint and to open a level of 10,000 children (printed, never
asserted; the rows the page holds, which keep them short, are counted)."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

from .notebook import RUN_TIMEOUT_MS, open_and_run, write_notebook
from .test_widget import TIMEOUT, row, run_cell, set_theme

DEMO = (
    "from tdview._demo import Trajectory  # defines the demo's tensorclass\n"
    "from tdview import TDView\n"
    'v = TDView("demo_ckpt.tdz")\n'
    "v"
)

# Loaded through the UI as `sub`: keys, shapes, one mapping of the archive behind every leaf.
CHECK_SUB = """
import os, torch
leaves = list(sub.values(True, True))
size = os.path.getsize("demo_ckpt.tdz")
print("SUB", json.dumps({
    "type": type(sub).__name__,
    "keys": sorted("/".join(k) if isinstance(k, tuple) else k for k in sub.keys(True, True)),
    "shapes": {k: list(sub[k].shape) for k in ("observation", "action", "reward", "done")},
    "batch": list(sub.batch_size),
    "one_mapping": sub["observation"].untyped_storage().nbytes() == size,
    "all_share": len({t.untyped_storage().data_ptr() for t in leaves}) == 1
                 and all(t.untyped_storage().nbytes() == size for t in leaves),
    "is_value": v.value is sub,
}))
"""

CHECK_TAGS = """
print("TAGS", json.dumps({"type": type(tags).__name__,
                          "ok": tags.data == {"demo", "tdview", "transformer"}}))
"""


def details(widget: Any) -> Any:
    return widget.locator(".tdview-details")


def wait_details(widget: Any, key_tuple: str) -> None:
    """Wait until the details list shows the node whose key tuple is ``key_tuple``."""
    details(widget).locator(".tdview-copy-text").get_by_text(key_tuple, exact=True).wait_for(
        timeout=TIMEOUT
    )


def select(page: Any, widget: Any, key: str, level: int, key_tuple: str) -> None:
    row(page, key, level).first.locator(".tdview-key").click()
    wait_details(widget, key_tuple)


def settle_theme(page: Any, theme: str) -> None:
    """Switch the theme and wait until JupyterLab's splash (shown while it swaps the
    theme's CSS) has gone."""
    set_theme(page, theme)
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=TIMEOUT)
    page.wait_for_timeout(300)  # the splash fades out


def clipboard(page: Any) -> str:
    return page.evaluate("() => navigator.clipboard.readText()")


def marked(text: str, mark: str) -> dict[str, Any]:
    """The JSON printed after ``mark`` in a cell's output."""
    for line in text.splitlines():
        if line.startswith(mark + " "):
            return json.loads(line[len(mark) + 1 :])
    raise AssertionError(f"no {mark} line in the output: {text!r}")


def load_through_form(widget: Any, variable: str) -> None:
    """Type ``variable`` into the load form like a user, then click Load and wait."""
    form = widget.locator(".tdview-load")
    field = form.locator(".tdview-variable")
    field.click()
    field.fill("")
    field.press_sequentially(variable)
    form.locator(".tdview-load-button").click()
    ended = ".tdview-load-status .tdview-load-done, .tdview-load-status [role=alert]"
    form.locator(ended).wait_for(timeout=RUN_TIMEOUT_MS)


def test_details_preview_load_and_export(lab, page, artifacts) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=lab.base_url)
    write_notebook(lab.root, "tdview_ui.ipynb", [DEMO])
    open_and_run(page, lab, "tdview_ui.ipynb")
    widget = page.locator(".tdview-root")
    row(page, "replay", 2).wait_for(timeout=TIMEOUT)

    # Expand by click (twisty) and by keyboard (ArrowRight on the selected row).
    row(page, "replay", 2).locator(".tdview-twisty").click()
    row(page, "observation", 3).first.wait_for(timeout=TIMEOUT)
    row(page, "rollout", 2).locator(".tdview-key").click()
    page.keyboard.press("ArrowRight")
    row(page, "policy_name", 3).wait_for(timeout=TIMEOUT)
    assert row(page, "rollout", 2).get_attribute("aria-expanded") == "true"

    # Filter: the search lists the matching keys; Escape clears it.
    search = widget.locator(".tdview-search-input")
    search.fill("observ")
    results = widget.locator(".tdview-search-result")
    results.filter(has_text="replay/next/observation").wait_for(timeout=TIMEOUT)
    assert widget.locator(".tdview-search-status").inner_text().endswith("matches")
    search.press("Escape")
    assert results.count() == 0

    # Details of `replay`: the key copies as a tuple and as a subpath.
    select(page, widget, "replay", 2, '("replay",)')
    info = details(widget).locator("dl")
    text = info.inner_text()
    assert "TensorDict" in text and "[1000]" in text and "row" in text and "cpu" in text, text
    info.locator(".tdview-copy-key button").click()
    assert clipboard(page) == '("replay",)'
    info.locator(".tdview-copy-subpath button").click()
    assert clipboard(page) == '"replay"'

    # Load `replay` on the CPU, mode r, as `sub`, through the form.
    form = widget.locator(".tdview-load")
    form.locator(".tdview-disclosure").click()
    page.wait_for_function(
        """() => [...document.querySelectorAll('.tdview-root .tdview-device option')]
                 .some(o => o.value === 'meta')""",
        timeout=TIMEOUT,
    )
    form.locator(".tdview-device").select_option("cpu")
    form.locator(".tdview-mode").select_option("r")
    # the subtree's size comes with the details' background totals
    form.locator(".tdview-memory", has_text="free").wait_for(timeout=TIMEOUT)
    # An invalid name is refused before anything is sent.
    form.locator(".tdview-variable").fill("2x")
    assert form.locator(".tdview-load-button").is_disabled()
    assert "not a Python identifier" in form.locator(".tdview-field-problem").inner_text()
    load_through_form(widget, "sub")
    done = form.locator(".tdview-load-done")
    assert "into sub" in done.inner_text(), form.inner_text()
    code = form.locator(".tdview-code").inner_text()
    assert code == (
        'sub = tdview.load_memmap("demo_ckpt.tdz", subpath="replay", device="cpu", mode="r")'
    ), code
    form.locator(".tdview-code-row button").click()
    assert clipboard(page) == code
    details(widget).evaluate("el => { el.scrollTop = el.scrollHeight; }")
    widget.screenshot(path=str(artifacts / "tdview-ui-load-light.png"))
    cells_before = page.locator(".jp-Notebook .jp-CodeCell").count()
    assert cells_before == 1, "typing in the form must not run notebook shortcuts"

    checked = marked(run_cell(page, "import json\n" + CHECK_SUB), "SUB")
    assert checked == {
        "type": "TensorDict",
        "keys": ["action", "done", "next/observation", "observation", "reward"],
        "shapes": {"observation": [1000, 8], "action": [1000], "reward": [1000], "done": [1000]},
        "batch": [1000],
        "one_mapping": True,
        "all_share": True,
        "is_value": True,
    }, checked

    # The pickled `tags`: locked, its size and imports on show; refused until unlocked.
    select(page, widget, "tags", 2, '("tags",)')
    lock = details(widget).locator(".tdview-lock")
    assert lock.get_attribute("data-locked") == "true"
    assert lock.locator(".tdview-lock-badge").text_content() == "Locked"
    lock_text = lock.inner_text()
    assert "56 B of pickle" in lock_text, lock_text
    assert "Imports: no module (builtins only)" in lock_text, lock_text
    assert "allow_pickle" not in form.locator(".tdview-code").inner_text()
    load_through_form(widget, "tags")
    error = form.locator(".tdview-load-status [role=alert]")
    assert "PickleRefusedError" in error.inner_text(), form.inner_text()
    assert "Unlock pickles for this load" in error.inner_text()
    lock.locator(".tdview-unlock-button").click()
    assert lock.get_attribute("data-locked") == "false"
    assert form.locator(".tdview-unlock").is_checked()
    assert (
        form.locator(".tdview-code")
        .inner_text()
        .endswith('subpath="tags", device="cpu", mode="r", allow_pickle=True)')
    )
    load_through_form(widget, "tags")
    assert "into tags" in form.locator(".tdview-load-done").inner_text(), form.inner_text()
    assert "NonTensorData" in form.locator(".tdview-load-summary").inner_text()
    assert marked(run_cell(page, "import json\n" + CHECK_TAGS), "TAGS") == {
        "type": "NonTensorData",
        "ok": True,
    }

    # Preview on demand: nothing is read before the button.
    select(page, widget, "reward", 3, '("replay", "reward")')
    preview = details(widget).locator(".tdview-preview")
    assert preview.locator(".tdview-preview-result").count() == 0
    preview.locator(".tdview-preview-button").click()
    note = preview.locator(".tdview-display-dtype")
    note.wait_for(timeout=TIMEOUT)
    assert note.inner_text() == "shown as float32 (stored as bfloat16)"

    select(page, widget, "observation", 3, '("replay", "observation")')
    assert "zero-copy map" in details(widget).locator("dl").inner_text()
    preview.locator(".tdview-preview-button").click()
    preview.locator(".tdview-preview-table").wait_for(timeout=TIMEOUT)
    stats = preview.locator(".tdview-stats").inner_text()
    for label in ("min", "max", "mean", "std", "NaN", "Inf", "count", "8,000"):
        assert label in stats, stats
    assert preview.locator(".tdview-histogram-bar").count() == 64
    assert preview.locator(".tdview-preview-table tbody tr").count() == 20
    assert preview.locator(".tdview-preview-table thead th").count() == 9  # row + 8 columns
    assert preview.locator(".tdview-display-dtype").count() == 0  # float32 as stored
    # the pager beside the table says the rows shown (the caption, only cut columns)
    assert preview.locator(".tdview-preview-rows").inner_text() == "rows 0–20 of 1,000"

    widget.screenshot(path=str(artifacts / "tdview-ui-light.png"))
    try:
        settle_theme(page, "dark")
        background = widget.evaluate("el => getComputedStyle(el).backgroundColor")
        assert background not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)")
        widget.screenshot(path=str(artifacts / "tdview-ui-dark.png"))
        # The lock box and a load error, in the dark theme too.
        select(page, widget, "tags", 2, '("tags",)')
        load_through_form(widget, "")
        details(widget).evaluate("el => { el.scrollTop = el.scrollHeight; }")
        widget.screenshot(path=str(artifacts / "tdview-ui-pickle-dark.png"))
    finally:
        set_theme(page, "light")


# ---------------------------------------------------------------- 100,000 leaves

GROUPS, PER_GROUP = 10, 10_000
#: Most tree rows the page may hold: 30 rows of 24 px fill a 720-pixel page, 8 more each
#: side (the tree's overscan), and room to spare; 10,010 if every child were drawn.
ROWS_DRAWN = 60

# Runs `code` in a new last cell and times, in the page, the widget's mount and its first
# painted row of children (after the next animation frame).
_TIMED_RUN = """async (code) => {
    const app = window.jupyterapp;
    const notebook = app.shell.currentWidget.content;
    notebook.activeCellIndex = notebook.widgets.length - 1;
    await app.commands.execute('notebook:insert-cell-below');
    notebook.activeCell.model.sharedModel.setSource(code);
    const times = {};
    window.__tdviewTimes = times;
    const firstRow = () => document.querySelector(
        '.tdview-root [role="treeitem"][aria-level="2"]:not([aria-busy]) .tdview-key');
    const observer = new MutationObserver(() => {
        if (times.mount === undefined && document.querySelector('.tdview-root')) {
            times.mount = performance.now() - times.start;
        }
        if (times.rows === undefined && firstRow()) {
            times.rows = performance.now() - times.start;
            observer.disconnect();
            requestAnimationFrame(() => {
                times.dom = document.querySelectorAll('.tdview-root [role="treeitem"]').length;
                times.paint = performance.now() - times.start;
            });
        }
    });
    observer.observe(document.body, {subtree: true, childList: true});
    times.start = performance.now();
    app.commands.execute('notebook:run-cell');
}"""

# Clicks the twisty of a level-2 row and times the first child row's paint.
_TIMED_OPEN = """([key, first]) => new Promise((resolve) => {
    const root = document.querySelector('.tdview-root');
    const find = (level, text) => [...root.querySelectorAll(
        `[role="treeitem"][aria-level="${level}"]:not([aria-busy])`)]
        .find((r) => r.querySelector('.tdview-key')?.textContent === text);
    const twisty = find(2, key).querySelector('.tdview-twisty');
    let start = 0;
    const observer = new MutationObserver(() => {
        if (!find(3, first)) return;
        observer.disconnect();
        const rows = performance.now() - start;
        requestAnimationFrame(() => resolve({rows, paint: performance.now() - start,
            total: root.querySelector('[role="treeitem"][aria-level="3"]')
                .getAttribute('aria-setsize'),
            dom: root.querySelectorAll('[role="treeitem"]').length}));
    });
    observer.observe(root, {subtree: true, childList: true, attributes: true});
    start = performance.now();
    twisty.click();
})"""

# Scrolls the tree to its end and times the paint of the last child row.
_TIMED_SCROLL = """(last) => new Promise((resolve) => {
    const root = document.querySelector('.tdview-root');
    const tree = root.querySelector('[role="tree"]');
    const found = () => [...root.querySelectorAll('[role="treeitem"][aria-level="3"]')]
        .some((r) => r.querySelector('.tdview-key')?.textContent === last);
    const start = performance.now();
    const observer = new MutationObserver(() => {
        if (!found()) return;
        observer.disconnect();
        const rows = performance.now() - start;
        requestAnimationFrame(() => resolve({rows, paint: performance.now() - start,
            dom: root.querySelectorAll('[role="treeitem"]').length}));
    });
    observer.observe(root, {subtree: true, childList: true, characterData: true});
    tree.scrollTop = tree.scrollHeight;
})"""


def write_wide(root: Path) -> None:
    """10 groups of 10,000 one-element leaves, with tensordict's own writer.

    Written a group at a time: one ``memmap()`` of all 100,000 leaves would hold 100,000
    maps at once, past Linux's default ``vm.max_map_count`` (65,530).
    """
    import torch
    from tensordict import TensorDict

    if (root / "meta.json").exists():
        return
    TensorDict({f"g{g}": TensorDict() for g in range(GROUPS)}).memmap(root)
    for g in range(GROUPS):
        leaves = {f"k{i:05d}": torch.zeros(1) for i in range(PER_GROUP)}
        TensorDict(leaves).memmap(root / f"g{g}", existsok=True)
        gc.collect()


def test_wide_checkpoint_timings(lab, page, capsys) -> None:
    """The widget-speed goals (first paint < 1 s, a level of 10,000 open < 300 ms) are
    measured here and printed, not asserted: a time says how fast this machine is. What
    keeps them short is counted and asserted: the rows the page holds, the groups at first
    paint and a window, never the 10,000 children, once a level opens or scrolls to its end.
    """
    write_wide(lab.root / "wide")
    write_notebook(lab.root, "tdview_wide.ipynb", ["from tdview import TDView"])
    open_and_run(page, lab, "tdview_wide.ipynb")
    code = (
        "import time\nt = time.perf_counter()\nw = TDView('wide')\n"
        "print(f'KERNEL {time.perf_counter() - t:.3f}')\nw"
    )
    page.evaluate(_TIMED_RUN, code)
    page.wait_for_function(
        "() => window.__tdviewTimes && window.__tdviewTimes.paint", timeout=RUN_TIMEOUT_MS
    )
    first = page.evaluate("() => window.__tdviewTimes")
    kernel = page.locator(".jp-RenderedText").filter(has_text="KERNEL").inner_text()
    assert row(page, "g0", 2).count() == 1
    assert first["dom"] <= GROUPS + 1  # the groups (and the root): none of their leaves

    opened = page.evaluate(_TIMED_OPEN, ["g3", "k00000"])
    assert opened["total"] == str(PER_GROUP)
    scrolled = page.evaluate(_TIMED_SCROLL, f"k{PER_GROUP - 1:05d}")
    assert opened["dom"] <= ROWS_DRAWN and scrolled["dom"] <= ROWS_DRAWN, (opened, scrolled)

    with capsys.disabled():
        print(
            f"\n[tdview timings, {GROUPS * PER_GROUP:,} leaves in {GROUPS} groups]\n"
            f"  first paint of the tree: {first['paint']:.0f} ms from running the cell"
            f" (kernel builds the view: {kernel.split()[-1]} s; widget mounted at"
            f" {first['mount']:.0f} ms, first row at {first['rows']:.0f} ms;"
            f" {first['paint'] - first['mount']:.0f} ms from mount to paint)\n"
            f"  open a level of {PER_GROUP:,} children: {opened['paint']:.0f} ms"
            f" (rows in the DOM at {opened['rows']:.0f} ms)\n"
            f"  scroll to its last child: {scrolled['paint']:.0f} ms\n"
            f"  rows in the page: {first['dom']}, {opened['dom']} open, {scrolled['dom']} scrolled"
        )
