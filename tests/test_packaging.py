"""`python -m build` makes a wheel that ships the built front end and the prebuilt
JupyterLab extension, and works installed alone where Node is absent."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ._optional import require_tool

ROOT = Path(__file__).resolve().parents[1]
EXTENSION = "tdview-jupyterlab"
DATA = f"tdview-0.1.0.data/data/share/jupyter/labextensions/{EXTENSION}/"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_tool("npm", "building the wheel needs npm: install Node 20")
    out = tmp_path_factory.mktemp("dist")
    # sdist first, then the wheel from the unpacked sdist: the path a user's build takes.
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (found,) = out.glob("tdview-*.whl")
    return found


def install_alone(wheel: Path, venv: Path) -> Path:
    """A fresh venv holding tdview only from the wheel; its dependencies come from this
    environment through a .pth file (no download). Returns its python."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
        ).strip()
    )
    # Every site directory this interpreter sees (a venv made with --system-site-packages
    # has two); the .pth files inside them are not read, so no editable tdview leaks in.
    sites = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    (purelib / "_deps.pth").write_text("\n".join(sites) + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)], check=True
    )
    return python


def test_wheel_contains_the_built_front_end(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "tdview/static/widget.js" in names
    assert "tdview/static/widget.css" in names
    assert "tdview/py.typed" in names  # PEP 561: type checkers read tdview's annotations
    assert not any(n.startswith(("js/", "tests/")) for n in names)


def test_wheel_installs_and_imports_without_node(wheel: Path, tmp_path: Path) -> None:
    python = install_alone(wheel, tmp_path / "venv")
    check = (
        "import shutil, pathlib, tdview\n"
        "assert shutil.which('node') is None and shutil.which('npm') is None\n"
        "here = pathlib.Path(tdview.__file__).parent\n"
        "assert 'site-packages' in str(here), here\n"
        "js = (here / 'static' / 'widget.js').read_text()\n"
        "assert 'render' in js\n"
        "from tdview import TDView\n"
        "print('ok', len(js))\n"
    )
    done = subprocess.run(
        [str(python), "-c", check],
        capture_output=True,
        text=True,
        env={"PATH": str(python.parent), "HOME": str(tmp_path)},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")


def test_wheel_ships_the_extension_as_shared_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    shipped = [n[len(DATA) :] for n in names if n.startswith(DATA)]
    assert "package.json" in shipped and "install.json" in shipped
    assert "static/style.js" in shipped
    assert any(re.fullmatch(r"static/remoteEntry\.[0-9a-f]+\.js", n) for n in shipped), shipped
    # Shipped once, as data: not a second time inside the package, and no sources.
    assert not any(n.startswith(("tdview/labextension/", "labextension/")) for n in names)


def test_fresh_install_lists_the_extension_enabled_and_ok(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    python = install_alone(wheel, venv)
    shipped = venv / "share" / "jupyter" / "labextensions" / EXTENSION
    assert (shipped / "package.json").is_file()

    # `jupyter labextension list`, run as the fresh environment's module (its bin/ holds
    # no `jupyter` script: jupyter_core came through the .pth). No Node on PATH.
    env = {"PATH": str(venv / "bin"), "HOME": str(tmp_path), "JUPYTER_PLATFORM_DIRS": "1"}
    done = subprocess.run(
        [str(python), "-m", "jupyterlab.labextensions", "list"],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    assert done.returncode == 0, text
    line = next((ln for ln in text.splitlines() if EXTENSION in ln), None)
    assert line is not None, text
    assert "enabled" in line and "OK" in line, text
    assert "(python, tdview)" in line, text
    # Listed from the fresh environment's share/jupyter, not from a development link.
    section = text[: text.index(line)].rstrip().splitlines()
    directories = [ln.strip() for ln in section if ln.strip().startswith("/")]
    assert directories and Path(directories[-1]).resolve() == shipped.parent.resolve(), text


def test_jupyterlab_is_an_extra(wheel: Path) -> None:
    """marimo and VS Code need no JupyterLab, jupyter-server nor nbconvert: the wheel
    requires them only through the ``jupyterlab`` extra (its lab extension still ships)."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(name).decode()
    requires = [
        line.split(":", 1)[1].strip()
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:")
    ]
    plain = [r for r in requires if "extra ==" not in r]
    assert not any(
        re.match(r"(jupyterlab|jupyter[-_]server|nbconvert|notebook)\b", r) for r in plain
    ), plain
    assert any(re.match(r"jupyterlab\b.*extra == [\"']jupyterlab[\"']", r) for r in requires), (
        requires
    )
