"""Write a notebook into the server's root, open it in JupyterLab, run it, read outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat

from .jupyter import JupyterLabServer

RUN_TIMEOUT_MS = 120_000


def write_notebook(root: Path, name: str, cells: list[str]) -> str:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    notebook.metadata["kernelspec"] = {
        "name": "python3", "display_name": "Python 3", "language": "python",
    }
    nbformat.write(notebook, root / name)
    return name


def open_and_run(page: Any, lab: JupyterLabServer, name: str, theme: str = "light") -> None:
    """Open ``name`` in JupyterLab, wait for its kernel, and run every cell."""
    # ?reset: start from an empty workspace, not the previous test's open panels.
    page.goto(lab.url(f"/lab/tree/{name}?reset"), wait_until="domcontentloaded")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
    if theme == "dark":
        page.wait_for_function(
            "() => window.jupyterapp.commands.hasCommand('apputils:change-theme')")
        page.evaluate(
            "() => window.jupyterapp.commands.execute('apputils:change-theme',"
            " {theme: 'JupyterLab Dark'})"
        )
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    # A notebook's kernel is ready when the session context reports an idle kernel.
    page.wait_for_function(
        """() => {
            const w = window.jupyterapp.shell.currentWidget;
            const k = w && w.sessionContext && w.sessionContext.session
                && w.sessionContext.session.kernel;
            return k && k.status === 'idle';
        }""",
        timeout=RUN_TIMEOUT_MS,
    )
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    wait_until_executed(page)


def wait_until_executed(page: Any) -> None:
    """Wait until every code cell shows an execution count (no ``[*]`` left)."""
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
            return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
        }""",
        timeout=RUN_TIMEOUT_MS,
    )


def output_texts(page: Any) -> list[str]:
    return page.eval_on_selector_all(
        ".jp-CodeCell .jp-OutputArea-output", "els => els.map(e => e.innerText)"
    )
