"""Issue 32's preview in a real JupyterLab at 1280x720, driven through Chromium: the
statistics, histogram and heatmap of what the index selects (``[5]`` of a [256, 64]
weight: row 5's 64 values, and the preview says so), ``...`` and negative indices, the
index field's placeholder from the leaf's own shape, an index the leaf cannot take
answered beside the field with the leaf's shape, the pager beside the table it pages, a
4-D conv weight shown a kernel at a time through the dimension mapper (columns labelled
by one index, never ``0,0,1``), a diverging heatmap for signed values and a sequential
one for non-negative values, to scale and captioned; and a kernel that answered all
this without importing torch or tensordict. Light and dark screenshots of each state."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .notebook import open_and_run, write_notebook
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import details, settle_theme, wait_details

CKPT = "preview_ckpt"


def tensors() -> dict[str, Any]:
    import torch

    gen = torch.Generator().manual_seed(32)
    weight = torch.randn(256, 64, generator=gen) * 0.05
    weight[5] = torch.linspace(-0.2, 0.3, 64)
    return {
        "weight": weight,
        "conv": torch.randn(64, 3, 7, 7, generator=gen),
        "act": torch.rand(48, 96, generator=gen) * 3,  # non-negative
    }


def write_ckpt(root: Path) -> None:
    from tensordict import TensorDict

    if not (root / "meta.json").exists():
        TensorDict(tensors()).memmap(root)


def wait_text(page: Any, selector: str, text: str) -> None:
    page.wait_for_function(
        "([sel, text]) => { const el = document.querySelector(sel);"
        " return el && el.textContent === text; }",
        arg=[selector, text],
        timeout=TIMEOUT,
    )


def enter(preview: Any, text: str) -> None:
    index = preview.locator(".tdview-preview-index")
    index.fill(text)
    index.press("Enter")


def stat(preview: Any, label: str) -> str:
    item = preview.locator(".tdview-stat", has=preview.page.get_by_text(label, exact=True))
    return item.locator(".tdview-stat-value").inner_text()


def close(text: str, value: float) -> bool:
    return math.isclose(float(text.replace(",", "")), value, rel_tol=1e-5, abs_tol=1e-7)


def shoot(widget: Any, artifacts: Path, name: str, theme: str) -> None:
    widget.screenshot(path=str(artifacts / f"preview-{name}-1280x720-{theme}.png"))


SCOPE = ".tdview-root .tdview-preview-scope"


def check_weight(page: Any, widget: Any, artifacts: Path, theme: str) -> None:
    """The weight: whole, then row 5, then its last column; errors in place; the pager."""
    weight = tensors()["weight"]
    row(page, "weight", 2).locator(".tdview-key").click()
    wait_details(widget, '("weight",)')
    preview = details(widget).locator(".tdview-preview")
    if preview.locator(".tdview-preview-close").is_hidden():
        preview.locator(".tdview-preview-button").click()
    wait_text(page, SCOPE, "Statistics of the whole tensor: 16,384 values")
    index = preview.locator(".tdview-preview-index")
    assert index.get_attribute("placeholder") == "e.g. [128:148, :8]"  # fits [256, 64]
    assert "The shape of this tensor is [256, 64]." in (index.get_attribute("title") or "")
    assert close(stat(preview, "min"), float(weight.min()))
    shoot(widget, artifacts, "whole", theme)

    enter(preview, "[5]")
    wait_text(page, SCOPE, "Statistics of [5, 0:64]: 64 of 16,384 values")
    assert stat(preview, "count") == "64"
    assert close(stat(preview, "min"), -0.2) and close(stat(preview, "max"), 0.3)
    assert close(stat(preview, "mean"), float(weight[5].double().mean()))
    counts = preview.locator(".tdview-histogram-bar title").evaluate_all(
        "titles => titles.map(t => t.textContent)"
    )
    assert sum(int(t.rsplit(": ", 1)[1].replace(",", "")) for t in counts) == 64
    values = preview.locator(".tdview-preview-table tbody td").all_inner_texts()
    assert all(close(t, float(v)) for t, v in zip(values, weight[5][:20], strict=True))
    preview.locator(".tdview-preview-scope").scroll_into_view_if_needed()
    shoot(widget, artifacts, "row5", theme)
    preview.locator(".tdview-preview-table").scroll_into_view_if_needed()
    shoot(widget, artifacts, "row5-table", theme)

    enter(preview, "[0, 0, 0]")
    error = preview.locator(".tdview-preview-index-error")
    error.get_by_text("has 3 parts but the leaf has 2 dims", exact=False).wait_for(timeout=TIMEOUT)
    assert "its shape is [256, 64]" in error.inner_text()
    assert index.get_attribute("aria-invalid") == "true"
    assert preview.locator('[role="alert"]').count() == 0  # in place, not as a failure
    shoot(widget, artifacts, "index-error", theme)

    enter(preview, "[..., -1]")
    wait_text(page, SCOPE, "Statistics of [0:256, 63]: 256 of 16,384 values")
    assert error.inner_text() == ""
    column = preview.locator(".tdview-preview-table tbody td").all_inner_texts()
    assert all(close(t, float(v)) for t, v in zip(column, weight[:20, -1], strict=True))

    # the whole weight again, its heatmap: signed values, a diverging scale, to scale
    enter(preview, "")
    wait_text(page, SCOPE, "Statistics of the whole tensor: 16,384 values")
    if not preview.locator(".tdview-preview-heatmap").is_checked():
        preview.locator(".tdview-preview-heatmap").check()
    caption = preview.locator(".tdview-heatmap-caption")
    caption.wait_for(timeout=TIMEOUT)
    assert caption.inner_text() == (
        "Heatmap of the selection: 256 × 64 values, each cell: mean of 2×1 values"
    )
    assert preview.locator(".tdview-heatmap-zero").inner_text() == "0"  # centred on 0
    box = preview.locator(".tdview-heatmap-canvas").bounding_box()
    assert box is not None and abs(box["height"] / box["width"] - 4) < 0.1, box
    # the pager with its table: the next rows, the statistics unchanged
    head = preview.locator(".tdview-preview-table-head")
    assert head.locator(".tdview-preview-pager").count() == 1
    head.locator(".tdview-preview-next").click()
    wait_text(page, ".tdview-root .tdview-preview-rows", "rows 20–40 of 256")
    labels = preview.locator(".tdview-preview-table tbody th").all_inner_texts()
    assert labels[0] == "20"
    assert page.locator(SCOPE).inner_text() == "Statistics of the whole tensor: 16,384 values"
    preview.locator(".tdview-preview-table").scroll_into_view_if_needed()
    shoot(widget, artifacts, "pager", theme)
    head.locator(".tdview-preview-cols-next").click()
    wait_text(page, ".tdview-root .tdview-preview-caption", "columns 50–64 of 64")
    columns = preview.locator(".tdview-preview-table thead th").all_inner_texts()
    assert columns[1] == "50" and len(columns) == 15, columns
    first = preview.locator(".tdview-preview-table tbody td").first.inner_text()
    assert close(first, float(weight[20, 50]))  # rows 20-40 still: a page, not a selection
    assert page.locator(SCOPE).inner_text() == "Statistics of the whole tensor: 16,384 values"
    preview.locator(".tdview-heatmap").scroll_into_view_if_needed()
    shoot(widget, artifacts, "heatmap-diverging", theme)


def check_conv(page: Any, widget: Any, artifacts: Path, theme: str) -> None:
    """A conv weight: a 7 x 7 kernel at a time; the sliders pick filter and channel."""
    conv = tensors()["conv"]
    row(page, "conv", 2).locator(".tdview-key").click()
    wait_details(widget, '("conv",)')
    preview = details(widget).locator(".tdview-preview")
    wait_text(page, SCOPE, "Statistics of the whole tensor: 9,408 values")
    head = preview.locator(".tdview-preview-table thead th").all_inner_texts()
    assert head == ["d2 \\ d3", *(str(i) for i in range(7))], head
    assert not any("," in h for h in head)
    sliders = preview.locator(".tdview-plane-slider")
    assert sliders.count() == 2
    sliders.nth(0).fill("12")
    sliders.nth(1).fill("1")
    page.get_by_text("[12, 1, 0:7, 0:7]", exact=False).first.wait_for(timeout=TIMEOUT)
    page.wait_for_function(
        "(want) => { const td = document.querySelector("
        "'.tdview-root .tdview-preview-table tbody td');"
        " return td && Math.abs(Number(td.textContent) - want) < 1e-4; }",
        arg=float(conv[12, 1, 0, 0]),
        timeout=TIMEOUT,
    )
    values = preview.locator(".tdview-preview-table tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.querySelectorAll('td')].map(td => td.textContent))"
    )
    for shown, real in zip(values, conv[12, 1].tolist(), strict=True):
        assert all(close(t, v) for t, v in zip(shown, real, strict=True))
    caption = preview.locator(".tdview-heatmap-caption")
    caption.wait_for(timeout=TIMEOUT)
    assert caption.inner_text().startswith("Heatmap of the plane [12, 1, 0:7, 0:7]: 7 × 7 values")
    preview.locator(".tdview-plane").scroll_into_view_if_needed()
    shoot(widget, artifacts, "conv-mapper", theme)
    preview.locator(".tdview-heatmap").scroll_into_view_if_needed()
    shoot(widget, artifacts, "conv-heatmap", theme)


def check_sequential(page: Any, widget: Any, artifacts: Path, theme: str) -> None:
    row(page, "act", 2).locator(".tdview-key").click()
    wait_details(widget, '("act",)')
    preview = details(widget).locator(".tdview-preview")
    wait_text(page, SCOPE, "Statistics of the whole tensor: 4,608 values")
    legend = preview.locator(".tdview-heatmap-legend")
    legend.wait_for(timeout=TIMEOUT)
    assert preview.locator(".tdview-heatmap-zero").count() == 0
    assert "non-negative" in legend.inner_text()
    preview.locator(".tdview-heatmap").scroll_into_view_if_needed()
    shoot(widget, artifacts, "heatmap-sequential", theme)


NO_TORCH = 'import sys\nprint("IMPORTED", "torch" in sys.modules, "tensordict" in sys.modules)'


def test_the_preview_follows_what_is_asked(lab, page, artifacts) -> None:
    write_ckpt(lab.root / CKPT)
    page.set_viewport_size({"width": 1280, "height": 720})
    write_notebook(
        lab.root,
        "tdview_preview_selection.ipynb",
        [f'from tdview import TDView\nv = TDView("{CKPT}")\nv'],
    )
    open_and_run(page, lab, "tdview_preview_selection.ipynb")
    widget = page.locator(".tdview-root")
    try:
        for theme in ("light", "dark"):
            settle_theme(page, theme)
            check_weight(page, widget, artifacts, theme)
            check_conv(page, widget, artifacts, theme)
            check_sequential(page, widget, artifacts, theme)
            if theme == "light":
                out = run_cell(page, NO_TORCH)
                assert "IMPORTED False False" in out, out
    finally:
        settle_theme(page, "light")
