"""A fresh kernel that only browses never imports torch or tensordict (about 2 s): the
view, its tree, its details and its search stand on the index alone; a device list or a
load imports them when asked."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: Run in a fresh interpreter: a TDView on the checkpoint, requests answered through its
#: dispatcher as the front end sends them, then which heavy modules were imported.
BROWSE = textwrap.dedent(
    """
    import json, sys
    import tdview
    from tdview import TDView

    view = TDView(sys.argv[1])
    sent = []
    view.send = lambda content, buffers=None: sent.append(content)

    def ask(rid, method, **params):
        message = {"kind": "tdview:request", "v": 1, "id": rid, "method": method,
                   "params": params}
        view._on_custom_msg(view, message, [])
        assert view._dispatcher.drain(60)
        (reply,) = [c for c in sent if c["kind"] == "tdview:reply" and c["id"] == rid]
        return reply

    def heavy():
        return sorted(m for m in ("torch", "tensordict") if m in sys.modules)

    replies = {
        "children": ask(1, "children", path=[], offset=0, limit=50, totals=False),
        "children_totals": ask(2, "children", path=["model"], offset=0, limit=50),
        "node": ask(3, "node", path=["model", "layers", "0"]),
        "search": ask(4, "search", pattern="weight", limit=20),
    }
    report = {"ok": {k: r["ok"] for k, r in replies.items()},
              "rows": [row["key"] for row in replies["children"]["result"]["children"]],
              "found": replies["search"]["result"]["total"],
              "browsing": heavy(), "load_is_function": callable(tdview.load)}
    report["devices"] = ask(5, "devices")["result"]["devices"][0]["name"]
    report["after_devices"] = heavy()
    # ... and the loader on a thread of its own, so that the Load click finds it imported
    from tdview.protocol import _load
    _load._warming[0].join(60)
    report["warmed"] = heavy()
    print(json.dumps(report))
    """
)


@pytest.mark.parametrize("kind", ["directory", "archive"])
def test_browsing_imports_neither_torch_nor_tensordict(
    demo_paths: dict[str, Path], kind: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", BROWSE, str(demo_paths[kind])],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(report["ok"].values()), report
    assert "model" in report["rows"] and "replay" in report["rows"]
    assert report["found"] > 0
    assert report["browsing"] == []
    assert report["load_is_function"]
    # the device list is asked when the load form opens: it imports torch then
    assert report["devices"] == "cpu" and "torch" in report["after_devices"]
    assert report["warmed"] == ["tensordict", "torch"]


def test_package_face_is_lazy_and_whole(demo_paths: dict[str, Path]) -> None:
    """``import tdview`` imports no loader, no diff engine and no widget; each public
    name still answers (``tdview.load`` is the function, and it loads)."""
    script = textwrap.dedent(
        """
        import json, sys
        import tdview
        before = sorted(m for m in ("torch", "tensordict", "ipywidgets", "tdview.loader._api",
                                    "tdview.index", "tdview.widget") if m in sys.modules)
        td = tdview.load(sys.argv[1], subpath="model/layers/0")
        print(json.dumps({"before": before, "keys": sorted(td.keys()),
                          "names": sorted(n for n in tdview.__all__ if getattr(tdview, n) is None),
                          "diff": callable(tdview.diff) and tdview.diff.__name__}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(demo_paths["archive"])],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["before"] == []
    assert report["keys"]  # the layer's submodules, loaded
    assert report["names"] == []
    assert report["diff"] == "diff"
