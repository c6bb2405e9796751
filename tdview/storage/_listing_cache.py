"""Folder listings of a remote checkpoint kept beside fsspec's cache.

fsspec's block and file caches keep the bytes read, but a folder's listing (``ls``)
always goes to the store: a second load of a cached remote folder would still send a
listing per folder. With a cache (:func:`~._remote.remote` ``cache=``), the listings a
load made are written as small JSON files in the cache's folder and read back by later
loads, under the cache's own policy: what it holds is fresh, never checked against the
store (a changed folder is not seen: use another ``cache_dir``). A file that does not
read back as a listing is ignored (the folder is listed again).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

__all__ = ["cached_listing", "keep_listing"]

#: The most bytes a kept listing may take (a larger one is not kept, nor read).
MAX_LISTING_BYTES = 16 << 20
_FOLDER = "tdview-listings"


def _file(fs: Any, path: str) -> str | None:
    """Where ``fs`` (a caching filesystem, else None) keeps the listing of ``path``."""
    from fsspec.implementations.cached import CachingFileSystem

    if not isinstance(fs, CachingFileSystem) or not getattr(fs, "storage", None):
        return None
    name = hashlib.sha256(f"{fs.fs.protocol}:{path}".encode()).hexdigest()
    return os.path.join(fs.storage[-1], _FOLDER, name + ".json")


def cached_listing(fs: Any, path: str) -> list[dict[str, Any]] | None:
    """The ``ls(path, detail=True)`` items a cache kept for the folder ``path``, or None.

    Examples
    --------
    >>> import fsspec
    >>> cached_listing(fsspec.filesystem("memory"), "/x") is None   # no cache, no listing
    True
    """
    where = _file(fs, path)
    if where is None:
        return None
    try:
        with open(where, "rb") as f:
            data = f.read(MAX_LISTING_BYTES + 1)
        items = json.loads(data) if len(data) <= MAX_LISTING_BYTES else None
    except (OSError, ValueError):
        return None
    if not isinstance(items, list) or not all(_item(i) for i in items):
        return None
    return items


def keep_listing(fs: Any, path: str, items: Any) -> None:
    """Keep the listing ``items`` of the folder ``path`` in the cache of ``fs`` (nothing
    without a cache, or for an error or a listing that is not plain)."""
    where = _file(fs, path)
    if where is None or not isinstance(items, list):
        return
    plain = [
        {"name": str(i["name"]), "type": i.get("type"), "size": i.get("size")}
        for i in items
        if isinstance(i, dict) and "name" in i
    ]
    if not all(_item(i) for i in plain):
        return
    data = json.dumps(plain).encode()
    if len(data) > MAX_LISTING_BYTES:
        return
    try:
        os.makedirs(os.path.dirname(where), exist_ok=True)
        temporary = f"{where}.{os.getpid()}.tmp"
        with open(temporary, "wb") as f:
            f.write(data)
        os.replace(temporary, where)  # a reader sees the old listing or the new, whole
    except OSError:
        pass  # a cache that cannot be written lists again next time


def _item(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and isinstance(item.get("name"), str)
        and item.get("type") in ("file", "directory", None)
        and (item.get("size") is None or isinstance(item.get("size"), int))
    )
