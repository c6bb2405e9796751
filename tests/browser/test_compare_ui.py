"""The compare view (``TDView(a, compare=b)``) in a real JupyterLab, driven through
Chromium, on a small model before and after one optimizer step with one key added: the
differences marked in one tree, stepped through from the keyboard, compared again by
bytes and by values, previewed side by side, one side loaded into the kernel; light and
dark screenshots. And "Compare in tdview" in the file browser, for two checkpoints."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from .notebook import RUN_TIMEOUT_MS, open_and_run, write_notebook
from .test_labextension import (  # noqa: F401 - the fixtures apply here too
    _extension_installed,
    _own_kernels,
    context_menu,
    listing_item,
    menu_labels,
    open_lab,
)
from .test_widget import TIMEOUT, run_cell
from .test_widget_ui import settle_theme

BEFORE, AFTER = "cmp_step_1", "cmp_step_2.tdz"
OPEN = f'from tdview import TDView\nv = TDView("{BEFORE}", compare="{AFTER}")\nv'


def _checkpoint(model: Any, optimizer: Any) -> Any:
    """The model's parameters and the optimizer's state, nested by module."""
    from tensordict import TensorDict

    td = TensorDict({}, [])
    for name, value in model.state_dict().items():
        td[tuple(name.split("."))] = value.detach().clone()
    for index, state in optimizer.state_dict()["state"].items():
        for name, value in state.items():
            td["optim", "state", str(index), name] = value.detach().clone()
    return td


@pytest.fixture(scope="module")
def steps(lab: Any) -> tuple[Path, Path]:
    """A model after one optimizer step (a directory) and after the next one (an
    archive), which adds one key, ``grad_scale``."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(32, 8), torch.randn(32, 4)

    def step() -> None:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()

    step()
    before = _checkpoint(model, optimizer)
    step()
    after = _checkpoint(model, optimizer)
    after["grad_scale"] = torch.tensor(1024.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not (lab.root / BEFORE).exists():
            before.memmap(lab.root / BEFORE)
        if not (lab.root / AFTER).exists():
            after.save(str(lab.root / AFTER))
    return lab.root / BEFORE, lab.root / AFTER


def selected_row(widget: Any) -> Any:
    return widget.locator('[role="treeitem"][aria-selected="true"]')


def selected_path(widget: Any) -> str:
    """The path of the selected row, as its title says it ("a / b: verdict")."""
    title = selected_row(widget).get_attribute("title") or ""
    return title.split(": ", 1)[0]


def press_and_wait(page: Any, widget: Any, key: str) -> str:
    """Press ``key`` in the tree; wait until the selection or the status moved on."""
    before = selected_path(widget)
    status = widget.locator(".tdview-compare-status")
    page.keyboard.press(key)
    page.wait_for_function(
        """([before]) => {
            const root = document.querySelector('.tdview-compare');
            const row = root.querySelector('[role="treeitem"][aria-selected="true"]');
            const path = row ? (row.getAttribute('title') || '').split(': ')[0] : '';
            const status = root.querySelector('.tdview-compare-status').textContent;
            return path !== before || status !== '';
        }""",
        arg=[before],
        timeout=TIMEOUT,
    )
    return "" if status.inner_text() else selected_path(widget)


def marked(text: str, mark: str) -> dict[str, Any]:
    for line in text.splitlines():
        if line.startswith(mark + " "):
            return json.loads(line[len(mark) + 1 :])
    raise AssertionError(f"no {mark} line in the output: {text!r}")


def test_compare_step_through_refine_preview_load(lab, page, artifacts, steps) -> None:
    write_notebook(lab.root, "compare_ui.ipynb", [OPEN])
    open_and_run(page, lab, "compare_ui.ipynb")
    widget = page.locator(".tdview-root")
    compare = widget.locator(".tdview-compare")
    compare.wait_for(timeout=TIMEOUT)
    header = compare.locator(".tdview-compare-header")
    assert BEFORE in header.inner_text() and AFTER in header.inner_text()
    assert "metadata (shapes, dtypes)" in header.inner_text()
    assert "+1 added" in header.inner_text()
    keys = compare.locator(".tdview-compare-keys").inner_text()
    assert "] next difference" in keys and "[ previous difference" in keys

    # Metadata (a directory records no CRC-32): the weights have one dtype and shape on
    # both sides, so they are not called changed; the optimizer's step counts are read
    # (one element each: 1 -> 2), and grad_scale is added; "only differences" is on.
    added = compare.locator('[role="treeitem"][data-status="added"]')
    added.wait_for(timeout=TIMEOUT)
    assert added.locator(".tdview-key").inner_text() == "grad_scale"
    assert added.locator(".tdview-mark").inner_text() == "+"
    assert added.locator(".tdview-compare-scalar").inner_text() == "1024"
    rows = compare.locator('[role="treeitem"] .tdview-key').all_inner_texts()
    assert sorted(rows[1:]) == ["grad_scale", "optim"], rows  # the root, its differences

    # Compare every leaf's bytes (the directory's files against the archive's entries).
    compare.locator(".tdview-compare-all-fingerprint").click()
    compare.locator(".tdview-refine-done").wait_for(timeout=RUN_TIMEOUT_MS)
    header.get_by_text("bytes (sizes and CRC-32s)").wait_for(timeout=TIMEOUT)
    # the layers now hold changed leaves: their rows count them
    compare.locator('[role="treeitem"] .tdview-count-changed').first.wait_for(timeout=TIMEOUT)

    # Step through every difference with the keyboard: ] forward, [ back.
    out = run_cell(
        page,
        "import json\nprint('ROWS', json.dumps([' / '.join(r.path) for r in "
        "v.diff.changed() if r.path]))",
    )
    expected = marked(out, "ROWS")
    assert "grad_scale" in expected and "0 / weight" in expected, expected
    compare.locator('[role="tree"]').focus()
    page.keyboard.press("Home")
    seen = []
    for _ in range(len(expected) + 2):
        path = press_and_wait(page, compare, "]")
        if not path:
            break
        seen.append(path)
    assert seen == expected, (seen, expected)
    assert compare.locator(".tdview-compare-status").inner_text() == (
        "No difference after this one."
    )
    assert press_and_wait(page, compare, "[") == expected[-2]
    # back to the first weight, by the keyboard too
    for _ in range(len(expected)):
        if selected_path(compare) == "0 / weight":
            break
        press_and_wait(page, compare, "[")
    assert selected_path(compare) == "0 / weight"

    # Its details: both sides' facts, the bytes differ; then its value statistics.
    details = compare.locator(".tdview-compare-details")
    details.locator(".tdview-compare-path", has_text="0 / weight").wait_for(timeout=TIMEOUT)
    assert "bytes differ" in details.inner_text()
    assert details.locator(".tdview-compare-facts thead").inner_text().count("·") == 2
    details.locator(".tdview-compare-values").click()
    compare.locator(".tdview-refine-done").wait_for(timeout=RUN_TIMEOUT_MS)
    try:
        details.get_by_text("max |a−b|").wait_for(timeout=10_000)
    except Exception:
        widget.screenshot(path=str(artifacts / "debug-compare.png"))
        print("DEBUG", details.inner_text(), compare.inner_text())
        raise
    out = run_cell(
        page,
        (
            "import torch, tdview\n"
            "r = v.diff.row(('0', 'weight'))\n"
            "a = tdview.load_memmap('cmp_step_1')['0', 'weight']\n"
            "b = tdview.load_memmap('cmp_step_2.tdz')['0', 'weight']\n"
            "print('STATS', json.dumps({'level': v.diff.level, 'differing': r.values.differing,"
            " 'numel': r.values.numel, 'max_abs': r.values.max_abs,"
            " 'torch': float((b.double() - a.double()).abs().max())}))"
        ),
    )
    stats = marked(out, "STATS")
    assert stats["level"] == "mixed"
    assert stats["max_abs"] == pytest.approx(stats["torch"])
    text = details.inner_text()
    assert f"{stats['differing']:,} of {stats['numel']:,}" in text, text

    # Both sides previewed, and the difference of the values shown.
    details.locator(".tdview-compare-preview .tdview-preview-button").click()
    difference = details.locator(".tdview-compare-difference")
    difference.wait_for(timeout=RUN_TIMEOUT_MS)
    assert "b − a over the" in difference.inner_text()
    assert details.locator(".tdview-compare-preview-side .tdview-stats").count() == 2

    # Load side a's tensor into the kernel; its code line names side a's checkpoint.
    load_a = details.locator(".tdview-compare-load-a")
    code = load_a.locator(".tdview-code").inner_text()
    assert code.startswith('weight = tdview.Checkpoint("cmp_step_1").load_leaf("0/weight"'), code
    load_a.locator(".tdview-disclosure").click()
    field = load_a.locator(".tdview-variable")
    field.fill("")
    field.press_sequentially("w_old")
    load_a.locator(".tdview-load-button").click()
    load_a.locator(".tdview-load-done").wait_for(timeout=RUN_TIMEOUT_MS)
    out = run_cell(page, "print('OLD', json.dumps(bool(torch.equal(w_old, a))))")
    assert marked(out, "OLD") is True

    details.evaluate("el => { el.scrollTop = 0; }")
    widget.screenshot(path=str(artifacts / "tdview-compare-light.png"))
    try:
        settle_theme(page, "dark")
        background = widget.evaluate("el => getComputedStyle(el).backgroundColor")
        assert background not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)")
        widget.screenshot(path=str(artifacts / "tdview-compare-dark.png"))
    finally:
        settle_theme(page, "light")

    # Last (the weight then leaves the "only differences" tree): values again, within an
    # atol above the largest difference: the weight is equal within it, and the header
    # says the tolerances used.
    tolerance = compare.locator(".tdview-compare-tolerance")
    atol = f"{stats['max_abs'] * 2:.3g}"
    tolerance.locator(".tdview-atol").fill(atol)
    compare.locator(".tdview-compare-all-values").click()
    compare.locator(".tdview-refine-done").wait_for(timeout=RUN_TIMEOUT_MS)
    header.get_by_text("within rtol 0, atol ").wait_for(timeout=TIMEOUT)
    out = run_cell(
        page,
        (
            "r = v.diff.row(('0', 'weight'))\n"
            "print('TOL', json.dumps({'atol': v.diff.atol, 'differing': r.values.differing,"
            " 'equal': r.values.equal}))"
        ),
    )
    assert marked(out, "TOL") == {"atol": float(atol), "differing": 0, "equal": True}


def test_compare_in_tdview_from_the_file_browser(lab, page, artifacts, steps) -> None:
    open_lab(page, lab)
    listing_item(page, BEFORE).wait_for(timeout=TIMEOUT)
    context_menu(page, BEFORE, "Open in tdview")  # the folder check has run
    page.keyboard.press("Escape")
    # One checkpoint selected: no compare entry.
    assert "Compare in tdview" not in menu_labels(page, AFTER)
    # Two: the entry, which opens a compare console (the older name first).
    listing_item(page, AFTER).click()
    listing_item(page, BEFORE).click(modifiers=["Control"])
    listing_item(page, BEFORE).click(button="right")
    menu = page.locator(".lm-Menu").last
    menu.wait_for(timeout=TIMEOUT)
    labels = menu.locator(".lm-Menu-item:visible .lm-Menu-itemLabel").all_inner_texts()
    assert "Compare in tdview" in labels and "Open in tdview" not in labels, labels
    menu.locator(".lm-Menu-item:visible", has_text="Compare in tdview").click()
    tab = page.locator(
        ".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=f"tdview compare: {BEFORE} ⇄ {AFTER}"
    )
    tab.wait_for(timeout=TIMEOUT)
    panel = page.locator(".jp-MainAreaWidget.tdview-console:visible")
    panel.locator('.tdview-compare [role="treeitem"][data-status="added"]').wait_for(
        timeout=RUN_TIMEOUT_MS
    )
    code = panel.locator(".jp-CodeConsole-content .jp-InputArea").all_inner_texts()
    assert any(f'view = TDView("{BEFORE}", compare="{AFTER}")' in t for t in code), code
    page.screenshot(path=str(artifacts / "labextension-compare-light.png"))


_TREE_STATE = """(root) => {
    const tree = root.querySelector('[role="tree"]');
    const rows = [...tree.querySelectorAll('[role="treeitem"]')].sort(
        (a, b) => Number(a.dataset.index) - Number(b.dataset.index));
    const path = (r) => r.getAttribute('aria-level') === '1'
        ? '' : (r.getAttribute('title') || '').split(': ')[0];
    const selected = rows.find((r) => r.getAttribute('aria-selected') === 'true');
    const box = tree.getBoundingClientRect();
    const at = selected ? selected.getBoundingClientRect() : null;
    return {
        expanded: rows.filter((r) => r.getAttribute('aria-expanded') === 'true').map(path),
        selected: selected ? path(selected) : null,
        top: at ? Math.round(at.top - box.top) : null,
        visible: at ? at.top >= box.top && at.bottom <= box.bottom : false,
        rows: rows.map(path),
    };
}"""


def tree_state(compare: Any) -> dict[str, Any]:
    """The rows drawn open (``""`` for the root), the row selected, where it is in the
    tree's viewport, and every row drawn, each by its path (``"a / b"``)."""
    return compare.evaluate(_TREE_STATE)


def tree_row(compare: Any, path: str) -> Any:
    """The row of ``path`` (``"optim / state"``), by its title."""
    return compare.locator(
        f'[role="treeitem"][title^="{path}: "], [role="treeitem"][title="{path}"]'
    )


def refine_all_and_wait(compare: Any, level: str) -> None:
    """Compare the whole tree again at ``level``; wait until its new tree is on screen
    (the old tree element is marked first: the view puts a new one in its place)."""
    compare.locator('[role="tree"]').evaluate("el => { el.dataset.before = 'refine'; }")
    compare.locator(f".tdview-compare-all-{level}").click()
    compare.locator(".tdview-refine-done").wait_for(timeout=RUN_TIMEOUT_MS)
    compare.locator('[role="tree"]:not([data-before])').wait_for(timeout=TIMEOUT)


def shown_paths(page: Any) -> set[str]:
    """What "only differences" shows, as the kernel's diff says it: each key with a
    difference of its own and every node above one ("" the root)."""
    out = run_cell(
        page,
        "import json\nprint('ROWS', json.dumps([list(r.path) for r in "
        "v.diff.changed() if r.path]))",
    )
    shown = {""}
    for path in marked(out, "ROWS"):
        shown.update(" / ".join(path[:n]) for n in range(1, len(path) + 1))
    return shown


def ancestors(path: str) -> list[str]:
    """``"a / b / c"``: ``["", "a", "a / b"]``."""
    keys = path.split(" / ") if path else []
    return [" / ".join(keys[:n]) for n in range(len(keys))]


def rows_under(shown: set[str], expanded: list[str]) -> set[str]:
    """The rows a tree of ``shown`` draws with the rows of ``expanded`` open."""
    return {p for p in shown if all(a in expanded for a in ancestors(p))}


def details_of(compare: Any, path: str) -> None:
    """Wait until the details pane shows ``path`` (exactly)."""
    compare.locator(".tdview-compare-details .tdview-compare-path").get_by_text(
        path, exact=True
    ).wait_for(timeout=TIMEOUT)


def test_compare_refine_keeps_open_rows_and_selection(lab, page, artifacts, steps) -> None:
    write_notebook(lab.root, "compare_keep.ipynb", [OPEN])
    open_and_run(page, lab, "compare_keep.ipynb")
    compare = page.locator(".tdview-root .tdview-compare")
    compare.locator('[role="treeitem"][data-status="added"]').wait_for(timeout=RUN_TIMEOUT_MS)
    refine_all_and_wait(compare, "fingerprint")  # now the weights and the optimizer differ

    # Open two levels below the root (optim, optim / state), and rows beside the
    # selection's ancestors (the first layer, a second optimizer state), by their twisties.
    opened = ["", "0", "optim", "optim / state", "optim / state / 0", "optim / state / 1"]
    for path in opened[1:]:
        row = tree_row(compare, path)
        row.wait_for(timeout=TIMEOUT)
        row.locator(".tdview-twisty").click()
        compare.locator(f'[role="treeitem"][title^="{path} / "]').first.wait_for(timeout=TIMEOUT)
    selected = "optim / state / 0 / exp_avg_sq"
    tree_row(compare, selected).locator(".tdview-key").click()
    details_of(compare, selected)
    before = tree_state(compare)
    assert before["expanded"] == opened, before
    assert before["selected"] == selected and before["visible"], before

    # By values: every key that differed by bytes still differs (no tolerance), so the
    # same rows are open, the same one selected, at the same place in the viewport.
    refine_all_and_wait(compare, "values")
    compare.locator(".tdview-compare-header").get_by_text("values").first.wait_for(timeout=TIMEOUT)
    after = tree_state(compare)
    assert after["expanded"] == before["expanded"], (before, after)
    assert after["selected"] == selected, after
    assert after["visible"] and after["top"] == before["top"], (before, after)
    assert set(after["rows"]) == rows_under(shown_paths(page), opened), after
    details_of(compare, selected)
    compare.locator(".tdview-compare-details").get_by_text("max |a−b|").wait_for(timeout=TIMEOUT)

    # Within an atol of 0.5 the weights and the moments are equal, the step counts (1
    # against 2) are not: the selected key and the first layer leave the tree, the rows
    # that still hold a difference stay open, and the selection goes to the nearest
    # ancestor still shown.
    compare.locator(".tdview-compare-tolerance .tdview-atol").fill("0.5")
    refine_all_and_wait(compare, "values")
    compare.locator(".tdview-compare-header").get_by_text("atol 0.5").wait_for(timeout=TIMEOUT)
    shown = shown_paths(page)
    assert selected not in shown and "0" not in shown, shown
    nearest = [p for p in ancestors(selected) if p in shown][-1]
    assert nearest == "optim / state / 0", shown  # it still holds its step
    filtered = tree_state(compare)
    expanded = [p for p in opened if p in shown]
    assert filtered["expanded"] == expanded, filtered
    assert filtered["selected"] == nearest and filtered["visible"], filtered
    assert set(filtered["rows"]) == rows_under(shown, expanded), filtered
    details_of(compare, nearest)
    page.locator(".tdview-root").screenshot(path=str(artifacts / "tdview-compare-refine-kept.png"))


RUN_OPEN = (
    'from tdview import TDView\nv = TDView("run32/step_1000.tdz", compare="run32/step_2000.tdz")\nv'
)


@pytest.fixture(scope="module")
def training_run(lab: Any) -> tuple[Path, Path]:
    """step_1000.tdz and step_2000.tdz of one training run (tests/training_steps.py)."""
    from ..training_steps import write_training_steps

    folder = lab.root / "run32"
    if (folder / "step_2000.tdz").exists():
        return folder / "step_1000.tdz", folder / "step_2000.tdz"
    return write_training_steps(folder)


def test_compare_two_archives_says_what_changed_from_the_first_paint(
    lab, page, artifacts, training_run
) -> None:
    """Two archives: the first paint compares their recorded CRC-32s, so every trained
    weight, moment and step shows as changed, nothing is called the same for its shape
    alone, a scalar shows its numbers, and keys are whole; at 1280x720, light and dark."""
    page.set_viewport_size({"width": 1280, "height": 720})
    write_notebook(lab.root, "compare_run.ipynb", [RUN_OPEN])
    open_and_run(page, lab, "compare_run.ipynb")
    widget = page.locator(".tdview-root")
    compare = widget.locator(".tdview-compare")
    compare.wait_for(timeout=TIMEOUT)
    header = compare.locator(".tdview-compare-header")
    header.get_by_text("bytes (sizes and CRC-32s)").wait_for(timeout=TIMEOUT)
    out = run_cell(
        page,
        "import json\nt = v.diff.rollup()\nprint('TOTAL', json.dumps({'changed': t.changed, "
        "'added': t.added, 'removed': t.removed, 'crc': t.same_crc, 'unread': t.same_metadata,"
        " 'trained': sorted(' / '.join(r.path) for r in v.diff if r.is_leaf and r.a and r.b"
        " and r.status == 'changed')}))",
    )
    total = marked(out, "TOTAL")
    text = header.inner_text()
    assert f"~{total['changed']} changed" in text, text
    assert f"+{total['added']} added" in text and f"-{total['removed']} removed" in text
    assert total["unread"] == 0 and "values not compared" not in text, text
    assert f"{total['crc']} CRC equal" in text, text
    assert "model / head / weight" in total["trained"] and "step" in total["trained"]

    # The run's step and the learning rate show their change in their rows.
    step = tree_row(compare, "step")
    step.wait_for(timeout=TIMEOUT)
    assert step.locator(".tdview-compare-scalar").inner_text() == "1000 → 2000"
    assert tree_row(compare, "lr").locator(".tdview-compare-scalar").inner_text() == (
        "0.01 → 0.005"
    )
    step.locator(".tdview-key").click()
    details_of(compare, "step")
    verdict = compare.locator(".tdview-compare-details .tdview-compare-verdict").inner_text()
    assert verdict.startswith("1000 → 2000") and "value changed" in verdict, verdict

    # Open model / blocks / 0 and optimizer / state / head.bias: keys whole, AdamW's step.
    for path in ["model", "model / blocks", "model / blocks / 0", "optimizer"]:
        row = tree_row(compare, path)
        row.wait_for(timeout=TIMEOUT)
        row.locator(".tdview-twisty").click()
        compare.locator(f'[role="treeitem"][title^="{path} / "]').first.wait_for(timeout=TIMEOUT)
    for path in ["optimizer / state", "optimizer / state / head.bias"]:
        row = tree_row(compare, path)
        row.wait_for(timeout=TIMEOUT)
        row.locator(".tdview-twisty").click()
        compare.locator(f'[role="treeitem"][title^="{path} / "]').first.wait_for(timeout=TIMEOUT)
    weight = tree_row(compare, "model / blocks / 0 / weight")
    assert weight.get_attribute("data-status") == "changed"
    key = weight.locator(".tdview-key")
    assert key.inner_text() == "weight"
    assert key.evaluate("el => el.scrollWidth <= el.clientWidth + 1")  # drawn whole
    moment = tree_row(compare, "optimizer / state / head.bias / step")
    assert moment.locator(".tdview-compare-scalar").inner_text() == "3 → 6"
    state_key = tree_row(compare, "optimizer / state / head.bias").locator(".tdview-key")
    assert state_key.inner_text() == "head.bias"
    tree_row(compare, "model / blocks / 0 / weight").locator(".tdview-key").click()
    details_of(compare, "model / blocks / 0 / weight")
    assert "bytes differ" in compare.locator(".tdview-compare-details").inner_text()

    page.screenshot(path=str(artifacts / "compare-two-archives-1280x720-light.png"))
    try:
        settle_theme(page, "dark")
        page.screenshot(path=str(artifacts / "compare-two-archives-1280x720-dark.png"))
    finally:
        settle_theme(page, "light")


def test_compare_says_values_not_compared_one_click_from_them(lab, page, artifacts, steps) -> None:
    """A directory against an archive (no CRC-32 recorded on one side): the header says
    how many leaves are the same only by shape and dtype, and its button compares them."""
    page.set_viewport_size({"width": 1280, "height": 720})
    write_notebook(lab.root, "compare_unread.ipynb", [OPEN])
    open_and_run(page, lab, "compare_unread.ipynb")
    compare = page.locator(".tdview-root .tdview-compare")
    header = compare.locator(".tdview-compare-header")
    header.locator(".tdview-compare-unverified").wait_for(timeout=RUN_TIMEOUT_MS)
    out = run_cell(page, "print('UNREAD', v.diff.rollup().same_metadata)")
    unread = int(next(x for x in out.splitlines() if x.startswith("UNREAD")).split()[1])
    assert unread > 0
    assert header.locator(".tdview-compare-unverified").inner_text() == (
        f"{unread} same shape and dtype — values not compared"
    )
    assert " same\n" not in header.inner_text()  # no leaf called plainly "same"
    page.screenshot(path=str(artifacts / "compare-values-not-compared-1280x720-light.png"))
    try:
        settle_theme(page, "dark")
        page.screenshot(path=str(artifacts / "compare-values-not-compared-1280x720-dark.png"))
    finally:
        settle_theme(page, "light")
    header.locator(".tdview-compare-unverified-values").click()
    compare.locator(".tdview-refine-done").wait_for(timeout=RUN_TIMEOUT_MS)
    header.get_by_text("values", exact=True).wait_for(timeout=TIMEOUT)
    assert header.locator(".tdview-compare-unverified").count() == 0
    out = run_cell(page, "print('LEVEL', v.diff.level, v.diff.rollup().same_metadata)")
    assert "LEVEL values 0" in out
    assert "changed" in header.inner_text()
