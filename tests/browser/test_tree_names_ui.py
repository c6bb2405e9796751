"""Issue 32's "names are never cut" and "the keyboard" in a real JupyterLab at 1280x720
(the file browser open): a flat ``TensorDict(model.state_dict())`` (a small torch
decoder, dotted keys) saved by tensordict as a ``.tdz`` and with ``.memmap()`` shows its
keys grouped by ``.`` as the modules nest, details, Copy and a load keeping the real key;
switched flat, every key is whole or cut in the middle with its end kept, no shape is cut
inside a number, and ``config`` stays ``config``; the divider moves with the keyboard and
the mouse and is kept for the next view of the same widget; the root row shows its size;
keys pressed at key-repeat speed (20 ms) end where the same keys pressed at 200 ms end.
Light and dark screenshots at 1280x720."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .notebook import open_and_run, write_notebook
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import load_through_form, marked, settle_theme

FLAT = "flat32/flat_state_dict"
LONG_KEY = "decoder.layers.0.self_attn.in_proj_weight"
#: A shape as the tree writes it: whole numbers only, trailing dims dropped as "…".
SHAPE = re.compile(
    r"^(batch )?\[(\d+(, \d+)*)?((, )?…)?\]( \w+)?$|^$|^\d[\d,]* (keys|entr(y|ies))$"
)


def write_flat_state_dict(root: Path) -> None:
    """A 2-layer transformer decoder's ``state_dict()`` as one flat TensorDict (keys such as
    ``decoder.layers.0.self_attn.in_proj_weight``, [768, 256]) with a ``config`` value,
    saved with tensordict's ``save`` (``.tdz``) and ``memmap`` (a directory)."""
    import torch
    from tensordict import NonTensorData, TensorDict

    folder = root / "flat32"
    if (folder / "flat_state_dict.tdz").exists():
        return
    torch.manual_seed(32)

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(500, 256)
            layer = torch.nn.TransformerDecoderLayer(256, 4, 512, batch_first=True)
            self.decoder = torch.nn.TransformerDecoder(layer, 2)
            self.head = torch.nn.Linear(256, 500)

    td = TensorDict(Net().state_dict())
    td["config"] = NonTensorData({"d_model": 256, "layers": 2, "heads": 4})
    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        td.memmap(folder / "flat_state_dict")
        td.save(str(folder / "flat_state_dict.tdz"))


@pytest.fixture
def small_page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    yield page
    context.close()


def open_view(page: Any, lab: Any, name: str, cells: list[str]) -> Any:
    write_flat_state_dict(lab.root)
    write_notebook(lab.root, name, cells)
    open_and_run(page, lab, name)
    # the file browser is open beside the notebook, as a new user has it
    page.locator(".jp-FileBrowser").first.wait_for(state="visible", timeout=TIMEOUT)
    return page.locator(".tdview-root").first


def twisty(page: Any, key: str, level: int) -> None:
    row(page, key, level).first.locator(".tdview-twisty").click()


def rows_problems(widget: Any) -> list[str]:
    """Every rendered row whose key overflows, whose key is cut elsewhere than in its
    middle (its start and its end kept, as in its title), or whose shape is cut."""
    return widget.evaluate(
        """(root, shape) => {
            const re = new RegExp(shape);
            const out = [];
            const rows = root.querySelectorAll('.tdview-tree [role="treeitem"]:not([aria-busy])');
            for (const r of rows) {
                const key = r.querySelector('.tdview-key');
                const text = key.textContent;
                if (key.scrollWidth > key.clientWidth + 1) out.push(`overflows: ${text}`);
                const real = r.getAttribute('title') || '';
                if (text.includes('…') && !r.classList.contains('tdview-group-row')) {
                    const [head, tail] = text.split('…');
                    const full = real.split(' / ').at(-1);
                    if (!full.startsWith(head) || !full.endsWith(tail) || tail.length < 4)
                        out.push(`cut badly: ${text} of ${full}`);
                }
                const s = r.querySelector('.tdview-shape')?.textContent ?? '';
                if (!re.test(s)) out.push(`shape cut: ${s}`);
            }
            return out;
        }""",
        SHAPE.pattern,
    )


def level_keys(widget: Any, level: int) -> list[str]:
    return widget.locator(
        f'.tdview-tree [role="treeitem"][aria-level="{level}"] .tdview-key'
    ).all_inner_texts()


def separator(widget: Any) -> Any:
    return widget.locator('.tdview-body > [role="separator"]')


def theme(page: Any, name: str) -> None:
    """Switch JupyterLab's theme and wait until the page is drawn in it."""
    settle_theme(page, name)
    light = "true" if name == "light" else "false"
    page.wait_for_function(
        "(light) => document.body.dataset.jpThemeLight === light", arg=light, timeout=TIMEOUT
    )
    page.wait_for_timeout(300)


def shot(page: Any, artifacts: Path, name: str) -> None:
    page.screenshot(path=str(artifacts / f"{name}-1280x720-light.png"))
    try:
        theme(page, "dark")
        page.screenshot(path=str(artifacts / f"{name}-1280x720-dark.png"))
    finally:
        theme(page, "light")


def test_flat_state_dict_grouped_whole_names_divider(lab, small_page, artifacts) -> None:
    page = small_page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=lab.base_url)
    widget = open_view(
        page, lab, "tree_names.ipynb", [f'from tdview import TDView\nv = TDView("{FLAT}.tdz")\nv']
    )
    row(page, "decoder.layers", 2).wait_for(timeout=TIMEOUT)

    # Grouped by default: the modules nest; the toggle says so.
    assert level_keys(widget, 2) == ["embed.weight", "decoder.layers", "head", "config"]
    toggle = widget.locator(".tdview-group-toggle input")
    assert toggle.is_visible() and toggle.is_checked()

    # The root row shows its size, the one the header gives.
    root = widget.locator('.tdview-tree [role="treeitem"][aria-level="1"] .tdview-bytes')
    root.wait_for(timeout=TIMEOUT)
    header = widget.locator(".tdview-header").inner_text()
    assert root.inner_text() and root.inner_text() in header, (root.inner_text(), header)

    twisty(page, "decoder.layers", 2)
    row(page, "0", 3).wait_for(timeout=TIMEOUT)
    assert level_keys(widget, 3) == ["0", "1"]
    twisty(page, "0", 3)
    row(page, "self_attn", 4).wait_for(timeout=TIMEOUT)
    assert level_keys(widget, 4)[:3] == ["self_attn", "multihead_attn", "linear1"]
    twisty(page, "self_attn", 4)
    leaf = row(page, "in_proj_weight", 5).first
    leaf.wait_for(timeout=TIMEOUT)
    assert leaf.get_attribute("title") == LONG_KEY  # the real key, whole
    assert leaf.locator(".tdview-shape").inner_text() == "[768, 256] float32"

    # Selected: the details, the copied key and the load keep the real key.
    leaf.locator(".tdview-key").click()
    details = widget.locator(".tdview-details")
    key_tuple = f'("{LONG_KEY}",)'
    details.locator(".tdview-copy-text").get_by_text(key_tuple, exact=True).wait_for(
        state="attached", timeout=TIMEOUT
    )
    details.locator(".tdview-copy-key button").click()
    assert page.evaluate("() => navigator.clipboard.readText()") == key_tuple
    form = widget.locator(".tdview-load")
    form.locator(".tdview-disclosure").click()
    load_through_form(widget, "w")
    code = widget.locator(".tdview-load .tdview-code").inner_text()
    assert LONG_KEY in code and "layers.0.…" not in code, code
    out = run_cell(
        page,
        "import json\nfrom tensordict import TensorDict\n"
        f'ref = TensorDict.load_memmap("{FLAT}")\n'
        f'same = bool((w == ref["{LONG_KEY}"]).all())\n'
        'print("W", json.dumps({"shape": list(w.shape), "same": same}))',
    )
    assert marked(out, "W") == {"shape": [768, 256], "same": True}
    widget.scroll_into_view_if_needed()
    leaf.locator(".tdview-key").click()
    assert rows_problems(widget) == []
    shot(page, artifacts, "tdview-tree-grouped")

    # A group is no key: selected, the details say what it is and offer nothing to copy.
    row(page, "self_attn", 4).first.locator(".tdview-key").click()
    note = widget.locator(".tdview-group-note")
    note.wait_for(timeout=TIMEOUT)
    assert "decoder.layers.0.self_attn.… groups 4 keys" in note.inner_text()

    # Flat: the key wins over the annotations; cut, it keeps its end; config is whole.
    leaf_again = "decoder.layers.0.self_attn.in_proj_bias"
    row(page, "in_proj_bias", 5).first.locator(".tdview-key").click()
    toggle.uncheck()
    selected = widget.locator('.tdview-tree [role="treeitem"][aria-selected="true"]')
    page.wait_for_function(
        "(key) => document.querySelector('.tdview-tree [aria-selected=\"true\"]')?.title === key",
        arg=leaf_again,
        timeout=TIMEOUT,
    )
    assert selected.locator(".tdview-key").inner_text() == leaf_again
    assert rows_problems(widget) == []
    shot(page, artifacts, "tdview-tree-flat")
    widget.locator(".tdview-tree").focus()
    page.keyboard.press("End")
    assert selected.get_attribute("title") == "config"
    assert selected.locator(".tdview-key").inner_text() == "config"

    # The divider: narrower with the keyboard, the keys then cut in the middle.
    divider = separator(widget)
    start = int(divider.get_attribute("aria-valuenow"))
    divider.focus()
    for _ in range(2):
        page.keyboard.press("Shift+ArrowLeft")
    assert int(divider.get_attribute("aria-valuenow")) == start - 20
    keys = level_keys(widget, 2)
    cut = [k for k in keys if "…" in k]
    assert cut and all(k.endswith("weight") or k.endswith("bias") for k in cut), keys
    assert "config" in keys  # the selected row, in view
    assert rows_problems(widget) == []
    shot(page, artifacts, "tdview-tree-narrow")

    # ... and with the mouse; the share is kept with the widget's model.
    box = divider.bounding_box()
    body = widget.locator(".tdview-body").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 40)
    page.mouse.down()
    page.mouse.move(body["x"] + body["width"] * 0.6, box["y"] + 40, steps=5)
    page.mouse.up()
    share = int(divider.get_attribute("aria-valuenow"))
    assert 55 <= share <= 65, share
    out = run_cell(page, 'print("LAYOUT", json.dumps(v._layout))')
    layout = marked(out, "LAYOUT")
    assert round(layout["split"] * 100) == share and layout["grouped"] is False

    # The same widget shown again: its divider and its flat keys as the user left them.
    run_cell(page, "v")
    second = page.locator(".tdview-root").nth(1)
    separator(second).wait_for(timeout=TIMEOUT)
    assert separator(second).get_attribute("aria-valuenow") == str(share)
    assert not second.locator(".tdview-group-toggle input").is_checked()


def test_memmap_directory_groups_and_keeps_real_keys(lab, small_page) -> None:
    page = small_page
    widget = open_view(
        page, lab, "tree_names_dir.ipynb", [f'from tdview import TDView\nv = TDView("{FLAT}")\nv']
    )
    row(page, "decoder.layers", 2).wait_for(timeout=TIMEOUT)
    twisty(page, "head", 2)
    row(page, "bias", 3).first.locator(".tdview-key").click()
    details = widget.locator(".tdview-details")
    details.locator(".tdview-copy-text").get_by_text('("head.bias",)', exact=True).wait_for(
        state="attached", timeout=TIMEOUT
    )
    out = run_cell(page, 'import json\nprint("SEL", json.dumps(list(v.selected)))')
    assert marked(out, "SEL") == ["head.bias"]
    # the kernel's `selected` reveals through the groups
    run_cell(page, f'v.selected = ("{LONG_KEY}",)')
    page.wait_for_function(
        "(key) => document.querySelector('.tdview-tree [aria-selected=\"true\"]')?.title === key",
        arg=LONG_KEY,
        timeout=TIMEOUT,
    )
    assert rows_problems(widget) == []


#: A walk through the demo checkpoint that opens four levels, each asked of the kernel.
WALK = [
    *["ArrowDown", "ArrowRight", "ArrowRight", "ArrowDown", "ArrowRight", "ArrowRight"],
    *["ArrowRight", "ArrowRight", "ArrowDown", "ArrowDown", "ArrowLeft", "ArrowLeft"],
    *["ArrowDown", "ArrowRight", "ArrowRight", "End", "ArrowUp", "ArrowUp"],
]

# Every row of a tree, scrolled through (the tree is virtual): title, expanded, selected.
ALL_ROWS = """async (tree) => {
    const rows = new Map();
    for (let top = 0; ; top += tree.clientHeight / 2) {
        tree.scrollTop = top;
        tree.dispatchEvent(new Event('scroll'));
        await new Promise((r) => requestAnimationFrame(r));
        for (const r of tree.querySelectorAll('[role="treeitem"]')) {
            rows.set(Number(r.dataset.index), [r.title, r.getAttribute('aria-expanded'),
                r.getAttribute('aria-selected'), r.getAttribute('aria-busy')]);
        }
        if (top + tree.clientHeight >= tree.scrollHeight) break;
    }
    return [...rows.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1]);
}"""


# The keys as the browser delivers them to the focused tree, `interval` ms apart, timed in
# the page (a round trip to the test for each key would be slower than a key repeat); a
# negative interval sends them all in one task, so that no reply can come between two.
PRESS = """async (tree, [keys, interval]) => {
    tree.focus();
    for (const key of keys) {
        tree.dispatchEvent(new KeyboardEvent('keydown', {key, bubbles: true, cancelable: true}));
        if (interval >= 0) await new Promise((r) => setTimeout(r, interval));
    }
}"""


def walk(page: Any, tree: Any, interval_ms: int) -> list[Any]:
    tree.evaluate(PRESS, [WALK, interval_ms])
    # done when no key waits: the selected row loaded and no row still a placeholder
    page.wait_for_function(
        """(tree) => {
            const sel = tree.querySelector('[aria-selected="true"]');
            return sel && !sel.hasAttribute('aria-busy') && !tree.querySelector('[aria-busy]');
        }""",
        arg=tree.element_handle(),
        timeout=TIMEOUT,
    )
    page.wait_for_timeout(500)
    return tree.evaluate(ALL_ROWS)


def test_keys_at_key_repeat_speed_end_where_slow_keys_end(lab, small_page, artifacts) -> None:
    page = small_page
    view = 'from tdview import TDView\nTDView("demo_ckpt.tdz")'
    open_view(page, lab, "tree_keys.ipynb", [view, view, view])
    trees = page.locator(".tdview-root .tdview-tree")
    page.wait_for_function(
        "() => document.querySelectorAll('.tdview-root .tdview-tree').length === 3"
    )
    for i in range(3):
        trees.nth(i).locator('[role="treeitem"][aria-level="2"]').first.wait_for(timeout=TIMEOUT)
    slow = walk(page, trees.nth(0), 200)
    fast = walk(page, trees.nth(1), 20)
    # and all in one go (a kernel slower than the key repeat): every key overtakes the loads
    burst = walk(page, trees.nth(2), -1)
    expanded = [title for title, open_, _, _ in slow if open_ == "true"]
    selected = [title for title, _, sel, _ in slow if sel == "true"]
    # the walk opened model, model/layers, one of its layers and another top-level node
    assert len(expanded) >= 4 and expanded[:2] == ["demo_ckpt.tdz", "model"], expanded
    assert len(selected) == 1
    assert fast == slow
    assert burst == slow
    shot(page, artifacts, "tdview-tree-keys")
