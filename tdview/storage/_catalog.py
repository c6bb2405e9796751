"""The names of an archive: which keys are files (and their central records), which are
directories, and where each entry's region must end.

Two catalogs answer the same questions. :class:`EagerCatalog` checks every name, the
layout and duplicates when the archive is opened (small archives, and any archive with
an odd name). :class:`LazyCatalog` serves a large archive whose names all passed one
whole-array safety check at open: it keeps the central directory as arrays
(:class:`~._columns.Columns`) and finds the names that start with a key by comparing a
few words of every name at once (the files of a folder that is not crowded are all found
by the same look-up), so that opening makes nothing per entry. What cannot be checked
for all names at once (a name given twice, a name that is both a file and a directory)
is checked for each name when it is looked up as a file or listed: every entry is
reached through a key looked up here, so no entry of such a name is ever read (the
entries below a directory that shares its name with a file have names of their own, and
stay readable). After ``_SEARCHES`` look-ups it builds the dictionaries that the eager
catalog builds at open (and checks every name then).
"""

from __future__ import annotations

import bisect
import operator
from typing import Any

from ..errors import ArchiveError, UnsafeCheckpointError
from ._columns import Columns
from ._key_safety import first_unsafe_name
from ._zip import LOCAL, LOCAL_SIG, CentralEntry

__all__ = ["EagerCatalog", "LazyCatalog", "lazy_catalog"]

_BY_OFFSET = operator.attrgetter("header_offset")
_HEAD = operator.itemgetter(0)
_RPARTITION = operator.methodcaller("rpartition", "/")
# Look-ups answered by searching the names before the dictionaries are built.
_SEARCHES = 16
# Names below a folder up to which its files are all found by one look-up (LazyCatalog._folder).
_FOLDER_NAMES = 256
# The most names below a subtree a load prepares for (LazyCatalog.prepare) that are
# indexed on their own, so that its look-ups need not build the whole catalog.
_SUBTREE_NAMES = 4096


class EagerCatalog:
    """Every name checked at open: files by name, all directories, sorted offsets."""

    def __init__(
        self, root: str, entries: list[CentralEntry], cd_start: int, file_size: int
    ) -> None:
        self.root = root
        self.file_size = file_size
        names = [e.name for e in entries]
        if "/\n" in "\n".join(names) + "\n":  # explicit directory entries ("sub/")
            files = {e.name: e for e in entries if e.name[-1:] != "/"}
            explicit = [e.name[:-1] for e in entries if e.name[-1:] == "/"]
        else:
            files, explicit = dict(zip(names, entries, strict=True)), []
        self.files = files
        self._check_names(entries, [*files, *explicit], len(files) + len(set(explicit)))
        self.dirs = directories(files, explicit)
        clash = files.keys() & self.dirs
        if clash:
            raise UnsafeCheckpointError(
                f"refusing archive {root}: {min(clash)!r} is both a file entry and a directory."
            )
        self.starts = self._check_layout(entries, cd_start)
        self._children: dict[str, list[str]] | None = None

    def _check_names(self, entries: list[CentralEntry], names: list[str], unique: int) -> None:
        """Refuse unsafe names (one batch test, then one by one) and duplicates."""
        unsafe = first_unsafe_name(names)
        if unsafe is not None:
            name, problem = unsafe
            shown = next(e.name for e in entries if e.name in (name, name + "/"))
            raise UnsafeCheckpointError(
                f"refusing archive {self.root}: entry name {shown!r} {problem}."
            )
        if unique != len(entries):
            seen: set[str] = set()
            for e in entries:
                if e.name in seen:
                    raise _twice(self.root, e.name)
                seen.add(e.name)

    def _check_layout(self, entries: list[CentralEntry], cd_start: int) -> list[int]:
        """Check that entries are disjoint and end before the central directory.

        A lower bound: each local region is at least 30 bytes + its name + its stored
        bytes (the local extra length is only known once the header is read).

        Returns
        -------
        list of int
            The sorted local header offsets, then the central directory start: the
            bound of each entry is the next value (found by bisection).
        """
        order = sorted(entries, key=_BY_OFFSET)
        starts = [e.header_offset for e in order]
        starts.append(cd_start)
        fixed = LOCAL.size
        for i, e in enumerate(order):
            end = e.header_offset + fixed + len(e.raw_name) + e.stored_size
            if end > starts[i + 1]:
                raise layout_error(
                    self.root,
                    e,
                    end,
                    starts[i + 1],
                    is_next_entry=i + 1 < len(order),
                    file_size=self.file_size,
                )
        return starts

    def file(self, key: str) -> CentralEntry | None:
        return self.files.get(key)

    def has_file(self, key: str) -> bool:
        return key in self.files

    def has_meta(self) -> bool:
        return "meta.json" in self.files

    def is_dir(self, key: str) -> bool:
        return key in self.dirs

    def children(self, key: str) -> list[str]:
        """The sorted child names of directory ``key``."""
        if self._children is None:
            self._children = index_children(self.files, self.dirs)
        return list(self._children.get(key, ()))

    def keys(self) -> list[str]:
        return list(self.files)

    def next_start(self, at: int) -> tuple[int, bool]:
        """The first local header offset after ``at`` (or the central directory start),
        and whether it is an entry's."""
        i = bisect.bisect_right(self.starts, at)
        return self.starts[i], i + 1 < len(self.starts)


def lazy_catalog(root: str, columns: Columns, cd_start: int) -> LazyCatalog | None:
    """A :class:`LazyCatalog`, when every name passes the whole-array checks and the
    entries are laid out apart; None otherwise (the eager catalog then says why)."""
    if not columns.plain:
        return None
    starts = columns.layout(cd_start)
    if starts is None:
        return None
    return LazyCatalog(root, columns, starts)


class LazyCatalog:
    """Names looked up in the central directory's arrays; see the module docstring."""

    def __init__(self, root: str, columns: Columns, starts: Any) -> None:
        self.root = root
        self.columns = columns
        self.starts = starts
        self._searches = 0
        self._found: dict[str, CentralEntry] = {}
        # built after _SEARCHES look-ups: name -> row, directories, names refused and why
        self._rows: dict[str, int] | None = None
        self._dirs: set[str] | None = None
        self._refused: dict[str, str] = {}
        self._children: dict[str, list[str]] | None = None
        self._start_list: list[int] | None = None
        self._folders: dict[str, dict[str, int | str] | None] = {}  # see _folder
        # (dirkey + "/", name -> row or why refused, directories) below a subtree a load
        # prepared for (see prepare)
        self._subtree: tuple[str, dict[str, int | str], set[str]] | None = None

    def prepare(self, dirkey: str) -> None:
        """Index the names below folder ``dirkey`` (one look-up of the names that start
        with it), when they are at most ``_SUBTREE_NAMES``: a ``subpath=`` load of a
        module's folder (a few dozen entries, each file and folder looked up) then finds
        them there, not in a catalog of the whole archive built for it. A name given twice,
        or both a file and a directory, is refused as the whole catalog refuses it (both
        lie below ``dirkey``)."""
        if self._rows is not None or not dirkey:
            return
        prefix = dirkey + "/"
        if self._subtree is not None and self._subtree[0] == prefix:
            return
        encoded = _encoded(prefix)
        if encoded is None:
            return
        rows = self.columns.rows_with_prefix(encoded)
        if len(rows) > _SUBTREE_NAMES:
            return
        files: dict[str, int | str] = {}
        dirs = {dirkey}
        for row, name in zip(rows.tolist(), self.columns.names_after(rows, 0), strict=True):
            files[name] = str(_twice(self.root, name)) if name in files else row
            parent = name.rpartition("/")[0]
            while parent not in dirs:
                dirs.add(parent)
                parent = parent.rpartition("/")[0]
        for name in files.keys() & dirs:
            files[name] = str(_clash(self.root, name))
        self._subtree = prefix, files, dirs

    def _below(self, key: str) -> tuple[str, dict[str, int | str], set[str]] | None:
        """The prepared subtree that ``key`` (a name, or a folder + ``/``) lies in."""
        sub = self._subtree
        return sub if sub is not None and self._rows is None and key.startswith(sub[0]) else None

    # -- look-ups ---------------------------------------------------------------------

    def has_meta(self) -> bool:
        return self.file("meta.json") is not None

    def file(self, key: str) -> CentralEntry | None:
        found = self._found.get(key)
        if found is not None:
            return found
        sub = self._below(key)
        if sub is not None:
            row = sub[1].get(key)
            if isinstance(row, str):
                raise UnsafeCheckpointError(row)
            if row is None:
                return None
            found = self._found[key] = self.columns.entry(row, key, lists=False)
            return found
        if self._rows is None and self._searches < _SEARCHES:
            dirkey, _, name = key.rpartition("/")
            # a file is rarely looked up alone: find its folder's files in one pass
            files = self._folder(dirkey) if dirkey else None
            if files is not None:
                row = files.get(name)
                if isinstance(row, str):
                    raise UnsafeCheckpointError(row)
            else:
                self._searches += 1
                row = self._search_file(key)
        else:
            self._build()
            assert self._rows is not None
            row = self._rows.get(key)
            if row is not None and key in self._refused:
                raise UnsafeCheckpointError(self._refused[key])
        if row is None:
            return None
        found = self._found[key] = self.columns.entry(row, key, lists=self._rows is not None)
        return found

    def has_file(self, key: str) -> bool:
        """Whether ``key`` is a file entry (what :meth:`file` finds), without building
        its record once the dictionaries exist."""
        rows = self._rows
        if rows is None or key in self._found:
            return self.file(key) is not None
        if key in rows:
            reason = self._refused.get(key)
            if reason is not None:
                raise UnsafeCheckpointError(reason)
            return True
        return False

    def _folder(self, dirkey: str) -> dict[str, int | str] | None:
        """The files directly in folder ``dirkey`` (name -> row, or -> why it is refused:
        given twice, or also a directory), found with one look-up of the names below it
        and kept; None when more than ``_FOLDER_NAMES`` names lie below it (its files
        are then looked up one by one). Counts as one search."""
        if dirkey in self._folders:
            return self._folders[dirkey]
        self._searches += 1
        prefix = _encoded(dirkey + "/")
        if prefix is None:
            self._folders[dirkey] = {}
            return {}
        rows = self.columns.rows_with_prefix(prefix)
        found: dict[str, int | str] | None = None
        if len(rows) <= _FOLDER_NAMES:
            files: dict[str, int | str] = {}
            subdirs: set[str] = set()
            for row, name in zip(
                rows.tolist(), self.columns.names_after(rows, len(prefix)), strict=True
            ):
                if "/" in name:
                    subdirs.add(name.partition("/")[0])
                elif name in files:
                    files[name] = str(_twice(self.root, dirkey + "/" + name))
                else:
                    files[name] = row
            for name in files.keys() & subdirs:
                files[name] = str(_clash(self.root, dirkey + "/" + name))
            found = files
        self._folders[dirkey] = found
        return found

    def _search_file(self, key: str) -> int | None:
        """The row of file ``key``, found with one look-up of the names that start with
        it: a second file of that name, or a directory of that name, refuses it."""
        prefix = _encoded(key)
        if prefix is None:
            return None
        rows = self.columns.rows_with_prefix(prefix)
        if not len(rows):
            return None
        after = self.columns.name_bytes(rows, len(prefix))
        exact = rows[after == 0]
        if len(exact) > 1:
            raise _twice(self.root, key)
        if len(exact) and (after == 0x2F).any():
            raise _clash(self.root, key)
        return int(exact[0]) if len(exact) else None

    def is_dir(self, key: str) -> bool:
        if not key:
            return True
        sub = self._below(key + "/")
        if sub is not None:
            return key in sub[2]
        if self._rows is None and self._searches < _SEARCHES:
            self._searches += 1
            # a file of this name too is refused where it is looked up (``file``)
            prefix = _encoded(key + "/")
            return prefix is not None and len(self.columns.rows_with_prefix(prefix)) > 0
        self._build()
        assert self._dirs is not None
        return key in self._dirs

    def children(self, key: str) -> list[str]:
        """The sorted child names of directory ``key``; a name refused (given twice, or
        both a file and a directory) is refused here too."""
        self._build()
        if self._children is None:
            assert self._rows is not None and self._dirs is not None
            self._children = index_children(self._rows, self._dirs)
        names = self._children.get(key, [])
        prefix = key + "/" if key else ""
        for name in names:
            reason = self._refused.get(prefix + name)
            if reason is not None:
                raise UnsafeCheckpointError(reason)
        return list(names)

    def keys(self) -> list[str]:
        self._build()
        assert self._rows is not None
        return list(self._rows)

    def rows_below(self, dirkey: str, suffix: str) -> tuple[list[str], list[int]]:
        """The file names below directory ``dirkey`` that end with ``suffix``, and their
        rows (names refused are left out)."""
        sub = self._below(dirkey + "/")
        if sub is not None:
            prefix = dirkey + "/"
            found = [
                (name, row)
                for name, row in sub[1].items()
                if name.startswith(prefix) and name.endswith(suffix) and type(row) is int
            ]
            return [name for name, _ in found], [row for _, row in found]
        self._build()
        assert self._rows is not None
        prefix = dirkey + "/" if dirkey else ""
        refused = self._refused
        names = [
            name
            for name in self._rows
            if name.startswith(prefix) and name.endswith(suffix) and name not in refused
        ]
        rows = self._rows
        return names, [rows[name] for name in names]

    def next_start(self, at: int) -> tuple[int, bool]:
        if self._start_list is None:  # a list bisects faster than numpy searches one value
            self._start_list = self.starts.tolist()
        starts = self._start_list
        i = bisect.bisect_right(starts, at)
        return starts[i], i + 1 < len(starts)

    # -- the dictionaries -------------------------------------------------------------

    def _build(self) -> None:
        """Build name -> row and the directories once (what the eager catalog builds at
        open), noting every name given twice or both a file and a directory."""
        if self._rows is not None:
            return
        names = self.columns.names()
        rows = dict(zip(names, range(len(names)), strict=True))
        if len(rows) != len(names):
            seen: set[str] = set()
            for name in names:
                if name in seen:
                    self._refused[name] = str(_twice(self.root, name))
                seen.add(name)
        dirs = directories(rows, [])
        for name in rows.keys() & dirs:
            self._refused[name] = str(_clash(self.root, name))
        self._rows, self._dirs = rows, dirs


def _encoded(key: str) -> bytes | None:
    """``key`` as the names spell it, or None for a key no name can be (empty, with a NUL,
    or not encodable)."""
    if not key or "\0" in key:
        return None
    try:
        return key.encode()
    except UnicodeEncodeError:  # lone surrogates: no UTF-8 name is spelled so
        return None


def _twice(root: str, name: str) -> UnsafeCheckpointError:
    return UnsafeCheckpointError(f"refusing archive {root}: entry name {name!r} appears twice.")


def _clash(root: str, name: str) -> UnsafeCheckpointError:
    return UnsafeCheckpointError(
        f"refusing archive {root}: {name!r} is both a file entry and a directory."
    )


def directories(files: Any, explicit: list[str]) -> set[str]:
    """All directories: the root, explicit directory entries and implicit parents."""
    dirs = {"", *explicit}
    # the parent of every name, deduplicated without a Python-level loop
    parents = set(map(_HEAD, map(_RPARTITION, (*files, *explicit))))
    for parent in parents:
        while parent not in dirs:
            dirs.add(parent)
            parent = parent.rpartition("/")[0]
    return dirs


def index_children(files: Any, dirs: set[str]) -> dict[str, list[str]]:
    """The sorted child names of every directory."""
    children: dict[str, set[str]] = {}
    for name in (*files, *dirs):
        if name:
            parent, _, child = name.rpartition("/")
            children.setdefault(parent, set()).add(child)
    return {parent: sorted(names) for parent, names in children.items()}


def layout_error(
    root: str,
    e: CentralEntry,
    end: int,
    limit: int,
    *,
    is_next_entry: bool,
    file_size: int,
    payload: int | None = None,
) -> Exception:
    """The error for an entry whose region ends past ``limit``."""
    start = (
        f"payload at offset {payload}"
        if payload is not None
        else (f"local header at offset {e.header_offset}")
    )
    where = (
        f"entry {e.name!r} in {root}: its {start} with {e.stored_size} stored "
        f"bytes ends at offset {end}"
    )
    if is_next_entry:
        return UnsafeCheckpointError(
            f"refusing {where}, which overlaps the next entry starting at offset {limit}."
        )
    return ArchiveError(
        f"corrupt {where}, past the end of the entry data at offset {limit} "
        f"(central directory start; file size {file_size})."
    )


def local_payload(
    root: str, e: CentralEntry, buf: Any, base: int, at: int, catalog: Any, file_size: int
) -> int:
    """The payload offset of entry ``e`` from its local header, which starts at ``base``
    in ``buf`` (the archive's mapping, or bytes read from offset ``at``): signature,
    name and layout checked. The caller has checked that the fixed header is there."""
    fields = LOCAL.unpack_from(buf, base)
    sig, name_len, extra_len = fields[0], fields[9], fields[10]
    if sig != LOCAL_SIG:
        raise ArchiveError(
            f"corrupt entry {e.name!r} in {root}: bad local header signature "
            f"{sig:#010x} at offset {at} (expected {LOCAL_SIG:#010x})."
        )
    local_name = bytes(buf[base + LOCAL.size : base + LOCAL.size + name_len])
    if local_name != e.raw_name:
        raise ArchiveError(
            f"corrupt entry {e.name!r} in {root}: the local header at offset {at} "
            f"names {local_name!r}, the central directory {e.raw_name!r}."
        )
    payload = at + LOCAL.size + name_len + extra_len
    end = payload + e.stored_size
    limit, is_next_entry = catalog.next_start(at)
    if end > limit:
        raise layout_error(
            root,
            e,
            end,
            limit,
            payload=payload,
            is_next_entry=is_next_entry,
            file_size=file_size,
        )
    return payload
