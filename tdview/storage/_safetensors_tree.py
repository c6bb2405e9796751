"""The tree a safetensors file is shown as: dotted keys grouped into folders.

A state dict's keys nest as modules do (``model.layers.0.mlp.up.weight``): each ``.``
is a level, so that the tree, the search and a subtree load see ``model/layers/0/...``.
A key that is also the prefix of another (``a.b`` and ``a.b.c``) stays a leaf, and the
longer key keeps its flat name at that level (``a`` holds ``b`` and ``b.c``); so does a
name that a ``meta.json`` reserves for the node itself (``shape``, ``_type``...). Each
folder is presented as tensordict lays a TensorDict out (a ``meta.json`` naming its
entries, batch size ``[]``, and ``<key>.memmap`` per tensor with elements), so that the
index reads it as it reads any checkpoint. The ``meta.json`` bytes are made here, when
a folder is first read; nothing here reads JSON.

Examples
--------
>>> layout = Layout([("a.b", "float32", (2,)), ("a.b.c", "int64", ()), ("w", "bool", (1,))])
>>> layout.children("a"), layout.leaf("a/b.c.memmap")
(['b.c.memmap', 'b.memmap', 'meta.json'], 'a.b.c')
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from math import prod

from ..errors import CheckpointFormatError

__all__ = ["META", "RESERVED", "Layout", "file_name"]

META = "meta.json"
#: Names a TensorDict's meta.json uses for the node itself: never an entry's name.
RESERVED = frozenset({"shape", "device", "_type", "_format_version", "_class", "_names"})
_TAIL = '"shape": [], "_type": "<class \'tensordict._td.TensorDict\'>", "_format_version": 1, "_class": "tensordict:TensorDict"}'  # noqa: E501
_UNSAFE = set('/<>:"|?*\\ %') | {chr(c) for c in range(32)} | {chr(127)}
_ENCODE = str.maketrans({c: f"%{ord(c):02X}" for c in _UNSAFE})
_NEEDS = re.compile("[" + re.escape("".join(sorted(_UNSAFE))) + "]")
_DIGITS = re.compile(r"(\d+)")


def file_name(key: str) -> str:
    """The file-system name tensordict gives a key: the twin of
    :func:`tdview.format.encode_key` (storage imports no format; a test holds the two
    equal), written out here because the store names the files the index looks for.

    Examples
    --------
    >>> file_name("a b"), file_name(""), file_name("..")
    ('a%20b', '%', '%2E%2E')
    """
    if not key:
        return "%"
    if key in (".", ".."):
        return "%2E" * len(key)
    # str.translate looks up each character: a search for one to encode is far cheaper
    return key.translate(_ENCODE) if _NEEDS.search(key) else key


def _natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key: ``layers.2`` before ``layers.10``."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in _DIGITS.split(name) if p)


class _Folder:
    """One folder: its entries (name -> real key, None for a sub-folder) in the header's
    order, its sub-folders, its file and folder names, its meta.json once made."""

    __slots__ = ("entries", "meta", "names", "prefix", "sub")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix  # its key and a "/" ("" for the root)
        self.entries: dict[str, str | None] = {}
        self.sub: dict[str, _Folder] = {}  # entry name -> the folder
        #: (file names, folder names), made when first asked
        self.names: tuple[frozenset[str], frozenset[str]] | None = None
        self.meta: bytes | None = None


class Layout:
    """The folders and files of a safetensors checkpoint (one file or a shard set).

    Parameters
    ----------
    tensors : iterable of (name, torch dtype name, shape)
        The tensors whose bytes can be read.
    unknown : iterable of str
        Keys named (by a shard index) whose record no file gives: each is an entry whose
        folder cannot be read (the store says why), flagged by the index.

    Attributes
    ----------
    files : dict
        Store key of each tensor's file (``"model/layers/0/w.memmap"``) -> its real key.
    """

    def __init__(
        self, tensors: Iterable[tuple[str, str, Sequence[int]]], unknown: Iterable[str] = ()
    ) -> None:
        records: dict[str, tuple[str, tuple[int, ...]] | None] = {
            name: (dtype, tuple(shape)) for name, dtype, shape in tensors
        }
        for name in unknown:
            records.setdefault(name, None)
        self._records = records
        root = _Folder("")
        self._folders: dict[str, _Folder] = {"": root}
        self.files: dict[str, str] = {}
        self.unknown: dict[str, str] = {}  # dirkey of an unknown key -> the key
        self.keys: dict[str, str] = {}  # real key -> its store key (file, or folder)
        for name, record in records.items():
            folder, leaf = self._place(name, root)
            folder.entries[leaf] = name
            encoded = file_name(leaf)
            if record is None:
                self.unknown[self.keys.setdefault(name, folder.prefix + encoded)] = name
            elif prod(record[1]):  # tensordict writes no file for an empty tensor
                key = self.keys[name] = folder.prefix + encoded + ".memmap"
                self.files[key] = name

    def _place(self, name: str, root: _Folder) -> tuple[_Folder, str]:
        """``(folder, entry name)`` of key ``name``, making its folders."""
        parts = name.split(".")
        last = len(parts) - 1
        depth, prefix, names = 0, parts[0], self._records
        while depth < last and parts[depth] not in RESERVED and prefix not in names:
            depth += 1
            prefix = f"{prefix}.{parts[depth]}"
        if depth and depth == last and parts[-1] in RESERVED:
            depth -= 1  # a reserved leaf name: flat, one level up
        leaf = parts[-1] if depth == last else ".".join(parts[depth:])
        if leaf in RESERVED:
            raise CheckpointFormatError(
                f"tensor {name!r}: a key named {leaf!r} at the top level cannot be shown as "
                "a tensordict entry (tensordict's meta.json reserves that name)."
            )
        folder = root
        for part in parts[:depth]:
            sub = folder.sub.get(part)
            if sub is None:
                key = folder.prefix + file_name(part)
                sub = folder.sub[part] = self._folders[key] = _Folder(key + "/")
                folder.entries.setdefault(part, None)
            folder = sub
        return folder, leaf

    # -- what the store asks -----------------------------------------------------------

    def is_dir(self, key: str) -> bool:
        return key in self._folders

    def children(self, dirkey: str) -> list[str]:
        """The sorted names in folder ``dirkey`` (``KeyError`` if it is none)."""
        files, dirs = self._names(dirkey)
        return sorted(files | dirs)

    def files_in(self, dirkey: str) -> frozenset[str]:
        """The file names of folder ``dirkey`` (``KeyError`` if it is none)."""
        return self._names(dirkey)[0]

    def dirs_in(self, dirkey: str) -> frozenset[str]:
        """The sub-folder names of folder ``dirkey`` (``KeyError`` if it is none)."""
        return self._names(dirkey)[1]

    def _names(self, dirkey: str) -> tuple[frozenset[str], frozenset[str]]:
        folder = self._folders[dirkey]
        if folder.names is None:
            dirs = frozenset(file_name(name) for name in folder.sub)
            files = {META}
            for name, real in folder.entries.items():
                if real is not None and name not in folder.sub:
                    key = folder.prefix + file_name(name) + ".memmap"
                    if key in self.files:
                        files.add(key[len(folder.prefix) :])
            folder.names = frozenset(files), dirs
        return folder.names

    def leaf(self, key: str) -> str | None:
        """The real key of the tensor whose file ``key`` is, or None."""
        return self.files.get(key)

    def meta(self, dirkey: str) -> bytes:
        """The ``meta.json`` of folder ``dirkey``, made the first time it is asked: its
        entries in their names' natural order (``layers.2`` before ``layers.10``)."""
        folder = self._folders[dirkey]
        if folder.meta is None:
            parts = []
            for name in sorted(folder.entries, key=_natural):
                real = folder.entries[name]
                record = None if real is None else self._records[real]
                if name in folder.sub or record is None:
                    value = '{"type": "TensorDict"}'
                else:
                    dtype, shape = record
                    value = (
                        f'{{"device": "cpu", "shape": {json.dumps(list(shape))}, '
                        f'"dtype": "torch.{dtype}", "is_nested": false}}'
                    )
                parts.append(f"{json.dumps(name)}: {value}, ")
            folder.meta = ("{" + "".join(parts) + _TAIL).encode()
        return folder.meta
