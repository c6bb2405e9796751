"""tdview: browse and load tensordict checkpoints.

The reading is tdview's own (storage -> format -> index -> load); tensordict supplies
the result types. The public names are imported on first use, so that ``import
tdview`` (or ``tdview.format``, or the command line) pays for none of torch, tensordict,
ipywidgets or the index: ``from tdview import TDView`` then browsing imports neither torch
nor tensordict (a load or the device list does, when asked).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._version import __version__

# Eager, and light (its own names are lazy): the subpackage ``tdview.diff`` is an
# attribute of this module once anything imports it, which would hide a lazy ``diff``
# function behind the module. ``tdview.load`` is the function (no subpackage of that name).
from .diff import diff  # isort: skip

if TYPE_CHECKING:
    from .answers import check
    from .index import Checkpoint, open_tree
    from .loader import load, load_memmap
    from .storage import remote, trust_paths
    from .widget import TDView

_LAZY = {
    "Checkpoint": ".index",
    "TDView": ".widget",
    "check": ".answers",
    "load": ".loader",
    "load_memmap": ".loader",
    "open_tree": ".index",
    "trust_paths": ".storage",
    "remote": ".storage",
}

__all__ = [
    "Checkpoint",
    "TDView",
    "__version__",
    "check",
    "diff",
    "load",
    "load_memmap",
    "open_tree",
    "remote",
    "trust_paths",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tdview' has no attribute {name!r}")
