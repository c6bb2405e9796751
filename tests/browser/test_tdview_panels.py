"""Several tdview panels (consoles) in one JupyterLab, opened and closed in different
orders: each keeps answering (a second panel once drew its tree and then timed out, its
kernel logging "Unknown subshell_id"); closing a panel shuts its kernel down unless a
notebook still uses it."""

from __future__ import annotations

import shutil
import time
from typing import Any

import pytest

from .notebook import RUN_TIMEOUT_MS
from .test_labextension import (
    TIMEOUT,
    _extension_installed,  # noqa: F401 - the module's autouse check
    _own_kernels,  # noqa: F401 - the module's autouse cleanup
    context_menu,
    open_lab,
    row,
)

ANSWER_MS = 20_000  # well under the view's 60 s request timeout
FOLDERS = ("panel_a", "panel_b", "panel_c", "panel_d", "panel_e")


@pytest.fixture(scope="module", autouse=True)
def _folders(lab: Any) -> None:
    for name in FOLDERS:
        if not (lab.root / name).exists():
            shutil.copytree(lab.root / "demo_ckpt", lab.root / name)


def open_panel(page: Any, name: str) -> Any:
    context_menu(page, name, "Open in tdview").click()
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=f"tdview: {name}")
    tab.first.wait_for(timeout=TIMEOUT)
    tab.first.click()
    return visible_panel(page)


def visible_panel(page: Any) -> Any:
    panel = page.locator(".jp-MainAreaWidget.tdview-console:visible")
    row(panel, "replay", 2).wait_for(timeout=RUN_TIMEOUT_MS)
    return panel


def activate(page: Any, name: str) -> Any:
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=f"tdview: {name}").first.click()
    return visible_panel(page)


def answers(page: Any, panel: Any, key: str = "replay") -> None:
    """The panel's kernel answers a new request: the details of a row it had not shown
    (each wait raises past ANSWER_MS: a deaf panel fails, however fast this machine is)."""
    row(panel, key, 2).locator(".tdview-key").click()
    dl = panel.locator(".tdview-details dl")
    dl.get_by_text("Subpath", exact=True).first.wait_for(timeout=ANSWER_MS)
    panel.locator(".tdview-details").get_by_text(key, exact=True).first.wait_for(timeout=ANSWER_MS)


def kernel_ids(page: Any) -> list[str]:
    return page.evaluate("""() => [...window.jupyterapp.shell.widgets('main')]
        .filter(w => w.hasClass && w.hasClass('tdview-console'))
        .map(w => w.sessionContext.session && w.sessionContext.session.kernel
                  && w.sessionContext.session.kernel.id)""")


@pytest.mark.parametrize(
    "order", [("panel_a", "panel_b", "panel_c"), ("panel_c", "panel_a", "panel_b")]
)
def test_several_panels_keep_answering(lab, page, order) -> None:
    open_lab(page, lab)
    for name in order:
        panel = open_panel(page, name)
        answers(page, panel, "replay")
    ids = kernel_ids(page)
    assert len(ids) == len(order) and len(set(ids)) == 1, ids  # views of one kernel
    # Back to each earlier panel, in reverse: each still answers.
    for name, key in zip(reversed(order), ("model", "optimizer", "rollout"), strict=False):
        answers(page, activate(page, name), key)


def test_panels_opened_at_once_all_answer(lab, page) -> None:
    """Opened back to back, without waiting for each tree: each kernel starts while the
    others do (the race that made one panel deaf)."""
    open_lab(page, lab)
    log_before = lab.log.read_text(errors="replace")
    names = ("panel_d", "panel_e", "panel_a", "panel_b")
    for name in names:
        context_menu(page, name, "Open in tdview").click()
    for name, key in zip(names, ("replay", "model", "optimizer", "rollout"), strict=True):
        answers(page, activate(page, name), key)
    new_log = lab.log.read_text(errors="replace")[len(log_before) :]
    assert "Unknown subshell_id" not in new_log, new_log[-3000:]


def running_kernels(lab: Any) -> set[str]:
    return {k["id"] for k in lab.api("/api/kernels")}  # type: ignore[union-attr]


def close_current(page: Any) -> None:
    page.evaluate("() => window.jupyterapp.shell.currentWidget.close()")


def wait_for(predicate: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.25)
    return predicate()


def test_closing_a_panel_shuts_its_kernel_down_unless_shared(lab, page) -> None:
    open_lab(page, lab)
    open_panel(page, "panel_a")
    (kernel_a,) = kernel_ids(page)
    assert kernel_a in running_kernels(lab)
    close_current(page)
    assert wait_for(lambda: kernel_a not in running_kernels(lab)), "the kernel outlived its panel"

    # A notebook opened on the panel's kernel keeps it running when the panel closes;
    # it is created next to the checkpoint, named after it.
    (lab.root / "sub").mkdir(exist_ok=True)
    if not (lab.root / "sub" / "panel_b").exists():
        shutil.copytree(lab.root / "demo_ckpt", lab.root / "sub" / "panel_b")
    page.evaluate("() => window.jupyterapp.commands.execute('tdview:open', {path: 'sub/panel_b'})")
    panel = visible_panel(page)
    (kernel_b,) = kernel_ids(page)
    panel.locator(".tdview-open-notebook button, button.tdview-open-notebook").first.click()
    page.locator(".jp-NotebookPanel:visible .jp-Cell").first.wait_for(timeout=TIMEOUT)
    path = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.path")
    assert path == "sub/panel_b-tdview.ipynb", path
    assert (lab.root / "sub" / "panel_b-tdview.ipynb").is_file()
    page.wait_for_function(
        """(id) => {
            const w = window.jupyterapp.shell.currentWidget;
            const k = w && w.sessionContext && w.sessionContext.session
                && w.sessionContext.session.kernel;
            return k && k.id === id && k.status === 'idle';
        }""",
        arg=kernel_b,
        timeout=RUN_TIMEOUT_MS,
    )
    activate(page, "sub/panel_b")  # the tab names the path
    close_current(page)
    page.wait_for_timeout(2000)
    assert kernel_b in running_kernels(lab), "the notebook's kernel was shut down"


def test_reload_restores_the_panel(lab, page) -> None:
    open_lab(page, lab)
    open_panel(page, "panel_c")
    (kernel,) = kernel_ids(page)
    page.wait_for_timeout(1500)  # the workspace is saved after a change
    page.reload(wait_until="domcontentloaded")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=TIMEOUT)
    page.evaluate("() => window.jupyterapp.restored")
    panel = activate(page, "panel_c")
    answers(page, panel, "model")
    assert kernel_ids(page) == [kernel]  # the same kernel, shown again


def test_kernel_restart_is_said_once(lab, page, artifacts) -> None:
    """After a restart the old view says so once, calmly, at its next request, and asks
    nothing more (it used to read "ConnectionLost: cannot send: Error: Cannot send", and
    each row the same)."""
    open_lab(page, lab)
    panel = open_panel(page, "panel_d")
    page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()"
    )
    page.wait_for_function(
        """() => {
            const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
            return k && k.status === 'idle';
        }""",
        timeout=RUN_TIMEOUT_MS,
    )
    # the view learns of the restart from its next request (a send to the gone comm
    # throws): the user's next click, here a row not shown yet, or a request of its own
    # sent first (then the view is inert already, and the click lands on nothing)
    row(panel, "replay", 2).locator(".tdview-key").click(force=True)
    notice = panel.locator(".tdview-lost")
    notice.wait_for(timeout=TIMEOUT)
    row(panel, "replay", 2).locator(".tdview-key").click(force=True)  # no second notice
    page.wait_for_timeout(1000)
    assert notice.count() == 1
    assert notice.inner_text() == "tdview: the kernel restarted: run the cell again.", (
        notice.inner_text()
    )
    assert panel.locator(".tdview-stale").evaluate("el => el.inert")  # nothing more asked
    text = panel.locator(".tdview-root").inner_text()
    assert "annot send" not in text and "ConnectionLost" not in text, text
    page.screenshot(path=str(artifacts / "labextension-kernel-restarted-light.png"))


# The boxes of a panel's cells' area, its view's tree and details (viewport pixels).
_FILL_BOXES = """(p) => {
    const area = p.querySelector('.jp-CodeConsole-content');
    const a = area.getBoundingClientRect();
    const tree = p.querySelector('.tdview-tree').getBoundingClientRect();
    const details = p.querySelector('.tdview-details').getBoundingClientRect();
    return {area_bottom: a.top + area.clientHeight, scrolls: area.scrollHeight > area.clientHeight,
            tree: tree.height, tree_bottom: tree.bottom, details_bottom: details.bottom};
}"""


def test_the_view_fills_the_panel_and_follows_its_resizes(lab, page, tmp_path) -> None:
    """In a tdview panel the tree and details reach down to the panel's bottom (no
    scrolling, not the 360 px of a notebook cell), and follow the panel when it grows."""
    open_lab(page, lab)
    panel = open_panel(page, "panel_e")
    panel.locator(".tdview-root.tdview-filled").wait_for(timeout=TIMEOUT)
    boxes = panel.evaluate(_FILL_BOXES)
    assert boxes["tree"] > 400, boxes  # 432 at this 900 px viewport, the code cell above
    assert 0 <= boxes["area_bottom"] - boxes["tree_bottom"] <= 24, boxes
    assert abs(boxes["details_bottom"] - boxes["tree_bottom"]) <= 1, boxes
    assert not boxes["scrolls"], boxes
    page.screenshot(path=str(tmp_path / "tdview-panel-900.png"))

    # A taller panel: its split gives the cells' area part of the height, the tree all of that.
    page.set_viewport_size({"width": 1400, "height": 1100})
    page.wait_for_function(
        """([p, before]) => {
            const area = p.querySelector('.jp-CodeConsole-content');
            const tree = p.querySelector('.tdview-tree').getBoundingClientRect();
            const bottom = area.getBoundingClientRect().top + area.clientHeight;
            return bottom > before + 50 && bottom - tree.bottom <= 24;
        }""",
        arg=[panel.element_handle(), boxes["area_bottom"]],
        timeout=TIMEOUT,
    )
    grown = panel.evaluate(_FILL_BOXES)
    assert (
        abs((grown["tree"] - boxes["tree"]) - (grown["area_bottom"] - boxes["area_bottom"])) <= 2
    ), (boxes, grown)
    assert not grown["scrolls"], grown
    page.screenshot(path=str(tmp_path / "tdview-panel-1100.png"))
