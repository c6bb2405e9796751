#!/usr/bin/env bash
# scripts/bootstrap.sh demo|test: creates .venv (if needed) and installs into it.
#   demo: tdview, editable, with JupyterLab, and the front end (widget bundle and lab
#         extension): what `make demo` needs and nothing more.
#   test: what `make test` adds: the test and lint extras (marimo, moto, playwright,
#         pytest, ruff, mypy...), torchrl, and the html-manager of the export tests.
# The Makefile runs `demo` before `test` and keeps a stamp for each.
# torch: an installed torch is kept (the venv sees the system's packages when the system
# Python already has torch); otherwise the CPU wheel is installed explicitly, so that no
# dependency resolution ever pulls a multi-GB CUDA build onto a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TDVIEW_TORCH_SPEC:-torch==2.13.0}
PIP=(.venv/bin/pip install --quiet)
NPM_CI=(npm ci --no-audit --no-fund --silent)

# pip builds tdview's editable wheel in the venv itself (--no-build-isolation: no second
# JupyterLab in a throwaway build environment) and without hatch-jupyter-builder's npm
# steps (SKIP_JUPYTER_BUILDER): the front end is built here, once, before it.
# (pyproject.toml's build-system requires, and editables, hatchling's for an editable wheel)
BUILD_REQUIRES=("hatchling>=1.21" "hatch-jupyter-builder>=0.9" "jupyterlab>=4,<5" editables)
install_tdview() {
  SKIP_JUPYTER_BUILDER=1 "${PIP[@]}" --no-build-isolation -e ".[$1]"
}

# The JupyterLab extension as the venv sees it: a link to the current build
# (labextension/ -> tdview/labextension/), not the copy an editable install makes.
unlink_labextension() {
  rm -rf .venv/share/jupyter/labextensions/tdview-jupyterlab
}
link_labextension() {
  unlink_labextension
  ln -s "$PWD/tdview/labextension" .venv/share/jupyter/labextensions/tdview-jupyterlab
}

demo() {
  if [ ! -x .venv/bin/python ]; then
    if "$PYTHON" -c "import torch" 2>/dev/null; then
      echo "bootstrap: reusing the torch of $PYTHON"
      "$PYTHON" -m venv --system-site-packages .venv
    else
      "$PYTHON" -m venv .venv
    fi
  fi
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    echo "bootstrap: installing the CPU build ($TORCH_SPEC)"
    "${PIP[@]}" "$TORCH_SPEC"
  fi
  command -v npm >/dev/null || { echo "bootstrap: npm (Node 20) is needed to build the front end" >&2; exit 1; }
  "${PIP[@]}" --upgrade pip
  "${PIP[@]}" "${BUILD_REQUIRES[@]}"
  # The widget's bundle (js/ -> tdview/static/) and the JupyterLab extension, whose build
  # runs the venv's `jupyter labextension build`.
  (cd js && "${NPM_CI[@]}" && npm run --silent build)
  (cd labextension && "${NPM_CI[@]}" && PATH="$PWD/../.venv/bin:$PATH" npm run --silent build)
  unlink_labextension  # a reinstall would remove the files of the old copy through the link
  install_tdview jupyterlab
  link_labextension
}

test_extras() {
  [ -x .venv/bin/python ] || { echo "bootstrap: run \`scripts/bootstrap.sh demo\` first" >&2; exit 1; }
  unlink_labextension
  install_tdview dev
  link_labextension
  # torchrl writes the replay buffers of tests/test_replay_buffers.py (tdview never imports
  # it). 0.14.1 pins tensordict<0.15, which pip's resolver refuses beside tensordict 0.15,
  # though what the tests use of it (ReplayBuffer.dumps) runs with 0.15: so it is installed
  # without its dependencies, and the rest of them are in the test extra above.
  "${PIP[@]}" --no-deps "torchrl==0.14.1"
  # What an nbconvert HTML export loads from its CDNs (html-manager, anywidget, require.js):
  # tests/browser/test_static_export_html.py serves these locally in their place.
  (cd tests/browser/html-manager && "${NPM_CI[@]}" --ignore-scripts)
}

case "${1:-}" in
  demo) demo ;;
  test) test_extras ;;
  *) echo "usage: scripts/bootstrap.sh demo|test" >&2; exit 2 ;;
esac
