"""`python -m build` makes a wheel that ships the built front end and works without Node."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("npm") is None:
        pytest.skip("building the wheel needs npm (Node 20)")
    out = tmp_path_factory.mktemp("dist")
    # sdist first, then the wheel from the unpacked sdist: the path a user's build takes.
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                   check=True, capture_output=True)
    (found,) = out.glob("tdview-*.whl")
    return found


def test_wheel_contains_the_built_front_end(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "tdview/static/widget.js" in names
    assert "tdview/static/widget.css" in names
    assert not any(n.startswith(("js/", "tests/")) for n in names)


def test_wheel_installs_and_imports_without_node(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # Dependencies come from this environment (no download); tdview only from the wheel.
    purelib = Path(subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        text=True).strip())
    (purelib / "_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
                   check=True)
    bare_path = str(venv / "bin")  # no node, no npm
    check = (
        "import shutil, pathlib, tdview\n"
        "assert shutil.which('node') is None and shutil.which('npm') is None\n"
        "here = pathlib.Path(tdview.__file__).parent\n"
        "assert 'site-packages' in str(here), here\n"
        "js = (here / 'static' / 'widget.js').read_text()\n"
        "assert 'render' in js\n"
        "print('ok', len(js))\n"
    )
    done = subprocess.run([str(python), "-c", check], capture_output=True, text=True,
                          env={"PATH": bare_path, "HOME": str(tmp_path)}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")
