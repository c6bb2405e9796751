"""One skip policy for what a test needs beyond tdview's own dependencies.

A module or tool that ``make test`` installs (torchrl, moto, s3fs, aiohttp, marimo,
anywidget, the ``zip`` and ``npm`` tools, Chromium, the built front end) skips a test
locally, with a message saying how to install it, and fails it under ``CI=true``, where
its absence is a broken install rather than a choice. Platform facts (no CUDA device, no
FIFOs, no ``/proc``) stay plain ``skipif``\\ s: CI cannot change them.
"""

from __future__ import annotations

import importlib
import os
import shutil
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any, NoReturn, TypeVar

import pytest

#: How to install what ``pip install -e ".[test]"`` does not (torchrl pins tensordict<0.15).
TORCHRL_INSTALL = "scripts/bootstrap.sh installs it: pip install --no-deps torchrl==0.14.1"
F = TypeVar("F", bound=Callable[..., Any])

TEST_EXTRAS = 'make test installs it (pip install -e ".[test]")'


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def missing(message: str) -> NoReturn:
    """Skip with ``message``, or fail with it under ``CI=true``."""
    if in_ci():
        pytest.fail(f"{message}. Under CI=true a missing test dependency is a failure.")
    pytest.skip(message, allow_module_level=True)


def require_module(name: str, why: str = "", install: str = "") -> ModuleType:
    """``name`` imported, else a skip (a failure under ``CI=true``) saying ``why`` the test
    needs it and how to ``install`` it. A module that raises on import (a broken install)
    counts as missing and its error is shown."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(name)
    except Exception as error:  # noqa: BLE001 - a broken install is reported as a missing one
        top = name.partition(".")[0]
        hint = install or (TORCHRL_INSTALL if top == "torchrl" else TEST_EXTRAS)
        said = f" ({why})" if why else ""
        missing(f"{name} does not import ({type(error).__name__}: {error}){said}; {hint}")


def require_tool(name: str, install: str = "") -> str:
    """The path of the command ``name``, else a skip (a failure under ``CI=true``)."""
    path = shutil.which(name)
    if path is None:
        missing(f"the {name} command is not on PATH; {install or f'apt-get install {name}'}")
    return path


def require(present: bool, message: str) -> None:
    """A precondition that ``make test`` sets up (a built front end): skip or fail."""
    if not present:
        missing(message)


def needs_cuda(test: F) -> F:
    """Marks ``test`` ``cuda`` (``make test-gpu`` runs these) and skips it without a CUDA
    device, CI included: CI has none."""
    import torch

    skip = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
    return pytest.mark.cuda(skip(test))
