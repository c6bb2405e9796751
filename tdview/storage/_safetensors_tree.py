"""The tree a safetensors file is shown as: dotted keys grouped into folders.

A state dict's keys nest as modules do (``model.layers.0.mlp.up.weight``): each ``.``
is a level, so that the tree, the search and a subtree load see ``model/layers/0/...``.
A key that is also the prefix of another (``a.b`` and ``a.b.c``) stays a leaf, and the
longer key keeps its flat name at that level (``a`` holds ``b`` and ``b.c``); so does a
name that a ``meta.json`` reserves for the node itself (``shape``, ``_type``...). Each
folder is presented as tensordict lays a TensorDict out (a ``meta.json`` naming its
entries, batch size ``[]``, and ``<key>.memmap`` per tensor with elements), so that the
index reads it as it reads any checkpoint. A folder is grouped when it is first asked
for (its keys a range of the sorted keys: a level costs its own entries, not the whole
header's), its ``meta.json`` bytes made when first read; nothing here reads JSON.

Examples
--------
>>> layout = Layout(["a.b", "a.b.c", "w"], lambda key: ("float32", [2]))
>>> layout.children("a"), layout.leaf("a/b.c.memmap")
(['b.c.memmap', 'b.memmap', 'meta.json'], 'a.b.c')
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_left
from collections.abc import Callable, Collection, Sequence
from json.encoder import encode_basestring_ascii
from typing import cast

from ..errors import CheckpointFormatError
from ._group_tree import encode_name as file_name  # tensordict's name of a key's file

__all__ = ["META", "RESERVED", "Layout", "file_name"]

META = "meta.json"
#: Names a TensorDict's meta.json uses for the node itself: never an entry's name.
RESERVED = frozenset({"shape", "device", "_type", "_format_version", "_class", "_names"})
_TAIL = '"shape": [], "_type": "<class \'tensordict._td.TensorDict\'>", "_format_version": 1, "_class": "tensordict:TensorDict"}'  # noqa: E501
_DIGITS = re.compile(r"(\d+)")
#: a key (of keys joined by newlines) whose last part is a reserved name
_RESERVED_LAST = re.compile(r"\.(?:" + "|".join(map(re.escape, sorted(RESERVED))) + r")\n")


def _natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key: ``layers.2`` before ``layers.10``."""
    return tuple((0, int(p)) if p.isdecimal() else (1, p) for p in _DIGITS.split(name) if p)


def natural_order(names: Collection[str]) -> list[str]:
    """``names`` in natural order (:func:`_natural`; ties by the names themselves), the
    common folders sorted without a key made per name: no digit (plain order), or only
    numbers (by value).

    Examples
    --------
    >>> natural_order(["b", "a10", "a2"]), natural_order(["10", "9"])
    (['a2', 'a10', 'b'], ['9', '10'])
    """
    if _DIGITS.search("/".join(names)) is None:
        return sorted(names)
    if all(map(str.isdecimal, names)):
        return sorted(sorted(names), key=int)
    return sorted(sorted(names), key=_natural)


class _Folder:
    """One folder: the real keys below it (a range of the sorted keys), and once built
    (:meth:`Layout._build`, when first asked) its entries (name -> real key, None for a
    sub-folder), sub-folders, file and folder names; its meta.json once made."""

    __slots__ = (
        "dirs", "dotted", "entries", "files", "hi", "lo", "meta", "names", "prefix", "unknown",
    )  # fmt: skip

    def __init__(self, prefix: str, dotted: str, lo: int, hi: int) -> None:
        self.prefix = prefix  # its key and a "/" ("" for the root)
        self.dotted = dotted  # the real keys' start below it: "model.layers." ("" root)
        self.lo, self.hi = lo, hi
        self.entries: dict[str, str | None] | None = None  # None: not built yet
        self.files: dict[str, str] = {}  # file name -> real key
        self.dirs: dict[str, _Folder] = {}  # file-system name -> the sub-folder
        self.unknown: dict[str, str] = {}  # entry's file-system name -> an unknown key
        #: (file names, folder names), made when first asked
        self.names: tuple[frozenset[str], frozenset[str]] | None = None
        self.meta: bytes | None = None


class Layout:
    """The folders and files of a safetensors checkpoint (one file or a shard set),
    built one folder at a time when it is first asked for: opening a file of a million
    tensors and listing its top level groups no key below the top.

    Parameters
    ----------
    names : collection of str
        Every real key (tensors and ``unknown`` ones).
    describe : callable
        ``describe(name) -> (torch dtype name, shape)`` of a tensor whose bytes can be
        read (what its ``meta.json`` entry says).
    empty : collection of str
        Tensors of no element: tensordict writes no file for them.
    unknown : collection of str
        Keys named (by a shard index) whose record no file gives: each is an entry whose
        folder cannot be read (the store says why), flagged by the index.

    Raises
    ------
    CheckpointFormatError
        A top-level key that tensordict's ``meta.json`` reserves (``shape``...).
    """

    def __init__(
        self,
        names: Collection[str],
        describe: Callable[[str], tuple[str, Sequence[int]]],
        *,
        empty: Collection[str] = (),
        unknown: Collection[str] = (),
    ) -> None:
        reserved = RESERVED.intersection(names)
        if reserved:
            name = next(name for name in names if name in reserved)
            raise CheckpointFormatError(
                f"tensor {name!r}: a key named {name!r} at the top level cannot be shown as "
                "a tensordict entry (tensordict's meta.json reserves that name)."
            )
        self._names = names if isinstance(names, (dict, set, frozenset)) else frozenset(names)
        self._describe = describe
        self._no_file = set(empty).union(unknown) if empty or unknown else frozenset()
        self._unknown = frozenset(unknown)
        self._sorted = sorted(names)
        self._tails = _reserved_tails(self._sorted)
        self._folders: dict[str, _Folder] = {"": _Folder("", "", 0, len(self._sorted))}
        self._lock = threading.Lock()

    # -- one folder, built when first asked ---------------------------------------------

    def _folder(self, dirkey: str) -> _Folder | None:
        """The folder whose key is ``dirkey``, its parents built as needed; None if none."""
        found = self._folders.get(dirkey)
        if found is not None:
            return found
        folder = self._folders[""]
        for part in dirkey.split("/"):
            if folder.entries is None:
                self._build(folder)
            sub = folder.dirs.get(part)
            if sub is None:
                return None
            folder = sub
        return folder

    def _built(self, dirkey: str) -> _Folder:
        """The folder ``dirkey``, built (``KeyError`` if it is none)."""
        folder = self._folders.get(dirkey) or self._folder(dirkey)
        if folder is None:
            raise KeyError(dirkey)
        if folder.entries is None:
            self._build(folder)
        return folder

    def _build(self, folder: _Folder) -> None:
        """Group ``folder``'s keys once (the index may read folders on threads)."""
        with self._lock:
            if folder.entries is None:
                self._group(folder)

    def _group(self, folder: _Folder) -> None:
        """Group the keys below ``folder`` by their next part: a part that is a key itself
        (``a.b`` beside ``a.b.c``), or a reserved name, keeps the rest flat here; so does
        a reserved last part (``b.shape``); else the part is a sub-folder."""
        entries: dict[str, str | None] = {}
        keys, names, dotted = self._sorted, self._names, folder.dotted
        start, i, hi = len(dotted), folder.lo, folder.hi
        while i < hi:
            key = keys[i]
            cut = key.find(".", start)
            if cut < 0:
                if key[start:] not in RESERVED:  # (a reserved last part: its parent's)
                    self._entry(folder, entries, key[start:], key)
                i += 1
                continue
            part, head = key[start:cut], key[:cut]
            if part in RESERVED or head in names:
                self._entry(folder, entries, key[start:], key)
                i += 1
                continue
            end = bisect_left(keys, head + "/", i, hi)  # the keys that start with head.
            flat = self._tails.get(head, ()) if self._tails else ()
            for key in flat:
                self._entry(folder, entries, key[start:], key)
            if end - i > len(flat):
                entries.setdefault(part, None)
                name = file_name(part)
                sub = _Folder(folder.prefix + name + "/", head + ".", i, end)
                folder.dirs[name] = self._folders[folder.prefix + name] = sub
            i = end
        folder.entries = entries

    def _entry(self, folder: _Folder, entries: dict[str, str | None], name: str, key: str) -> None:
        """Entry ``name`` of ``folder`` for real key ``key``: a file, unless ``key`` is
        unknown or an empty tensor."""
        entries[name] = key
        if key in self._no_file:
            if key in self._unknown:
                folder.unknown[file_name(name)] = key
        else:
            folder.files[file_name(name) + ".memmap"] = key

    # -- what the store asks -----------------------------------------------------------

    def is_dir(self, key: str) -> bool:
        return self._folder(key) is not None

    def children(self, dirkey: str) -> list[str]:
        """The sorted names in folder ``dirkey`` (``KeyError`` if it is none)."""
        files, dirs = self._listing(dirkey)
        return sorted(files | dirs)

    def files_in(self, dirkey: str) -> frozenset[str]:
        """The file names of folder ``dirkey`` (``KeyError`` if it is none)."""
        return self._listing(dirkey)[0]

    def dirs_in(self, dirkey: str) -> frozenset[str]:
        """The sub-folder names of folder ``dirkey`` (``KeyError`` if it is none)."""
        return self._listing(dirkey)[1]

    def _listing(self, dirkey: str) -> tuple[frozenset[str], frozenset[str]]:
        folder = self._folders.get(dirkey)
        if folder is not None and folder.names is not None:
            return folder.names
        folder = self._built(dirkey)
        if folder.names is None:
            folder.names = frozenset([META, *folder.files]), frozenset(folder.dirs)
        return folder.names

    def leaf(self, key: str) -> str | None:
        """The real key of the tensor whose file ``key`` is, or None."""
        dirkey, _, name = key.rpartition("/")
        folder = self._folders.get(dirkey) or self._folder(dirkey)
        if folder is None:
            return None
        if folder.entries is None:
            self._build(folder)
        return folder.files.get(name)

    def unknown(self, key: str) -> str | None:
        """The unknown real key whose entry ``key`` is (a folder never read), or None."""
        if not self._unknown:
            return None
        dirkey, _, name = key.rpartition("/")
        folder = self._folder(dirkey)
        return None if folder is None else self._built(dirkey).unknown.get(name)

    @property
    def files(self) -> dict[str, str]:
        """Every file's key (``"model/layers/0/w.memmap"``) -> its real key: every folder
        built (the whole tree, for a test or a full listing)."""
        out: dict[str, str] = {}
        todo = [""]
        while todo:
            folder = self._built(todo.pop())
            out.update((folder.prefix + name, key) for name, key in folder.files.items())
            todo.extend(sub.prefix[:-1] for sub in folder.dirs.values())
        return out

    def meta(self, dirkey: str) -> bytes:
        """The ``meta.json`` of folder ``dirkey``, made the first time it is asked: its
        entries in their names' natural order (``layers.2`` before ``layers.10``)."""
        folder = self._folders.get(dirkey)
        if folder is not None and folder.meta is not None:
            return folder.meta
        folder = self._built(dirkey)
        if folder.meta is None:
            entries = cast("dict[str, str | None]", folder.entries)
            parts = []
            for name in natural_order(entries):
                real = entries[name]
                if real is None or real in self._unknown:
                    value = '{"type": "TensorDict"}'
                else:
                    dtype, shape = self._describe(real)
                    value = (
                        f'{{"device": "cpu", "shape": {_ints(shape)}, '
                        f'"dtype": "torch.{dtype}", "is_nested": false}}'
                    )
                parts.append(f"{encode_basestring_ascii(name)}: {value}, ")
            folder.meta = ("{" + "".join(parts) + _TAIL).encode()
        return folder.meta


def _reserved_tails(keys: list[str]) -> dict[str, list[str]]:
    """``head -> [head.shape, ...]``: the keys whose last part is a reserved name, by
    what comes before it (none in most files: a count over the keys tells)."""
    if _RESERVED_LAST.search("\n".join(keys) + "\n") is None:
        return {}
    tails: dict[str, list[str]] = {}
    for key in keys:
        head, sep, last = key.rpartition(".")
        if last in RESERVED and sep:
            tails.setdefault(head, []).append(key)
    return tails


def _ints(shape: Sequence[int]) -> str:
    """A shape as JSON: ``[2, 3]`` (``str`` of a list of ints is its JSON)."""
    return str(shape) if type(shape) is list else str(list(shape))
