"""Mapping a file from the descriptor the store opened and checked, never by its path.

``torch.from_file`` takes a path and opens it again: a file swapped since it was checked
(a symlink out of the checkpoint, a FIFO) would be what it maps, and reopening costs an
``open`` and a path walk per leaf. Here the descriptor the store opened (``O_NOFOLLOW``,
``O_NONBLOCK``) and checked (``fstat``: a regular file, long enough) is mapped itself
(``mmap(2)`` through ctypes: Python's own ``mmap`` keeps a duplicate of the descriptor
open for the life of the mapping, one per leaf), and the tensor is a
``torch.frombuffer`` view of that mapping, unmapped when its storage is freed.

``shared=True`` maps ``MAP_SHARED`` (writes reach the file: ``mode="r+"``, and
``mode=None`` on a writable file); otherwise ``MAP_PRIVATE`` (copy-on-write: the file
never changes), as ``torch.from_file(shared=...)`` does. A storage made so is not one of
torch's file mappings: its ``filename`` is None and ``is_shared()`` is False (the
``MemoryMappedTensor`` over it still knows its file).

Where no ``mmap(2)`` can be called (Windows), :data:`AVAILABLE` is False and the loader
maps by path.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import sys
from typing import Any

import torch

from .._units import human_bytes
from ..errors import MapRefusedError

__all__ = ["AVAILABLE", "map_descriptor"]

_PROT = getattr(mmap, "PROT_READ", 1) | getattr(mmap, "PROT_WRITE", 2)
_FAILED = ctypes.c_void_p(-1).value  # MAP_FAILED
_SHARED, _PRIVATE = getattr(mmap, "MAP_SHARED", 1), getattr(mmap, "MAP_PRIVATE", 2)


def _libc() -> tuple[Any, Any] | None:
    """``mmap`` and ``munmap`` of the C library, typed; None where there are none."""
    if os.name != "posix":
        return None
    try:
        # errno is kept for mmap only (it costs each call), munmap is not checked
        do_map, do_unmap = ctypes.CDLL(None, use_errno=True).mmap, ctypes.CDLL(None).munmap
    except (OSError, AttributeError):
        return None
    do_map.restype = ctypes.c_void_p
    do_map.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_ssize_t,
    ]
    do_unmap.restype = ctypes.c_int
    do_unmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return do_map, do_unmap


_CALLS = _libc()
AVAILABLE = _CALLS is not None and hasattr(mmap, "MAP_PRIVATE")
_mmap: Any = _CALLS[0] if _CALLS is not None else None
_munmap: Any = _CALLS[1] if _CALLS is not None else None


# address -> length of each mapping made here and not unmapped yet
_SIZES: dict[int, int] = {}


class _Mapped(ctypes.c_char * (sys.maxsize // 2)):  # type: ignore[misc]
    """The bytes of one mapping, for ``torch.frombuffer`` (which reads only the
    ``count`` items it is asked for: one array type for every size, as making one per size
    would make a type per leaf). Unmapped when the last storage using it is freed."""

    def __del__(self) -> None:
        addr = ctypes.addressof(self)
        size = _SIZES.pop(addr, 0)
        if size:
            _munmap(addr, size)


def map_descriptor(fd: int, dtype: torch.dtype, numel: int, *, shared: bool) -> torch.Tensor:
    """A flat tensor of the first ``numel`` items of ``dtype`` of the file open at ``fd``
    (``numel`` > 0, the file checked to hold them), mapped shared or copy-on-write.
    ``fd`` may be closed once this returns.

    Raises
    ------
    MapRefusedError
        ``mmap(2)`` refused (the descriptor's mode does not allow it, no memory...): an
        ``OSError`` naming the file and its size.
    """
    nbytes = numel * dtype.itemsize
    addr = _mmap(None, nbytes, _PROT, _SHARED if shared else _PRIVATE, fd, 0)
    if addr is None or addr == _FAILED:
        raise _refused(ctypes.get_errno(), fd, nbytes, shared)
    _SIZES[addr] = nbytes  # the window unmaps it when freed (also if frombuffer raises)
    return torch.frombuffer(_Mapped.from_address(addr), dtype=dtype, count=numel)


def _refused(code: int, fd: int, nbytes: int, shared: bool) -> MapRefusedError:
    """The error of a mapping refused with ``errno`` ``code``, naming the file open at
    ``fd`` (as ``/proc/self/fd`` names it) and its size. A copy-on-write mapping is
    writable memory the kernel may have to back: it counts against the commit limit
    (RAM plus swap, ``vm.overcommit_memory``), a shared one does not."""
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        path = f"the file open at descriptor {fd}"
    try:
        size = human_bytes(os.fstat(fd).st_size)
    except OSError:
        size = "unknown size"
    how = "shared" if shared else "copy-on-write"
    message = f"cannot map {human_bytes(nbytes)} of {path} (a file of {size}) {how}: "
    message += os.strerror(code)
    if code == errno.ENOMEM and not shared:
        message += (
            ". A copy-on-write mapping (mode='r', or mode=None on a file this process "
            "cannot write) counts against the memory commit limit (RAM plus swap), which "
            "this one exceeds; mode=None on a writable file and mode='r+' map it shared, "
            "which does not count (in-place writes then reach the file)"
        )
    return MapRefusedError(code, message + ".")
