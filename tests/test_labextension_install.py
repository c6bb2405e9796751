"""The wheel ships the prebuilt JupyterLab extension: installed alone into a fresh
environment, without Node, `jupyter labextension list` shows it enabled and OK."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXTENSION = "tdview-jupyterlab"
DATA = f"tdview-0.1.0.data/data/share/jupyter/labextensions/{EXTENSION}/"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = (ROOT / "tdview" / "labextension" / "package.json").exists()
    if shutil.which("npm") is None and not built:
        pytest.skip("building the JupyterLab extension needs npm (Node 20)")
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out),
                           str(ROOT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (found,) = out.glob("tdview-*.whl")
    return found


def test_wheel_ships_the_extension_as_shared_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    shipped = [n[len(DATA):] for n in names if n.startswith(DATA)]
    assert "package.json" in shipped and "install.json" in shipped
    assert "static/style.js" in shipped
    assert any(re.fullmatch(r"static/remoteEntry\.[0-9a-f]+\.js", n) for n in shipped), shipped
    # Shipped once, as data: not a second time inside the package, and no sources.
    assert not any(n.startswith(("tdview/labextension/", "labextension/")) for n in names)


def test_fresh_install_lists_the_extension_enabled_and_ok(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # Dependencies (jupyterlab among them) come from this environment; tdview and its
    # extension only from the wheel.
    purelib = Path(subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        text=True).strip())
    (purelib / "_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
                   check=True)
    shipped = venv / "share" / "jupyter" / "labextensions" / EXTENSION
    assert (shipped / "package.json").is_file()

    # `jupyter labextension list`, run as the fresh environment's module (its bin/ holds
    # no `jupyter` script: jupyter_core came through the .pth). No Node on PATH.
    env = {"PATH": str(venv / "bin"), "HOME": str(tmp_path), "JUPYTER_PLATFORM_DIRS": "1"}
    done = subprocess.run([str(python), "-m", "jupyterlab.labextensions", "list"], env=env,
                          capture_output=True, text=True, cwd=tmp_path)
    text = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    assert done.returncode == 0, text
    line = next((ln for ln in text.splitlines() if EXTENSION in ln), None)
    assert line is not None, text
    assert "enabled" in line and "OK" in line, text
    assert "(python, tdview)" in line, text
    # Listed from the fresh environment's share/jupyter, not from a development link.
    section = text[:text.index(line)].rstrip().splitlines()
    directories = [ln.strip() for ln in section if ln.strip().startswith("/")]
    assert directories and Path(directories[-1]).resolve() == shipped.parent.resolve(), text
