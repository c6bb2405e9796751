"""A directory store's names: one listing per directory, or one probe per name.

Probing a key costs dict lookups: the listing of its directory is read once
(``os.scandir``: names and types, no stat per file), and a directory's real path is its
parent's real path plus its name, so ``realpath`` runs once for the root. Where names
are probed one by one (``PER_NAME``), a folder is not listed unless asked for (its
``list_dir``, or ``plain_files`` of more names than ``_PROBE_MAX``): a name is probed
with one ``lstat``, which tells what a listing tells of it (a regular file, a folder, a
symlink: nothing followed), and a folder found so is known by its real path as a listed
one is. Keys that meet a symlink (file or directory), odd names, and unreadable
directories take the per-key path (``DirectoryStore.file_path``: the key resolved from
its folder's real path, then a confinement check), so every guarantee of that path holds
for them. What a probe answers is typed in :mod:`._probe`.
"""

from __future__ import annotations

import os
import stat

from .._cache import BoundedCache
from ..errors import LimitExceededError, UnsafeCheckpointError
from ._base import WINDOWS_PATHS, Store
from ._held import HeldFolders
from ._key_safety import check_key as _check_any_key
from ._key_safety import name_problem
from ._probe import (
    ABSENT,
    MISSING,
    OTHER,
    PER_KEY,
    PER_NAME,
    REGULAR,
    Listing,
    Probe,
    Unprobed,
    lstat,
    plain_name,
    scan,
)

__all__ = ["NOATIME", "DirectoryNames", "check_key"]

# O_NOATIME avoids updating access times, but only the file's owner may use it.
NOATIME = getattr(os, "O_NOATIME", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# O_NONBLOCK keeps a FIFO swapped in after the stat from blocking the open.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
# Listings kept per store, counted in names: enough for the folders a walk is in, bounded
# for a checkpoint of 100,000 files (a listing dropped is read again when needed).
_HELD_NAMES = 16384
# A folder whose ``meta.json`` names more entries than _PROBE_MAX is listed (PER_NAME).
_PROBE_MAX = 8
# Names probed, and folders found, kept per store (dropped all at once beyond): a load
# uses a probe right after making it, and a walk needs the folders it is in (16,384 of
# each held 7 MB more than tensordict's whole meta load of a 10,000-leaf module tree).
_HELD_PROBES = 4096


def check_key(key: str, root: str) -> str:
    """:func:`~._key_safety.check_key` for a key joined to a path of this system."""
    return _check_any_key(key, root, windows=WINDOWS_PATHS)


class DirectoryNames(Store):
    """The listings and probes of a :class:`~._directory.DirectoryStore` (which sets
    the state declared here), and a file opened by name and read whole."""

    root: str
    _prefix: str  # the root's real path with a trailing separator
    _checkout: bool  # a content store's checkout: its files are links
    _noatime: int  # NOATIME until the first refusal
    _folders: HeldFolders
    # dirkey -> its Listing, MISSING or PER_KEY (see _listing); bounded by _HELD_NAMES
    _listings: dict[str, Listing | Unprobed]
    _held: int  # names in _listings
    # PER_NAME: dirkey -> real path + sep, MISSING or PER_KEY of the folders found without
    # listing their parent; key -> what _probe answers
    _dirs: dict[str, str | Unprobed]
    _probes: BoundedCache[str, Probe | Unprobed]

    def _listing(self, dirkey: str) -> Listing | Unprobed:
        """The :class:`~._probe.Listing` of a directory key, or ``MISSING`` (not a
        directory) or ``PER_KEY`` (reached through a symlink, or unreadable). Cached, up
        to ``_HELD_NAMES`` names in all. ``dirkey`` is a checked key."""
        found = self._listings.get(dirkey)
        if found is not None:
            return found
        real = self._dir_path(dirkey)
        held = 1
        if real is MISSING or real is PER_KEY:
            found = real
        else:
            try:
                found = scan(real, dirkey)
                held += len(found.files) + len(found.others)
            except OSError:  # unreadable (only searchable) or changed: the per-key path
                found = PER_KEY
        listings = self._listings
        self._held += held
        # drop the least recently used, but never the last one used: the parent a
        # sub-folder was just found in (_dir_path), which may alone hold more names than
        # the budget (a level of 100,000 folders would be listed again for each of them)
        while self._held > _HELD_NAMES and len(listings) > 1:
            old = listings.pop(next(iter(listings)))
            self._held -= 1 + (len(old.files) + len(old.others) if type(old) is Listing else 0)
        listings[dirkey] = found
        return found

    def _dir_path(self, dirkey: str) -> str | Unprobed:
        """The real path (with a trailing separator) of directory ``dirkey`` from its
        parent's listing (or, PER_NAME, from a probe of its name in its parent when the
        parent is not listed), without listing ``dirkey`` itself; ``MISSING`` (absent,
        or not a directory) or ``PER_KEY`` (met a symlink or an unreadable parent)."""
        if not dirkey:
            return self._prefix
        found = self._dirs.get(dirkey)
        if found is not None:
            return found
        own = self._listings.get(dirkey)
        if type(own) is Listing:
            return own.real
        parent, _, name = dirkey.rpartition("/")
        listings = self._listings
        up = listings.pop(parent, None)
        if up is not None:
            listings[parent] = up  # now the most recently used (see _listing)
        elif PER_NAME:
            return self._probe_dir(dirkey)
        else:
            up = self._listing(parent)
        if up is MISSING or up is PER_KEY:
            return up
        entry = up.others.get(name)
        if entry is None:
            return MISSING  # absent, or a regular file
        if entry.is_symlink():
            return PER_KEY
        if entry.is_dir(follow_symlinks=False):
            return up.real + name + os.sep
        return MISSING

    def _probe_dir(self, dirkey: str) -> str | Unprobed:
        """:meth:`_dir_path` of a folder whose parent is not listed: its name probed, and
        so each unknown folder above it, from the nearest one known (no recursion: a
        tree may be deeper than Python's stack)."""
        chain = [dirkey]
        parent = dirkey.rpartition("/")[0]
        while parent and parent not in self._dirs and parent not in self._listings:
            chain.append(parent)
            parent = parent.rpartition("/")[0]
        found: str | Unprobed = MISSING
        for key in reversed(chain):
            up, _, name = key.rpartition("/")
            if up in self._listings:
                found = self._dir_path(key)  # from the parent's listing
            else:
                found = real = self._dir_path(up)  # known now: probed, or the root
                if type(real) is str:
                    found = self._probe_one_dir(key, real, name, up)
            self._keep_dir(key, found)
        return found

    def _keep_dir(self, key: str, found: str | Unprobed) -> None:
        """Remember what a folder was found to be. Beyond the bound all are dropped at
        once, but for the folders above ``key``: a walk goes on in them."""
        dirs = self._dirs
        if len(dirs) >= _HELD_PROBES:
            kept = {}
            up = key.rpartition("/")[0]
            while up and (held := dirs.get(up)) is not None:
                kept[up] = held
                up = up.rpartition("/")[0]
            dirs.clear()
            dirs.update(kept)
        dirs[key] = found

    def _probe_one_dir(self, key: str, real: str, name: str, up: str) -> str | Unprobed:
        """What one ``lstat`` of folder ``key`` (``name`` in ``real``) says of it."""
        if not plain_name(name, up):
            return PER_KEY  # an odd (or unsafe) name: the per-key path decides
        st = lstat(real + name)
        if st is None:
            return MISSING
        if st is MISSING or st is PER_KEY:
            return st
        if stat.S_ISDIR(st.st_mode):
            self._remember(key, (OTHER, real + name, -1, st))  # is_dir(key) answers
            return real + name + os.sep
        return PER_KEY if stat.S_ISLNK(st.st_mode) else MISSING

    def known_size(self, key: str) -> int | None:
        """The size of ``key``'s regular file as its probe found it (no system call), or
        None when not probed so (or not a regular file). Sizes a leaf before it is
        mapped, as a ``stat`` would (a file can change after either)."""
        found = self._probes.get(key)
        return found[2] if type(found) is tuple and found[2] >= 0 else None

    def _remember(self, key: str, found: Probe | Unprobed) -> Probe | Unprobed:
        return self._probes.put(key, found)

    def plain_files(self, key: str, wanted: int | None = None) -> frozenset[str] | None:
        """The regular files of a directory that the listing shows (no symlinks, only names
        that need no per-key check); None for a directory answered per key. ``wanted``:
        how many names the caller will probe there; a folder not listed yet is then not
        listed for as few as _PROBE_MAX (PER_NAME), its names are probed one by one."""
        return self.plain_entries(key, wanted)[0]

    def plain_dirs(self, key: str, wanted: int | None = None) -> frozenset[str] | None:
        """The sub-directories of a directory that the listing shows (no symlinks, only
        names that need no per-key check); None for a directory answered per key.
        ``wanted``: see :meth:`plain_files`."""
        return self.plain_entries(key, wanted)[1]

    def plain_entries(
        self, key: str, wanted: int | None = None
    ) -> tuple[frozenset[str] | None, frozenset[str] | None]:
        if wanted is not None and wanted <= _PROBE_MAX and PER_NAME and (key not in self._listings):
            return None, None
        listing = self._listings.get(key)
        if listing is None:
            check_key(key, self.root)
            listing = self._listing(key)
        if type(listing) is not Listing:
            return None, None
        return listing.plain_files, listing.plain_dirs

    def _probe(self, key: str) -> Probe | Unprobed:
        """The :data:`~._probe.Probe` of a key whose directory lists (or probes) fast and
        that is no symlink (or a symlink :meth:`_probe_link` takes); ``MISSING`` when
        its directory does not exist; ``PER_KEY`` when the per-key path must answer.
        Raises for an unsafe key."""
        if type(key) is not str:
            check_key(key, self.root)  # raises TypeError
        found = self._probes.get(key)
        if found is not None:
            return found  # probed before (checked then)
        dirkey, _, name = key.rpartition("/")
        listing = self._listings.get(dirkey)
        if listing is None:
            if name_problem(key, windows=WINDOWS_PATHS) is not None:
                check_key(key, self.root)  # raises, naming the whole key
            if PER_NAME:
                return self._probe_name(key, dirkey, name)
            listing = self._listing(dirkey)
        if listing is MISSING or listing is PER_KEY:
            return listing
        if not plain_name(name, dirkey):
            check_key(key, self.root)  # raises when unsafe; odd but safe names go slow
            return PER_KEY
        if name in listing.files:
            return (REGULAR, listing.real + name, -1, None)
        entry = listing.others.get(name)
        if entry is None:
            return (ABSENT, listing.real + name, -1, None)
        if entry.is_symlink():
            return (self._probe_link(key, listing.real, name) if PER_NAME else None) or PER_KEY
        return (OTHER, listing.real + name, -1, entry)

    def _probe_name(self, key: str, dirkey: str, name: str) -> Probe | Unprobed:
        """:meth:`_probe` of a checked key whose folder is not listed: one ``lstat``
        (remembered, as a listing is). A key that passes ``check_key`` ends in a plain
        name (no leading dot, no NUL, a file name) on POSIX: only Windows checks again."""
        real = self._dirs.get(dirkey)
        if type(real) is not str:  # one test on the way of a folder found plain
            if real is MISSING or real is PER_KEY:
                return real
            real = self._dir_path(dirkey)  # not found yet
            if real is MISSING or real is PER_KEY:
                return real
            self._keep_dir(dirkey, real)  # found from its parent's listing: kept as probed
        if WINDOWS_PATHS and not plain_name(name, dirkey):
            return PER_KEY
        path = real + name
        found: Probe | Unprobed
        if self._checkout and "." in name:  # a file of a content store's checkout: a link
            try:
                target = self._readlink(real, name)
            except (FileNotFoundError, NotADirectoryError):
                return self._remember(key, (ABSENT, path, -1, None))  # as an lstat says
            except (OSError, ValueError):
                pass  # no symlink (EINVAL): the lstat below tells what it is
            else:
                # a link _probe_link takes is remembered there; any other goes per key
                return self._probe_link(key, real, name, target) or self._remember(key, PER_KEY)
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            found = (ABSENT, path, -1, None)
        except (OSError, ValueError):
            return PER_KEY  # cannot be told here (a folder on the way not searchable...)
        else:
            mode = st.st_mode
            if mode & 0o170000 == 0o100000:  # stat.S_ISREG
                found = (REGULAR, path, st.st_size, None)
            elif stat.S_ISLNK(mode):
                found = self._probe_link(key, real, name) or PER_KEY
            else:
                if stat.S_ISDIR(mode) and key not in self._dirs:
                    self._keep_dir(key, path + os.sep)  # a plain folder: files open by name
                found = (OTHER, path, -1, st)
        return self._probes.put(key, found)

    def _probe_link(
        self, key: str, folder: str, name: str, target: str | None = None
    ) -> Probe | None:
        """The probe of ``key``, the symlink ``name`` in the real folder ``folder``, when
        the link fast paths take it (:class:`~._link_paths.LinkedNames`); None otherwise
        (the per-key path answers)."""
        raise NotImplementedError

    def _unlisted_dir(self, dirkey: str) -> str | None:
        """The real path (with a trailing separator) of directory ``dirkey`` when it is
        not listed yet but its parent's listing shows it as a plain directory (no
        symlink): a file in it can then be opened without listing it (a folder of
        10,000 leaves need not be listed to read its ``meta.json``). None otherwise."""
        if dirkey in self._listings:
            return None
        real = self._dir_path(dirkey)
        return real if type(real) is str else None

    def _readlink(self, folder: str, name: str) -> str:
        """What the symlink ``name`` in the real folder ``folder`` (with a trailing
        separator) says: read through the folder's descriptor when it is held open (no
        path walked again), else by its path."""
        held = self._folders.fds.get(folder[:-1])
        if held is not None and held >= 0:
            return os.readlink(name, dir_fd=held)
        return os.readlink(folder + name)

    def _open(self, path: str, flags: int, dir_fd: int | None = None) -> int:
        """Open ``path`` read-only, without updating its access time when allowed."""
        if self._noatime:
            try:
                return os.open(path, _READ_FLAGS | self._noatime | flags, dir_fd=dir_fd)
            except PermissionError:
                # not the owner (O_NOATIME is refused), or not writable: it tells which
                fd = os.open(path, _READ_FLAGS | flags, dir_fd=dir_fd)
                self._noatime = 0
                return fd
        return os.open(path, _READ_FLAGS | flags, dir_fd=dir_fd)

    def _require_regular(self, key: str, st: os.stat_result) -> None:
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(f"{self.display(key)} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            # FIFOs and devices could block or never end: refuse them outright.
            raise UnsafeCheckpointError(
                f"refusing {self.display(key)}: not a regular file (mode {st.st_mode:#o})."
            )

    def _check_limit(self, key: str, size: int, limit: int) -> None:
        if size > limit:
            raise LimitExceededError(
                f"{self.display(key)} is {size} bytes, above the limit of {limit} bytes."
            )

    def read_folder_meta(self, dirkey: str, limit: int) -> bytes | None:
        """A sub-folder of a folder not listed, probed by name (:meth:`_probe_name`: one
        ``lstat``, remembered), and its ``meta.json`` opened by name (``O_NOFOLLOW``) and
        read as :meth:`read_bytes` reads it. None (the general path answers) for anything
        else: a key probed or listed before, a content store's checkout, an odd name,
        anything but a plain folder, a ``meta.json`` that does not open."""
        parent, _, name = dirkey.rpartition("/")
        if (
            not PER_NAME
            or self._checkout
            or dirkey in self._probes
            or parent in self._listings
            or name_problem(dirkey, windows=WINDOWS_PATHS) is not None  # what _probe checks
        ):
            return None
        found = self._probe_name(dirkey, parent, name)
        if type(found) is not tuple:
            return None  # a symlink...: the probe answers
        _, path, _, info = found
        if type(info) is not os.stat_result or not stat.S_ISDIR(info.st_mode):
            return None  # absent, a file...: remembered, the probe answers
        meta = path + os.sep + "meta.json"
        try:
            fd = self._open(meta, _NOFOLLOW)
        except OSError:
            return None  # absent, a symlink...: read_bytes tells (and raises) what
        return self._read_open(fd, dirkey + "/meta.json", limit, record=meta)

    def _read_open(
        self,
        fd: int,
        key: str,
        limit: int,
        *,
        record: str | None = None,
        st: os.stat_result | None = None,
    ) -> bytes:
        """Read the whole file open at ``fd`` (up to ``limit`` bytes), then close it.
        ``record``: its path, opened by name (``O_NOFOLLOW``) in a folder known to be
        plain, unprobed: a regular file is remembered as its probe would (no ``lstat``
        more)."""
        try:
            if st is None:
                st = os.fstat(fd)  # the file may have been swapped since it was listed
            if record is not None and stat.S_ISREG(st.st_mode):
                self._remember(key, (REGULAR, record, st.st_size, None))
            if stat.S_ISREG(st.st_mode) and st.st_size <= limit:
                data = os.read(fd, st.st_size + 1)  # the whole file, if it did not grow
                if len(data) <= st.st_size:
                    return data
                # it grew: go on reading, up to the limit
                chunks, left, want = [data], limit + 1 - len(data), 1 << 20
            else:
                self._require_regular(key, st)
                self._check_limit(key, st.st_size, limit)
                chunks, left, want = [], limit + 1, st.st_size + 1
            while left > 0:
                ask = min(left, want)
                chunk = os.read(fd, ask)
                chunks.append(chunk)
                left -= len(chunk)
                if len(chunk) < ask:
                    break  # the end of a regular file
                want = 1 << 20
        finally:
            os.close(fd)
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._check_limit(key, len(data), limit)  # it grew while we read it
        return data
