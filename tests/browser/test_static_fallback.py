"""The built widget (``tdview/static/widget.js``) rendered from saved state with no kernel,
as nbconvert's HTML export or a notebook reopened before its kernel runs it renders it:
the model's ``send`` goes nowhere, and the view shows the saved static tree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tdview import TDView

from .._optional import require

STATIC = Path(__file__).resolve().parents[2] / "tdview" / "static"
ORIGIN = "http://tdview.test"

# An anywidget model over saved traits: `send` is counted and never answered.
PAGE = """<!doctype html><html><head><link rel="stylesheet" href="/widget.css"></head>
<body><div id="out"></div><script type="module">
import widget from "/widget.js";
const traits = JSON.parse(document.getElementById("traits").textContent);
const listeners = new Map();
window.sent = 0;
const model = {
  get: (name) => traits[name],
  set: (name, value) => { traits[name] = value; },
  save_changes() {},
  send() { window.sent += 1; },
  on(event, cb) { listeners.set(event, [...(listeners.get(event) ?? []), cb]); },
  off(event, cb) { listeners.set(event, (listeners.get(event) ?? []).filter((f) => f !== cb)); },
};
widget.render({ model, el: document.getElementById("out") });
</script><script id="traits" type="application/json">TRAITS</script></body></html>"""


def _saved_traits(archive: Path) -> dict[str, Any]:
    view = TDView(archive)
    view._repr_mimebundle_()  # sets the static tree, as displaying the output does
    state = view.get_state()
    view.close()
    return {k: v for k, v in state.items() if not k.startswith("_model") and k != "_esm"}


def test_saved_state_without_a_kernel_shows_the_static_tree(page, demo_paths) -> None:
    built = (STATIC / "widget.js").is_file()
    require(built, "tdview/static/widget.js is not built: cd js && npm run build")
    traits = json.dumps(_saved_traits(demo_paths["archive"])).replace("</", "<\\/")
    files = {
        "/": ("text/html", PAGE.replace("TRAITS", traits)),
        "/widget.js": ("text/javascript", (STATIC / "widget.js").read_text()),
        "/widget.css": ("text/css", (STATIC / "widget.css").read_text()),
    }

    def serve(route: Any) -> None:
        path = route.request.url[len(ORIGIN) :] or "/"
        kind, body = files.get(path, ("text/plain", ""))
        route.fulfill(status=200 if path in files else 404, content_type=kind, body=body)

    page.route(f"{ORIGIN}/**", serve)
    page.goto(f"{ORIGIN}/")
    fallback = page.locator(".tdview-root .tdview-static-fallback")
    fallback.wait_for(timeout=10_000)
    assert "static view" in fallback.locator(".tdview-static-note").inner_text()
    keys = fallback.locator(".tdview-static td").all_inner_texts()
    assert {"replay", "observation", "model"} <= set(keys)
    assert page.locator(".tdview-root .tdview-app").is_hidden()
    assert page.evaluate("window.sent") >= 1  # the view asked; no one answered
