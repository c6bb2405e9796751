"""Outside a live kernel: a notebook with a TDView output, exported to HTML by nbconvert,
shows the static tree (``TDView._repr_mimebundle_``'s ``text/html``), and the tour's
command-line cell runs when the environment's ``bin/`` is not on the kernel's PATH."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow

TOUR = Path(__file__).resolve().parents[1] / "notebooks" / "tour.ipynb"


def _small_notebook(tmp_path: Path, demo_paths: dict[str, Path]) -> nbformat.NotebookNode:
    shutil.copy2(demo_paths["archive"], tmp_path / "ckpt.tdz")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell('from tdview import TDView\nTDView("ckpt.tdz")')]
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    return notebook


def _html(notebook: nbformat.NotebookNode, **kwargs: object) -> str:
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(**kwargs).from_notebook_node(notebook)
    return body


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# HTMLExporter's default priority with text/html moved before the widget view (docs/hosts.md).
NO_JS_PRIORITY = (
    '["text/html", "application/vnd.jupyter.widget-view+json", "application/javascript", '
    '"text/markdown", "image/svg+xml", "text/vnd.mermaid", "text/latex", "image/png", '
    '"image/jpeg", "text/plain"]'
)


def _tdview_state(state: dict) -> dict:
    """The saved state of the one TDView model in a widget-state document."""
    (model,) = [
        m["state"]
        for m in state["state"].values()
        if m["state"].get("_anywidget_id") == "tdview.widget.TDView"
    ]
    return model


def _has_rows(html: str) -> bool:
    return all(re.search(rf">{key}</td>", html) for key in ("replay", "observation", "model"))


def test_saved_notebook_exports_the_static_tree(tmp_path, demo_paths) -> None:
    """A notebook saved as JupyterLab saves it by default (outputs, no widget state):
    nbconvert's HTML (what nbviewer shows) holds the static tree, not an empty widget."""
    notebook = _small_notebook(tmp_path, demo_paths)
    NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        store_widget_state=False,
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    output = notebook.cells[0].outputs[0]["data"]
    assert "application/vnd.jupyter.widget-view+json" in output  # live front ends: the widget
    assert "text/html" in output and "text/plain" in output
    nbformat.write(notebook, tmp_path / "saved.ipynb")
    html = _html(nbformat.read(tmp_path / "saved.ipynb", as_version=4))
    assert 'class="tdview-static"' in html
    for key in ("replay", "observation", "model"):
        assert re.search(rf">{key}</td>", html), key


def test_notebook_saved_with_widget_state_keeps_the_static_tree(tmp_path, demo_paths) -> None:
    """Saved with widget state (JupyterLab's "Save Widget State", nbclient's
    ``store_widget_state``), nbconvert's lab and classic templates emit the widget-view
    script alone for the output (its model is in the state) and drop its text/html. The
    static tree then travels in the saved state (``_static_html``, the same HTML, bounded),
    which the view shows while no kernel answers; an export that should show it without
    JavaScript puts text/html before the widget view in nbconvert's priority."""
    notebook = _small_notebook(tmp_path, demo_paths)
    NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    nbformat.write(notebook, tmp_path / "saved.ipynb")
    saved = nbformat.read(tmp_path / "saved.ipynb", as_version=4)
    output = saved.cells[0].outputs[0]["data"]
    model = _tdview_state(saved.metadata["widgets"][WIDGET_STATE])
    assert model["_static_html"] == output["text/html"]  # what the output holds, no more
    assert _has_rows(model["_static_html"]) and len(model["_static_html"]) < 64 << 10

    for template in ("lab", "classic"):
        html = _html(saved, template_name=template)
        assert f'<script type="{WIDGET_VIEW}">' in html, template
        assert 'class="tdview-static"' not in html, template  # nbconvert dropped it
        found = re.search(
            rf'<script type="{re.escape(WIDGET_STATE)}">\s*(.*?)</script>', html, re.S
        )
        assert found, template
        state = json.loads(found.group(1))  # JSON reads the "<\/" of escape_html_script
        assert _has_rows(_tdview_state(state)["_static_html"]), template

    from traitlets.config import Config

    priority = ["text/html", WIDGET_VIEW, "text/plain"]
    html = _html(saved, config=Config({"NbConvertBase": {"display_data_priority": priority}}))
    assert 'class="tdview-static"' in html and _has_rows(html)

    # The same from the command line, with the flag and list that docs/hosts.md gives (the
    # trait is NbConvertBase's: `--HTMLExporter.display_data_priority` is ignored).
    from nbconvert import HTMLExporter

    default = HTMLExporter().default_config["NbConvertBase"]["display_data_priority"]
    assert sorted(json.loads(NO_JS_PRIORITY)) == sorted(default)  # nothing else dropped
    subprocess.run(
        [
            sys.executable,
            "-m",
            "nbconvert",
            "--to",
            "html",
            "--output",
            "nojs",
            f"--NbConvertBase.display_data_priority={NO_JS_PRIORITY}",
            str(tmp_path / "saved.ipynb"),
        ],
        check=True,
        capture_output=True,
    )
    html = (tmp_path / "nojs.html").read_text(encoding="utf-8")
    assert 'class="tdview-static"' in html and _has_rows(html)
    assert f'<script type="{WIDGET_VIEW}">' not in html


def test_tour_cli_cell_runs_without_the_venv_on_path(tmp_path, demo_paths, monkeypatch) -> None:
    """`make demo`'s JupyterLab may run kernels whose PATH lacks the venv's bin/: the tour
    runs tdview as ``{sys.executable} -m tdview``, which needs no PATH entry."""
    bin_dir = str(Path(sys.executable).parent)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != bin_dir]
    monkeypatch.setenv("PATH", os.pathsep.join(path or ["/usr/bin", "/bin"]))
    if shutil.which("tdview"):
        pytest.skip("a tdview outside this environment is on PATH")
    tour = nbformat.read(TOUR, as_version=4)
    cli = tour.cells[-1]
    assert "-m tdview tree" in cli.source
    (tmp_path / "demo").mkdir()
    shutil.copy2(demo_paths["archive"], tmp_path / "demo" / "demo_ckpt.tdz")
    notebook = nbformat.v4.new_notebook(cells=[cli], metadata=tour.metadata)
    NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    text = "".join(o.get("text", "") for o in notebook.cells[0].outputs)
    assert "command not found" not in text
    assert "replay  TensorDict" in text, text


def test_static_tree_in_the_state_is_bounded() -> None:
    """The saved state holds the static tree beside the output's copy: past
    ``STATE_HTML`` characters its rows are left out and counted."""
    from tdview.views import _html

    table = [(1, f"k{i}" * 300, "<" * 2000) for i in range(900)]  # escaped: 4× longer
    full = _html.render_html("c", table)
    clipped = _html.render_html("c", table, limit=_html.STATE_HTML)
    assert len(full) > 4 << 20
    assert len(clipped) < _html.STATE_HTML + 16 * _html.MAX_SHOWN
    assert re.search(r"… [\d,]+ more rows", clipped)
    assert _html.render_html("c", table[:3], limit=_html.STATE_HTML) == _html.render_html(
        "c", table[:3]
    )
