"""Keys are data, not terminal commands; and the command line never shows a traceback.

A key holding ``\\x1b]2;PWNED\\x07\\x1b[2J`` printed raw retitles and clears the user's
terminal; a right-to-left override makes one name read as another. Every text rendering
(``tdview tree``, the widget's ``text/plain`` and ``text/html``, error messages) shows
them escaped, visibly; the protocol's JSON keeps the real key.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from tdview import TDView
from tdview.__main__ import main
from tdview._text import printable
from tdview.index import Checkpoint
from tdview.protocol import Session, handle
from tdview.views._html import MAX_SHOWN

TITLE = "\x1b]2;PWNED\x07\x1b[2J"
BIDI = "gpj.\u202eexe"
KEYS = [TITLE, BIDI, "two\nlines", "tab\tbed"]


def _unsafe(text: str) -> bool:
    return any(c in text for c in "\x1b\x07\u202e\n\t") or any(
        0xD800 <= ord(c) <= 0xDFFF for c in text
    )


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("keys") / "ckpt"
    TensorDict({key: torch.zeros(2) for key in KEYS}, batch_size=[]).memmap(root)
    meta = json.loads((root / "meta.json").read_text())  # a key with no UTF-8 form
    meta["lone\ud800"] = {"dtype": "torch.float32", "shape": [1], "is_nested": False}
    (root / "meta.json").write_text(json.dumps(meta))
    return root


def _tree(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tdview", "tree", *args], capture_output=True, text=True, timeout=120
    )


def test_tree_escapes_control_and_bidi_characters(hostile: Path):
    out = _tree(str(hostile))
    assert out.returncode == 0, out.stderr
    for line in out.stdout.splitlines():
        assert not _unsafe(line), repr(line)
    for shown in [
        "\\x1b]2;PWNED\\x07\\x1b[2J",
        "gpj.\\u202eexe",
        "two\\nlines",
        "tab\\tbed",
        "lone\\ud800",
    ]:
        assert shown in out.stdout
    assert len(out.stdout.splitlines()) == 1 + len(KEYS) + 1  # one line per key


def test_error_messages_are_escaped(hostile: Path):
    out = _tree(str(hostile), "\x1b[2Jnope")
    assert out.returncode == 2 and "\x1b" not in out.stderr
    assert "\\x1b[2Jnope" in out.stderr and "\\x1b]2;PWNED" in out.stderr


def test_protocol_keeps_the_real_keys(hostile: Path):
    session = Session(Checkpoint(hostile), str(hostile))
    reply, _ = handle(
        session,
        {
            "kind": "tdview:request",
            "v": 1,
            "id": 1,
            "method": "children",
            "params": {"path": [], "offset": 0, "limit": 10},
        },
    )
    assert reply is not None
    keys = [child["key"] for child in reply["result"]["children"]]
    assert set(KEYS) <= set(keys) and "lone\ud800" in keys
    node, _ = handle(
        session,
        {"kind": "tdview:request", "v": 1, "id": 2, "method": "node", "params": {"path": [TITLE]}},
    )
    assert node is not None and node["result"]["path"] == [TITLE]
    missing, _ = handle(
        session,
        {
            "kind": "tdview:request",
            "v": 1,
            "id": 3,
            "method": "node",
            "params": {"path": [TITLE + "x"]},
        },
    )
    assert missing is not None and not _unsafe(missing["error"]["message"])


def test_widget_static_renderings_are_escaped(hostile: Path):
    view = TDView(hostile)
    data, _ = view._repr_mimebundle_()
    view.close()
    for mime in ("text/plain", "text/html"):
        assert "\x1b" not in data[mime] and "\u202e" not in data[mime], mime
        assert "\\x1b]2;PWNED" in data[mime]
    assert "two\nlines" not in data["text/plain"]


def test_static_rendering_of_a_long_key_is_cut(tmp_path: Path):
    TensorDict({"k": torch.zeros(1)}, batch_size=[]).memmap(tmp_path / "c")
    meta = json.loads((tmp_path / "c" / "meta.json").read_text())
    meta["k" * 50_000] = meta.pop("k")  # a key no file name can hold: in meta.json only
    (tmp_path / "c" / "meta.json").write_text(json.dumps(meta))
    view = TDView(tmp_path / "c")
    data, _ = view._repr_mimebundle_()
    view.close()
    assert len(data["text/plain"]) < 3 * MAX_SHOWN and "more characters)" in data["text/plain"]
    assert len(data["text/html"]) < 6 * MAX_SHOWN


def test_printable_examples():
    assert printable(TITLE) == "\\x1b]2;PWNED\\x07\\x1b[2J"
    assert printable("poids_é/层") == "poids_é/层"
    assert printable("a\u2066b\u200fc\ufeff") == "a\\u2066b\\u200fc\\ufeff"


def test_an_internal_error_is_reported_not_raised(hostile: Path, monkeypatch, capsys):
    import tdview.views  # the face the command line renders through

    def broken(*args, **kwargs):
        raise KeyError("\x1b[2J")

    monkeypatch.setattr(tdview.views, "render_tree", broken)
    assert main(["tree", str(hostile)]) == 3
    err = capsys.readouterr().err
    assert "internal error (KeyError" in err and "\x1b" not in err
    monkeypatch.setenv("TDVIEW_DEBUG", "1")
    with pytest.raises(KeyError):
        main(["tree", str(hostile)])


@pytest.mark.parametrize(
    "args",
    [
        ["tree", "/nonexistent/ckpt"],
        ["tree", "{hostile}", "[" * 5000],  # a JSON SUBPATH nested too deep
        ["tree", "{hostile}", '["a", 3]'],
        ["tree", "{hostile}", "--depth", str(10**30)],
        ["tree", "{hostile}", "--filter", "[" * 4096],
    ],
)
def test_the_command_line_never_raises(hostile: Path, args: list[str], capsys):
    code = main([a.format(hostile=hostile) for a in args])
    assert code in (0, 2)
    assert "Traceback" not in capsys.readouterr().err
