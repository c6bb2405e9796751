"""A checkpoint saved as a directory tree (``td.memmap(path)``)."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterable

from ..errors import LimitExceededError, UnsafeCheckpointError
from ._base import (
    WINDOWS_PATHS,
    EntryInfo,
    Payload,
    Store,
    has_file_name,
    name_problem,
    not_found,
)
from ._base import check_key as _check_any_key
from ._checked import map_path, open_checked, proc_name, proc_names
from ._folder_walk import FolderWalk
from ._held import HeldFolders
from ._links import (
    HF_BLOB,
    Link,
    LinkResolver,
    hf_files,
    plain_target,
    trusted_paths,
)

__all__ = ["DirectoryStore", "found_dir", "open_dir"]

# O_NOATIME avoids updating access times, but only the file's owner may use it.
_NOATIME = getattr(os, "O_NOATIME", 0)
# O_NONBLOCK keeps a FIFO swapped in after the stat from blocking the open.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# Listing states of a directory key (see DirectoryStore._listing).
_MISSING = object()  # no directory of that name
_SLOW = object()  # reached through a symlink, or unreadable: answer per key
_REGULAR = object()  # a listed regular file (no symlink)
# a symlink out of the root to a regular file that the link policy allows, found in a
# folder held open (see DirectoryStore._probe_link)
_LINKED = object()
_Listing = tuple[str, frozenset[str], dict[str, os.DirEntry[str]], frozenset[str], frozenset[str]]
# Listings kept per store, counted in names: enough for the folders a walk is in, bounded
# for a checkpoint of 100,000 files (a listing dropped is read again when needed).
_HELD_NAMES = 16384
# Where names are probed one by one (``lstat``) instead of listing their folder: Linux,
# whose file systems match names exactly (a case-insensitive one could answer a probe for
# a name that its listing spells otherwise) and whose ``/proc/self/fd`` checks what is
# opened. A folder whose ``meta.json`` names more entries than _PROBE_MAX is listed.
PER_NAME = sys.platform.startswith("linux")
_PROBE_MAX = 8
# Names probed, and folders found, kept per store (dropped all at once beyond): a load
# uses a probe right after making it, and a walk needs the folders it is in (16,384 of
# each held 7 MB more than tensordict's whole meta load of a 10,000-leaf module tree).
_HELD_PROBES = 4096


_O_PATH = getattr(os, "O_PATH", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def found_dir(path: str) -> str | None:
    """The real path of the directory at the absolute, normalized ``path`` (Linux), or
    None when it is no directory or this cannot tell (then ask ``os.stat``). The folder
    is opened (``O_PATH``): when the path ``/proc/self/fd`` gives for it is ``path``
    itself, no part of ``path`` is a symlink, three system calls instead of a ``stat``
    and an ``lstat`` per part."""
    opened = open_dir(path)
    if opened is None:
        return None
    if opened[1] >= 0:
        os.close(opened[1])
    return opened[0]


def open_dir(path: str) -> tuple[str, int] | None:
    """:func:`found_dir`, keeping the folder open: ``(real path, descriptor)``, the
    descriptor ``O_PATH`` (the caller closes it) when the folder is at ``path`` itself
    (no symlink on the way), -1 otherwise."""
    if not (PER_NAME and _O_PATH):
        return None
    try:
        fd = os.open(path, _O_PATH | _O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None  # absent, not a directory...
    known = _REAL_DIRS.get(path)
    try:
        st = os.fstat(fd)
        if known == (st.st_dev, st.st_ino):
            return path, fd  # the very folder found at its real path before
        name = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        name = None
    if name == path:
        if len(_REAL_DIRS) >= _MAX_REAL_DIRS:
            _REAL_DIRS.clear()
        _REAL_DIRS[path] = st.st_dev, st.st_ino
        return path, fd
    os.close(fd)
    return os.path.realpath(path), -1


# Folders /proc/self/fd named at the very path they were opened by: path -> (st_dev,
# st_ino). Opening the same path to the same folder again needs no readlink of /proc
# (the dearest call of a small load). The path could have gained a symlink on the way
# since, to that same folder: the store then takes the path it was given for the real
# one, which opens the same files; only a link inside that climbs above the new symlink
# reads where its path says, not where the kernel would go (never outside what the link
# policy allows: it judges that same path).
_REAL_DIRS: dict[str, tuple[int, int]] = {}
_MAX_REAL_DIRS = 256


def up_to_blobs(folder: str, blobs: str) -> str:
    """What a link in the real folder ``folder`` says before a blob's name when it leads
    into ``blobs`` (``<repo>/blobs/``): ``../`` once per folder below the repository,
    then ``blobs/``; a NUL, which no target holds, for a folder outside it. Remembered
    per folder for every store, with the ``blobs`` it was worked out for (a snapshot
    nested in another's tree has other blobs for the same folder)."""
    found = _BLOB_UPS.get(folder)
    if found is not None and found[0] == blobs:
        return found[1]
    repo = blobs[: -len("blobs") - 1]
    up = "\x00"
    if folder.startswith(repo):
        up = "../" * folder.count(os.sep, len(repo)) + "blobs" + os.sep
    if len(_BLOB_UPS) >= _HELD_PROBES:
        _BLOB_UPS.clear()
    _BLOB_UPS[folder] = blobs, up
    return up


# real folder -> (blobs, up_to_blobs of it) (bounded)
_BLOB_UPS: dict[str, tuple[str, str]] = {}


def real_dir(path: str) -> str:
    """The real path of the directory at the absolute ``path``; NotADirectoryError when it
    is none (see :func:`found_dir`)."""
    found = found_dir(path)
    if found is not None:
        return found
    if not os.path.isdir(path):
        raise NotADirectoryError(f"{path} is not a directory")
    return os.path.realpath(path)


def check_key(key: str, root: str) -> str:
    """:func:`~._base.check_key` for a key joined to a path of this system."""
    return _check_any_key(key, root, windows=WINDOWS_PATHS)


class DirectoryStore(Store):
    """Read the files of a checkpoint directory, confined to that directory.

    Every key is checked (no ``..``, no absolute key). Each directory is listed once
    (``os.scandir``: names and types, no stat per file) and its real path is its
    parent's plus its name, so probing a key costs dict lookups; a key that meets a
    symlink is resolved with :func:`os.path.realpath`, and one that resolves outside
    the root's real path raises :class:`~tdview.errors.UntrustedLinkError` unless the
    link policy (:mod:`._links`) lets it be read: a file of a content store that holds
    the checkpoint (Hugging Face cache, git-annex, DVC) or a path below a trusted path
    (``trusted``). Files are opened without following a symlink swapped in after the
    listing (or after a key was resolved), and checked on the descriptor opened.
    Listings are read once per store: files created later are not seen. The store never
    creates or writes, and opens a file for writing only when asked
    (:meth:`open_file_stat`, for ``mode="r+"``), never one read through a link out of
    the root; sizes come from ``os.stat``.

    Parameters
    ----------
    path : str or os.PathLike
        An existing directory.
    trusted : iterable of str or os.PathLike, optional
        Paths outside the root that links may lead to, for reading. Defaults to
        :func:`~._links.trusted_paths` when the store is opened
        (``TDVIEW_TRUSTED_PATHS`` and :func:`tdview.trust_paths`).

    Examples
    --------
    >>> store = DirectoryStore("/ckpt")                      # doctest: +SKIP
    >>> store.read_bytes("meta.json", limit=1 << 20)[:1]     # doctest: +SKIP
    b'{'
    """

    kind = "directory"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        trusted: Iterable[str | os.PathLike[str]] | None = None,
        real: str | None = None,
        root_fd: int = -1,
    ) -> None:
        self.root = path if real is not None and type(path) is str else os.path.abspath(path)
        # real: the real path of the root when the caller found it (open_dir: ``path``
        # is then absolute and normalized), with the root's descriptor when it is open
        self._real_root = real_dir(self.root) if real is None else real
        self._prefix = self._real_root.rstrip(os.sep) + os.sep
        self._proc_names: bool | None = None  # /proc/self/fd names files (on first use)
        # dirkey -> a _Listing, _MISSING or _SLOW (see _listing); bounded by _HELD_NAMES
        self._listings: dict[str, _Listing | object] = {}
        self._held = 0
        # per-name probes (PER_NAME): dirkey -> real path + sep, _MISSING or _SLOW of the
        # folders found without listing their parent, and key -> what _probe answers
        # (for a regular file, its size after the path and _REGULAR)
        self._dirs: dict[str, str | object] = {}
        self._probes: dict[str, tuple[str, object] | tuple[str, object, int] | object] = {}
        self._noatime = _NOATIME
        self._folders = HeldFolders(self._prefix, self._proc_usable, root_fd)  # see close()
        # a link into a folder held open was met, or the root is a snapshot of the
        # Hugging Face cache (its path says so): names are links, read them first
        blobs, reason = hf_files(self._real_root)
        self._checkout = blobs is not None  # a snapshot: its files are links
        self.walks_folders = bool(PER_NAME and _O_PATH) and not self._checkout
        self._read_only = False  # a file refused opening for writing (see open_leaf)
        self._display = self.root if self.root.endswith(os.sep) else self.root + os.sep
        self._resolver = LinkResolver(
            self.root,
            self._real_root,
            self.display,
            trusted_paths() if trusted is None else trusted,
        )
        # a snapshot's blobs/ folder ("<repo>/blobs/") and what the policy says of its
        # files, when the trusted paths do not answer first (see _link_at)
        self._blob_reason = reason if blobs is not None and not self._resolver.trusted else None
        self._blobs = blobs if self._blob_reason else None

    def display(self, key: str) -> str:
        return self._display + key if key else self.root

    # -- one listing per directory, or one probe per name --------------------------------
    #
    # Probing a key costs dict lookups: the listing of its directory is read once
    # (``os.scandir``: names and types, no stat per file), and a directory's real path is
    # its parent's real path plus its name, so ``realpath`` runs once for the root. Where
    # names are probed one by one (PER_NAME), a folder is not listed unless asked for (its
    # ``list_dir``, or ``plain_files`` of more names than _PROBE_MAX): a name is probed
    # with one ``lstat``, which tells what a listing tells of it (a regular file, a
    # folder, a symlink: nothing followed), and a folder found so is known by its real
    # path as a listed one is. Keys that meet a symlink (file or directory), odd names,
    # and unreadable directories take the per-key path below (``file_path``: the key
    # resolved from its folder's real path, then a confinement check), so every
    # guarantee of that path holds for them.

    def _listing(self, dirkey: str) -> _Listing | object:
        """``(real path + sep, regular file names, {other name: DirEntry}, plain file
        names, plain directory names)`` of a directory key (plain: see
        :meth:`plain_files`, :meth:`plain_dirs`), or ``_MISSING`` (not a directory) or
        ``_SLOW`` (reached through a symlink, or unreadable). Cached, up to
        ``_HELD_NAMES`` names in all. ``dirkey`` is a checked key."""
        found = self._listings.get(dirkey)
        if found is not None:
            return found
        found = real = self._dir_path(dirkey)
        held = 1
        if type(real) is str:
            try:
                found = _scan(real, dirkey)
                held += len(found[1]) + len(found[2])
            except OSError:  # unreadable (only searchable) or changed: the per-key path
                found = _SLOW
        listings = self._listings
        self._held += held
        # drop the least recently used, but never the last one used: the parent a
        # sub-folder was just found in (_dir_path), which may alone hold more names than
        # the budget (a level of 100,000 folders would be listed again for each of them)
        while self._held > _HELD_NAMES and len(listings) > 1:
            old = listings.pop(next(iter(listings)))
            self._held -= 1 + (len(old[1]) + len(old[2]) if type(old) is tuple else 0)
        listings[dirkey] = found
        return found

    def _dir_path(self, dirkey: str) -> str | object:
        """The real path (with a trailing separator) of directory ``dirkey`` from its
        parent's listing (or, PER_NAME, from a probe of its name in its parent when the
        parent is not listed), without listing ``dirkey`` itself; ``_MISSING`` (absent,
        or not a directory) or ``_SLOW`` (met a symlink or an unreadable parent)."""
        if not dirkey:
            return self._prefix
        found = self._dirs.get(dirkey)
        if found is not None:
            return found
        own = self._listings.get(dirkey)
        if type(own) is tuple:
            return own[0]
        parent, _, name = dirkey.rpartition("/")
        listings = self._listings
        up = listings.pop(parent, None)
        if up is not None:
            listings[parent] = up  # now the most recently used (see _listing)
        elif PER_NAME:
            return self._probe_dir(dirkey)
        else:
            up = self._listing(parent)
        if type(up) is not tuple:
            return up  # _MISSING or _SLOW
        entry = up[2].get(name)
        if entry is None:
            return _MISSING  # absent, or a regular file
        if entry.is_symlink():
            return _SLOW
        if entry.is_dir(follow_symlinks=False):
            return up[0] + name + os.sep
        return _MISSING

    def _probe_dir(self, dirkey: str) -> str | object:
        """:meth:`_dir_path` of a folder whose parent is not listed: its name probed, and
        so each unknown folder above it, from the nearest one known (no recursion: a
        tree may be deeper than Python's stack)."""
        chain = [dirkey]
        parent = dirkey.rpartition("/")[0]
        while parent and parent not in self._dirs and parent not in self._listings:
            chain.append(parent)
            parent = parent.rpartition("/")[0]
        found: str | object = _MISSING
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

    def _keep_dir(self, key: str, found: object) -> None:
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

    def _probe_one_dir(self, key: str, real: str, name: str, up: str) -> str | object:
        """What one ``lstat`` of folder ``key`` (``name`` in ``real``) says of it."""
        if not _plain_name(name, up):
            return _SLOW  # an odd (or unsafe) name: the per-key path decides
        st = _lstat(real + name)
        if st is None:
            return _MISSING
        if st is _SLOW:
            return _SLOW
        mode = st.st_mode  # type: ignore[attr-defined]
        if stat.S_ISDIR(mode):
            self._remember(key, (real + name, st))  # is_dir(key) answers from it
            return real + name + os.sep
        return _SLOW if stat.S_ISLNK(mode) else _MISSING

    def known_size(self, key: str) -> int | None:
        """The size of ``key``'s regular file as its probe found it (no system call), or
        None when not probed so (or not a regular file). Sizes a leaf before it is
        mapped, as a ``stat`` would (a file can change after either)."""
        found = self._probes.get(key)
        return found[2] if type(found) is tuple and len(found) == 3 else None  # type: ignore[misc]

    def _remember(self, key: str, found: object) -> object:
        probes = self._probes
        if len(probes) >= _HELD_PROBES:
            probes.clear()
        probes[key] = found
        return found

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
        if type(listing) is not tuple:
            return None, None
        return listing[3], listing[4]  # type: ignore[index]

    def _probe(self, key: str) -> tuple[str, object] | object:
        """``(real path, what)`` of a key whose directory lists (or probes) fast and that
        is no symlink, where ``what`` is ``_REGULAR``, a DirEntry or an ``lstat`` result
        (directories, FIFOs...), or None (absent); ``_MISSING`` when its directory does
        not exist; ``_SLOW`` when the per-key path must answer. Raises for an unsafe
        key."""
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
        if listing is _SLOW or listing is _MISSING:
            return listing
        if not _plain_name(name, dirkey):
            check_key(key, self.root)  # raises when unsafe; odd but safe names go slow
            return _SLOW
        assert isinstance(listing, tuple)
        if name in listing[1]:
            return listing[0] + name, _REGULAR
        entry = listing[2].get(name)
        if entry is not None and entry.is_symlink():
            return (self._probe_link(key, listing[0], name) if PER_NAME else None) or _SLOW
        return listing[0] + name, entry

    def _probe_name(self, key: str, dirkey: str, name: str) -> tuple[str, object] | object:
        """:meth:`_probe` of a checked key whose folder is not listed: one ``lstat``
        (remembered, as a listing is). A key that passes ``check_key`` ends in a plain
        name (no leading dot, no NUL, a file name) on POSIX: only Windows checks again."""
        real = self._dirs.get(dirkey)
        if real is None:
            real = self._dir_path(dirkey)
            if type(real) is not str:
                return real
            self._keep_dir(dirkey, real)  # found from its parent's listing: kept as probed
        elif type(real) is not str:
            return real
        if WINDOWS_PATHS and not _plain_name(name, dirkey):
            return _SLOW
        path = real + name
        found: object
        if self._checkout and "." in name:  # a file of a content store's checkout: a link
            try:
                target = self._readlink(real, name)
            except (FileNotFoundError, NotADirectoryError):
                return self._remember(key, (path, None))  # absent: as an lstat says
            except (OSError, ValueError):
                pass  # no symlink (EINVAL): the lstat below tells what it is
            else:
                # a link _probe_link takes is remembered there; any other goes per key
                return self._probe_link(key, real, name, target) or self._remember(key, _SLOW)
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            found = (path, None)
        except (OSError, ValueError):
            return _SLOW  # cannot be told here (a folder on the way not searchable...)
        else:
            mode = st.st_mode
            if mode & 0o170000 == 0o100000:  # stat.S_ISREG
                found = path, _REGULAR, st.st_size
            elif stat.S_ISLNK(mode):
                found = self._probe_link(key, real, name) or _SLOW
            else:
                if stat.S_ISDIR(mode) and key not in self._dirs:
                    self._keep_dir(key, path + os.sep)  # a plain folder: files open by name
                found = path, st
        probes = self._probes
        if len(probes) >= _HELD_PROBES:
            probes.clear()
        probes[key] = found
        return found

    # -- links out of the root, into a folder held open ---------------------------------
    #
    # A content store's checkout (the Hugging Face cache's snapshots/, git-annex, DVC) is
    # a folder of symlinks that say ``../../blobs/<hash>``. Such a target, read once
    # (``readlink``), names its real path without a walk (:func:`._links.plain_target`),
    # and the folder it names is held open (:mod:`._held`): its files are looked at and
    # opened through that descriptor, so no folder swapped on the way leads elsewhere.
    # Any other link, or a file the policy refuses, takes the per-key path (which raises
    # naming the link).

    def _link_at(
        self, folder: str, name: str, target: str | None = None, key: str | None = None
    ) -> tuple[str, str, int, str, str | None] | None:
        """``(target, real path, descriptor of its folder, its name there, the policy's
        reason when known already)`` of the symlink ``name`` in the real folder
        ``folder`` (with a trailing separator) when its target lies outside the root in
        a folder held open; None otherwise. ``target``: what the link says, when read
        already. ``key``: the store key of ``name``, remembered absent (as its probe
        would) when there is no such name."""
        if target is None:
            try:
                target = self._readlink(folder, name)
            except (FileNotFoundError, NotADirectoryError):
                if key is not None:
                    self._remember(key, (folder + name, None))  # no readlink again
                return None
            except OSError:
                return None
        blobs = self._blobs
        if blobs is not None:
            # a link of a Hugging Face snapshot says "../" as many times as its folder is
            # deep in the repository, then "blobs/<hash>": what plain_target makes of it,
            # told by one comparison
            up = up_to_blobs(folder, blobs)
            if target.startswith(up) and HF_BLOB.fullmatch(target, len(up)) is not None:
                blob = target[len(up) :]
                fd = self._folders.fd(blobs[:-1])
                return None if fd < 0 else (target, blobs + blob, fd, blob, self._blob_reason)
        real = plain_target(folder, target)
        if real is None or real.startswith(self._prefix):
            return None
        fd, blob = self._folders.split(real)
        return None if fd < 0 else (target, real, fd, blob, None)

    def _readlink(self, folder: str, name: str) -> str:
        """What the symlink ``name`` in the real folder ``folder`` (with a trailing
        separator) says: read through the folder's descriptor when it is held open (no
        path walked again), else by its path."""
        held = self._folders.fds.get(folder[:-1])
        if held is not None and held >= 0:
            return os.readlink(name, dir_fd=held)
        return os.readlink(folder + name)

    def _probe_link(
        self, key: str, folder: str, name: str, target: str | None = None
    ) -> tuple[str, object, int] | None:
        """The probe ``(real path, _LINKED, size)`` of ``key``, the symlink ``name`` in
        the real folder ``folder``, when its target is a regular file outside the root,
        in a folder held open, that the link policy lets be read (the link is then
        remembered, as :meth:`link` tells); None otherwise."""
        found = self._link_at(folder, name, target)
        if found is None:
            return None
        target, real, fd, blob, reason = found
        try:
            st = os.stat(blob, dir_fd=fd, follow_symlinks=False)
        except (OSError, ValueError):
            return None
        if not stat.S_ISREG(st.st_mode) or not self._resolver.allow(key, target, real, st, reason):
            return None
        self._checkout = True
        probe = real, _LINKED, st.st_size
        self._remember(key, probe)
        return probe

    def _read_link(self, key: str, folder: str, name: str, limit: int) -> bytes | None:
        """:meth:`read_bytes` of ``key``, the symlink ``name`` in the real folder
        ``folder``, opened through its folder held open as :meth:`_probe_link` allows
        (no ``stat`` before: the descriptor's tells); None where that does not."""
        opened = self._open_link(key, folder, name)
        if opened is None:
            return None
        return self._read_open(opened[0], key, limit, st=opened[1])

    def _open_link(self, key: str, folder: str, name: str) -> tuple[int, os.stat_result] | None:
        """The descriptor (read-only) and ``fstat`` of ``key``'s file, the symlink
        ``name`` in the real folder ``folder``, opened through its folder held open as
        :meth:`_probe_link` allows (no ``stat`` before: the descriptor's tells; the link
        is remembered as its probe would); None where that does not."""
        found = self._link_at(folder, name, key=key)
        if found is None:
            return None
        target, real, dir_fd, blob, reason = found
        try:
            fd = self._open(blob, _NOFOLLOW, dir_fd=dir_fd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            allowed = stat.S_ISREG(st.st_mode) and self._resolver.allow(
                key, target, real, st, reason
            )
        except BaseException:
            os.close(fd)
            raise
        if not allowed:
            os.close(fd)
            return None
        self._checkout = True
        self._remember(key, (real, _LINKED, st.st_size))
        return fd, st

    def _open_pinned(self, real: str, flags: int = 0) -> int:
        """Open the file at the real path ``real`` (read-only, or as ``flags`` add)
        through its folder held open (:mod:`._held`), not following a symlink;
        -1 when that folder cannot be held open or the file is gone (the per-key path
        decides)."""
        fd, name = self._folders.split(real)
        if fd < 0:
            return -1
        try:
            return self._open(name, _NOFOLLOW | flags, dir_fd=fd)
        except OSError:
            return -1

    def close(self) -> None:
        """Close the folders held open (see :mod:`._held`)."""
        self._folders.close()

    def __del__(self) -> None:
        held = getattr(self, "_folders", None)
        if held is not None and held.fds:
            held.close()

    def file_path(self, key: str) -> str:
        """Return the absolute real path of ``key``, after checking it stays inside.

        Parameters
        ----------
        key : str
            A relative key; the path need not exist.

        Raises
        ------
        UnsafeCheckpointError
            If the key is unsafe or resolves (through symlinks) outside the root.
        """
        found = self._probe(key) if key else _SLOW
        if type(found) is tuple:
            return found[0]
        return self._resolve(key)

    def _resolve(self, key: str) -> str:
        """The per-key path: ``realpath`` of the key, part after part from its nearest
        folder whose real path is known (its own folder, for a file linked from a plain
        folder), confined to the root and to what the link policy allows outside it (a
        key reaching outside is remembered, see :meth:`link`); a key that passes through
        one real folder twice is refused (a symlink to a folder above it makes a tree
        without end)."""
        if key not in self._probes:  # a key probed was checked then
            check_key(key, self.root)
        if not key:
            return self._real_root
        dirkey, _, name = key.rpartition("/")
        known = self._dir_path(dirkey) if PER_NAME else None
        if type(known) is str:
            return self._resolver.resolve_name(key, known, name)  # type: ignore[arg-type]
        return self._resolver.resolve(key)

    def link(self, key: str) -> Link | None:
        """The link out of the root through which ``key``'s file is read, or None when the
        file is inside the root (or absent). Cheap (dict lookups) for a listed file and a
        key met before; a key reached through a symlink is resolved otherwise.

        Raises
        ------
        UntrustedLinkError
            The key leads out of the root where no rule trusts.
        """
        links = self._resolver.links
        if key in links:
            return links[key]
        found = self._probe(key) if key else _SLOW
        if (type(found) is tuple and found[1] is not _LINKED) or found is _MISSING:
            return None
        self._resolve(key)
        return self._resolver.links.get(key)

    def open_file(self, key: str) -> int:
        """Open the regular file of ``key`` read-only and return the descriptor (the
        caller closes it), checked on that descriptor: a regular file, and (for a key met
        through a symlink) the very file the key was resolved to, not a symlink or a
        folder swapped in since. Never blocks: a FIFO swapped in is opened without
        waiting for a writer (``O_NONBLOCK``), then refused.

        Raises
        ------
        FileNotFoundError, UnsafeCheckpointError
            Absent, not a regular file, or leading where the link policy refuses.
        """
        return self.open_file_stat(key)[0]

    def open_leaf(self, key: str) -> tuple[int, os.stat_result, bool]:
        """:meth:`open_file_stat` for a mapping of ``mode=None``: for reading and writing
        when the process may write the file (``os.access``), read-only otherwise and
        always for a file read through a link out of the root; ``(fd, fstat, whether it
        is open for writing)``. A writable file takes one ``open`` (no ``access``), and a
        key never probed no ``lstat`` first (see :meth:`_open_unprobed`)."""
        if PER_NAME and key not in self._probes:
            opened = self._open_unprobed(key)
            if opened is not None:
                return opened
        found = self._probe(key) if key else _SLOW
        if type(found) is tuple and found[1] is _REGULAR and not self._read_only:
            fd = self._open_pinned(found[0], os.O_RDWR)  # type: ignore[index]
            if fd >= 0:
                return fd, self._checked_stat(key, fd), True
            self._read_only = True  # refused (or gone): ask os.access from now on
        elif type(found) is tuple and found[1] is _LINKED and key in self._resolver.links:
            # a link out of the root the policy allowed: read-only, through its folder
            # held open (what open_file_stat does for it)
            fd = self._open_pinned(found[0])  # type: ignore[index]
            if fd >= 0:
                return fd, self._checked_stat(key, fd), False
        if self.link(key) is not None:
            return (*self.open_file_stat(key), False)
        write = os.access(self.file_path(key), os.W_OK)
        return (*self.open_file_stat(key, write=write), write)

    def _open_unprobed(self, key: str) -> tuple[int, os.stat_result, bool] | None:
        """:meth:`open_leaf` of a key not probed yet whose folder is known plain and not
        listed (the folders of a load are): the file is opened by name in its folder held
        open, for writing, without following a symlink, and checked on the descriptor,
        which tells what an ``lstat`` would (it is then remembered as its probe); in a
        content store's checkout the link is read and followed as :meth:`_probe_link`
        allows. None where the probe must answer: an absent file (remembered so), a
        symlink, a file this process may not write, anything but a regular file, an odd
        name."""
        dirkey, _, name = key.rpartition("/")
        real = self._dirs.get(dirkey) if dirkey else self._prefix
        if type(real) is not str or dirkey in self._listings or not _plain_name(name, dirkey):
            return None
        if self._checkout:  # its files are links: read the link first
            opened = self._open_link(key, real, name)
            return None if opened is None else (*opened, False)
        if self._read_only:
            return None  # a file refused writing: os.access decides (the probe path)
        fd = self._folders.fd(real[:-1] or os.sep)  # its folder, held open
        if fd < 0:
            return None
        try:
            fd = self._open(name, _NOFOLLOW | os.O_RDWR, dir_fd=fd)
        except FileNotFoundError:
            self._remember(key, (real + name, None))  # absent, as its probe would say
            return None
        except OSError:  # a symlink (ELOOP), not writable, a folder...: the probe tells
            return None
        try:
            st = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return None
        self._remember(key, (real + name, _REGULAR, st.st_size))
        return fd, st, True

    def open_file_stat(self, key: str, *, write: bool = False) -> tuple[int, os.stat_result]:
        """:meth:`open_file`, with the ``fstat`` of the descriptor it checked. ``write``:
        open it for reading and writing (a shared mapping of ``mode="r+"``), which a file
        read through a link out of the root refuses (tdview never writes through one)."""
        found = self._probe(key) if key else _SLOW
        extra = _NOFOLLOW | (os.O_RDWR if write else 0)
        fd = -1
        linked = type(found) is tuple and found[1] is _LINKED
        if type(found) is tuple and found[1] is _REGULAR:
            # through its folder held open: no folder swapped since it was listed can
            # lead elsewhere (a leaf's folder usually holds several leaves)
            fd = self._open_pinned(found[0], extra)
            if fd < 0:
                try:
                    fd = self._open(found[0], extra)
                except OSError:
                    fd = -1  # gone or swapped: the per-key path decides
                if fd >= 0 and not self._opened_as_listed(fd, found[0]):
                    os.close(fd)  # a folder on its path was swapped: the per-key path
                    fd = -1
        elif linked:
            if not write:
                fd = self._open_pinned(found[0])  # type: ignore[index]
            if fd < 0:
                self._probes.pop(key, None)  # changed since: the per-key path resolves it
        elif not write and key in self._resolver.links:
            fd = self._open_linked(key)
        if fd < 0:
            real, st = self._stat(key)
            self._require_regular(key, st)
            if write and linked and key not in self._resolver.links:
                self._resolve(key)  # its link was dropped from the bounded list: again
            if write and self._resolver.links.get(key) is not None:
                raise UnsafeCheckpointError(
                    f"refusing to open {self.display(key)} for writing: it is read through "
                    "a link out of the checkpoint root, and tdview never writes through one."
                )
            fd = self._open_checked(key, real, write=write)
        return fd, self._checked_stat(key, fd)

    def _checked_stat(self, key: str, fd: int) -> os.stat_result:
        """The ``fstat`` of ``key``'s descriptor ``fd``, a regular file (else it is closed
        and the error raised)."""
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self._require_regular(key, st)
        except BaseException:
            os.close(fd)
            raise
        return st

    def _proc_usable(self) -> bool:
        """Whether ``/proc/self/fd`` names the files this store opens (asked once)."""
        if self._proc_names is None:
            self._proc_names = PER_NAME and proc_names(self._real_root)
        return self._proc_names

    def _opened_as_listed(self, fd: int, path: str) -> bool:
        """Whether descriptor ``fd``, opened by ``path`` (its folder's real path and its
        name), is that file: O_NOFOLLOW guards the last name only, and a folder on the
        way may have been swapped for a link since it was listed. ``/proc/self/fd`` names
        what was opened (about 1 µs); where it does not tell, the open is kept as before."""
        return not self._proc_usable() or proc_name(fd) == path

    def _open_linked(self, key: str) -> int:
        """Open the file of a key resolved before to a link out of the root (the index
        checked it), following its links once, as they are now: the descriptor is kept
        only when ``/proc/self/fd`` says it is the very file the policy allowed (then no
        part is resolved again); -1 otherwise (the per-key path resolves it again)."""
        link = self._resolver.links[key]
        if not (PER_NAME and proc_names(self._real_root)):
            return -1
        dirkey, _, name = key.rpartition("/")
        folder = self._dir_path(dirkey)
        if type(folder) is not str:
            return -1
        try:
            fd = self._open(folder + name, 0)  # type: ignore[operator]
        except OSError:
            return -1
        if proc_name(fd) != link.real:
            os.close(fd)
            return -1
        return fd

    def _open_checked(self, key: str, real: str, *, write: bool = False) -> int:
        """Open the real path of ``key``, checked on the descriptor (see ``_checked``)."""
        return open_checked(
            self._open_write if write else self._open, real, self.display(key), self._real_root
        )

    def map_path(self, fd: int, real: str) -> str:
        """A path that opens the very file of descriptor ``fd`` (from :meth:`open_file`)
        for an API that takes a path (``torch.from_file``): ``/proc/self/fd/<fd>`` on
        Linux, ``real`` (its real path) elsewhere."""
        return map_path(fd, real, self._real_root)

    def _stat(self, key: str) -> tuple[str, os.stat_result]:
        """Return ``(real path, stat)`` of an existing key, or raise FileNotFoundError."""
        real = self.file_path(key)
        known = self._resolver.last_stat(real)  # what resolving it found at its end
        if known is not None:
            return real, known
        try:
            return real, os.stat(real)
        except (FileNotFoundError, NotADirectoryError):
            raise not_found(self.display(key)) from None

    def is_file(self, key: str) -> bool:
        found = self._probe(key)
        if found is _MISSING:
            return False
        if type(found) is tuple:
            entry = found[1]
            return (
                entry is _REGULAR
                or entry is _LINKED
                or (entry is not None and _is(entry, stat.S_ISREG))
            )
        real = self._resolve(key)
        known = self._resolver.last_stat(real)
        return stat.S_ISREG(known.st_mode) if known is not None else os.path.isfile(real)

    def is_dir(self, key: str) -> bool:
        found = self._probes.get(key) if type(key) is str else None
        if found is None:
            found = self._probe(key) if key else _SLOW
        if found is _MISSING:
            return False
        if type(found) is tuple:
            entry = found[1]
            if type(entry) is os.stat_result:
                return stat.S_ISDIR(entry.st_mode)
            return (
                entry is not None
                and entry is not _REGULAR
                and entry is not _LINKED
                and _is(entry, stat.S_ISDIR)
            )
        return os.path.isdir(self._resolve(key))

    def list_dir(self, key: str) -> list[str]:
        check_key(key, self.root)
        listing = self._listing(key)
        if type(listing) is tuple:
            return sorted([*listing[1], *listing[2]])
        real, st = self._stat(key)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(f"{self.display(key)} is not a directory")
        return sorted(os.listdir(real))

    def entry(self, key: str) -> EntryInfo:
        real, st = self._stat(key)
        self._require_regular(key, st)
        return EntryInfo(
            key=key,
            display=self.display(key),
            size=st.st_size,
            stored_size=st.st_size,
            compression="stored",
            crc32=None,
            file=real,
            link=self._resolver.links.get(key) if self._resolver.links else None,
        )

    def locate(self, key: str) -> Payload:
        """The file's :class:`~._base.Payload`: a file of its own (its real path, offset
        0), stored as it is, mappable; from :meth:`entry` (one ``stat``, none for a file
        the listing or the resolver has seen)."""
        entry = self.entry(key)
        return Payload(
            key=key,
            display=entry.display,
            file=entry.file,
            in_archive=False,
            offset=0,
            size=entry.size,
            stored_size=entry.size,
            compression="stored",
            crc32=None,
            encrypted=False,
            as_stored=True,
            mappable=self.mappable,
            link=entry.link,
        )

    def _require_regular(self, key: str, st: os.stat_result) -> None:
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(f"{self.display(key)} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            # FIFOs and devices could block or never end: refuse them outright.
            raise UnsafeCheckpointError(
                f"refusing {self.display(key)}: not a regular file (mode {st.st_mode:#o})."
            )

    def _unlisted_dir(self, dirkey: str) -> str | None:
        """The real path (with a trailing separator) of directory ``dirkey`` when it is
        not listed yet but its parent's listing shows it as a plain directory (no
        symlink): a file in it can then be opened without listing it (a folder of
        10,000 leaves need not be listed to read its ``meta.json``). None otherwise."""
        if dirkey in self._listings:
            return None
        real = self._dir_path(dirkey)
        return real if type(real) is str else None

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
        if type(found) is not tuple or type(found[1]) is not os.stat_result:
            return None  # absent, a file, a symlink...: remembered, the probe answers
        if not stat.S_ISDIR(found[1].st_mode):
            return None
        meta = found[0] + os.sep + "meta.json"
        try:
            fd = self._open(meta, _NOFOLLOW)
        except OSError:
            return None  # absent, a symlink...: read_bytes tells (and raises) what
        return self._read_open(fd, dirkey + "/meta.json", limit, record=meta)

    def folder_walk(self, dirkey: str) -> tuple[FolderWalk, int] | None:
        """Folder ``dirkey`` held open for a walk (see :mod:`._folder_walk`): a
        descriptor of its own, duplicated from the folder held open (opened name by name
        from the root, none followed). None in a content store's checkout (its files are
        links, which the walk never follows), and where the folder is not known plain or
        cannot be held."""
        if not self.walks_folders:
            return None
        real = self._dir_path(dirkey) if dirkey else self._prefix
        if type(real) is not str:
            return None
        held = self._folders.fd(real[:-1] or os.sep)
        if held < 0:
            return None
        return FolderWalk(self._noatime), os.dup(held)

    def read_bytes(self, key: str, limit: int) -> bytes:
        fd = -1
        linked: object = None  # what the probe of a symlinked meta.json said
        if type(key) is str and _NOFOLLOW:  # the final name must not be a symlink
            dirkey, _, name = key.rpartition("/")
            if name == "meta.json":  # a walk's file, in a folder probed (so checked) plain
                real_dir = self._dirs.get(dirkey) if dirkey else self._prefix
                tried = False  # the link read already (and not taken)
                if type(real_dir) is str and self._checkout and key not in self._probes:
                    # a content store's checkout, whose files are links: read the link
                    data = self._read_link(key, real_dir, name, limit)
                    if data is not None:
                        return data
                    tried = True
                if type(real_dir) is str:
                    try:
                        fd = self._open(real_dir + name, _NOFOLLOW)
                    except OSError as error:
                        fd = -1  # absent, a symlink...: the paths below decide
                        if PER_NAME and error.errno == errno.ELOOP:  # a symlink
                            if key not in self._probes and not tried:
                                data = self._read_link(key, real_dir, name, limit)
                                if data is not None:
                                    return data
                            linked = self._probes.get(key) or self._remember(key, _SLOW)
                    else:
                        return self._read_open(fd, key, limit, record=real_dir + name)
            listing = self._listings.get(dirkey)
            if type(listing) is tuple and name in listing[1] and _plain_name(name, dirkey):
                # a listed regular file (the common case of a walk)
                try:
                    fd = self._open(listing[0] + name, _NOFOLLOW)
                except OSError:
                    fd = -1  # gone or swapped: the paths below decide
                else:
                    return self._read_open(fd, key, limit)
            if listing is None and linked is None and _plain_name(name, dirkey):
                check_key(key, self.root)
                real_dir = self._unlisted_dir(dirkey)
                if real_dir is not None:
                    try:
                        fd = self._open(real_dir + name, _NOFOLLOW)
                    except OSError as error:
                        fd = -1  # absent, a symlink...: the listed path decides
                        if PER_NAME and error.errno == errno.ELOOP:
                            self._remember(key, _SLOW)  # a symlink: what its probe says
                    else:
                        return self._read_open(fd, key, limit, record=real_dir + name)
        found = self._probe(key) if fd < 0 else None
        if type(found) is tuple and found[1] is _REGULAR:
            # a listed regular file: open it without following a symlink swapped in since
            try:
                fd = self._open(found[0], _NOFOLLOW)
            except OSError:
                fd = -1  # gone or swapped: the per-key path decides
        elif type(found) is tuple and found[1] is _LINKED:
            fd = self._open_pinned(found[0])
        if fd < 0:
            real, st = self._stat(key)
            self._require_regular(key, st)
            self._check_limit(key, st.st_size, limit)
            fd = self._open_checked(key, real)
        return self._read_open(fd, key, limit)

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
                self._remember(key, (record, _REGULAR, st.st_size))
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

    def _open_write(self, path: str, flags: int) -> int:
        """:meth:`_open` for reading and writing (see :meth:`open_file_stat`)."""
        return self._open(path, flags | os.O_RDWR)

    def _check_limit(self, key: str, size: int, limit: int) -> None:
        if size > limit:
            raise LimitExceededError(
                f"{self.display(key)} is {size} bytes, above the limit of {limit} bytes."
            )

    def writable(self, key: str | None = None) -> bool:
        """Whether the process may write the root folder or ``key``'s file; never for a
        file read through a link out of the root (tdview writes through none)."""
        target = self._real_root if key is None else self.file_path(key)
        if key is not None and self.link(key) is not None:
            return False
        return os.access(target, os.W_OK)

    # -- payloads (the Store seam: thin methods over the ones above) --------------------

    local_folders = True  # a loaded folder's path is where tensordict's memmap_ writes
    maps_unprobed = PER_NAME  # see open_leaf

    def map(self, key: str, *, write: bool | None = False) -> tuple[int, os.stat_result, bool]:
        """The file of ``key``, opened and checked by :meth:`open_leaf` (``write=None``)
        or :meth:`open_file_stat`: ``(fd, fstat, whether it is open for writing)``."""
        if write is None:
            return self.open_leaf(key)
        fd, st = self.open_file_stat(key, write=write)
        return fd, st, write

    def opened_path(self, fd: int, key: str) -> str:
        link = self.link(key)
        return self.map_path(fd, link.real if link is not None else self.file_path(key))

    def read_into(self, key: str, offset: int, buf: object) -> None:
        """``preadv`` from the descriptor :meth:`open_file_stat` opened and checked."""
        from ..errors import LeafDataError

        out = memoryview(buf).cast("B")  # type: ignore[arg-type]
        fd, st = self.open_file_stat(key)
        try:
            want = len(out)
            if offset < 0 or offset + want > st.st_size:
                raise ValueError(
                    f"{self.display(key)}: bytes {offset}..{offset + want} lie outside its "
                    f"{st.st_size} bytes."
                )
            done = 0
            while done < want:
                got = os.preadv(fd, [out[done:]], offset + done)
                if got <= 0:
                    raise LeafDataError(
                        f"{self.display(key)} ended at {offset + done} bytes while being "
                        "read: it was truncated."
                    )
                done += got
        finally:
            os.close(fd)


def _lstat(path: str) -> os.stat_result | None | object:
    """``os.lstat(path)``; None when absent, ``_SLOW`` when it cannot be told (a folder on
    the way that cannot be searched)."""
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError):
        return _SLOW


def _is(what: object, test: object) -> bool:
    """Whether the DirEntry or ``lstat`` result of a probe passes ``stat.S_ISREG`` or
    ``stat.S_ISDIR`` (nothing followed)."""
    if type(what) is os.stat_result:
        return test(what.st_mode)  # type: ignore[operator]
    if test is stat.S_ISREG:
        return what.is_file(follow_symlinks=False)  # type: ignore[attr-defined]
    return what.is_dir(follow_symlinks=False)  # type: ignore[attr-defined]


def _scan(real: str, dirkey: str) -> _Listing:
    """List one directory (``os.scandir``: the type comes with the name, no stat)."""
    files: list[str] = []
    others: dict[str, os.DirEntry[str]] = {}
    dirs: list[str] = []
    with os.scandir(real) as it:
        for entry in it:
            if entry.is_file(follow_symlinks=False):
                files.append(entry.name)
            else:
                others[entry.name] = entry
                if entry.is_dir(follow_symlinks=False):
                    dirs.append(entry.name)
    joined = "\n" + "\n".join(files) + "\n" + "\n".join(dirs)
    found = frozenset(files)
    if (
        "\n." in joined
        or "\x00" in joined
        or (WINDOWS_PATHS and ("\\" in joined or (not dirkey and ":" in joined)))
    ):
        return (
            real,
            found,
            others,
            frozenset(n for n in files if _plain_name(n, dirkey)),
            frozenset(n for n in dirs if _plain_name(n, dirkey)),
        )
    return real, found, others, found, frozenset(dirs)


def _plain_name(name: str, dirkey: str) -> bool:
    """Whether a name in directory ``dirkey`` surely passes ``check_key`` (no per-key
    check needed). Conservative: a name it refuses is checked, and probed, per key."""
    return (
        bool(name)
        and name[0] != "."
        and "\x00" not in name
        and not (WINDOWS_PATHS and ("\\" in name or (not dirkey and name[1:2] == ":")))
        and (name.isascii() or has_file_name(name))
    )
