""" "Open in tdview" starts one kernel and opens later files as new views in it: the
first panel says "Starting a kernel…" while it waits, the second opens in the running
kernel with a name of its own (``view2``), and "Open in new tdview kernel" starts
another kernel on request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .notebook import RUN_TIMEOUT_MS
from .test_labextension import (
    TIMEOUT,
    _extension_installed,  # noqa: F401 - the module's autouse check
    _own_kernels,  # noqa: F401 - the module's autouse cleanup
    context_menu,
    open_lab,
    row,
    run_in_console,
)
from .test_tdview_panels import kernel_ids, running_kernels

STATUS = ".tdview-console-status"


def panel_of(page: Any, name: str) -> Any:
    """The tdview console of ``name``, brought to the front, once its tree shows."""
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=f"tdview: {name}")
    tab.first.wait_for(timeout=TIMEOUT)
    tab.first.click()
    panel = page.locator(".jp-MainAreaWidget.tdview-console:visible")
    row(panel, "replay", 2).wait_for(timeout=RUN_TIMEOUT_MS)
    return panel


def test_two_files_open_as_views_of_one_kernel(lab, page, artifacts: Path) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    open_lab(page, lab)
    before = running_kernels(lab)
    context_menu(page, "demo_ckpt.tdz", "Open in tdview").click()
    status = page.locator(f".tdview-console:visible {STATUS}", has_text="Starting a kernel…")
    status.wait_for(timeout=TIMEOUT)  # said at once: the kernel takes seconds to start
    page.screenshot(path=str(artifacts / "labextension-starting-kernel-1280x720-light.png"))
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")
    assert tab.inner_text() == "tdview: demo_ckpt.tdz"  # not "Console" while it starts
    first = panel_of(page, "demo_ckpt.tdz")
    assert first.locator(STATUS).count() == 0  # gone once the view has drawn

    context_menu(page, "demo_ckpt", "Open in tdview").click()
    second = panel_of(page, "demo_ckpt")
    # a panel's session is set a moment after its view draws (a loaded machine shows it)
    page.wait_for_function(
        """() => [...window.jupyterapp.shell.widgets('main')]
            .filter(w => w.hasClass && w.hasClass('tdview-console'))
            .every(w => w.sessionContext.session && w.sessionContext.session.kernel)""",
        timeout=TIMEOUT,
    )
    ids = kernel_ids(page)
    assert len(ids) == 2 and ids[0] == ids[1], ids  # one kernel serves both views
    assert len(running_kernels(lab) - before) == 1
    out = run_in_console(page, second, "print('VIEWS', view.source, view2.source)", "VIEWS")
    assert "VIEWS demo_ckpt.tdz demo_ckpt" in out, out  # each view its own name
    row(second, "model", 2).locator(".tdview-key").click()  # the second view answers
    second.locator(".tdview-details").get_by_text("model", exact=True).first.wait_for(
        timeout=TIMEOUT
    )


def test_open_in_new_kernel_starts_one_of_its_own(lab, page, artifacts: Path) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    open_lab(page, lab, theme="dark")
    context_menu(page, "demo_ckpt", "Open in tdview").click()
    panel_of(page, "demo_ckpt")
    (shared,) = set(kernel_ids(page))
    context_menu(page, "demo_ckpt.tdz", "Open in new tdview kernel").click()
    status = page.locator(f".tdview-console:visible {STATUS}", has_text="Starting a kernel…")
    status.wait_for(timeout=TIMEOUT)
    page.screenshot(path=str(artifacts / "labextension-starting-kernel-1280x720-dark.png"))
    own = panel_of(page, "demo_ckpt.tdz")
    ids = kernel_ids(page)
    assert len(set(ids)) == 2 and shared in ids, ids
    out = run_in_console(page, own, "print('OWN', view.source)", "OWN")
    assert "OWN demo_ckpt.tdz" in out, out  # a kernel of its own: its view is `view`
