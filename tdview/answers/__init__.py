"""Answers to what users open a checkpoint to learn (issue 34).

Is it healthy (``check``: CRC-32s, file sizes, values), where the bytes go (``sizes``,
``tdview du``), what is stored twice (``duplicates``). Each is a walk over the index, as
:mod:`tdview.diff` is: payloads streamed in bounded memory, progress and cancel through
the same callbacks, ``diff(1)``-style exit codes on the command line. This layer stands
on the index, the loader and the diff; the protocol, the widget and the command line
stand on it.

The face's names are imported from their modules on first use (``import tdview`` stays
light): add each public name to ``_LAZY`` with the module that defines it.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

#: public name -> the module of this package that defines it
_LAZY: dict[str, str] = {
    **dict.fromkeys(("Duplicates", "duplicates_of", "find_duplicates"), "._duplicates"),
    **dict.fromkeys(("SECTIONS", "SizeEntry", "SizeReport", "sizes", "walk_sizes"), "._sizes"),
    "add_du_parser": "._du_cli",
    **dict.fromkeys(("KINDS", "CheckReport", "Problem"), "._check_report"),
    "check": "._check",  # tdview.check: is it healthy
    "add_check_parser": "._check_cli",  # tdview check on the command line
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value
