"""A JupyterLab or Notebook 7 server of this environment, started for browser tests."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class JupyterLabServer:
    root: Path
    port: int
    token: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}{path}{sep}token={self.token}"

    def api(self, path: str) -> object:
        request = urllib.request.Request(
            f"{self.base_url}{path}", headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_jupyterlab(root: Path, log: Path, timeout: float = 90.0) -> JupyterLabServer:
    """Start JupyterLab on a free loopback port with a token; wait until it answers."""
    return start_server("jupyterlab", root, log, timeout)


def start_server(
    app: str,
    root: Path,
    log: Path,
    timeout: float = 90.0,
    *,
    news: bool = False,
    flags: Sequence[str] = (),
) -> JupyterLabServer:
    """Start ``python -m <app>`` (``jupyterlab`` or ``notebook``, i.e. Notebook 7) on a
    free loopback port with a token, with ``flags`` added; wait until it answers.
    ``news=True`` leaves JupyterLab's news prompt as a fresh install has it."""
    port, token = free_port(), secrets.token_hex(16)
    settings = root / ".settings"
    settings.mkdir(parents=True, exist_ok=True)
    if not news:
        # Keep the news prompt out of screenshots (it would also try the outside network).
        setting = settings / "@jupyterlab" / "apputils-extension"
        setting.mkdir(parents=True, exist_ok=True)
        (setting / "notification.jupyterlab-settings").write_text(
            '{"fetchNews": "false", "checkForUpdates": false}'
        )
    command = [
        sys.executable,
        "-m",
        app,
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        # No workspace or news fetches: the test machine has no outside network.
        "--LabServerApp.workspaces_dir=" + str(root / ".workspaces"),
        f"--LabServerApp.user_settings_dir={settings}",
        "--ServerApp.disable_check_xsrf=True",
    ]
    if app == "jupyterlab":
        command.append("--LabApp.expose_app_in_browser=True")
        if not news:
            command.append("--LabApp.news_url=")
    elif app == "notebook":
        command.append("--JupyterNotebookApp.expose_app_in_browser=True")
    else:
        raise ValueError(f"unknown app {app!r}")
    if os.geteuid() == 0:  # CI and containers run as root
        command.append("--allow-root")
    command += flags
    env = dict(os.environ, JUPYTER_PLATFORM_DIRS="1", PYTHONUNBUFFERED="1")
    handle = log.open("wb")
    process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
    server = JupyterLabServer(root, port, token, process, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{app} exited early:\n{log.read_text()[-4000:]}")
        try:
            server.api("/api/status")
            return server
        except OSError:
            time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"{app} did not answer within {timeout}s:\n{log.read_text()[-4000:]}")
