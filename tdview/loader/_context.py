"""What one load call carries down the tree: the checkpoint, the options, the caches."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import torch

from .._cache import BoundedCache
from ..errors import DeviceUnavailableError
from ..index import LoadAccess, Tree, load_access
from ..storage import Store
from ._fdmap import AVAILABLE as MAPS_DESCRIPTORS
from ._mapping import archive_mapping
from ._prefetch import Prefetcher

__all__ = ["MODES", "LoadContext", "check_mode", "check_usable", "user_stacklevel"]

MODES = (None, "r", "r+")
# root folder -> its Path (a Path is immutable: loads of one checkpoint share it)
_ROOT_PATHS: BoundedCache[str, Path] = BoundedCache(256)
# What every load would work out again for its first leaf of each dtype and shape:
# "torch.float32" -> torch.float32 (the names of the closed dtype table), and shape ->
# C-contiguous strides (bounded: a checkpoint may hold many shapes).
_DTYPES: dict[str, torch.dtype] = {}
_MAX_STRIDES = 4096
_STRIDES: BoundedCache[tuple[int, ...], tuple[int, ...]] = BoundedCache(_MAX_STRIDES)
# Folder paths kept per load (all dropped beyond, then made again from the root down)
_MAX_PREFIXES = 4096


def child_path(parent: Path, name: str) -> Path:
    """``parent / name`` for a plain name, by CPython's cheap child path where it has one
    (no parsing of ``name``)."""
    child = getattr(parent, "_make_child_relpath", None)
    return child(name) if child is not None else parent / name


def root_path(root: str) -> Path:
    """``Path(root)``, made once per checkpoint folder (bounded), not once per load.

    Examples
    --------
    >>> root_path("/ckpt") is root_path("/ckpt")
    True
    """
    found = _ROOT_PATHS.get(root)
    if found is None:
        found = _ROOT_PATHS.put(root, Path(root))
    return found


def user_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside tdview.

    Examples
    --------
    >>> user_stacklevel() >= 1
    True
    """
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tdview."):
        frame = frame.f_back
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


#: Device types every process can put a tensor on (check_usable answers at once).
_ALWAYS_USABLE = ("cpu", "meta")
#: The devices of those types that saved tensordicts record, made once per process
_USABLE_DEVICES = {name: torch.device(name) for name in _ALWAYS_USABLE}


def check_usable(device: torch.device, what: str) -> None:
    """Raise ``DeviceUnavailableError`` (``what``, then why and what to do) unless this
    process can put a tensor on ``device``. One empty tensor is made: torch's own errors
    for a missing backend are an ``AssertionError``, a ``RuntimeError`` or worse."""
    if device.type in _ALWAYS_USABLE:
        return
    try:
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError, NotImplementedError, ImportError) as exc:
        raise DeviceUnavailableError(
            f"{what}, which this process cannot use ({exc}). Pass device='cpu' (or another "
            "device) to load it there."
        ) from None


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
        ``"torch.float32"`` -> ``torch.float32``, filled as leaves are met (shared by
        the loads of this process: the names are those of the closed dtype table).
    depth, max_depth : int
        How many nodes are being built, one inside the other, and how many may be
        (``_build.depth_room``: what the recursion limit leaves).
    """

    ckpt: Tree
    mode: str | None
    allow_pickle: bool | None
    read_data: bool
    prefetch: Prefetcher | None = None
    progress: Callable[[tuple[str, ...]], object] | None = None
    dtypes: dict[str, torch.dtype] = field(default_factory=lambda: _DTYPES)
    depth: int = 0
    max_depth: int = 1 << 30
    _mappings: dict[str, torch.Tensor] = field(default_factory=dict, init=False)  # by file
    _root: str | None = None
    #: the store's files are entries of one archive (``Store.packed``): a leaf is a view
    #: of the one mapping, or decompressed
    is_archive: bool = field(init=False)
    #: the store cannot be mapped (a remote one): leaves come from ``fetched`` (_remote)
    remote: bool = field(init=False)
    #: a folder's leaf is a plain tensor in memory, not a ``MemoryMappedTensor`` (an
    #: HDF5 or zarr array, as its format's reader gives it: ``Store.leaves_in_memory``)
    in_memory: bool = field(init=False)
    #: every leaf file is mapped, by a store whose ``map`` needs no probe before
    #: (``Store.maps_unprobed``): the index gives leaves unprobed (``load_items``)
    maps_files: bool = field(init=False)
    #: a loaded tensordict records its folder as ``_memmap_prefix`` (local folders, a
    #: mode that may write back), unless its ``meta.json`` is a link out of the root
    keeps_prefix: bool = field(init=False)
    #: plain TensorDict folders are loaded folder by folder through descriptors
    #: (:mod:`._walk`): a store that walks folders, not while reading ahead, and
    #: mmap(2) at hand where leaves are mapped
    walks: bool = field(init=False)
    #: the index's doors for a load (:class:`~tdview.index.LoadAccess`)
    index: LoadAccess = field(init=False)
    fetched: Any = None
    _typed: dict[tuple[torch.dtype, str], torch.Tensor] = field(default_factory=dict, init=False)
    _devices: dict[str, torch.device] = field(default_factory=dict, init=False)
    _prefixes: dict[str, Path] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        store = self.ckpt.store
        self.index = load_access(self.ckpt)
        self.is_archive = store.packed
        self.remote = not store.mappable
        self.in_memory = store.leaves_in_memory
        self.maps_files = self.read_data and store.maps_unprobed
        self.keeps_prefix = store.local_folders and self.mode != "r"
        self.walks = (
            store.walks_folders
            and self.index.walks_folders
            and (MAPS_DESCRIPTORS or not self.read_data)
        )

    @property
    def store(self) -> Store:
        return self.ckpt.store

    def device(self, name: str) -> torch.device:
        """``torch.device(name)`` of a device a saved tensordict records, made (and tried)
        once per load.

        Raises
        ------
        DeviceUnavailableError
            This process cannot use the device (a checkpoint saved on ``cuda:0`` read
            where torch has no CUDA): the message says to pass ``device=``.
        """
        found = self._devices.get(name) or _USABLE_DEVICES.get(name)
        if found is None:
            found = torch.device(name)
            if found.type not in _ALWAYS_USABLE:  # (the message is made only for others)
                check_usable(
                    found, f"{self.ckpt.path}: the saved tensordict records device {name!r}"
                )
            self._devices[name] = found
        return found

    def strides(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The C-contiguous strides of ``shape`` (in elements), made once per shape (for
        all loads of this process, up to a bound)."""
        found = _STRIDES.get(shape)
        if found is None:
            strides, step = [], 1
            for dim in reversed(shape):
                strides.append(step)
                step *= max(dim, 1)
            found = tuple(reversed(strides))
            _STRIDES.put(shape, found)
        return found

    def typed_mapping(self, dtype: torch.dtype, file: str = "") -> torch.Tensor:
        """The archive mapping (of ``file``, see :meth:`mapping`) viewed as ``dtype`` (its
        whole items), made once per dtype: a leaf at an aligned offset is one
        ``as_strided`` of it."""
        found = self._typed.get((dtype, file))
        if found is None:
            flat = self.mapping(file)
            whole = flat.numel() - flat.numel() % dtype.itemsize
            found = self._typed[dtype, file] = flat[:whole].view(dtype)
        return found

    def prefix_path(self, dirkey: str) -> Path:
        """``Path`` of a directory store's folder (what tensordict records as a loaded
        tensordict's ``_memmap_prefix``), made from its parent's (children are built
        before their parent, so the missing ancestors are made on the way down)."""
        found = self._prefixes.get(dirkey)
        if found is not None:
            return found
        missing = []
        key = dirkey
        while key and (found := self._prefixes.get(key)) is None:
            missing.append(key)
            key = key.rpartition("/")[0]
        prefixes = self._prefixes
        if len(prefixes) >= _MAX_PREFIXES:
            prefixes.clear()  # a load of a million folders keeps no Path of each here
        if found is None:
            found = prefixes[""] = root_path(self.store.root)
        for key in reversed(missing):
            found = prefixes[key] = child_path(found, key.rpartition("/")[2])
        return found

    def file(self, key: str) -> str:
        """The absolute path of a directory store's file (what ``store.display`` gives,
        without ``os.path.join``'s cost per leaf)."""
        if self._root is None:
            self._root = os.path.join(self.ckpt.store.root, "")
        return self._root + (key if os.sep == "/" else key.replace("/", os.sep))

    def mapping(self, file: str = "") -> torch.Tensor:
        """The archive's flat uint8 mapping, shared for ``mode="r+"``, private otherwise;
        ``file``: which one of a store of several files (``Store.map_key``)."""
        found = self._mappings.get(file)
        if found is None:
            found = self._mappings[file] = archive_mapping(
                self.ckpt, shared=self.mode == "r+", file=file
            )
        return found

    def check_mapping(self) -> None:
        """Before a load returns views of the archive's mapping: raise ``ArchiveError``
        when the file is now shorter than when it was opened (a page past its new end
        kills the process with SIGBUS when it is read). One ``fstat``; nothing when no
        leaf views the mapping."""
        if self._mappings:
            self.ckpt.store.check_intact()
