"""A checkpoint saved as a directory tree (``td.memmap(path)``): the store's interface.

Its names are listed or probed by :mod:`._names` (what a probe finds is typed in
:mod:`._probe`), links out of the root are read through folders held open by
:mod:`._link_paths`, and a key the probes cannot answer takes the per-key path here
(:meth:`DirectoryStore.file_path`: resolved and confined by :mod:`._links`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from typing import Any

from .._cache import BoundedCache
from ..errors import UnsafeCheckpointError
from . import _names
from ._base import EntryInfo, Payload, Store
from ._checked import map_path, open_checked, proc_name, proc_names
from ._content_stores import hf_files
from ._folder_walk import FolderWalk
from ._held import HeldFolders
from ._key_safety import not_found
from ._link_paths import LinkedNames
from ._links import Link, LinkResolver
from ._names import NOATIME, check_key
from ._probe import (
    LINKED,
    MISSING,
    OTHER,
    PER_KEY,
    PER_NAME,
    REGULAR,
    Listing,
    Probe,
    Unprobed,
    is_dir_entry,
    is_regular_entry,
    plain_name,
    real_dir,
)
from ._trust import trusted_paths

__all__ = ["DirectoryStore"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_PATH = getattr(os, "O_PATH", 0)


class DirectoryStore(LinkedNames):
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
        :func:`~._trust.trusted_paths` when the store is opened
        (``TDVIEW_TRUSTED_PATHS`` and :func:`tdview.trust_paths`).

    Examples
    --------
    >>> store = DirectoryStore("/ckpt")                      # doctest: +SKIP
    >>> store.read_bytes("meta.json", limit=1 << 20)[:1]     # doctest: +SKIP
    b'{'
    """

    kind = "directory"

    def sub_store(self, key: str) -> Store:
        """The checkpoint at ``key`` of a folder of checkpoints, opened as its own path is
        (a folder, an archive, a safetensors file...: :func:`~._open.open_store`)."""
        from ._open import open_store  # _open opens directories: a cycle at import time

        return open_store(os.path.join(self.root, check_key(key, self.root)))

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
        self._listings = {}  # the state of the listings and probes: see DirectoryNames
        self._held = 0
        self._dirs = {}
        self._probes = BoundedCache(_names._HELD_PROBES)  # the bound when the store opens
        self._noatime = NOATIME
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
        found = self._probe(key) if key else PER_KEY
        if type(found) is tuple:
            return found[1]  # its real path
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
            return self._resolver.resolve_name(key, known, name)
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
        found = self._probe(key) if key else PER_KEY
        if (type(found) is tuple and found[0] is not LINKED) or found is MISSING:
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
        found = self._probe(key) if key else PER_KEY
        if type(found) is tuple and found[0] is REGULAR and not self._read_only:
            fd = self._open_pinned(found[1], os.O_RDWR)
            if fd >= 0:
                return fd, self._checked_stat(key, fd), True
            self._read_only = True  # refused (or gone): ask os.access from now on
        elif type(found) is tuple and found[0] is LINKED and key in self._resolver.links:
            # a link out of the root the policy allowed: read-only, through its folder
            # held open (what open_file_stat does for it)
            fd = self._open_pinned(found[1])
            if fd >= 0:
                return fd, self._checked_stat(key, fd), False
        if self.link(key) is not None:
            return (*self.open_file_stat(key), False)
        write = os.access(self.file_path(key), os.W_OK)
        return (*self.open_file_stat(key, write=write), write)

    def open_file_stat(self, key: str, *, write: bool = False) -> tuple[int, os.stat_result]:
        """:meth:`open_file`, with the ``fstat`` of the descriptor it checked. ``write``:
        open it for reading and writing (a shared mapping of ``mode="r+"``), which a file
        read through a link out of the root refuses (tdview never writes through one)."""
        found = self._probe(key) if key else PER_KEY
        extra = _NOFOLLOW | (os.O_RDWR if write else 0)
        fd = -1
        linked = type(found) is tuple and found[0] is LINKED
        if type(found) is tuple and found[0] is REGULAR:
            # through its folder held open: no folder swapped since it was listed can
            # lead elsewhere (a leaf's folder usually holds several leaves)
            path = found[1]
            fd = self._open_pinned(path, extra)
            if fd < 0:
                try:
                    fd = self._open(path, extra)
                except OSError:
                    fd = -1  # gone or swapped: the per-key path decides
                if fd >= 0 and not self._opened_as_listed(fd, path):
                    os.close(fd)  # a folder on its path was swapped: the per-key path
                    fd = -1
        elif type(found) is tuple and linked:
            if not write:
                fd = self._open_pinned(found[1])
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
        if found is MISSING:
            return False
        if type(found) is tuple:
            kind = found[0]
            if kind is REGULAR or kind is LINKED:
                return True
            info = found[3]  # None: ABSENT
            return info is not None and is_regular_entry(info)
        real = self._resolve(key)
        known = self._resolver.last_stat(real)
        return stat.S_ISREG(known.st_mode) if known is not None else os.path.isfile(real)

    def is_dir(self, key: str) -> bool:
        found = self._probes.get(key) if type(key) is str else None
        if found is None:
            found = self._probe(key) if key else PER_KEY
        if found is MISSING:
            return False
        if type(found) is tuple:
            info = found[3]
            return found[0] is OTHER and info is not None and is_dir_entry(info)
        return os.path.isdir(self._resolve(key))

    def list_dir(self, key: str) -> list[str]:
        check_key(key, self.root)
        listing = self._listing(key)
        if type(listing) is Listing:
            return sorted([*listing.files, *listing.others])
        real, st = self._stat(key)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(f"{self.display(key)} is not a directory")
        return sorted(os.listdir(real))

    def holds(self, dirkey: str, name: str) -> bool:
        """One ``lstat`` (see :meth:`Store.holds`)."""
        key = f"{dirkey}/{name}" if dirkey else name
        check_key(key, self.root)
        return os.path.lexists(os.path.join(self.root, key))

    def entries(self, dirkey: str, limit: int) -> tuple[list[tuple[str, str]], bool]:
        """One ``scandir`` of the folder, no link followed but to tell a linked folder
        (see :meth:`Store.entries`); an entry that cannot be looked at is left out."""
        check_key(dirkey, self.root)
        found: list[tuple[str, str]] = []
        with os.scandir(os.path.join(self.root, dirkey) if dirkey else self.root) as listing:
            for item in listing:
                if len(found) == limit:
                    return found, True
                try:
                    if item.is_dir(follow_symlinks=False):
                        found.append((item.name, "dir"))
                    else:
                        found.append((item.name, "linked dir" if item.is_dir() else "file"))
                except OSError:
                    continue
        return found, False

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
        linked: Probe | Unprobed | None = None  # what the probe of a symlinked meta.json said
        if type(key) is str and _NOFOLLOW:  # the final name must not be a symlink
            dirkey, _, name = key.rpartition("/")
            if name == "meta.json":  # a walk's file, in a folder probed (so checked) plain
                folder = self._dirs.get(dirkey) if dirkey else self._prefix
                tried = False  # the link read already (and not taken)
                if type(folder) is str and self._checkout and key not in self._probes:
                    # a content store's checkout, whose files are links: read the link
                    data = self._read_link(key, folder, name, limit)
                    if data is not None:
                        return data
                    tried = True
                if type(folder) is str:
                    try:
                        fd = self._open(folder + name, _NOFOLLOW)
                    except OSError as error:
                        fd = -1  # absent, a symlink...: the paths below decide
                        if PER_NAME and error.errno == errno.ELOOP:  # a symlink
                            if key not in self._probes and not tried:
                                data = self._read_link(key, folder, name, limit)
                                if data is not None:
                                    return data
                            linked = self._probes.get(key) or self._remember(key, PER_KEY)
                    else:
                        return self._read_open(fd, key, limit, record=folder + name)
            listing = self._listings.get(dirkey)
            if type(listing) is Listing and name in listing.files and plain_name(name, dirkey):
                # a listed regular file (the common case of a walk)
                try:
                    fd = self._open(listing.real + name, _NOFOLLOW)
                except OSError:
                    fd = -1  # gone or swapped: the paths below decide
                else:
                    return self._read_open(fd, key, limit)
            if listing is None and linked is None and plain_name(name, dirkey):
                check_key(key, self.root)
                folder = self._unlisted_dir(dirkey)
                if folder is not None:
                    try:
                        fd = self._open(folder + name, _NOFOLLOW)
                    except OSError as error:
                        fd = -1  # absent, a symlink...: the listed path decides
                        if PER_NAME and error.errno == errno.ELOOP:
                            self._remember(key, PER_KEY)  # a symlink: what its probe says
                    else:
                        return self._read_open(fd, key, limit, record=folder + name)
        found = self._probe(key) if fd < 0 else None
        if type(found) is tuple and found[0] is REGULAR:
            # a listed regular file: open it without following a symlink swapped in since
            try:
                fd = self._open(found[1], _NOFOLLOW)
            except OSError:
                fd = -1  # gone or swapped: the per-key path decides
        elif type(found) is tuple and found[0] is LINKED:
            fd = self._open_pinned(found[1])
        if fd < 0:
            real, st = self._stat(key)
            self._require_regular(key, st)
            self._check_limit(key, st.st_size, limit)
            fd = self._open_checked(key, real)
        return self._read_open(fd, key, limit)

    def _open_write(self, path: str, flags: int) -> int:
        """:meth:`_open` for reading and writing (see :meth:`open_file_stat`)."""
        return self._open(path, flags | os.O_RDWR)

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

    def read_into(self, key: str, offset: int, buf: Any) -> None:
        """``preadv`` from the descriptor :meth:`open_file_stat` opened and checked."""
        from ..errors import LeafDataError

        out = memoryview(buf).cast("B")
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
