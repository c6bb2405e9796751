"""The tour notebook runs from top to bottom on the demo checkpoint, as `make demo` serves it."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tdview import Checkpoint
from tdview._units import human_bytes
from tdview.index import rollup

TOUR = Path(__file__).resolve().parents[1] / "notebooks" / "tour.ipynb"
pytestmark = pytest.mark.slow


def test_tour_notebook_runs(demo_paths: dict[str, Path], tmp_path: Path) -> None:
    shutil.copy(TOUR, tmp_path / "tour.ipynb")
    (tmp_path / "demo").mkdir()
    for path in demo_paths.values():
        (shutil.copytree if path.is_dir() else shutil.copy2)(path, tmp_path / "demo" / path.name)
    notebook = nbformat.read(tmp_path / "tour.ipynb", as_version=4)
    NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    outputs = [
        "".join(
            o.get("text", "") or str(o.get("data", {}).get("text/plain", ""))
            for o in cell.get("outputs", [])
        )
        for cell in notebook.cells
        if cell.cell_type == "code"
    ]
    text = "\n".join(outputs)
    assert "refused:" in text and "tags" in text  # the pickle policy cell
    assert "trusted: {" in text
    assert "replay  TensorDict  batch [1000]" in text  # the command-line cell
    # sizes as the widget writes them (three digits: "9.49 MB"), from the one formatter
    archive = tmp_path / "demo" / "demo_ckpt.tdz"
    total = rollup(Checkpoint(archive), Checkpoint(archive).root)
    assert f"demo/demo_ckpt.tdz {human_bytes(archive.stat().st_size)}" in text
    assert f"{total.leaves} leaves, {human_bytes(total.bytes)}:" in text
    for dtype, size in total.by_dtype.items():
        assert f"'{dtype}': '{human_bytes(size)}'" in text
    widget = notebook.cells[3].outputs[0]["data"]
    assert "application/vnd.jupyter.widget-view+json" in widget
    assert "text/html" in widget  # the static fallback for saved notebooks
