"""The load form in a notebook asks before it replaces a kernel variable: loading into
``view`` (the view itself) says "`view` is already bound to this TDView" and binds
nothing until Replace; a free name loads at once, with no progress flashed."""

from __future__ import annotations

from pathlib import Path

import pytest

from .notebook import RUN_TIMEOUT_MS, open_and_run, write_notebook
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import select, settle_theme

VIEW = 'from tdview import TDView\nview = TDView("demo_ckpt")\nview'
BOUND = "⚠ view is already bound to this TDView."


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_form_asks_before_replacing_a_bound_name(lab, page, artifacts: Path, theme) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    name = write_notebook(lab.root, f"load_form_{theme}.ipynb", [VIEW])
    open_and_run(page, lab, name)
    if theme == "dark":
        settle_theme(page, "dark")
    widget = page.locator(".tdview-root")
    row(page, "replay", 2).wait_for(timeout=TIMEOUT)
    select(page, widget, "replay", 2, '("replay",)')
    form = widget.locator(".tdview-load")
    form.locator(".tdview-disclosure").click()
    field = form.locator(".tdview-variable")
    field.fill("view")
    form.locator(".tdview-load-button").click()

    question = form.locator(".tdview-bound")
    question.wait_for(timeout=RUN_TIMEOUT_MS)
    assert question.locator(".tdview-bound-message").inner_text() == BOUND
    assert question.get_attribute("role") == "alert"
    assert form.locator(".tdview-progress").count() == 0  # a quick answer shows no progress
    question.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / f"load-form-bound-1280x720-{theme}.png"))
    assert "KEPT TDView" in run_cell(page, "print('KEPT', type(view).__name__)")

    question.locator(".tdview-replace-button").click()
    done = form.locator(".tdview-load-done")
    done.wait_for(timeout=RUN_TIMEOUT_MS)
    assert done.inner_text() == "Loaded replay into view"
    assert form.locator(".tdview-bound").count() == 0
    out = run_cell(page, "print('NOW', type(view).__name__, list(view.batch_size))")
    assert "NOW TensorDict [1000]" in out, out

    # The question goes with the name; a free name loads without asking.
    field.fill("replay_td")
    form.locator(".tdview-load-button").click()
    form.locator(".tdview-load-done", has_text="into replay_td").wait_for(timeout=RUN_TIMEOUT_MS)
    assert form.locator(".tdview-bound").count() == 0
