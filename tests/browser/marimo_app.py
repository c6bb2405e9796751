"""A marimo app of this environment, started for browser tests: ``marimo run`` headless on
a free loopback port, serving one notebook file (marimo shows anywidgets through
``mo.ui.anywidget``, in a shadow root that Playwright's locators pierce)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .jupyter import free_port


@dataclass
class MarimoApp:
    notebook: Path
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_marimo(notebook: Path, log: Path, timeout: float = 90.0) -> MarimoApp:
    """``marimo run NOTEBOOK --headless`` on 127.0.0.1 (no token: loopback only); wait
    until it answers. Its working directory is the notebook's folder."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "marimo",
        "run",
        str(notebook),
        "--headless",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-token",
        "--no-sandbox",
    ]
    # A config home of its own: no user settings, no telemetry prompt.
    env = dict(
        os.environ,
        XDG_CONFIG_HOME=str(log.parent / "marimo-config"),
        MARIMO_SKIP_UPDATE_CHECK="1",
        PYTHONUNBUFFERED="1",
    )
    handle = log.open("wb")
    process = subprocess.Popen(
        command, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=notebook.parent
    )
    app = MarimoApp(notebook, port, process, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"marimo exited early:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(app.url, timeout=5) as response:
                if response.status == 200:
                    return app
        except OSError:
            time.sleep(0.5)
    app.stop()
    raise RuntimeError(f"marimo did not answer within {timeout}s:\n{log.read_text()[-4000:]}")
