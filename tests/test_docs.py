"""The README is a front door: its first screen says what tdview is, shows it, installs it
and gives the two commands that set a fresh machine up; the pages it links exist."""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

from .test_static_export import NO_JS_PRIORITY

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FIRST_SCREEN = 30  # lines
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def first_screen() -> str:
    return "\n".join(README.read_text().splitlines()[:FIRST_SCREEN])


def test_first_screen_says_shows_installs_and_sets_up() -> None:
    screen = first_screen()
    assert screen.startswith("# tdview\n")
    assert "![" in screen and "(docs/tdview.png)" in screen
    assert "pip install tdview" in screen and 'pip install "tdview[jupyterlab]"' in screen
    commands = re.findall(r"^make (\S+)", screen, flags=re.MULTILINE)
    assert commands == ["demo", "test"]


def test_the_two_commands_are_make_targets() -> None:
    """``make -n`` knows both (the Makefile's own parse, not a grep of it)."""
    for target in ("demo", "test"):
        done = subprocess.run(
            ["make", "-n", "--no-print-directory", target],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
    demo = subprocess.run(
        ["make", "-n", "-B", "--no-print-directory", "demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    # the demo installs what it needs and nothing of the tests' extras
    assert "scripts/bootstrap.sh demo" in demo and "bootstrap.sh test" not in demo
    assert "jupyter lab" in demo and "tour.ipynb" in demo


def test_screenshot_is_a_small_png() -> None:
    data = (ROOT / "docs" / "tdview.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width <= 1280 and height <= 720, (width, height)
    assert len(data) < 200_000


def test_every_relative_link_of_the_docs_exists() -> None:
    pages = [README, ROOT / "ARCHITECTURE.md", ROOT / "bench" / "RESULTS.md"]
    pages += sorted((ROOT / "docs").glob("*.md"))
    broken = [
        (page.name, target)
        for page in pages
        for target in LINK.findall(page.read_text())
        if "://" not in target and not (page.parent / target).exists()
    ]
    assert not broken
    linked = set(LINK.findall(README.read_text()))
    assert {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")} <= linked


def test_hosts_page_gives_the_tested_nbconvert_priority() -> None:
    """The command line of docs/hosts.md is the one tests/test_static_export.py runs."""
    assert (
        f"--NbConvertBase.display_data_priority='{NO_JS_PRIORITY}'"
        in (ROOT / "docs" / "hosts.md").read_text()
    )
