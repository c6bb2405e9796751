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
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(notebook, root / name)
    return name


def open_and_run(
    page: Any, server: JupyterLabServer, name: str, theme: str = "light", url: str | None = None
) -> None:
    """Open ``name`` alone, wait for its kernel, and run every cell.

    ``url`` defaults to JupyterLab's ``/lab/tree/<name>?reset`` (``?reset``: the
    server-side workspace would otherwise restore the panels of earlier tests beside it);
    Notebook 7 passes ``/notebooks/<name>``.
    """
    page.goto(server.url(url or f"/lab/tree/{name}?reset"), wait_until="domcontentloaded")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
    if theme == "dark":
        page.wait_for_function(
            "() => window.jupyterapp.commands.hasCommand('apputils:change-theme')"
        )
        page.evaluate(
            "() => window.jupyterapp.commands.execute('apputils:change-theme',"
            " {theme: 'JupyterLab Dark'})"
        )
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    # Ready when this notebook's session context reports an idle kernel.
    page.wait_for_function(
        """(name) => {
            const app = window.jupyterapp;
            const w = app && app.shell && app.shell.currentWidget;
            const k = w && w.context && w.context.path.endsWith(name) && w.sessionContext
                && w.sessionContext.session && w.sessionContext.session.kernel;
            return k && k.status === 'idle';
        }""",
        arg=name,
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
