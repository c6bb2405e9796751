"""Storage: checkpoint files by relative key, from a directory or a zip archive.

This layer knows keys and bytes, nothing about ``meta.json``. :func:`open_store`
returns a :class:`DirectoryStore` for a directory and an :class:`ArchiveStore` for a
``.tdz`` (any zip file with a top-level ``meta.json``); both follow the
:class:`Store` interface, and every key is confined to the checkpoint root.

Examples
--------
>>> from tdview.storage import open_store
>>> with open_store("/ckpt.tdz") as store:                      # doctest: +SKIP
...     meta = store.read_bytes("meta.json", limit=1 << 20)
"""

from __future__ import annotations

from ._archive import ArchiveStore
from ._base import WINDOWS_PATHS, EntryInfo, Store
from ._directory import DirectoryStore
from ._open import is_archive, open_store

__all__ = ["WINDOWS_PATHS", "ArchiveStore", "DirectoryStore", "EntryInfo", "Store", "is_archive",
           "open_store"]
