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
from dataclasses import dataclass, field
from math import prod

from ..errors import CheckpointFormatError

__all__ = ["META", "RESERVED", "Layout", "file_name"]

META = "meta.json"
#: Names a TensorDict's meta.json uses for the node itself: never an entry's name.
RESERVED = frozenset({"shape", "device", "_type", "_format_version", "_class", "_names"})
_TAIL = '"shape": [], "_type": "<class \'tensordict._td.TensorDict\'>", "_format_version": 1, "_class": "tensordict:TensorDict"}'  # noqa: E501
_UNSAFE = set('/<>:"|?*\\ %') | {chr(c) for c in range(32)} | {chr(127)}
_ENCODE = str.maketrans({c: f"%{ord(c):02X}" for c in _UNSAFE})
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
    return key.translate(_ENCODE)


def _natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key: ``layers.2`` before ``layers.10``."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in _DIGITS.split(name) if p)


@dataclass
class _Folder:
    entries: dict[str, str | None] = field(default_factory=dict)  # name -> real key or None
    folders: set[str] = field(default_factory=set)  # entry names that are folders
    files: set[str] = field(default_factory=set)  # file names (encoded, .memmap)
    dirs: set[str] = field(default_factory=set)  # folder names (encoded)
    meta: bytes | None = None


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
        records = {name: (dtype, tuple(shape)) for name, dtype, shape in tensors}
        lost = [name for name in unknown if name not in records]
        names = set(records) | set(lost)
        self._folders: dict[str, _Folder] = {"": _Folder()}
        self._records: dict[str, tuple[str, tuple[int, ...]] | None] = {}
        self.files: dict[str, str] = {}
        self.unknown: dict[str, str] = {}  # dirkey of an unknown key -> the key
        self.keys: dict[str, str] = {}  # real key -> its store key (file, or folder)
        for name in sorted(names, key=_natural):
            record = records.get(name)
            dirkey, leaf = self._place(name, names)
            folder = self._folders[dirkey]
            folder.entries[leaf] = name
            self._records[name] = record
            prefix = dirkey + "/" if dirkey else ""
            if record is None:
                self.unknown[self.keys.setdefault(name, prefix + file_name(leaf))] = name
            elif prod(record[1]):  # tensordict writes no file for an empty tensor
                folder.files.add(file_name(leaf) + ".memmap")
                key = self.keys[name] = prefix + file_name(leaf) + ".memmap"
                self.files[key] = name

    def _place(self, name: str, names: set[str]) -> tuple[str, str]:
        """``(folder key, entry name)`` of key ``name``, making its folders."""
        parts = name.split(".")
        depth = 0
        while depth < len(parts) - 1:
            part = parts[depth]
            if part in RESERVED or ".".join(parts[: depth + 1]) in names:
                break
            depth += 1
        if depth and depth == len(parts) - 1 and parts[-1] in RESERVED:
            depth -= 1  # a reserved leaf name: flat, one level up
        leaf = ".".join(parts[depth:])
        if leaf in RESERVED:
            raise CheckpointFormatError(
                f"tensor {name!r}: a key named {leaf!r} at the top level cannot be shown as "
                "a tensordict entry (tensordict's meta.json reserves that name)."
            )
        dirkey = ""
        for part in parts[:depth]:
            parent = self._folders[dirkey]
            parent.entries.setdefault(part, None)
            parent.folders.add(part)
            parent.dirs.add(file_name(part))
            dirkey = f"{dirkey}/{file_name(part)}" if dirkey else file_name(part)
            self._folders.setdefault(dirkey, _Folder())
        return dirkey, leaf

    # -- what the store asks -----------------------------------------------------------

    def is_dir(self, key: str) -> bool:
        return key in self._folders

    def children(self, dirkey: str) -> list[str]:
        """The sorted names in folder ``dirkey`` (``KeyError`` if it is none)."""
        folder = self._folders[dirkey]
        return sorted({META, *folder.files, *folder.dirs})

    def files_in(self, dirkey: str) -> frozenset[str]:
        """The file names of folder ``dirkey`` (``KeyError`` if it is none)."""
        return frozenset({META, *self._folders[dirkey].files})

    def dirs_in(self, dirkey: str) -> frozenset[str]:
        """The sub-folder names of folder ``dirkey`` (``KeyError`` if it is none)."""
        return frozenset(self._folders[dirkey].dirs)

    def leaf(self, key: str) -> str | None:
        """The real key of the tensor whose file ``key`` is, or None."""
        return self.files.get(key)

    def meta(self, dirkey: str) -> bytes:
        """The ``meta.json`` of folder ``dirkey``, made the first time it is asked."""
        folder = self._folders[dirkey]
        if folder.meta is None:
            parts = []
            for name, real in folder.entries.items():
                record = None if real is None else self._records[real]
                if name in folder.folders or record is None:
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
