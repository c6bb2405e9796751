"""A notebook saved with widget state, exported by nbconvert to HTML (lab template) and
opened with no kernel, renders as it would from a static host: @jupyter-widgets/html-manager
(which the page loads from unpkg) builds the saved anywidget model, with the ``anywidget``
module fetched through requirejs from jsDelivr, and tdview's saved ES module shows the
static tree it was given in ``_static_html``.

What the page would load from its CDNs is served from ``tests/browser/html-manager`` (npm
packages pinned in its lockfile, installed by ``make env``), on a local server: the
CDN URLs in the exported HTML are rewritten to it, and html-manager's CDN base is set with
its ``data-jupyter-widgets-cdn`` attribute. Any other request off the local server is
refused and recorded; only MathJax (which this notebook has no use for) may be among them.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

pytestmark = pytest.mark.slow

PACKAGES = Path(__file__).resolve().parent / "html-manager"
# The CDN URLs that nbconvert's lab template writes (HTMLExporter.require_js_url, and
# jupyter_widgets_base_url + "@jupyter-widgets/html-manager@" + html_manager_semver_range),
# and the CDN that html-manager's requireLoader loads widget modules from.
REQUIRE_JS = "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js"
WIDGETS_CDN = "https://unpkg.com/"
MODULES_CDN = "https://cdn.jsdelivr.net/npm/"
TIMEOUT = 20_000


def _installed(name: str) -> str:
    """The version of an npm package in tests/browser/html-manager, or a failure that says
    how to install them (never a skip: `make test` installs them)."""
    manifest = PACKAGES / "node_modules" / name / "package.json"
    if not manifest.is_file():
        pytest.fail(
            f"{manifest} is missing: `make env` installs the packages that this test "
            "serves in place of the CDNs (or: cd tests/browser/html-manager && npm ci; "
            "it needs the npm registry)."
        )
    return str(json.loads(manifest.read_text())["version"])


class _Handler(SimpleHTTPRequestHandler):
    """``/npm/<package>@<range>/<file>`` from node_modules (as a CDN would, whatever the
    range), the rest from the export's folder. Requests are recorded."""

    requests: list[str]

    def translate_path(self, path: str) -> str:
        path = unquote(urlsplit(path).path)
        self.requests.append(path)
        found = re.fullmatch(r"/npm/((?:@[^/@]+/)?[^/@]+)@[^/]+/(.+)", path)
        if found:
            return str(PACKAGES / "node_modules" / found.group(1) / found.group(2))
        return super().translate_path(path)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, list[str]]]:
    """A local HTTP server (127.0.0.1, one per module): its base URL, the folder it serves
    and the paths requested of it."""
    root = tmp_path_factory.mktemp("export-html")
    requests: list[str] = []
    handler = type("Handler", (_Handler,), {"requests": requests})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", root, requests
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _exported_html(tmp_path: Path, demo_paths: dict[str, Path]) -> str:
    """A one-cell notebook showing TDView, run with widget state stored, saved, read back
    and exported as `jupyter nbconvert --to html` does (lab template)."""
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter

    shutil.copy2(demo_paths["archive"], tmp_path / "ckpt.tdz")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell('from tdview import TDView\nTDView("ckpt.tdz")')]
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    nbformat.write(notebook, tmp_path / "saved.ipynb")
    saved = nbformat.read(tmp_path / "saved.ipynb", as_version=4)
    assert "application/vnd.jupyter.widget-state+json" in saved.metadata["widgets"]
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(saved)
    return str(body)


def _served(html: str, base: str) -> str:
    """The export with its CDN URLs on the local server, as the page's own would be."""
    exporter_defaults = _exporter_defaults()
    assert exporter_defaults == (REQUIRE_JS, WIDGETS_CDN), exporter_defaults
    manager = f"{WIDGETS_CDN}@jupyter-widgets/html-manager@"
    assert f'<script src="{REQUIRE_JS}"></script>' in html
    assert f"'{manager}*/dist/embed-amd.js'" in html
    html = html.replace(
        f'<script src="{REQUIRE_JS}"></script>',
        f'<script src="{base}/npm/requirejs@2.1.10/require.js" '
        f'data-jupyter-widgets-cdn="{base}/npm/"></script>',
    )
    return html.replace(f"'{manager}", f"'{base}/npm/@jupyter-widgets/html-manager@")


def _exporter_defaults() -> tuple[str, str]:
    from nbconvert import HTMLExporter

    exporter = HTMLExporter()
    return exporter.require_js_url, exporter.jupyter_widgets_base_url


def test_exported_html_with_widget_state_shows_the_static_tree(
    page, server, tmp_path, demo_paths, artifacts
) -> None:
    from anywidget import __version__ as anywidget_version
    from anywidget._version import _ANYWIDGET_SEMVER_VERSION

    # The packages match what the export would fetch: html-manager for nbconvert's "*"
    # (the 1.0 line that ipywidgets 8 writes state for), anywidget for the Python side's.
    assert _installed("@jupyter-widgets/html-manager").startswith("1.0.")
    assert _installed("anywidget") == anywidget_version, (
        "tests/browser/html-manager/package.json pins another anywidget than the Python "
        f"one ({anywidget_version}): update it and its lockfile"
    )
    assert _installed("requirejs") == "2.1.10"  # nbconvert's require_js_url

    base, root, requests = server
    html = _exported_html(tmp_path, demo_paths)
    (root / "export.html").write_text(_served(html, base), encoding="utf-8")

    refused: list[str] = []
    errors: list[str] = []

    def local_only(route: Any) -> None:
        if route.request.url.startswith(base + "/"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page.on("pageerror", lambda error: errors.append(str(error)))
    page.route("**/*", local_only)
    page.goto(f"{base}/export.html")
    output = page.locator(".jp-OutputArea-output.jupyter-widgets")
    fallback = output.locator(".tdview-root .tdview-static-fallback")
    try:
        fallback.wait_for(timeout=TIMEOUT)
    finally:
        page.screenshot(path=str(artifacts / "tdview-static-export-html.png"), full_page=True)
    assert fallback.locator(".tdview-static-note").is_visible()
    note = fallback.locator(".tdview-static-note").inner_text()
    assert "static view" in note and "no kernel has answered yet" in note, note
    keys = fallback.locator(".tdview-static td").all_inner_texts()
    assert {"replay", "observation", "model"} <= set(keys), keys
    assert output.locator(".tdview-root .tdview-app").is_hidden()

    # Everything came from the local server, through the loaders' own CDN URLs.
    assert [url for url in refused if "mathjax" not in url] == [], refused
    loaded = set(requests)
    assert "/npm/@jupyter-widgets/html-manager@*/dist/embed-amd.js" in loaded, loaded
    assert f"/npm/anywidget@{_ANYWIDGET_SEMVER_VERSION}/dist/index.js" in loaded, loaded
    assert errors == [], errors
