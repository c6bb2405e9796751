"""Browser smoke test: JupyterLab serves a notebook, Chromium runs it, outputs render."""

from __future__ import annotations

from .notebook import open_and_run, output_texts, write_notebook


def test_notebook_runs_in_jupyterlab(lab, page, artifacts):
    name = write_notebook(
        lab.root,
        "smoke.ipynb",
        [
            "import tdview, torch\nprint('tdview', tdview.__version__, 'torch', torch.__version__)",
            "import os\nprint(sorted(n for n in os.listdir('.')"
            " if n in ('demo_ckpt', 'demo_ckpt.tdz')))",
        ],
    )
    open_and_run(page, lab, name)
    texts = output_texts(page)
    page.screenshot(path=str(artifacts / "smoke-light.png"))
    import tdview

    assert any(f"tdview {tdview.__version__}" in t for t in texts), texts
    assert any("['demo_ckpt', 'demo_ckpt.tdz']" in t for t in texts), texts
