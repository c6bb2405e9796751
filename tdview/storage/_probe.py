"""What a directory store finds at a key without resolving it: the types of its probes
and listings, and the system calls that find them (``lstat``, ``scandir``, a folder
opened ``O_PATH``).

A probe is a :data:`Probe` (a key found plain, or plainly absent: a typed tuple whose
first item, a :class:`Found`, says what is there) or an :class:`Unprobed` member (the
probe cannot answer: its folder is missing, or the per-key path must). Probes are made
on a load's hot path (one per leaf not walked through descriptors), so they are plain
tuples compared with module-level names of the enum members.
"""

from __future__ import annotations

import enum
import os
import stat
import sys
from typing import Final, NamedTuple

from .._cache import BoundedCache
from ._base import WINDOWS_PATHS
from ._key_safety import has_file_name

__all__ = [
    "ABSENT",
    "LINKED",
    "MISSING",
    "OTHER",
    "PER_KEY",
    "PER_NAME",
    "REGULAR",
    "Found",
    "Listing",
    "Probe",
    "Unprobed",
    "found_dir",
    "is_dir_entry",
    "is_regular_entry",
    "lstat",
    "open_dir",
    "plain_name",
    "real_dir",
    "scan",
]

# Where names are probed one by one (``lstat``) instead of listing their folder: Linux,
# whose file systems match names exactly (a case-insensitive one could answer a probe for
# a name that its listing spells otherwise) and whose ``/proc/self/fd`` checks what is
# opened.
PER_NAME = sys.platform.startswith("linux")


class Found(enum.Enum):
    """What a probe found at a key (nothing followed)."""

    REGULAR = "a regular file"
    LINKED = (
        "a symlink out of the root to a regular file the link policy allows, in a folder held open"
    )
    ABSENT = "no such name in its folder"
    OTHER = "a folder, a FIFO, a device: its DirEntry or lstat tells"


class Unprobed(enum.Enum):
    """Why a key (or a folder) has no :data:`Probe`: what answers instead."""

    MISSING = "its folder does not exist: no key below it does"
    PER_KEY = "met a symlink, an odd name or an unreadable folder: the per-key path answers"


# module-level names of the members: what the hot path compares with ``is`` (a global,
# where an enum's attribute costs ten times as much); Final, so that mypy narrows a
# ``Probe | Unprobed`` by ``found is MISSING or found is PER_KEY``
REGULAR: Final = Found.REGULAR
LINKED: Final = Found.LINKED
ABSENT: Final = Found.ABSENT
OTHER: Final = Found.OTHER
MISSING: Final = Unprobed.MISSING
PER_KEY: Final = Unprobed.PER_KEY

Probe = tuple[Found, str, int, os.stat_result | os.DirEntry[str] | None]
"""A key found plain: ``(what is there, its real path, its size when the system call that
found it told (a regular file, a link probed by name; -1 otherwise), the DirEntry or
``lstat`` result of an ``OTHER``; None otherwise)``. A plain tuple, told from an
:class:`Unprobed` by ``type(found) is tuple``: a named tuple costs eight times as much
to make (a probe is made per leaf), which made the index of 10,000 leaves 8% slower."""


class Listing(NamedTuple):
    """One directory listed (``os.scandir``): its real path with a trailing separator,
    its regular file names, its other names with their DirEntry, and the names of its
    regular files and folders that need no per-key check (see :func:`plain_name`)."""

    real: str
    files: frozenset[str]
    others: dict[str, os.DirEntry[str]]
    plain_files: frozenset[str]
    plain_dirs: frozenset[str]


def scan(real: str, dirkey: str) -> Listing:
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
        return Listing(
            real,
            found,
            others,
            frozenset(n for n in files if plain_name(n, dirkey)),
            frozenset(n for n in dirs if plain_name(n, dirkey)),
        )
    return Listing(real, found, others, found, frozenset(dirs))


def plain_name(name: str, dirkey: str) -> bool:
    """Whether a name in directory ``dirkey`` surely passes ``check_key`` (no per-key
    check needed). Conservative: a name it refuses is checked, and probed, per key."""
    return (
        bool(name)
        and name[0] != "."
        and "\x00" not in name
        and not (WINDOWS_PATHS and ("\\" in name or (not dirkey and name[1:2] == ":")))
        and (name.isascii() or has_file_name(name))
    )


def lstat(path: str) -> os.stat_result | Unprobed | None:
    """``os.lstat(path)``; None when absent, ``PER_KEY`` when it cannot be told (a folder
    on the way that cannot be searched)."""
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError):
        return PER_KEY


def is_regular_entry(info: os.stat_result | os.DirEntry[str]) -> bool:
    """Whether a probe's DirEntry or ``lstat`` result is a regular file (not followed)."""
    if type(info) is os.stat_result:
        return stat.S_ISREG(info.st_mode)
    assert isinstance(info, os.DirEntry)
    return info.is_file(follow_symlinks=False)


def is_dir_entry(info: os.stat_result | os.DirEntry[str]) -> bool:
    """Whether a probe's DirEntry or ``lstat`` result is a folder (not followed)."""
    if type(info) is os.stat_result:
        return stat.S_ISDIR(info.st_mode)
    assert isinstance(info, os.DirEntry)
    return info.is_dir(follow_symlinks=False)


# -- the root's real path --------------------------------------------------------------

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
        _REAL_DIRS.put(path, (st.st_dev, st.st_ino))
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
_MAX_REAL_DIRS = 256
_REAL_DIRS: BoundedCache[str, tuple[int, int]] = BoundedCache(_MAX_REAL_DIRS)


def real_dir(path: str) -> str:
    """The real path of the directory at the absolute ``path``; NotADirectoryError when it
    is none (see :func:`found_dir`)."""
    found = found_dir(path)
    if found is not None:
        return found
    if not os.path.isdir(path):
        raise NotADirectoryError(f"{path} is not a directory")
    return os.path.realpath(path)
