"""Choose the store for a path: a directory or an archive."""

from __future__ import annotations

import os
import stat

from ..errors import NotACheckpointError
from ._archive import META, ArchiveStore
from ._base import Store
from ._consolidated import ConsolidatedStore, is_consolidated
from ._directory import DirectoryStore
from ._h5 import H5Store, is_h5, is_h5_url, open_h5_url
from ._key_safety import not_found
from ._mapfile import map_file, not_a_checkpoint
from ._probe import open_dir
from ._remote import is_remote, open_remote
from ._safetensors_files import is_safetensors
from ._safetensors_open import (
    INDEX_SUFFIX,
    open_safetensors,
    open_safetensors_folder,
    open_shard_index,
)
from ._zarr import ZarrStore, is_zarr_folder, is_zarr_url, open_zarr_url
from ._zip import parse_central_directory

__all__ = ["is_archive", "open_store"]


def open_store(path: str | os.PathLike[str] | Store) -> Store:
    """Open a checkpoint directory or archive for reading.

    Parameters
    ----------
    path : str or os.PathLike
        A directory, or a zip archive with a top-level ``meta.json`` (any suffix); or an
        fsspec URL, or a :func:`~tdview.storage.remote` path (see :mod:`._remote`).

    Returns
    -------
    Store
        A :class:`DirectoryStore` or an :class:`ArchiveStore`.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist (the message names ``<path>/meta.json``, like the
        reference loader's).
    NotACheckpointError
        If ``path`` is a file that is not a zip with a top-level ``meta.json``.
    ArchiveError, UnsafeCheckpointError
        If the archive is corrupt or hostile.

    Examples
    --------
    >>> open_store("/ckpt").kind                                  # doctest: +SKIP
    'directory'
    """
    if isinstance(path, Store):  # a store already open (a checkpoint in a zip of them)
        return path
    if is_remote(path):  # a URL (s3://, https://...): see _remote; zarr, HDF5 by name
        if is_zarr_url(path):
            return open_zarr_url(path)
        return open_h5_url(path) if is_h5_url(path) else open_remote(path)
    path = os.path.abspath(os.fspath(path))
    if is_zarr_folder(path):  # td.to_zarr(path): a zarr.json and no meta.json
        return ZarrStore(path)
    opened = open_dir(path)
    if opened is not None:  # a directory (Linux: told by opening it, no stat)
        found = open_safetensors_folder(path)  # no meta.json, a safetensors model
        if found is not None:
            if opened[1] >= 0:
                os.close(opened[1])
            return found
        return DirectoryStore(path, real=opened[0], root_fd=opened[1])
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        inner = _in_archive(path)
        if inner is not None:
            return inner
        raise not_found(os.path.join(path, META)) from None
    if stat.S_ISDIR(st.st_mode):
        return DirectoryStore(path)
    if stat.S_ISREG(st.st_mode) and is_h5(path):  # td.to_h5(path): the HDF5 signature
        return H5Store(path)
    if stat.S_ISREG(st.st_mode) and is_safetensors(path):  # told by its header
        return open_safetensors(path)
    if stat.S_ISREG(st.st_mode) and path.endswith(INDEX_SUFFIX):  # a shard set's index
        return open_shard_index(path)
    if stat.S_ISREG(st.st_mode):
        try:
            return ArchiveStore(path)
        except NotACheckpointError:
            if not is_consolidated(path):  # td.consolidate(filename=path): its footer
                raise
        return ConsolidatedStore(path)
    raise not_a_checkpoint(path, f"not a regular file (mode {st.st_mode:#o})")


def _in_archive(path: str) -> Store | None:
    """``"<zip>::<key>"`` (how a checkpoint in a zip of them is named: the load code
    tdview writes for one): that member, read through the zip (``Store.sub_store``),
    which closes the zip with it; None for a path of another form."""
    outer, sep, key = path.partition("::")
    if not sep or not key or not os.path.isfile(outer):
        return None
    store = open_store(outer)
    try:
        found = store.sub_store(key)
    except BaseException:
        store.close()
        raise
    found.owner = store  # closed with it
    return found


def is_archive(path: str | os.PathLike[str]) -> bool:
    """Return True when ``path`` is a regular file holding a zip with a top-level meta.json.

    Like the reference's ``is_memmap_archive``, the suffix does not matter and entry
    names are not checked for safety here (:func:`open_store` does that).

    Examples
    --------
    >>> is_archive("/nonexistent.tdz")
    False
    """
    try:
        path = os.path.abspath(os.fspath(path))
        if not os.path.isfile(path):
            return False
        mapping = map_file(path)
        try:
            cd = parse_central_directory(mapping, len(mapping), path)
        finally:
            mapping.close()
    except (OSError, ValueError):  # ValueError covers every tdview parsing error
        return False
    return cd is not None and cd.has_name(META)
