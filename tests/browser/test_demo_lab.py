"""``make demo`` starts JupyterLab without its news pop-up ("Would you like to get
notified about official Jupyter news?"): the flags the Makefile passes, read from the
Makefile itself, on a JupyterLab whose user settings are empty, as a new user's are."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .jupyter import JupyterLabServer, start_server

REPO = Path(__file__).resolve().parents[2]
NEWS = "Would you like to get notified about official Jupyter news?"
TIMEOUT = 60_000


def demo_lab_flags() -> list[str]:
    """``$(DEMO_LAB_FLAGS)`` as ``make demo`` expands it."""
    rule = "tdview-demo-flags: ; @echo $(DEMO_LAB_FLAGS)"
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", f"--eval={rule}", "tdview-demo-flags"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return shlex.split(done.stdout)


@pytest.fixture
def lab_with(tmp_path: Path) -> Iterator[Any]:
    servers: list[JupyterLabServer] = []

    def start(name: str, flags: list[str]) -> JupyterLabServer:
        root = tmp_path / name
        root.mkdir()
        # user settings empty, as a new user has them: the harness's news setting left out
        servers.append(start_server("jupyterlab", root, root / "lab.log", news=True, flags=flags))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def news_prompt_shown(page: Any, server: JupyterLabServer) -> bool:
    page.goto(server.url("/lab"), wait_until="domcontentloaded")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=TIMEOUT)
    page.evaluate("() => window.jupyterapp.restored")
    try:  # the plugin asks once the app is restored
        page.get_by_text(NEWS).first.wait_for(timeout=8_000)
        return True
    except Exception:  # noqa: BLE001 - playwright's TimeoutError: not shown
        return False


def test_make_demo_starts_lab_without_the_news_prompt(
    lab_with: Any, page: Any, artifacts: Path
) -> None:
    flags = demo_lab_flags()
    assert any(f.startswith("--LabApp.app_settings_dir=") for f in flags), flags
    # the prompt this removes: a plain JupyterLab asks
    assert news_prompt_shown(page, lab_with("plain", []))
    demo = lab_with("demo", flags)
    assert not news_prompt_shown(page, demo)
    page.set_viewport_size({"width": 1280, "height": 720})
    page.screenshot(path=str(artifacts / "demo-lab-no-news-1280x720.png"))
    settings = demo.api("/lab/api/settings/@jupyterlab/apputils-extension:notification")
    # overrides.json makes "false" the default the plugin reads (a user may still opt in)
    default = settings["schema"]["properties"]["fetchNews"]["default"]  # type: ignore[index]
    assert default == "false"
