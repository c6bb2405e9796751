"""What one load call carries down the tree: the checkpoint, the options, the caches."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..index import Checkpoint
from ..storage import Store
from ._mapping import archive_mapping
from ._prefetch import Prefetcher

__all__ = ["MODES", "LoadContext", "check_mode", "user_stacklevel"]

MODES = (None, "r", "r+")


def user_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside tdview.

    Examples
    --------
    >>> user_stacklevel() >= 1
    True
    """
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tdview."):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def check_mode(mode: object) -> None:
    """Raise ``ValueError`` unless ``mode`` is None, ``"r"`` or ``"r+"``.

    Examples
    --------
    >>> check_mode("w")
    Traceback (most recent call last):
    ...
    ValueError: mode must be 'r', 'r+' or None, got 'w'.
    """
    if not (mode is None or (isinstance(mode, str) and mode in ("r", "r+"))):
        raise ValueError(f"mode must be 'r', 'r+' or None, got {mode!r}.")


@dataclass
class LoadContext:
    """The state of one load.

    Attributes
    ----------
    ckpt : Checkpoint
    mode : str or None
        ``"r"``, ``"r+"`` or None (see :func:`tdview.load_memmap`).
    allow_pickle : bool or None
    read_data : bool
        False for ``device="meta"`` and under a FakeTensorMode: no payload is read.
    prefetch : Prefetcher or None
        The parallel decompression of the subtree's compressed leaves.
    progress : callable or None
        Called with the path of each leaf once it is loaded.
    dtypes : dict
        ``"torch.float32"`` -> ``torch.float32``, filled as leaves are met.
    """

    ckpt: Checkpoint
    mode: str | None
    allow_pickle: bool | None
    read_data: bool
    prefetch: Prefetcher | None = None
    progress: Callable[[tuple[str, ...]], object] | None = None
    dtypes: dict[str, torch.dtype] = field(default_factory=dict)
    _mapping: torch.Tensor | None = None
    _root: str | None = None

    @property
    def store(self) -> Store:
        return self.ckpt.store

    @property
    def is_archive(self) -> bool:
        return self.ckpt.store.kind == "archive"

    def file(self, key: str) -> str:
        """The absolute path of a directory store's file (what ``store.display`` gives,
        without ``os.path.join``'s cost per leaf)."""
        if self._root is None:
            self._root = os.path.join(self.ckpt.store.root, "")
        return self._root + (key if os.sep == "/" else key.replace("/", os.sep))

    def mapping(self) -> torch.Tensor:
        """The archive's flat uint8 mapping, shared for ``mode="r+"``, private otherwise."""
        if self._mapping is None:
            self._mapping = archive_mapping(self.ckpt, shared=self.mode == "r+")
        return self._mapping
