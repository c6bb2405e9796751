"""The wheel's front-end build: hatch-jupyter-builder's ``build-function``.

Two npm projects are built with hatch-jupyter-builder's own ``npm_builder`` (each only
when its sources are newer than its output):

- ``js/``: the anywidget bundle, into ``tdview/static/``;
- ``labextension/``: the prebuilt JupyterLab extension, into ``tdview/labextension/``,
  which the wheel ships as ``share/jupyter/labextensions/tdview-jupyterlab``. Its build
  runs ``jupyter labextension build``, so the ``jupyter`` of this (build) environment is
  put first on ``PATH``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hatch_jupyter_builder import npm_builder

PROJECTS = (
    # (npm project, its sources, its output)
    ("js", "js/src", "tdview/static"),
    ("labextension", "labextension/src", "tdview/labextension"),
)


def build(target_name: str, version: str, force: bool = False, **_: object) -> None:
    """Build both npm projects (``version`` is "standard" or "editable")."""
    bin_dir = str(Path(sys.executable).parent)
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    for path, source_dir, build_dir in PROJECTS:
        npm_builder(target_name, version, path=path, build_cmd="build", npm=["npm"],
                    source_dir=source_dir, build_dir=build_dir, force=force)
