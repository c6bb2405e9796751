#!/usr/bin/env bash
# Creates .venv (if needed) and installs tdview into it, editable, with its test extras.
# torch: an installed torch is kept (the venv sees the system's packages when the system
# Python already has torch); otherwise the CPU wheel is installed explicitly, so that no
# dependency resolution ever pulls a multi-GB CUDA build onto a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TDVIEW_TORCH_SPEC:-torch==2.13.0}

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
  .venv/bin/pip install --quiet "$TORCH_SPEC"
fi
command -v npm >/dev/null || { echo "bootstrap: npm (Node 20) is needed to build the front end" >&2; exit 1; }
.venv/bin/pip install --quiet --upgrade pip
.venv/bin/pip install --quiet -e ".[dev]"
# torchrl writes the replay buffers of tests/test_replay_buffers.py (tdview never imports
# it). 0.14.1 pins tensordict<0.15, which pip's resolver refuses beside tensordict 0.15,
# though what the tests use of it (ReplayBuffer.dumps) runs with 0.15: so it is installed
# without its dependencies, and the rest of them are in the test extra above.
.venv/bin/pip install --quiet --no-deps "torchrl==0.14.1"
# The editable build skips npm when a bundle exists; keep the bundle current.
(cd js && npm ci --no-audit --no-fund --silent && npm run --silent build)
# The JupyterLab extension (labextension/ -> tdview/labextension/). The editable install
# copied a snapshot into the venv's share/jupyter; a link keeps JupyterLab on the current build.
(cd labextension && npm ci --no-audit --no-fund --silent && PATH="$PWD/../.venv/bin:$PATH" npm run --silent build)
rm -rf .venv/share/jupyter/labextensions/tdview-jupyterlab
ln -s "$PWD/tdview/labextension" .venv/share/jupyter/labextensions/tdview-jupyterlab
# What an nbconvert HTML export loads from its CDNs (html-manager, anywidget, require.js):
# tests/browser/test_static_export_html.py serves these locally in their place.
(cd tests/browser/html-manager && npm ci --no-audit --no-fund --silent --ignore-scripts)
