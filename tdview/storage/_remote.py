"""Remote checkpoints: fsspec URLs (``s3://``, ``gs://``, ``https://``, ``file://``...).

:func:`open_store` sends a URL here (a string with a ``scheme://`` of two letters or
more, or a :class:`RemotePath` made by :func:`remote`). An object is opened as an archive
(:class:`~._remote_archive.RemoteArchiveStore`: the central directory through suffix
ranges, ``meta.json`` entries in batches, payloads by range), a prefix with a
``meta.json`` as a checkpoint folder (:class:`~._remote_dir.RemoteDirectoryStore`:
listings and ``meta.json`` reads issued concurrently). Neither can be memory-mapped
(``Store.mappable`` is False): the loader reads leaves into memory through
``fetch``. A ``file://`` URL goes through fsspec like any other (a plain path is mapped).

Storage options (credentials, ``endpoint_url``, ``client_kwargs``...) are passed to
fsspec by :func:`remote`, or come from fsspec's own configuration and the environment
for a plain URL string. ``cache="blocks"`` or ``cache="files"`` puts fsspec's block cache
or whole-file cache in front of the filesystem, so that a second browse or load (in this
process or a later one, with the same ``cache_dir``) reads from the local disk. The cache
is trusted: it never expires and never checks an object against the store (fsspec's
``expiry_time=False, check_files=False``), so a second load of an archive that the cache
holds sends no request at all (not even for its size, which the cache recorded). A
folder's listings are not cached: they are asked again.
"""

from __future__ import annotations

import re
from typing import Any, TypeGuard

from ..errors import NotACheckpointError
from ._base import Store
from ._key_safety import not_found

__all__ = ["EXTRAS", "RemotePath", "is_remote", "open_remote", "remote"]

# protocol -> the tdview extra that installs what fsspec needs for it
EXTRAS = {"http": "http", "https": "http", "s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]+://")
_CACHES = {"blocks": "blockcache", "files": "filecache"}


class RemotePath(str):
    """A URL, with the filesystem or the storage options to open it (see :func:`remote`).

    It is a ``str`` (the URL), so that it can go wherever a checkpoint path goes
    (``Checkpoint``, ``TDView``, ``load_memmap``).
    """

    fs: Any
    path: str
    options: dict[str, Any]
    cache: str | None
    cache_dir: str | None
    concurrency: int | None
    verify: bool

    def __new__(
        cls,
        url: str,
        fs: Any,
        path: str,
        options: dict[str, Any],
        cache: str | None,
        cache_dir: str | None,
        concurrency: int | None,
        verify: bool = False,
    ) -> RemotePath:
        self = super().__new__(cls, url)
        self.fs, self.path, self.options = fs, path, options
        self.cache, self.cache_dir, self.concurrency = cache, cache_dir, concurrency
        self.verify = verify
        return self


def remote(
    url: str,
    fs: Any = None,
    *,
    cache: str | None = None,
    cache_dir: str | None = None,
    concurrency: int | None = None,
    verify: bool = False,
    **storage_options: Any,
) -> RemotePath:
    """Name a remote checkpoint, with what fsspec needs to reach it.

    Parameters
    ----------
    url : str
        An fsspec URL (``"s3://bucket/run/ckpt.tdz"``, ``"https://host/ckpt.tdz"``), or,
        with ``fs``, a path on that filesystem (``"bucket/run/ckpt"``).
    fs : fsspec.AbstractFileSystem, optional
        A filesystem already made (its own options apply; ``storage_options`` must then
        be empty).
    cache : {"blocks", "files"}, optional
        Put fsspec's block cache (``"blocks"``: the ranges read are kept, in sparse files)
        or whole-file cache (``"files"``: the first read downloads the whole object) in
        front of the filesystem. Off by default. What the cache holds is taken as
        fresh, never checked against the store: reading an archive the cache holds sends
        no request. An object changed on the store after it was cached is not seen: use
        another ``cache_dir`` then, or give a cache filesystem of your own as ``fs``
        (``fsspec.filesystem("blockcache", fs=..., check_files=True)`` checks each object
        when it is opened: an ``info`` call, which for s3fs is a HEAD and a listing).
    cache_dir : str, optional
        Where the cache keeps its files (a temporary folder by default, which lasts as
        long as the process; give a folder to reuse the cache in a later process).
    concurrency : int, optional
        Ranged reads in flight at once (16 by default).
    verify : bool
        Check the CRC-32 of every archive payload a load reads (metadata and compressed
        entries are always checked). Off by default, as a mapped local load checks none:
        every read is still checked for its range and length, and each entry for its
        local header.
    **storage_options
        Passed to fsspec: ``key``/``secret``/``endpoint_url`` (s3fs), ``token`` (gcsfs),
        ``client_kwargs``, ``headers`` (HTTP)...

    Returns
    -------
    RemotePath
        A ``str`` to give to ``Checkpoint``, ``TDView``, ``load_memmap`` or
        ``open_store``.

    Examples
    --------
    >>> ckpt = remote("s3://bucket/ckpt.tdz", endpoint_url="http://127.0.0.1:9000",
    ...               key="id", secret="secret")                       # doctest: +SKIP
    >>> tdview.Checkpoint(ckpt).children()                              # doctest: +SKIP
    >>> remote("https://example.org/ckpt.tdz", cache="blocks")          # doctest: +ELLIPSIS
    'https://example.org/ckpt.tdz'
    """
    if cache is not None and cache not in _CACHES:
        raise ValueError(f"cache must be None, 'blocks' or 'files', got {cache!r}.")
    if fs is not None and storage_options:
        raise ValueError(
            "pass storage options to the filesystem you made, or no "
            f"filesystem: got both fs= and {sorted(storage_options)}."
        )
    if fs is not None:
        path = fs._strip_protocol(url)
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        shown = url if _URL.match(url) else f"{protocol}://{path}"
    else:
        path, shown = url, url
    return RemotePath(shown, fs, path, dict(storage_options), cache, cache_dir, concurrency, verify)


def is_remote(path: object) -> TypeGuard[str | RemotePath]:
    """Whether ``path`` names a remote checkpoint (a URL, or a :class:`RemotePath`).

    Examples
    --------
    >>> is_remote("s3://bucket/x.tdz"), is_remote("/data/x.tdz"), is_remote("C://x")
    (True, False, False)
    """
    return isinstance(path, RemotePath) or (isinstance(path, str) and _URL.match(path) is not None)


def open_remote(path: str | RemotePath) -> Store:
    """Open the remote checkpoint ``path`` names (see the module docstring).

    Raises
    ------
    ImportError
        fsspec needs a package for the protocol: the message names the tdview extra.
    FileNotFoundError
        Nothing at the URL, or a folder without ``meta.json``.
    NotACheckpointError
        An object that is not a zip with a top-level ``meta.json``.
    """
    from ._consolidated_remote import RemoteConsolidatedStore
    from ._listing_cache import cached_listing
    from ._ranges import cached_size
    from ._remote_archive import RemoteArchiveStore
    from ._remote_dir import RemoteDirectoryStore
    from ._safetensors_open import is_safetensors_url, open_remote_safetensors
    from ._zarr import open_zarr_url, zarr_group_at

    where = path if isinstance(path, RemotePath) else remote(path)
    fs, fspath = filesystem(where)
    url = str(where)
    size = None
    if url.endswith("/") or _is_http(fs):
        kind = "directory" if url.endswith("/") else "file"
    elif (cached := cached_size(fs, fspath)) is not None:
        kind, size = "file", cached  # the cache holds the object: no request to the store
    elif cached_listing(fs, fspath) is not None:
        kind = "directory"  # a folder a cached load listed: no request either
    else:
        try:
            info = fs.info(fspath)
        except FileNotFoundError:
            raise not_found(url.rstrip("/") + "/meta.json") from None
        kind, size = info.get("type", "file"), info.get("size")
    if kind == "directory":
        if _is_http(fs):
            if zarr_group_at(fs, fspath):  # td.to_zarr: one ranged read of its zarr.json
                return open_zarr_url(where)
            raise NotACheckpointError(
                f"{url}: a checkpoint folder cannot be listed over HTTP; serve the "
                "checkpoint as an archive (.tdz: tensordict's td.save('x.tdz') or "
                "pack_memmap), or from an object store."
            )
        folder = RemoteDirectoryStore(
            url.rstrip("/"), fs, fspath.rstrip("/"), concurrency=where.concurrency
        )
        if folder.is_file("meta.json") or not folder.is_file("zarr.json"):  # its listing
            return folder
        if not zarr_group_at(fs, fspath):  # td.to_zarr: one ranged read of its zarr.json
            return folder
        folder.close()
        return open_zarr_url(where)
    if is_safetensors_url(url):  # told by its name: a look would cost a request
        return open_remote_safetensors(url, fs, fspath, concurrency=where.concurrency, size=size)
    try:
        return RemoteArchiveStore(
            url, fs, fspath, concurrency=where.concurrency, size=size, verify=where.verify
        )
    except NotACheckpointError as not_zip:
        error: Exception = not_zip
    except FileNotFoundError as absent:  # over HTTP, a folder's URL names no object
        error = absent
    if isinstance(error, NotACheckpointError):
        try:  # td.consolidate(filename=...): a footer at the end of the object
            return RemoteConsolidatedStore(
                url, fs, fspath, concurrency=where.concurrency, size=size
            )
        except NotACheckpointError:
            pass
    if zarr_group_at(fs, fspath):  # td.to_zarr at a URL of another name: tried last
        return open_zarr_url(where)
    raise error from None


def filesystem(where: RemotePath) -> tuple[Any, str]:
    """The fsspec filesystem of ``where`` (made from its options, cache in front) and the
    path on it; a missing package is an ``ImportError`` naming the tdview extra."""
    import fsspec

    fs, path = where.fs, where.path
    if fs is None:
        try:
            fs, path = fsspec.core.url_to_fs(where.path, **where.options)
        except ImportError as error:
            protocol = where.path.split("://", 1)[0].lower()
            extra = EXTRAS.get(protocol)
            hint = (
                f'pip install "tdview[{extra}]"'
                if extra is not None
                else f"install the fsspec implementation of {protocol}://"
            )
            raise ImportError(
                f"reading {where} needs a package that is not installed ({error}): {hint}."
            ) from None
    if where.cache is not None:
        storage = where.cache_dir or _temporary_cache()
        fs = fsspec.filesystem(
            _CACHES[where.cache], fs=fs, cache_storage=storage, check_files=False, expiry_time=False
        )
    return fs, path


_TEMPORARY: list[str] = []


def _temporary_cache() -> str:
    """One cache folder for the process, removed at exit."""
    if not _TEMPORARY:
        import atexit
        import shutil
        import tempfile

        folder = tempfile.mkdtemp(prefix="tdview-cache-")
        atexit.register(shutil.rmtree, folder, True)
        _TEMPORARY.append(folder)
    return _TEMPORARY[0]


def _is_http(fs: Any) -> bool:
    protocol = getattr(fs, "fs", fs).protocol  # a cache's target
    protocol = protocol if isinstance(protocol, tuple) else (protocol,)
    return "http" in protocol or "https" in protocol


def display_join(root: str, key: str) -> str:
    """``root/key`` for a folder URL (``root`` for the root)."""
    return f"{root}/{key}" if key else root
