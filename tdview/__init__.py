"""tdview: browse and load tensordict checkpoints.

The reading is tdview's own (storage -> format -> index -> load); tensordict supplies
the result types. The public names are imported on first use, so that ``import
tdview.format`` (or the command line) does not pay for torch, tensordict and ipywidgets.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._version import __version__

# Eager (the package is light): ``tdview.load`` is the function, the loader is the
# subpackage ``tdview.loader``.
from .loader import load, load_memmap  # noqa: E402  isort: skip
from .diff import diff  # noqa: E402  isort: skip

if TYPE_CHECKING:
    from .index import Checkpoint
    from .storage import remote, trust_paths
    from .widget import TDView

_LAZY = {
    "Checkpoint": ".index",
    "TDView": ".widget",
    "trust_paths": ".storage",
    "remote": ".storage",
}

__all__ = [
    "Checkpoint",
    "TDView",
    "__version__",
    "diff",
    "load",
    "load_memmap",
    "remote",
    "trust_paths",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tdview' has no attribute {name!r}")
