"""A folder of checkpoints in a real JupyterLab, driven through Chromium: the collection's
rows (a directory checkpoint, a .tdz, a config.json), a member expanded, a leaf's details
and code line naming the member's own path, its preview, loads through the form (the
leaf, and a member whole) checked from the next cell, light and dark screenshots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .notebook import open_and_run, write_notebook
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import details, load_through_form, marked, settle_theme

FOLDER = "run_collection"

# The values the UI loads, checked against the files with tensordict's own reader.
CHECK = f"""
import json, torch
from tensordict import TensorDict
ref = TensorDict.load_memmap("{FOLDER}/step_1000")
print("LOADED", json.dumps({{
    "weight": w.tolist(),
    "weight_type": type(w).__name__,
    "member_type": type(ck).__name__,
    "member_keys": sorted("/".join(k) if isinstance(k, tuple) else k
                          for k in ck.keys(True, True)),
    "member_same": all(torch.equal(ck[k], ref[k]) for k in ref.keys(True, True)),
    "value_is_member": v.value is ck,
}}))
"""


def write_collection(root: Path) -> None:
    """A training run: a directory checkpoint, an archive, and the run's config."""
    import torch
    from tensordict import TensorDict

    def model(step: int) -> TensorDict:
        weight = torch.arange(12, dtype=torch.float32).reshape(4, 3) * step
        return TensorDict(
            {"model": {"weight": weight, "bias": torch.ones(4) * step}, "step": torch.tensor(step)},
            [],
        )

    root.mkdir(exist_ok=True)
    if not (root / "step_1000" / "meta.json").exists():
        model(1).memmap(root / "step_1000")
    if not (root / "step_2000.tdz").exists():
        model(2).save(root / "step_2000.tdz")
    (root / "config.json").write_text(json.dumps({"lr": 0.001, "layers": [4, 3]}))


def dl_text(widget: Any) -> str:
    return details(widget).locator("dl").inner_text()


def show(page: Any, widget: Any, key: str, level: int, path_text: str) -> str:
    """Click the row of ``key`` and wait until the details show its path; their text."""
    row(page, key, level).first.locator(".tdview-key").click()
    details(widget).locator("dd").get_by_text(path_text, exact=True).wait_for(timeout=TIMEOUT)
    return dl_text(widget)


def test_collection_member_leaf_preview_and_load(lab, page, artifacts) -> None:
    write_collection(lab.root / FOLDER)
    cell = f'from tdview import TDView\nv = TDView("{FOLDER}")\nv'
    write_notebook(lab.root, "tdview_collection.ipynb", [cell])
    open_and_run(page, lab, "tdview_collection.ipynb")
    widget = page.locator(".tdview-root")
    row(page, "step_2000.tdz", 2).wait_for(timeout=TIMEOUT)  # the root opens by itself

    # The collection's rows: what each is, its size as for any node.
    def badge(key: str, level: int) -> str:
        return row(page, key, level).locator(".tdview-badge").inner_text()

    assert badge(FOLDER, 1) == "folder of checkpoints"
    assert badge("config.json", 2) == "JSON"
    assert badge("step_1000", 2) == "checkpoint · directory"
    assert badge("step_2000.tdz", 2) == "checkpoint · archive"
    size = row(page, "step_2000.tdz", 2).locator(".tdview-bytes", has_text="B")
    size.wait_for(timeout=TIMEOUT)  # with the subtree totals, sent after the first paint
    assert size.inner_text() == "72 B"  # 12 + 4 float32, one int64
    header = widget.locator(".tdview-header").inner_text()
    assert "folder of checkpoints" in header, header

    # config.json: its value shown like a non-tensor's; nothing to load.
    text = show(page, widget, "config.json", 2, "config.json")
    assert '"lr": 0.001' in text and "JSON file" in text, text
    form = widget.locator(".tdview-load")
    form.locator(".tdview-disclosure").click()
    assert form.locator(".tdview-load-button").is_disabled()
    assert "tdview does not load it" in form.locator(".tdview-load-refusal").inner_text()
    assert form.locator(".tdview-load-fields").is_hidden()
    assert form.locator(".tdview-code-row").is_hidden()
    size = row(page, "config.json", 2).locator(".tdview-bytes", has_text="B")
    size.wait_for(timeout=TIMEOUT)
    assert size.inner_text() == f"{(lab.root / FOLDER / 'config.json').stat().st_size} B"
    widget.screenshot(path=str(artifacts / "tdview-collection-json-light.png"))

    # A leaf of the archive member: the details and the code line name the member.
    row(page, "step_2000.tdz", 2).locator(".tdview-twisty").click()
    row(page, "model", 3).wait_for(timeout=TIMEOUT)
    row(page, "model", 3).locator(".tdview-twisty").click()
    row(page, "weight", 4).wait_for(timeout=TIMEOUT)
    text = show(page, widget, "weight", 4, "step_2000.tdz / model / weight")
    assert f"{FOLDER}/step_2000.tdz (archive)" in text, text
    assert '("model", "weight")' in text and "model/weight" in text, text
    expected = (
        f'weight = tdview.Checkpoint("{FOLDER}/step_2000.tdz").load_leaf("model/weight",'
        ' device="cpu", mode="r")'
    )
    assert form.locator(".tdview-code").inner_text() == expected

    # Its preview.
    preview = details(widget).locator(".tdview-preview")
    preview.locator(".tdview-preview-button").click()
    preview.locator(".tdview-preview-table").wait_for(timeout=TIMEOUT)
    assert preview.locator(".tdview-preview-table tbody tr").count() == 4
    stats = preview.locator(".tdview-stats").inner_text()
    assert "22" in stats and "12" in stats, stats  # max 11 * 2, count 12

    # Load it as `w`: the kernel's line is the one shown before.
    load_through_form(widget, "w")
    assert "into w" in form.locator(".tdview-load-done").inner_text(), form.inner_text()
    assert form.locator(".tdview-code").inner_text() == expected.replace("weight =", "w =", 1)
    widget.screenshot(path=str(artifacts / "tdview-collection-light.png"))

    # The directory member, loaded whole from its own folder.
    text = show(page, widget, "step_1000", 2, "step_1000")
    assert "checkpoint · directory" in text and f"{FOLDER}/step_1000 (directory)" in text, text
    load_through_form(widget, "ck")
    assert form.locator(".tdview-code").inner_text() == (
        f'ck = tdview.load_memmap("{FOLDER}/step_1000", device="cpu", mode="r")'
    )

    checked = marked(run_cell(page, CHECK), "LOADED")
    assert checked == {
        "weight": [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0], [12.0, 14.0, 16.0], [18.0, 20.0, 22.0]],
        "weight_type": "Tensor",
        "member_type": "TensorDict",
        "member_keys": ["model/bias", "model/weight", "step"],
        "member_same": True,
        "value_is_member": True,
    }, checked

    try:
        settle_theme(page, "dark")
        show(page, widget, "weight", 4, "step_2000.tdz / model / weight")
        preview.locator(".tdview-preview-button").click()
        preview.locator(".tdview-preview-table").wait_for(timeout=TIMEOUT)
        widget.screenshot(path=str(artifacts / "tdview-collection-dark.png"))
    finally:
        settle_theme(page, "light")
