"""``make demo`` starts JupyterLab without its news pop-up ("Would you like to get
notified about official Jupyter news?"): the flags the Makefile passes, read from the
Makefile itself, on a JupyterLab whose user settings are empty, as a new user's are."""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .jupyter import JupyterLabServer, free_port

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


def start_plain_lab(root: Path, flags: list[str]) -> JupyterLabServer:
    """JupyterLab with empty user settings (none of the test harness's news setting)."""
    port, token = free_port(), secrets.token_hex(16)
    settings = root / ".settings"
    settings.mkdir(exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        f"--LabServerApp.workspaces_dir={root / '.workspaces'}",
        f"--LabServerApp.user_settings_dir={settings}",
        "--LabApp.expose_app_in_browser=True",
        *flags,
    ]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = root / "lab.log"
    env = dict(os.environ, JUPYTER_PLATFORM_DIRS="1")
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    server = JupyterLabServer(root, port, token, process, log)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(log.read_text()[-4000:])
        try:
            server.api("/api/status")
            return server
        except OSError:
            time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"JupyterLab did not answer:\n{log.read_text()[-4000:]}")


@pytest.fixture
def lab_with(tmp_path: Path) -> Iterator[Any]:
    servers: list[JupyterLabServer] = []

    def start(name: str, flags: list[str]) -> JupyterLabServer:
        root = tmp_path / name
        root.mkdir()
        servers.append(start_plain_lab(root, flags))
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
