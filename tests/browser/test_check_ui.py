"""The "Check" action in a real JupyterLab at 1280x720: an archive written by tensordict
with tied weights saved twice, a NaN and a leaf written in place with ``mode="r+"``; the
details' "✓ Check" lists the problems that ``tdview.answers.check`` finds in the kernel,
each named by its key, "Read every value" adds the NaN, and a problem's key selects its
node while the list stays. Light and dark screenshots."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .notebook import open_and_run, write_notebook
from .test_labextension import (
    _extension_installed,  # noqa: F401 - the module's autouse check
    _own_kernels,  # noqa: F401 - the module's autouse cleanup
)
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import details, settle_theme, wait_details

CKPT = "checked/ckpt.tdz"

WRITE = """
import torch
from pathlib import Path
from tensordict import TensorDict
path = Path({path!r})
path.parent.mkdir(exist_ok=True)
embed = torch.randn(64, 32, generator=torch.Generator().manual_seed(0))
bias = torch.zeros(64); bias[3] = float("nan")
TensorDict({{
    "model": {{
        "embed": {{"weight": embed}},
        "head": {{"weight": embed.clone(), "bias": bias}},
        "layers": {{str(i): {{"w": torch.randn(32, 32), "b": torch.randn(32)}} for i in range(3)}},
    }},
    "step": torch.tensor(1000),
}}).save(path)
TensorDict.load_memmap(path, mode="r+")["model", "layers", "1", "w"].mul_(2)
"""


@pytest.fixture
def page_1280(browser: Any) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    yield page
    context.close()


def kernel_check(page: Any, values: bool) -> list[list[Any]]:
    out = run_cell(
        page,
        "import json\nfrom tdview.answers import check\n"
        f"r = check({CKPT!r}, values={values})\n"
        "print('CHECK', json.dumps([[list(p.path), p.kind] for p in r.problems]))",
    )
    line = next(x for x in out.splitlines() if x.startswith("CHECK "))
    return json.loads(line[6:])


def shown(panel: Any) -> list[list[Any]]:
    rows = panel.locator(".tdview-check-problem")
    found = []
    for i in range(rows.count()):
        key = rows.nth(i).locator(".tdview-check-key").inner_text()
        kind = rows.nth(i).locator(".tdview-check-kind").inner_text().replace(" ", "_")
        found.append([key.split("/"), kind])
    return found


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_check_lists_the_problems_by_key(lab, page_1280, artifacts, theme: str) -> None:
    page = page_1280
    name = f"tdview_check_{theme}.ipynb"
    write_notebook(
        lab.root,
        name,
        [WRITE.format(path=CKPT), f'from tdview import TDView\nv = TDView("{CKPT}")\nv'],
    )
    open_and_run(page, lab, name)
    settle_theme(page, theme)  # the lab's settings may hold the other theme from before
    widget = page.locator(".tdview-root")
    row(page, "ckpt.tdz", 1).first.locator(".tdview-key").click()
    toggle = details(widget).locator(".tdview-check-toggle")
    toggle.wait_for(timeout=TIMEOUT)
    toggle.click()
    panel = widget.locator(".tdview-check")
    verdict = panel.locator(".tdview-check-verdict")
    verdict.wait_for(timeout=TIMEOUT)

    # integrity: the leaf written with r+ has a stale CRC; the tied weights are a group
    assert (
        shown(panel) == kernel_check(page, False) == [[["model", "layers", "1", "w"], "stale_crc"]]
    )
    assert "1 problem" in verdict.inner_text()
    assert "refresh_archive_checksums" in panel.locator(".tdview-check-message").first.inner_text()
    group = panel.locator(".tdview-check-duplicates .tdview-check-key").all_inner_texts()
    assert group == ["model/embed/weight", "model/head/weight"]

    # every value: the NaN too, as the kernel finds it
    panel.locator(".tdview-check-values input").check()
    panel.get_by_text("2 problems").wait_for(timeout=TIMEOUT)
    assert shown(panel) == kernel_check(page, True)
    assert [["model", "head", "bias"], "nan"] in shown(panel)
    widget.evaluate("(el) => el.scrollIntoView()")
    page.screenshot(path=str(artifacts / f"tdview-check-1280x720-{theme}.png"))

    # a problem's key selects its node; the list stays on show
    panel.locator(".tdview-check-key", has_text="model/head/bias").click()
    wait_details(widget, '("model", "head", "bias")')
    assert row(page, "bias", 4).first.get_attribute("aria-selected") == "true"
    assert panel.locator(".tdview-check-problem").count() == 2
