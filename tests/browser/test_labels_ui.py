"""Issue 34's "what is stored twice" and "optimizer state by parameter name" in a real
JupyterLab at 1280x720: a small language model whose decoder weight is its embedding
(``from_module``, so tensordict writes the tied weight twice) and its AdamW
``state_dict()`` (state numbered 0, 1, …), saved by tensordict as a ``.tdz`` and with
``.memmap()``. Each ``optim/state/<i>`` row shows its parameter (``0 → embed.weight``,
the names torch gave the numbers), in the tree and in the search's matches; a state's
details name its parameter, a link that selects it; the decoder weight's details say
"Same bytes as model/embed/weight": at once in the archive (its CRC-32s, nothing read),
after "Find leaves with the same bytes" in the folder (read and compared byte by byte);
the link selects the other key. Light and dark screenshots at 1280x720."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .notebook import open_and_run, write_notebook
from .test_tree_names_ui import shot
from .test_widget import TIMEOUT, row

RUN = "labels34/run"
#: The rows of ``optim/state/<i>``.
STATES = '[role="treeitem"][aria-level="4"][title^="optim / state / "]'


def write_run(root: Path) -> dict[str, str]:
    """The checkpoint (a folder and a ``.tdz``) and torch's numbering: id -> name."""
    import torch
    from tensordict import TensorDict

    torch.manual_seed(34)

    class TiedLM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(96, 24)
            self.block = torch.nn.Linear(24, 24)
            self.norm = torch.nn.LayerNorm(24)
            self.decoder = torch.nn.Linear(24, 96, bias=False)
            self.decoder.weight = self.embed.weight

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.decoder(self.norm(torch.relu(self.block(self.embed(x)))))

    model = TiedLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        optimizer.zero_grad()
        model(torch.randint(0, 96, (4, 8))).pow(2).mean().backward()
        optimizer.step()
    names = {id(p): n for n, p in model.named_parameters()}
    numbering = {
        str(i): names[id(p)]
        for i, p in enumerate(p for g in optimizer.param_groups for p in g["params"])
    }
    state = optimizer.state_dict()
    folder = root / "labels34"
    if not (folder / "run.tdz").exists():
        td = TensorDict(
            {
                "model": TensorDict.from_module(model).data,
                "optim": {
                    "state": {str(i): dict(m) for i, m in state["state"].items()},
                    "param_groups": state["param_groups"],
                },
            }
        )
        folder.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            td.memmap(folder / "run")
            td.save(str(folder / "run.tdz"))
    return numbering


@pytest.fixture
def small_page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    yield page
    context.close()


def open_view(page: Any, lab: Any, name: str, source: str) -> Any:
    write_notebook(lab.root, name, [f'from tdview import TDView\nv = TDView("{source}")\nv'])
    open_and_run(page, lab, name)
    widget = page.locator(".tdview-root").first
    row(page, "optim", 2).wait_for(timeout=TIMEOUT)
    return widget


def expand(page: Any, key: str, level: int) -> None:
    target = row(page, key, level).first
    target.wait_for(timeout=TIMEOUT)
    if target.get_attribute("aria-expanded") != "true":
        target.locator(".tdview-twisty").click()


def select(page: Any, key: str, level: int) -> None:
    target = row(page, key, level).first
    target.wait_for(timeout=TIMEOUT)
    target.locator(".tdview-key").click()


def wait_selected(page: Any, widget: Any, title: str) -> None:
    page.wait_for_function(
        """([root, title]) => {
            const r = root.querySelector('.tdview-tree [role="treeitem"][aria-selected="true"]');
            const t = r === null ? null : r.getAttribute('title');
            return t === title || (t !== null && t.startsWith(`${title}\n`));
        }""",
        arg=[widget.element_handle(), title],
        timeout=TIMEOUT,
    )


def state_labels(page: Any, widget: Any, count: int) -> dict[str, str]:
    """Each ``state/<i>`` row's muted text, once every row has one."""
    page.wait_for_function(
        """([root, n, states]) => {
            const rows = root.querySelectorAll(`.tdview-tree ${states}`);
            const labelled = [...rows].filter((r) => r.querySelector('.tdview-inline-value'));
            return labelled.length >= n;
        }""",
        arg=[widget.element_handle(), count, STATES],
        timeout=TIMEOUT,
    )
    found = {}
    for item in widget.locator(f".tdview-tree {STATES}").all():
        key = item.locator(".tdview-key").inner_text()
        found[key] = item.locator(".tdview-inline-value").inner_text()
    return found


def test_archive_labels_and_same_bytes_without_reading(lab, small_page, artifacts) -> None:
    page = small_page
    numbering = write_run(lab.root)
    widget = open_view(page, lab, "labels_archive.ipynb", f"{RUN}.tdz")
    expand(page, "optim", 2)
    expand(page, "state", 3)
    labels = state_labels(page, widget, len(numbering))
    assert labels == {key: f"→ {name}" for key, name in numbering.items()}

    # The search's rows of the states show their parameters as the tree's rows do.
    widget.locator(".tdview-search-input").fill("optim/state/*")
    page.wait_for_function(
        """([root, n]) => {
            const said = root.querySelectorAll('.tdview-search-result .tdview-search-inline');
            return [...said].filter((s) => s.textContent).length >= n;
        }""",
        arg=[widget.element_handle(), len(numbering)],
        timeout=TIMEOUT,
    )
    found = {}
    for result in widget.locator(".tdview-search-result").all():
        path = result.locator(".tdview-search-path").inner_text()
        found[path.rsplit("/", 1)[-1]] = result.locator(".tdview-search-inline").inner_text()
    assert found == labels
    shot(page, artifacts, "tdview-labels-search")
    widget.locator(".tdview-search-input").fill("")

    # A state's details: its parameter, a link that selects it.
    select(page, "0", 4)
    param = widget.locator(".tdview-related .tdview-param")
    param.wait_for(timeout=TIMEOUT)
    assert param.inner_text() == f"Parameter {numbering['0']}"
    shot(page, artifacts, "tdview-labels-param")
    param.locator(".tdview-link").click()
    wait_selected(page, widget, "model / embed / weight")

    # The tied decoder weight: the same bytes as the embedding, from the CRC-32s.
    expand(page, "decoder", 3)
    decoder_weight = widget.locator(
        '.tdview-tree [role="treeitem"][title^="model / decoder / weight"] .tdview-key'
    )
    decoder_weight.click()
    same = widget.locator(".tdview-related .tdview-same-bytes")
    same.wait_for(timeout=TIMEOUT)
    text = same.inner_text()
    assert text.startswith("Same bytes as model/embed/weight"), text
    assert "CRC-32" in text
    assert widget.locator(".tdview-find-same").count() == 0  # nothing to read: free
    shot(page, artifacts, "tdview-labels-archive")
    same.locator(".tdview-link").click()
    wait_selected(page, widget, "model / embed / weight")


def test_folder_reads_only_when_asked(lab, small_page, artifacts) -> None:
    page = small_page
    numbering = write_run(lab.root)
    widget = open_view(page, lab, "labels_folder.ipynb", RUN)
    expand(page, "model", 2)
    expand(page, "decoder", 3)
    decoder_weight = widget.locator(
        '.tdview-tree [role="treeitem"][title^="model / decoder / weight"] .tdview-key'
    )
    decoder_weight.click()
    find = widget.locator(".tdview-related .tdview-find-same")
    find.wait_for(timeout=TIMEOUT)
    assert widget.locator(".tdview-same-bytes").count() == 0  # nothing read yet
    shot(page, artifacts, "tdview-labels-find")
    find.click()
    same = widget.locator(".tdview-related .tdview-same-bytes")
    same.wait_for(timeout=TIMEOUT)
    assert same.inner_text().startswith("Same bytes as model/embed/weight")
    assert "compared byte by byte" in same.inner_text()

    # A leaf no other leaf shares: asked, it says so.
    block = widget.locator(
        '.tdview-tree [role="treeitem"][title^="model / block / weight"] .tdview-key'
    )
    expand(page, "block", 3)
    block.click()
    widget.locator(".tdview-related .tdview-find-same").click()
    widget.locator(".tdview-related").get_by_text("No other leaf has the same bytes.").wait_for(
        timeout=TIMEOUT
    )

    expand(page, "optim", 2)
    expand(page, "state", 3)
    labels = state_labels(page, widget, len(numbering))
    assert labels == {key: f"→ {name}" for key, name in numbering.items()}
    decoder_weight.scroll_into_view_if_needed()
    decoder_weight.click()
    find.wait_for(timeout=TIMEOUT)
    find.click()
    same.wait_for(timeout=TIMEOUT)
    shot(page, artifacts, "tdview-labels-folder")
