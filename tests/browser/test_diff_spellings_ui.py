"""The compare view of a module's weights in two spellings, in a real JupyterLab at
1280x720: a flat ``TensorDict(m.state_dict())`` saved with ``memmap`` (one file per dotted
key) against ``safetensors.torch.save_file`` of the same weights with one tensor changed.
The keys pair by their dotted form (nothing added or removed); compared by values, the
one changed tensor is found, its row and details name side a's key as it is spelled
there (``2.0.weight``), and side a's load line and Load button use that key. Light and
dark screenshots."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .notebook import RUN_TIMEOUT_MS, open_and_run, write_notebook
from .test_compare_ui import press_and_wait
from .test_widget import TIMEOUT, run_cell
from .test_widget_ui import marked, settle_theme

FLAT, FILE = "sp_flat", "sp_model.safetensors"
CHANGED = "2.0.weight"


def write_pair(root: Path) -> None:
    """The flat folder and the safetensors file, ``2.0.weight`` plus one in the file."""
    import torch
    from safetensors.torch import save_file
    from tensordict import TensorDict

    if (root / FILE).exists():
        return
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 3),
        torch.nn.ReLU(),
        torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2)),
    )
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    TensorDict(dict(state), batch_size=[]).memmap(root / FLAT)
    state[CHANGED] = state[CHANGED] + 1
    save_file(state, root / FILE)


@pytest.fixture
def small_page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    yield page
    context.close()


CHECK = """import json, torch, tdview
from safetensors.torch import load_file
ref = tdview.load_memmap("sp_flat")["2.0.weight"]
new = load_file("sp_model.safetensors")["2.0.weight"]
r = v.diff.row(("2", "0", "weight"))
print("CHECK", json.dumps({"loaded": bool(torch.equal(w_a, ref)),
    "path_a": list(r.path_a), "differing": r.values.differing,
    "numel": new.numel(), "changed": [".".join(x.path) for x in v.diff.changed()]}))"""


def test_the_compare_view_pairs_a_flat_state_dict_with_its_safetensors(
    lab, small_page, artifacts
) -> None:
    page = small_page
    write_pair(lab.root)
    write_notebook(
        lab.root,
        "spellings.ipynb",
        [f'from tdview import TDView\nv = TDView("{FLAT}", compare="{FILE}")\nv'],
    )
    open_and_run(page, lab, "spellings.ipynb")
    widget = page.locator(".tdview-root").first
    compare = widget.locator(".tdview-compare")
    compare.wait_for(timeout=TIMEOUT)
    header = compare.locator(".tdview-compare-header")
    assert "added" not in header.inner_text() and "removed" not in header.inner_text()

    compare.locator(".tdview-compare-all-values").click()
    compare.locator(".tdview-refine-done").wait_for(timeout=RUN_TIMEOUT_MS)
    # only the differences are shown: the changed tensor under the groups 2 and 0,
    # reached by the keyboard's next difference
    compare.locator('[role="treeitem"] .tdview-count-changed').first.wait_for(timeout=TIMEOUT)
    compare.locator('[role="tree"]').focus()
    page.keyboard.press("Home")
    assert press_and_wait(page, compare, "]") == "2 / 0 / weight"
    changed = compare.locator('[role="treeitem"][data-status="changed"]')
    assert changed.locator(".tdview-key").inner_text() == "weight"
    assert changed.locator(".tdview-compare-from").inner_text() == f"a: {CHANGED}"
    keys = compare.locator('[role="treeitem"] .tdview-key').all_inner_texts()
    assert keys[1:] == ["2", "0", "weight"], keys

    details = compare.locator(".tdview-compare-details")
    details.locator(".tdview-compare-path", has_text="2 / 0 / weight").wait_for(timeout=TIMEOUT)
    text = details.inner_text()
    assert f"Key in a\n{CHANGED}" in text, text
    assert "6 of 6" in text, text
    load_a = details.locator(".tdview-compare-load-a")
    code = load_a.locator(".tdview-code").inner_text()
    assert f'Checkpoint("{FLAT}").load_leaf("{CHANGED}"' in code, code
    load_a.locator(".tdview-disclosure").click()
    field = load_a.locator(".tdview-variable")
    field.fill("")
    field.press_sequentially("w_a")
    load_a.locator(".tdview-load-button").click()
    load_a.locator(".tdview-load-done").wait_for(timeout=RUN_TIMEOUT_MS)
    found = marked(run_cell(page, CHECK), "CHECK")
    assert found == {
        "loaded": True,
        "path_a": [CHANGED],
        "differing": found["numel"],
        "numel": 6,
        "changed": [CHANGED],
    }

    details.evaluate("el => { el.scrollTop = 0; }")
    widget.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(artifacts / "tdview-compare-spellings-1280x720-light.png"))
    try:
        settle_theme(page, "dark")
        page.screenshot(path=str(artifacts / "tdview-compare-spellings-1280x720-dark.png"))
    finally:
        settle_theme(page, "light")

    # The node 2/0, which side a spells only in its keys' names: same, its note says so.
    compare.locator('[role="tree"]').focus()
    page.keyboard.press("ArrowUp")
    page.wait_for_function(
        """() => {
            const el = document.querySelector('.tdview-compare-details .tdview-compare-path');
            return el !== null && el.textContent.trim().endsWith('2 / 0');
        }""",
        timeout=TIMEOUT,
    )
    text = details.inner_text()
    assert "a: keys named 2.0.…" in text, text
    assert load_a.is_hidden()  # side a has no node 2/0 to load
    assert details.locator(".tdview-compare-load-b").is_visible()
    page.screenshot(path=str(artifacts / "tdview-compare-spellings-group-1280x720-light.png"))
