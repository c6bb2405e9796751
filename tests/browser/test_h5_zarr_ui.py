"""Issue 35's HDF5 and zarr files in a real JupyterLab at 1280x720: a file written by
tensordict's ``to_h5`` and a store written by ``to_zarr`` open in ``TDView``; the tree
shows their groups (nested tensordicts with their batch sizes) and datasets, a preview
reads a leaf, the Load button binds a variable equal to what ``from_h5`` /
``from_zarr`` give. Light and dark screenshots at 1280x720."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .notebook import open_and_run, write_notebook
from .test_widget import TIMEOUT, row, run_cell
from .test_widget_ui import details, load_through_form, marked, select, settle_theme

FORMATS = {"h5": "episodes.h5", "zarr": "episodes.zarr"}


def write_files(root: Path) -> None:
    """The same tensordict, written by ``to_h5`` and by ``to_zarr``."""
    import torch
    from tensordict import NonTensorStack, TensorDict

    folder = root / "formats35"
    if (folder / FORMATS["h5"]).exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(35)
    td = TensorDict(
        observation=torch.randn(200, 8, generator=g),
        action=torch.randint(0, 4, (200,), generator=g),
        done=torch.rand(200, generator=g) > 0.9,
        next=TensorDict(
            observation=torch.randn(200, 8, generator=g),
            reward=torch.randn(200, 1, generator=g).to(torch.float16),
            batch_size=[200],
        ),
        batch_size=[200],
        names=["step"],
    )
    td["policy"] = "ppo"
    td["phase"] = NonTensorStack(*(["explore"] * 100 + ["exploit"] * 100))
    td.to_h5(folder / FORMATS["h5"]).close()
    td.to_zarr(folder / FORMATS["zarr"])


@pytest.fixture
def small_page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    yield page
    context.close()


CHECK = """import json, warnings
import torch
from tensordict import TensorDict
warnings.simplefilter("ignore")
ref = TensorDict.{reader}("formats35/{name}").to_tensordict()
print("SAME", json.dumps({{"obs": bool(torch.equal(nxt["observation"], ref["next", "observation"])),
    "reward": bool(torch.equal(nxt["reward"], ref["next", "reward"])),
    "batch": list(nxt.batch_size)}}))"""


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_file_opens_previews_and_loads(lab, small_page, artifacts, fmt: str) -> None:
    page, name = small_page, FORMATS[fmt]
    write_files(lab.root)
    write_notebook(
        lab.root,
        f"formats35_{fmt}.ipynb",
        [f'from tdview import TDView\nv = TDView("formats35/{name}")\nv'],
    )
    open_and_run(page, lab, f"formats35_{fmt}.ipynb")
    widget = page.locator(".tdview-root").first
    row(page, "next", 2).wait_for(timeout=TIMEOUT)
    keys = widget.locator('.tdview-tree [role="treeitem"][aria-level="2"] .tdview-key')
    assert set(keys.all_inner_texts()) == {
        "observation", "action", "done", "next", "policy", "phase"
    }  # fmt: skip

    row(page, "next", 2).locator(".tdview-twisty").click()
    row(page, "reward", 3).first.wait_for(timeout=TIMEOUT)
    select(page, widget, "reward", 3, '("next", "reward")')
    assert "float16" in details(widget).inner_text()
    preview = details(widget).locator(".tdview-preview")
    preview.locator(".tdview-preview-button").click()
    preview.locator(".tdview-preview-table").wait_for(timeout=TIMEOUT)
    assert "rows 0–20 of 200" in preview.locator(".tdview-preview-rows").inner_text()

    select(page, widget, "next", 2, '("next",)')
    form = widget.locator(".tdview-load")
    if (
        form.locator(".tdview-variable").count() == 0
        or not form.locator(".tdview-variable").is_visible()
    ):
        form.locator(".tdview-disclosure").click()
    load_through_form(widget, "nxt")
    assert "into nxt" in form.locator(".tdview-load-done").inner_text(), form.inner_text()
    reader = "from_h5" if fmt == "h5" else "from_zarr"
    out = run_cell(page, CHECK.format(reader=reader, name=name))
    assert marked(out, "SAME") == {"obs": True, "reward": True, "batch": [200]}

    widget.scroll_into_view_if_needed()
    select(page, widget, "reward", 3, '("next", "reward")')
    preview.locator(".tdview-preview-button").click()
    preview.locator(".tdview-preview-table").wait_for(timeout=TIMEOUT)
    assert "copy; reads 400 B" in details(widget).inner_text()  # read, not mapped
    preview.locator(".tdview-preview-table").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / f"tdview-{fmt}-1280x720-light.png"))
    try:
        settle_theme(page, "dark")
        background = widget.evaluate("el => getComputedStyle(el).backgroundColor")
        assert background not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)"), background
        page.screenshot(path=str(artifacts / f"tdview-{fmt}-1280x720-dark.png"))
    finally:
        settle_theme(page, "light")


LEAVES = """import json, warnings
import torch
from tensordict import TensorDict
warnings.simplefilter("ignore")
ref = TensorDict.{reader}("formats35/{name}").to_tensordict()
want = ref["next", "reward"]
print("LEAVES", json.dumps({{"rew": [type(rew).__name__, type(want).__name__,
    bool(torch.equal(rew, want))], "pol": [repr(pol.data), repr(ref.get("policy").data)],
    "shown": repr(ref.get("policy"))}}))"""


def _load_node(page: Any, widget: Any, key: str, level: int, key_tuple: str, variable: str) -> str:
    """Select a node, load it into ``variable`` with the form; the summary shown."""
    select(page, widget, key, level, key_tuple)
    form = widget.locator(".tdview-load")
    if not form.locator(".tdview-variable").is_visible():
        form.locator(".tdview-disclosure").click()
    load_through_form(widget, variable)
    assert f"into {variable}" in form.locator(".tdview-load-done").inner_text(), form.inner_text()
    return form.locator(".tdview-load-summary").inner_text()


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_leaf_and_a_string_load_as_the_format_s_reader_gives_them(
    lab, small_page, artifacts, fmt: str
) -> None:
    """The Load button binds a leaf as a plain tensor (its summary ``tensor(...)``, not
    ``MemoryMappedTensor(...)``) and a string as the installed tensordict's reader gives
    it (``bytes`` from an HDF5 file before tensordict 0.17, ``str`` from zarr)."""
    page, name = small_page, FORMATS[fmt]
    write_files(lab.root)
    write_notebook(
        lab.root,
        f"formats35_leaves_{fmt}.ipynb",
        [f'from tdview import TDView\nv = TDView("formats35/{name}")\nv'],
    )
    open_and_run(page, lab, f"formats35_leaves_{fmt}.ipynb")
    widget = page.locator(".tdview-root").first
    row(page, "next", 2).wait_for(timeout=TIMEOUT)
    row(page, "next", 2).locator(".tdview-twisty").click()
    row(page, "reward", 3).first.wait_for(timeout=TIMEOUT)
    said_reward = _load_node(page, widget, "reward", 3, '("next", "reward")', "rew")
    said_policy = _load_node(page, widget, "policy", 2, '("policy",)', "pol")  # shown below
    reader = "from_h5" if fmt == "h5" else "from_zarr"
    out = marked(run_cell(page, LEAVES.format(reader=reader, name=name)), "LEAVES")
    assert out["rew"] == ["Tensor", "Tensor", True], out
    got, want = out["pol"]
    assert got == want, out  # b'ppo' from an HDF5 file with tensordict 0.15
    assert said_policy == out["shown"], (said_policy, out)  # the reference's repr
    assert said_reward.startswith("tensor([[") and "Memory" not in said_reward, said_reward

    widget.scroll_into_view_if_needed()
    widget.locator(".tdview-load-summary").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / f"tdview-{fmt}-leaf-load-1280x720-light.png"))
    try:
        settle_theme(page, "dark")
        page.screenshot(path=str(artifacts / f"tdview-{fmt}-leaf-load-1280x720-dark.png"))
    finally:
        settle_theme(page, "light")
