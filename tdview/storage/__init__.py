"""Storage: checkpoint files by relative key, from a directory or a zip archive.

This layer knows keys and bytes, nothing about ``meta.json``. :func:`open_store`
returns a :class:`DirectoryStore` for a directory and an :class:`ArchiveStore` for a
``.tdz`` (any zip file with a top-level ``meta.json``); both follow the
:class:`Store` interface, and every key is confined to the checkpoint root: a
directory's symlinks may lead out of it only into a content store that holds the
checkpoint (Hugging Face cache, git-annex, DVC) or below a path trusted with
:func:`trust_paths` or ``TDVIEW_TRUSTED_PATHS``, and only for reading. Other formats are
stores that present their files as checkpoint folders: a safetensors file or shard set
(:class:`SafetensorsStore`, from its headers), HDF5, zarr, consolidated files.

Examples
--------
>>> from tdview.storage import open_store
>>> with open_store("/ckpt.tdz") as store:                      # doctest: +SKIP
...     meta = store.read_bytes("meta.json", limit=1 << 20)
"""

from __future__ import annotations

from ._archive import ArchiveStore
from ._base import WINDOWS_PATHS, EntryInfo, Mapped, Payload, Store
from ._codecs import DECODE_ERRORS, INFLATE_LIBRARY, METHODS, decompressor
from ._crc import CRC32_LIBRARY, crc32, crc32_combine
from ._directory import DirectoryStore
from ._folder_walk import FolderWalk
from ._group_tree import GroupTreeStore
from ._h5 import H5Store
from ._links import Link
from ._open import is_archive, open_store
from ._remote import RemotePath, is_remote, remote
from ._safetensors_store import SafetensorsStore
from ._trust import TRUSTED_PATHS_ENV, trust_paths, trusted_paths
from ._zarr import ZarrStore

__all__ = [
    "CRC32_LIBRARY",
    "DECODE_ERRORS",
    "INFLATE_LIBRARY",
    "METHODS",
    "TRUSTED_PATHS_ENV",
    "WINDOWS_PATHS",
    "ArchiveStore",
    "DirectoryStore",
    "EntryInfo",
    "FolderWalk",
    "GroupTreeStore",
    "H5Store",
    "Link",
    "Mapped",
    "Payload",
    "RemotePath",
    "SafetensorsStore",
    "Store",
    "ZarrStore",
    "crc32",
    "crc32_combine",
    "decompressor",
    "is_archive",
    "is_remote",
    "open_store",
    "remote",
    "trust_paths",
    "trusted_paths",
]
