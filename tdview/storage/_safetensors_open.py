"""Opening a safetensors checkpoint: a local file, a shard set (its index, or the folder
holding it), or a remote file or shard set over fsspec."""

from __future__ import annotations

import json
import os
import posixpath
import stat
from collections.abc import Callable
from typing import Any

from ..errors import CheckpointFormatError, LimitExceededError, TDViewError
from ._directory import DirectoryStore
from ._fast_json import NOT_READ, fast_loads
from ._key_safety import check_key, not_found
from ._mapfile import READ_FLAGS
from ._ranges import Transport
from ._safetensors_files import LocalShard, RemoteShard, Shard
from ._safetensors_store import SafetensorsStore
from ._safetensors_tree import META

__all__ = [
    "INDEX_SUFFIX",
    "folder_index",
    "is_safetensors_url",
    "open_remote_safetensors",
    "open_safetensors",
    "open_safetensors_folder",
    "open_shard_index",
    "parse_index",
    "shard_set",
]

#: How a shard index's name ends; the one Hugging Face writes; a single file's name.
INDEX_SUFFIX = ".safetensors.index.json"
INDEX = "model" + INDEX_SUFFIX
SINGLE = "model.safetensors"
#: The largest shard index read (a million keys take about 60 MB).
MAX_INDEX = 256 << 20


def open_safetensors(path: str) -> SafetensorsStore:
    """Open the local safetensors file ``path`` (followed if it is a link: the user named
    it) as a store.

    Examples
    --------
    >>> open_safetensors("/models/model.safetensors").kind           # doctest: +SKIP
    'safetensors'
    """
    root = os.path.abspath(path)

    def reopen(write: bool) -> int:
        return os.open(root, READ_FLAGS | (os.O_RDWR if write else 0))

    fd = reopen(False)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise not_found(root)
    shard = LocalShard(root, fd, st, reopen)
    return SafetensorsStore(root, [shard], metadata=shard.header.metadata)


def folder_index(names: list[str]) -> str | None:
    """The file of a folder's names that makes it a safetensors checkpoint: its shard
    index (``model.safetensors.index.json``, else the only ``*.safetensors.index.json``),
    else ``model.safetensors``; None for any other folder.

    Examples
    --------
    >>> folder_index(["config.json", "model.safetensors"])
    'model.safetensors'
    >>> folder_index(["a.safetensors.index.json", "a-1.safetensors"]), folder_index(["x"])
    ('a.safetensors.index.json', None)
    """
    if INDEX in names:
        return INDEX
    indexes = [name for name in names if name.endswith(INDEX_SUFFIX)]
    if len(indexes) == 1:
        return indexes[0]
    return SINGLE if SINGLE in names else None


def open_safetensors_folder(path: str) -> SafetensorsStore | None:
    """The safetensors checkpoint of folder ``path`` when it has no ``meta.json`` and
    holds one (:func:`folder_index`), else None. Its files are opened through a
    :class:`DirectoryStore` of the folder, under its rules for links (a Hugging Face
    snapshot's links into ``blobs/`` are followed, for reading)."""
    if os.path.lexists(os.path.join(path, META)):
        return None
    try:
        names = os.listdir(path)
    except OSError:
        return None
    found = folder_index(names)
    if found is None:
        return None
    return _through(DirectoryStore(path), found, path)


def open_shard_index(path: str) -> SafetensorsStore:
    """The shard set a local ``*.safetensors.index.json`` names (its shards beside it)."""
    root = os.path.abspath(path)
    return _through(DirectoryStore(os.path.dirname(root)), os.path.basename(root), root)


def _through(folder: DirectoryStore, name: str, root: str) -> SafetensorsStore:
    """The checkpoint of file ``name`` of ``folder`` (a single file or a shard index),
    its files opened through ``folder``, which the store closes."""
    try:
        if name.endswith(INDEX_SUFFIX):
            index = folder.read_bytes(name, MAX_INDEX)
            store = shard_set(
                root, index, folder.display(name), lambda shard: _folder_shard(folder, shard)
            )
        else:
            shard = _folder_shard(folder, name)
            store = SafetensorsStore(root, [shard], metadata=shard.header.metadata)
    except BaseException:
        folder.close()
        raise
    store.closing.append(folder)
    if not root.endswith(INDEX_SUFFIX) and not name.endswith(INDEX_SUFFIX):
        store.foreign_format = f"a folder holding the safetensors file {name}"
    return store


def _folder_shard(folder: DirectoryStore, name: str) -> LocalShard:
    check_key(name, folder.root)
    fd, st, _ = folder.map(name, write=False)

    def reopen(write: bool) -> int:
        return folder.map(name, write=write)[0]

    shard = LocalShard(folder.display(name), fd, st, reopen)
    shard.name = name
    return shard


def shard_set(
    root: str, index: bytes, where: str, open_shard: Callable[[str], Shard]
) -> SafetensorsStore:
    """The store of a shard set from its index's bytes (``where`` names it in errors):
    every shard the index names opened with ``open_shard``; what does not agree (a
    missing shard, a key the index names that its shard does not hold, a shard key the
    index does not name) is a problem of the key's node, not an error of the whole.

    Raises
    ------
    CheckpointFormatError
        The index is not ``{"weight_map": {key: file name}, "metadata": {...}}``.
    """
    metadata, weight_map = parse_index(index, where)
    shards: dict[str, Shard] = {}
    lost: dict[str, str] = {}
    for name in dict.fromkeys(weight_map.values()):
        try:
            shards[name] = open_shard(name)
        except FileNotFoundError:
            lost[name] = f"its shard {name} is missing"
        except (OSError, TDViewError) as error:
            lost[name] = f"its shard {name} cannot be read: {str(error).rstrip('.')}"
    agreed = _agreed(shards, weight_map)
    if agreed is not None:  # (the common set: nothing to say of any key)
        return SafetensorsStore(
            root, list(shards.values()), metadata=metadata, refused={}, unknown={}, where=agreed
        )
    holder: dict[str, Shard] = {}
    refused: dict[str, str] = {}
    for name, shard in shards.items():
        for key in shard.header.records:
            named = weight_map.get(key)
            if named == name or key not in holder:
                holder[key] = shard
            if named is None:
                refused[key] = f"shard {name} holds {key!r}, but the index does not name it"
    unknown = {  # each reason names its key: the store raises it as it is
        key: f"{lost[name]} (the index names it for {key!r})"
        if name in lost
        else f"the index names shard {name} for {key!r}, but no shard holds it"
        for key, name in weight_map.items()
        if key not in holder
    }
    for key, name in weight_map.items():
        if key in holder and name in shards and holder[key] is not shards[name]:
            refused[key] = f"the index names shard {name} for {key!r}, but another shard holds it"
    return SafetensorsStore(
        root,
        list(shards.values()),
        metadata=metadata,
        refused=refused,
        unknown=unknown,
        where=holder,
    )


def _agreed(shards: dict[str, Shard], weight_map: dict[str, str]) -> dict[str, Shard] | None:
    """Each key's shard where the index and the shards agree, told by whole dicts (no
    Python code per key): every shard holds only keys the index names for it, and they
    are as many as the index names (so each key is held once, by its shard); else None,
    and :func:`shard_set` looks key by key."""
    if sum(len(shard.header.records) for shard in shards.values()) != len(weight_map):
        return None
    holder: dict[str, Shard] = {}
    for name, shard in shards.items():
        named = dict.fromkeys(shard.header.records, name)
        if not named.items() <= weight_map.items():
            return None
        holder.update(dict.fromkeys(named, shard))
    return holder


def parse_index(data: bytes, where: str) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """``(metadata, weight_map)`` of a shard index's bytes, checked.

    Examples
    --------
    >>> parse_index(b'{"metadata": {"total_size": 8}, "weight_map": {"w": "a.safetensors"}}', "i")
    ({'total_size': 8}, {'w': 'a.safetensors'})
    """
    raw = fast_loads(data)
    if raw is NOT_READ:
        try:
            raw = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as error:
            raise CheckpointFormatError(f"{where} is not UTF-8 JSON ({error}).") from None
    weight_map = raw.get("weight_map") if isinstance(raw, dict) else None
    if (
        not isinstance(weight_map, dict)
        or set(map(type, weight_map.values())) - {str}
        or "" in weight_map.values()
    ):
        raise CheckpointFormatError(
            f"{where}: a shard index maps each key to its file under 'weight_map'; got "
            f"{str(weight_map)[:80]!r}."
        )
    metadata = raw.get("metadata")
    return (metadata if isinstance(metadata, dict) else None), weight_map


def is_safetensors_url(url: str) -> bool:
    """A URL of a safetensors file or shard index, told by its name: a look at a remote
    object costs a request.

    Examples
    --------
    >>> is_safetensors_url("s3://b/model.safetensors"), is_safetensors_url("s3://b/x.tdz")
    (True, False)
    """
    return url.endswith((".safetensors", INDEX_SUFFIX))


def open_remote_safetensors(
    url: str, fs: Any, path: str, *, concurrency: int | None, size: int | None
) -> SafetensorsStore:
    """The safetensors file or shard set at ``url`` (``path`` on ``fs``), read by ranges:
    two reads per file for the tree (an index first for a shard set). ``size``: the
    object's, when an ``info`` told it."""
    transport = Transport(fs, concurrency=concurrency)
    transport.sizes[path] = size
    try:
        if not url.endswith(INDEX_SUFFIX):
            shard = RemoteShard(transport, url, path)
            store = SafetensorsStore(url, [shard], metadata=shard.header.metadata)
        else:
            found, index = transport.tail(path, MAX_INDEX)
            if found > MAX_INDEX:
                raise LimitExceededError(
                    f"{url} is {found:,} bytes, above the limit of {MAX_INDEX:,} bytes."
                )
            store = shard_set(
                url, index, url, lambda name: _remote_shard(transport, url, path, name)
            )
    except BaseException:
        transport.close()
        raise
    store.transport = transport
    return store


def _remote_shard(transport: Transport, url: str, path: str, name: str) -> RemoteShard:
    check_key(name, url)
    shard = RemoteShard(
        transport,
        posixpath.join(posixpath.dirname(url), name),
        posixpath.join(posixpath.dirname(path), name),
    )
    shard.name = name
    return shard
