"""Outside a live kernel: a notebook with a TDView output, exported to HTML by nbconvert,
shows the static tree (``TDView._repr_mimebundle_``'s ``text/html``), and the tour's
command-line cell runs when the environment's ``bin/`` is not on the kernel's PATH."""

from __future__ import annotations

import os
import re
import shutil
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
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    return notebook


def _html(notebook: nbformat.NotebookNode) -> str:
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(notebook)
    return body


def test_saved_notebook_exports_the_static_tree(tmp_path, demo_paths) -> None:
    """A notebook saved as JupyterLab saves it by default (outputs, no widget state):
    nbconvert's HTML (what nbviewer shows) holds the static tree, not an empty widget."""
    notebook = _small_notebook(tmp_path, demo_paths)
    NotebookClient(notebook, timeout=120, kernel_name="python3", store_widget_state=False,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    output = notebook.cells[0].outputs[0]["data"]
    assert "application/vnd.jupyter.widget-view+json" in output  # live front ends: the widget
    assert "text/html" in output and "text/plain" in output
    nbformat.write(notebook, tmp_path / "saved.ipynb")
    html = _html(nbformat.read(tmp_path / "saved.ipynb", as_version=4))
    assert 'class="tdview-static"' in html
    for key in ("replay", "observation", "model"):
        assert re.search(rf">{key}</td>", html), key


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
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "".join(o.get("text", "") for o in notebook.cells[0].outputs)
    assert "command not found" not in text
    assert "replay  TensorDict" in text, text
