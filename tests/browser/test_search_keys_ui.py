"""Issue 32's search in a real JupyterLab at 1280x720, driven through Chromium: what users
paste (the widget's own key tuple, bracket forms, a DistributedDataParallel prefix) finds
the nodes it names in a from_module tree, a flat ``TensorDict(model.state_dict())`` and
an optimizer state keyed by parameter name, and says how it was read; the arrow keys go
from the box into the matches and back; Enter on a folder match shows it expanded with
its children; the matches are one line each, more than four on show, long paths cut in
the middle. Light and dark screenshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .notebook import open_and_run, write_notebook
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import settle_theme

CKPT = "run_ckpt"
CELL = f'from tdview import TDView\nv = TDView("{CKPT}")\nv'


def write_run(root: Path) -> list[tuple[str, ...]]:
    """A 6-layer decoder saved three ways by tensordict: nested (``from_module``), as a
    flat state_dict (dotted keys) and as AdamW-like state keyed by parameter name.
    Returns every nested key, as tensordict lists them."""
    import torch
    from tensordict import TensorDict
    from torch import nn

    torch.manual_seed(0)
    net = nn.Module()
    net.decoder = nn.TransformerDecoder(
        nn.TransformerDecoderLayer(d_model=32, nhead=2, dim_feedforward=64), num_layers=6
    )
    state = {
        name: TensorDict({"exp_avg": torch.zeros_like(p)}) for name, p in net.named_parameters()
    }
    td = TensorDict(
        {
            "model": TensorDict.from_module(net).data,
            "state_dict": TensorDict(dict(net.state_dict())),
            "optimizer": TensorDict({"state": TensorDict(state)}),
            "step": torch.tensor(1000),
        }
    )
    td.memmap(root / CKPT)
    return [k if isinstance(k, tuple) else (k,) for k in td.keys(include_nested=True)]


def ending_with(paths: list[tuple[str, ...]], tail: str) -> list[tuple[str, ...]]:
    """The keys whose state_dict spelling ends with ``tail`` at a key boundary, or whose
    last key holds it (what a pasted or typed state_dict key names)."""
    return [p for p in paths if ("." + ".".join(p)).endswith("." + tail) or tail in p[-1]]


def search(page: Any, widget: Any, pattern: str, count: int) -> list[str]:
    """Types ``pattern``; waits for ``count`` matches; returns each row's whole path."""
    box = widget.locator(".tdview-search-input")
    status = widget.locator(".tdview-search-status")
    box.fill("")
    page.wait_for_function("(el) => el.textContent === ''", arg=status.element_handle())
    box.fill(pattern)
    want = f"{count} match{'' if count == 1 else 'es'}"
    page.wait_for_function(
        "([el, want]) => el.textContent === want",
        arg=[status.element_handle(), want],
        timeout=TIMEOUT,
    )
    return widget.locator(".tdview-search-path").evaluate_all(
        "spans => spans.map(s => s.title || s.textContent)"
    )


def notes(widget: Any) -> str:
    box = widget.locator(".tdview-search-notes")
    return "" if box.is_hidden() else box.inner_text()


def joined(paths: list[tuple[str, ...]]) -> list[str]:
    return sorted("/".join(p) for p in paths)


#: Each row of the list: one line, its path cut or whole, nothing running over.
ROWS_GEOMETRY = """(list) => {
    const rows = [...list.querySelectorAll('.tdview-search-result')];
    const box = list.getBoundingClientRect();
    return {
        shown: rows.filter(r => {
            const b = r.getBoundingClientRect();
            return b.top >= box.top - 0.5 && b.bottom <= box.bottom + 0.5;
        }).length,
        heights: rows.map(r => r.getBoundingClientRect().height),
        lineHeight: parseFloat(getComputedStyle(rows[0]).fontSize) * 2,
        overflowing: rows.filter(r => {
            const s = r.querySelector('.tdview-search-path');
            return s.scrollWidth > s.clientWidth + 1;
        }).length,
        cut: rows.map(r => r.querySelector('.tdview-search-path'))
            .filter(s => s.title).map(s => [s.textContent, s.title]),
    };
}"""


def test_search_takes_what_users_paste(lab, page, artifacts) -> None:
    paths = write_run(lab.root)
    page.set_viewport_size({"width": 1280, "height": 720})
    write_notebook(lab.root, "tdview_search_keys.ipynb", [CELL])
    open_and_run(page, lab, "tdview_search_keys.ipynb")
    widget = page.locator(".tdview-root")
    row(page, "model", 2).wait_for(timeout=TIMEOUT)

    # A flat state_dict key, with DDP's prefix, typed or pasted as code: the one key of
    # the flat state_dict, the nested path of the from_module tree, the optimizer's key.
    tail = "decoder.layers.0.linear1.weight"
    expected = ending_with(paths, tail)
    assert {p[0] for p in expected} == {"model", "state_dict", "optimizer"}, expected
    found = search(page, widget, f"module.{tail}", len(expected))
    assert sorted(found) == joined(expected)
    assert notes(widget) == "matched without the module. prefix (DistributedDataParallel)"
    widget.screenshot(path=str(artifacts / "tdview-search-pasted-light.png"))
    found = search(page, widget, f"state_dict['{tail}']", len(expected))
    assert sorted(found) == joined(expected)
    assert notes(widget) == f"read as the key {tail} (state_dict is a variable)"
    found = search(page, widget, f"_orig_mod.module.{tail.replace('.', '/')}", 1)
    assert found == ["model/decoder/layers/0/linear1/weight"]

    # The widget's own copied key, then arrow keys into the list and Enter on the folder.
    layer = ("model", "decoder", "layers", "0")
    key = "(" + ", ".join(f'"{k}"' for k in layer) + ")"
    assert search(page, widget, key, 1) == ["/".join(layer)]
    assert notes(widget) == "read as the key model/decoder/layers/0"
    assert row(page, "self_attn", 6).count() == 0  # not expanded yet
    box = widget.locator(".tdview-search-input")
    box.press("ArrowDown")
    focused = "() => document.activeElement.className"
    assert page.evaluate(focused) == "tdview-search-result"
    page.keyboard.press("ArrowUp")
    assert page.evaluate("() => document.activeElement.classList.contains('tdview-search-input')")
    box.press("ArrowDown")
    page.keyboard.press("Enter")
    folder = row(page, "0", 5)
    page.wait_for_function(
        "(el) => el.getAttribute('aria-expanded') === 'true'",
        arg=folder.element_handle(timeout=TIMEOUT),
        timeout=TIMEOUT,
    )
    tree = widget.locator('[role="tree"]:not([hidden])')
    children = [c[-1] for c in paths if len(c) == 5 and c[:4] == layer]
    assert "self_attn" in children and "linear1" in children
    tree_box = tree.bounding_box()
    assert tree_box is not None
    for child in children[:4]:  # the first children are on show below the folder
        child_box = row(page, child, 6).bounding_box()
        assert child_box is not None, child
        assert tree_box["y"] <= child_box["y"] <= tree_box["y"] + tree_box["height"] - 10, child
    assert page.evaluate("() => document.activeElement.getAttribute('role')") == "tree"
    widget.screenshot(path=str(artifacts / "tdview-search-enter-folder-light.png"))
    assert run_cell(page, "print(v.selected)").strip() == repr(layer)

    # Many matches: more than four rows on show, each one line, long paths cut in the
    # middle (their end kept, whole in the tooltip), nothing running over its row.
    search(page, widget, "in_proj_weight", len([p for p in paths if "in_proj_weight" in p[-1]]))
    geometry = widget.locator(".tdview-search-results").evaluate(ROWS_GEOMETRY)
    assert geometry["shown"] >= 8, geometry
    assert len(set(geometry["heights"])) == 1, geometry["heights"]
    assert geometry["heights"][0] < geometry["lineHeight"], geometry  # one line
    assert geometry["overflowing"] == 0, geometry
    assert geometry["cut"], "no path was long enough to be cut"
    for text, whole in geometry["cut"]:
        head, _, end = text.partition("…")
        assert whole.startswith(head) and whole.endswith(end) and end, (text, whole)
    box.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    widget.screenshot(path=str(artifacts / "tdview-search-rows-light.png"))
    try:
        settle_theme(page, "dark")
        widget.screenshot(path=str(artifacts / "tdview-search-rows-dark.png"))
        search(page, widget, f"module.{tail}", len(expected))
        widget.screenshot(path=str(artifacts / "tdview-search-pasted-dark.png"))
        search(page, widget, key, 1)
        box.press("ArrowDown")
        page.keyboard.press("Enter")
        page.wait_for_function(
            "() => document.activeElement.getAttribute('role') === 'tree'", timeout=TIMEOUT
        )
        widget.screenshot(path=str(artifacts / "tdview-search-enter-folder-dark.png"))
    finally:
        settle_theme(page, "light")
