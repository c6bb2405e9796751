#!/usr/bin/env bash
# docs/tdview.png, the README's picture: the browser test that checks what it shows
# (tests/browser/test_readme_screenshot.py), told to keep its light screenshot of the cell.
set -euo pipefail
cd "$(dirname "$0")/.."
TDVIEW_README_SCREENSHOT="$PWD/docs/tdview.png" \
  .venv/bin/python -m pytest tests/browser/test_readme_screenshot.py -q -x -k light
ls -l docs/tdview.png
