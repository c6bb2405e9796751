"""A directory store's fast paths through links out of the root, into a folder held open.

A content store's checkout (the Hugging Face cache's snapshots/, git-annex, DVC) is a
folder of symlinks that say ``../../blobs/<hash>``. Such a target, read once
(``readlink``), names its real path without a walk (:func:`._links.plain_target`), and
the folder it names is held open (:mod:`._held`): its files are looked at and opened
through that descriptor, so no folder swapped on the way leads elsewhere. Any other
link, or a file the policy refuses (:class:`._links.LinkResolver`), takes the per-key
path (which raises naming the link).
"""

from __future__ import annotations

import os
import stat

from .._cache import BoundedCache
from ._checked import proc_name, proc_names
from ._content_stores import HF_BLOB
from ._links import LinkResolver, plain_target
from ._names import DirectoryNames
from ._probe import ABSENT, LINKED, PER_NAME, REGULAR, Probe, plain_name

__all__ = ["LinkedNames", "up_to_blobs"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# Real folders whose up_to_blobs is remembered (all dropped at once beyond).
_HELD_UPS = 4096


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
    _BLOB_UPS.put(folder, (blobs, up))
    return up


# real folder -> (blobs, up_to_blobs of it) (bounded)
_BLOB_UPS: BoundedCache[str, tuple[str, str]] = BoundedCache(_HELD_UPS)


class LinkedNames(DirectoryNames):
    """The link fast paths of a :class:`~._directory.DirectoryStore` (see the module)."""

    _real_root: str
    _resolver: LinkResolver
    # a snapshot's blobs/ folder ("<repo>/blobs/") and what the policy says of its files,
    # when the trusted paths do not answer first (see _link_at)
    _blobs: str | None
    _blob_reason: str | None
    _read_only: bool  # a file refused opening for writing (see _open_unprobed)

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
                    self._remember(key, (ABSENT, folder + name, -1, None))  # no readlink again
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

    def _probe_link(
        self, key: str, folder: str, name: str, target: str | None = None
    ) -> Probe | None:
        """The probe ``(LINKED, real path, size, None)`` of ``key``, the symlink ``name``
        in the real folder ``folder``, when its target is a regular file outside the
        root, in a folder held open, that the link policy lets be read (the link is then
        remembered, as ``link`` tells); None otherwise."""
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
        probe = (LINKED, real, st.st_size, None)
        self._remember(key, probe)
        return probe

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
        self._remember(key, (LINKED, real, st.st_size, None))
        return fd, st

    def _read_link(self, key: str, folder: str, name: str, limit: int) -> bytes | None:
        """:meth:`read_bytes` of ``key``, the symlink ``name`` in the real folder
        ``folder``, opened through its folder held open as :meth:`_probe_link` allows
        (no ``stat`` before: the descriptor's tells); None where that does not."""
        opened = self._open_link(key, folder, name)
        if opened is None:
            return None
        return self._read_open(opened[0], key, limit, st=opened[1])

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
        if type(real) is not str or dirkey in self._listings or not plain_name(name, dirkey):
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
            self._remember(key, (ABSENT, real + name, -1, None))  # absent, as its probe would say
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
        self._remember(key, (REGULAR, real + name, st.st_size, None))
        return fd, st, True

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
            fd = self._open(folder + name, 0)
        except OSError:
            return -1
        if proc_name(fd) != link.real:
            os.close(fd)
            return -1
        return fd
