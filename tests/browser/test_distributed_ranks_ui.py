"""The load form's "On N ranks": each rank's rows as ``tdview.distributed`` splits them
(checked against ``rows_of_rank`` in the kernel), about how many bytes each reads, and
the torchrun script, copied by its button. Screenshots at 1280x720, light and dark."""

from __future__ import annotations

from pathlib import Path

import pytest

from .notebook import open_and_run, write_notebook
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import clipboard, marked, select, settle_theme

VIEW = 'from tdview import TDView\nview = TDView("demo_ckpt")\nview'


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_form_splits_the_rows_across_ranks(lab, page, artifacts: Path, theme) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=lab.base_url)
    name = write_notebook(lab.root, f"ranks_{theme}.ipynb", [VIEW])
    open_and_run(page, lab, name)
    if theme == "dark":
        settle_theme(page, "dark")
    widget = page.locator(".tdview-root")
    row(page, "replay", 2).wait_for(timeout=TIMEOUT)
    select(page, widget, "replay", 2, '("replay",)')
    form = widget.locator(".tdview-load")
    form.locator(".tdview-disclosure").click()
    ranks = form.locator(".tdview-ranks")
    ranks.locator(".tdview-ranks-toggle").check()
    ranks.locator(".tdview-ranks-count").fill("3")
    table = ranks.locator(".tdview-ranks-table tbody tr")
    table.nth(2).wait_for(timeout=TIMEOUT)
    shown = [table.nth(i).locator("td").nth(1).inner_text() for i in range(table.count())]
    out = run_cell(
        page,
        "import json, tdview.distributed\n"
        "print('ROWS', json.dumps([tdview.distributed.rows_of_rank(1000, r, 3) "
        "for r in range(3)]))",
    )
    expected = marked(out, "ROWS")
    assert shown == [
        f"{a}:{b:,} ({b - a})" if b >= 1000 else f"{a}:{b} ({b - a})" for a, b in expected
    ]
    code = ranks.locator(".tdview-ranks-code").inner_text()
    assert "# torchrun --nproc_per_node=3 load_rows.py" in code
    assert 'tdview.distributed.load_shard("demo_ckpt", "replay")' in code
    ranks.locator(".tdview-copy-button", has_text="Copy script").click()
    assert clipboard(page) == code
    ranks.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / f"load-form-ranks-1280x720-{theme}.png"))
