"""The "Check" action on a folder of checkpoints, in a real JupyterLab at 1280x720: a
training run saved by tensordict (two steps whose frozen layer is the same bytes, the
second written in place with ``mode="r+"``, and a third archive cut short). The
folder's own row has "✓ Check"; it lists what ``tdview.answers.check`` finds in the
kernel, each problem named from the folder's root (member first), and the weights
stored at both steps as one group; a problem's key selects its node inside the member.
Light and dark screenshots."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .notebook import open_and_run, write_notebook
from .test_check_ui import page_1280 as page_1280  # the fixture, used by name
from .test_check_ui import shown
from .test_labextension import (
    _extension_installed,  # noqa: F401 - the module's autouse check
    _own_kernels,  # noqa: F401 - the module's autouse cleanup
)
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import details, settle_theme, wait_details

RUN = "checked_run"

WRITE = """
import torch
from pathlib import Path
from tensordict import TensorDict
root = Path({root!r})
root.mkdir(exist_ok=True)
g = torch.Generator().manual_seed(0)
norm = torch.randn(64, generator=g)
def step(n):
    return TensorDict({{
        "model": {{
            "norm": {{"weight": norm.clone()}},
            "layers": {{str(i): {{"w": torch.randn(32, 32, generator=g)}} for i in range(2)}},
        }},
        "step": torch.tensor(n),
    }})
step(1000).save(root / "step_1000.tdz")
step(2000).save(root / "step_2000.tdz")
TensorDict.load_memmap(root / "step_2000.tdz", mode="r+")["model", "layers", "1", "w"].mul_(2)
data = (root / "step_1000.tdz").read_bytes()
(root / "step_3000.tdz").write_bytes(data[: len(data) // 2])
"""


def kernel_check(page: Any) -> dict[str, Any]:
    out = run_cell(
        page,
        "import json\nfrom tdview.answers import check\n"
        f"r = check({RUN!r})\n"
        "print('CHECK', json.dumps({'problems': [[list(p.path), p.kind] for p in r.problems],"
        " 'duplicates': [[list(p) for p in g] for g in r.duplicates]}))",
    )
    line = next(x for x in out.splitlines() if x.startswith("CHECK "))
    return json.loads(line[6:])


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_check_of_a_folder_lists_each_member_s_problems(
    lab, page_1280, artifacts, theme: str
) -> None:
    page = page_1280
    name = f"tdview_check_folder_{theme}.ipynb"
    write_notebook(
        lab.root,
        name,
        [WRITE.format(root=RUN), f'from tdview import TDView\nv = TDView("{RUN}")\nv'],
    )
    open_and_run(page, lab, name)
    settle_theme(page, theme)
    widget = page.locator(".tdview-root")
    row(page, "step_2000.tdz", 2).wait_for(timeout=TIMEOUT)
    row(page, RUN, 1).first.locator(".tdview-key").click()
    toggle = details(widget).locator(".tdview-check-toggle")
    toggle.wait_for(timeout=TIMEOUT)
    toggle.click()
    panel = widget.locator(".tdview-check")
    verdict = panel.locator(".tdview-check-verdict")
    verdict.wait_for(timeout=TIMEOUT)

    kernel = kernel_check(page)
    assert (
        shown(panel)
        == kernel["problems"]
        == [
            [["step_2000.tdz", "model", "layers", "1", "w"], "stale_crc"],
            [["step_3000.tdz"], "truncated"],
        ]
    )
    assert "2 problems" in verdict.inner_text()
    assert "2 checkpoints" in verdict.inner_text()
    group = panel.locator(".tdview-check-duplicates li").first
    keys = group.locator(".tdview-check-key").all_inner_texts()
    assert keys == ["step_1000.tdz/model/norm/weight", "step_2000.tdz/model/norm/weight"]
    assert [k.split("/") for k in keys] in kernel["duplicates"]
    widget.evaluate("(el) => el.scrollIntoView()")
    page.screenshot(path=str(artifacts / f"tdview-check-folder-1280x720-{theme}.png"))

    # a problem's key selects its node inside the member; the list stays on show
    panel.locator(".tdview-check-key", has_text="step_2000.tdz/model/layers/1/w").click()
    wait_details(widget, '("model", "layers", "1", "w")')  # the member's own keys
    assert row(page, "w", 6).first.get_attribute("aria-selected") == "true"
    assert panel.locator(".tdview-check-problem").count() == 2

    # the Sizes view's "Find duplicates" on the folder: the frozen weights of both steps
    out = run_cell(
        page,
        "from tdview.answers import find_duplicates\n"
        f"print('WASTED', find_duplicates({RUN!r}).wasted_bytes)",
    )
    wasted = int(next(x for x in out.splitlines() if x.startswith("WASTED "))[7:])
    assert wasted == 64 * 4  # one copy of the norm's weight too many
    row(page, RUN, 1).first.locator(".tdview-key").click()
    sizes_toggle = details(widget).locator(".tdview-sizes-toggle")
    sizes_toggle.wait_for(timeout=TIMEOUT)
    sizes_toggle.click()
    sizes = widget.locator(".tdview-sizes")
    sizes.locator(".tdview-sizes-find").click()
    stored_twice = sizes.locator(".tdview-sizes-duplicates")
    stored_twice.wait_for(timeout=TIMEOUT)
    assert stored_twice.inner_text() == f"{wasted} B in duplicates"
    widget.evaluate("(el) => el.scrollIntoView()")
    page.screenshot(path=str(artifacts / f"tdview-sizes-folder-1280x720-{theme}.png"))
