"""Which symlinks out of a checkpoint root a directory store follows: for reading only.

A key whose real path stays inside the root is read as it is. A key whose real path
leaves the root is read only when one of these says so:

* **A content-addressed store that holds the checkpoint**, recognised by its structure
  from the root's real path (never from the link's words alone):

  - Hugging Face cache (``huggingface_hub.snapshot_download``): the root is
    ``<repo>/snapshots/<rev>`` or a folder below it, ``<repo>`` is named ``models--*``,
    ``datasets--*`` or ``spaces--*`` and holds a real ``blobs/`` folder; the file is a
    regular file directly in ``<repo>/blobs/``, named by its hash (40 or 64 hex digits).
  - git-annex: the nearest folder above the root that holds ``.git`` holds it as a real
    folder with a real ``annex/objects/``; the file is a regular file
    ``objects/<hash dir>/<hash dir>/<key>/<key>``.
  - DVC: the nearest folder above the root that holds a real ``.dvc/`` folder; its cache
    is ``.dvc/cache`` or the ``dir`` of the ``[cache]`` section of ``.dvc/config.local``
    or ``.dvc/config``; the file is a regular file ``files/md5/<2 hex>/<30 hex>`` (DVC 3)
    or ``<2 hex>/<30 hex>`` (DVC 2) of that cache.

  The folders these rules climb to are above the checkpoint root, so a checkpoint
  cannot make one up: a ``.git`` or ``.dvc`` folder inside the root is the
  checkpoint's own (links into it stay inside the root and are followed anyway).
* **A trusted path**: a folder (or file) given to :func:`trust_paths` or listed in the
  ``TDVIEW_TRUSTED_PATHS`` environment variable (``os.pathsep``-separated). Folders
  linked from the checkpoint may lead there too, not only files.

Every other link out of the root is refused (:class:`~tdview.errors.UntrustedLinkError`,
naming the link, its target and how to trust it). tdview never writes through a link
that leaves the root, whichever rule let it read the file.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from collections.abc import Callable, Iterable
from typing import NamedTuple

from .._cache import BoundedCache
from ..errors import UnsafeCheckpointError, UntrustedLinkError
from ._checked import proc_names, readlink_or

__all__ = [
    "TRUSTED_PATHS_ENV",
    "HF_BLOB",
    "Link",
    "LinkPolicy",
    "LinkResolver",
    "hf_files",
    "plain_target",
    "trust_paths",
    "trusted_paths",
    "untrusted_link",
]

#: The environment variable listing trusted paths (``os.pathsep``-separated).
TRUSTED_PATHS_ENV = "TDVIEW_TRUSTED_PATHS"

_HF_REPO = re.compile(r"(models|datasets|spaces)--.+")
#: The name of a blob in the Hugging Face cache: a git (SHA-1) or a SHA-256 hash.
HF_BLOB = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_ANNEX_HASH_DIR = re.compile(r"[0-9A-Za-z]{2,3}")
_HEX2 = re.compile(r"[0-9a-f]{2}")
_HEX30 = re.compile(r"[0-9a-f]{30}")
_DVC_CONFIG_BYTES = 1 << 16
# Keys read through a link out of the root, kept per store (dropped all at once beyond).
_HELD_LINKS = 16384
_new_tuple = tuple.__new__
# Paths added by trust_paths, in order, absolute (resolved when a store is opened).
_ADDED: list[str] = []


class Link(NamedTuple):
    """A key of a directory store whose file lies outside the checkpoint root.

    Attributes
    ----------
    key : str
        The store key.
    link : str
        The symlink that leaves the root, as the checkpoint names it.
    target : str
        What that symlink says (``os.readlink``).
    real : str
        The real path of the key's file.
    reason : str
        Why it may be read: ``"a blob of the Hugging Face cache /c/models--a--b"``,
        ``"below the trusted path /data"``...
    """

    key: str
    link: str
    target: str
    real: str
    reason: str


class _Trust:
    """What :func:`trust_paths` returns: a context manager that takes back the paths it
    added when the block ends (called plainly, the paths stay trusted)."""

    def __init__(self, added: list[str]) -> None:
        self.added = tuple(added)

    def __enter__(self) -> tuple[str, ...]:
        return trusted_paths()

    def __exit__(self, *exc: object) -> None:
        for path in self.added:
            if path in _ADDED:
                _ADDED.remove(path)

    def __repr__(self) -> str:
        return f"trust_paths{self.added!r}"


def trust_paths(*paths: str | os.PathLike[str]) -> _Trust:
    """Let checkpoints opened from now on read files below ``paths`` through symlinks.

    A checkpoint directory whose symlinks lead out of it is refused, except into a
    content store that holds it (Hugging Face cache, git-annex, DVC: see
    :mod:`tdview.storage._links`). This trusts more places for this process, as the
    ``TDVIEW_TRUSTED_PATHS`` environment variable does for every process: links into a
    trusted folder are followed **for reading**; tdview never writes through them
    (``mode="r+"`` refuses such a file, and the default mode maps it copy-on-write).

    Parameters
    ----------
    *paths : str or os.PathLike
        Folders (or single files); relative paths are made absolute now.

    Returns
    -------
    A context manager: ``with tdview.trust_paths(p): ...`` trusts ``p`` for the block
    only. Called plainly, the paths stay trusted until the process ends.

    Examples
    --------
    >>> import tdview
    >>> with tdview.trust_paths("/data/shared-weights"):      # doctest: +SKIP
    ...     td = tdview.load_memmap("/home/me/ckpt")          # links into /data/shared-weights
    """
    added = []
    for path in paths:
        full = os.path.abspath(os.fspath(path))
        if full not in _ADDED:
            _ADDED.append(full)
            added.append(full)
    return _Trust(added)


def trusted_paths() -> tuple[str, ...]:
    """The trusted paths now: those of ``TDVIEW_TRUSTED_PATHS``, then those added by
    :func:`trust_paths`, absolute (relative entries of the variable are taken from the
    current directory)."""
    global _TRUSTED
    listed = os.environ.get(TRUSTED_PATHS_ENV, "")
    added = tuple(_ADDED)
    known = _TRUSTED
    if known[0] == listed and known[1] == added:
        return known[2]
    entries = [p for p in listed.split(os.pathsep) if p.strip()]
    found = [os.path.abspath(p) for p in entries]
    paths = tuple(found + [p for p in added if p not in found])
    if all(os.path.isabs(p) for p in entries):  # a relative one depends on the cwd
        _TRUSTED = listed, added, paths
    return paths


# (the variable's value, the paths added, trusted_paths() of them): opening a store asks
# for them each time, and they seldom change
_TRUSTED: tuple[str, tuple[str, ...], tuple[str, ...]] = ("", (), ())


class LinkResolver:
    """The real path of a directory store's keys, part after part, confined to the root
    and to what the :class:`LinkPolicy` allows outside it.

    Parameters
    ----------
    root, real_root : str
        The store's root as given (absolute) and its real path.
    display : callable
        A key's name in messages (the store's ``display``).
    trusted : iterable of str or os.PathLike
        The trusted paths (:func:`trusted_paths` when the store was opened).

    Attributes
    ----------
    links : dict
        Key -> :class:`Link`, for the keys resolved so far whose file is outside the
        root (up to a bound: a key dropped is resolved again when asked for).
    policy : LinkPolicy or None
        Made when a key first leaves the root.
    """

    def __init__(
        self,
        root: str,
        real_root: str,
        display: Callable[[str], str],
        trusted: Iterable[str | os.PathLike[str]],
    ) -> None:
        self.root, self.real_root, self.display = root, real_root, display
        self.prefix = real_root.rstrip(os.sep) + os.sep
        self.trusted = tuple(os.path.abspath(os.fspath(p)) for p in trusted) if trusted else ()
        self.links: BoundedCache[str, Link] = BoundedCache(_HELD_LINKS)
        self.policy: LinkPolicy | None = None
        # real folders met while resolving (see RealPaths), where a descriptor opened is
        # checked to be at the path resolved (/proc/self/fd): a swap is caught there
        self._paths: RealPaths | None = None  # made when a key first needs resolving
        self._last: tuple[str, os.stat_result | None] = ("", None)

    def last_stat(self, real: str) -> os.stat_result | None:
        """The ``lstat`` the last :meth:`resolve` made of the real path it returned, when
        that is ``real`` and it exists (a real path holds no symlink: its ``stat``)."""
        last = self._last
        return last[1] if last[0] is real else None

    def resolve_name(self, key: str, folder: str, name: str) -> str:
        """:meth:`resolve` of a key whose folder is a plain folder inside the root, of real
        path ``folder`` (with a trailing separator): only its last part ``name`` is
        resolved (a symlink out of the root, in a content store's checkout)."""
        paths = self._paths
        if paths is None:
            paths = self._paths = RealPaths(proc_names(self.real_root))
        here = folder + name
        real, st = paths.real_at(here, link=True)
        self._last = real, st
        if real.startswith(self.prefix) or real == self.real_root:
            return real
        if self.policy is None:
            self.policy = LinkPolicy(self.real_root, self.trusted)
        reason = self.policy.reason(real, final=True, st=st)
        target = paths.target(here)
        if reason is None:
            raise untrusted_link(
                self.root, self.real_root, key, self.display(key), target, real, final=True
            )
        links = self.links
        known = links.get(key)
        if known is None or (known.target, known.real, known.reason) != (target, real, reason):
            links.put(key, Link(key, self.display(key), target, real, reason))
        return real

    def allow(
        self, key: str, target: str, real: str, st: os.stat_result, reason: str | None = None
    ) -> bool:
        """Remember ``key``, a symlink saying ``target`` whose file, found by the store
        at the real path ``real`` (a regular file: ``st``), lies outside the root, when
        the policy lets it be read; False when it does not (the caller then takes
        :meth:`resolve`, which raises naming the link). ``reason``: what the policy
        says of ``real``, when the caller knows it (a blob of the snapshot's cache, see
        :func:`hf_files`)."""
        if reason is None:
            if self.policy is None:
                self.policy = LinkPolicy(self.real_root, self.trusted)
            reason = self.policy.reason(real, final=True, st=st)
            if reason is None:
                return False
        # Link(...) without the NamedTuple's Python __new__: one per file of a checkout
        self.links.put(key, _new_tuple(Link, (key, self.display(key), target, real, reason)))
        return True

    def resolve(self, key: str, start: tuple[int, str] | None = None) -> str:
        """The real path of a checked, non-empty ``key``; a key reaching outside the root
        is remembered in :attr:`links`, and one that passes through one real folder twice
        is refused (a symlink to a folder above it makes a tree without end). ``start``:
        ``(n, real path + sep)`` of the folder of the key's first ``n`` parts, known to be
        a plain folder inside the root (found by its parent's listing or probe).

        Raises
        ------
        UntrustedLinkError
            A part of the key leads out of the root where the policy does not allow.
        UnsafeCheckpointError
            A symlink loop.
        """
        real = self.real_root
        seen = {real}
        parts = key.split("/")
        first = 1
        if start is not None:
            first = start[0] + 1
            real = start[1].rstrip(os.sep) or os.sep
            if first < len(parts):  # the folders it is in, for the loop check
                prefix = self.prefix
                seen.update(prefix + os.sep.join(parts[:i]) for i in range(1, first))
        left: tuple[str, str] | None = None  # (link, target) where the key left the root
        reason = None
        st: os.stat_result | None = None
        paths = self._paths
        if paths is None:
            paths = self._paths = RealPaths(proc_names(self.real_root))
        for depth in range(first, len(parts) + 1):
            part = parts[depth - 1]
            here = real + os.sep + part if real != os.sep else os.sep + part
            real, st = paths.real_at(here)
            if depth < len(parts) and real in seen:
                raise UnsafeCheckpointError(
                    f"refusing key {key!r} in {self.root}: its folder "
                    f"{'/'.join(parts[:depth])!r} resolves to {real}, a folder it is "
                    "already in (a symlink loop)."
                )
            seen.add(real)
            if real == self.real_root or real.startswith(self.prefix):
                left = reason = None
                continue
            final = depth == len(parts)
            if self.policy is None:
                self.policy = LinkPolicy(self.real_root, self.trusted)
            reason = self.policy.reason(real, final=final, st=st)
            if reason is None:
                raise untrusted_link(
                    self.root,
                    self.real_root,
                    key,
                    self.display("/".join(parts[:depth])),
                    paths.target(here),
                    real,
                    final=final,
                )
            if left is None:
                left = self.display("/".join(parts[:depth])), paths.target(here)
        if left is not None and reason is not None:
            self.links.put(key, Link(key, left[0], left[1], real, reason))
        self._last = real, st
        return real


class RealPaths:
    """``os.path.realpath`` of a path in a real folder, part after part as it does,
    remembering the real folders it met (``lstat``: a folder, no symlink) so that the
    next path through them takes no system call for them: the links of one checkpoint
    into one content store cost one ``readlink`` and one ``lstat`` each. A folder swapped
    for a symlink since it was met is not seen here: only where every file opened is
    checked on its descriptor to be at the path resolved (``remember``:
    ``/proc/self/fd`` tells), otherwise ``os.path.realpath`` looks at every part again.

    Examples
    --------
    >>> RealPaths(True).real_at("/")[0]
    '/'
    """

    def __init__(self, remember: bool) -> None:
        self.remember = remember
        self.folders: BoundedCache[str, None] = BoundedCache(_HELD_LINKS)
        self.targets: dict[str, str] = {}  # the symlinks read by the last real_at

    def target(self, link: str) -> str:
        """What the symlink ``link`` says (read again unless the last :meth:`real_at` read
        it; its own path when it is none)."""
        found = self.targets.get(link)
        return found if found is not None else readlink_or(link)

    def real_at(self, path: str, *, link: bool = False) -> tuple[str, os.stat_result | None]:
        """The real path of ``path``, whose folder is a real path (missing parts taken as
        they are, as ``realpath`` does), and the ``lstat`` of its last part when it exists
        (a real path's last part is no symlink: that is its ``stat``). ``link``: ``path``
        is likely a symlink (a probe just said so): it is read first (``readlink``), which
        tells that too, and looked at otherwise."""
        self.targets.clear()
        if self.remember:
            folder, sep, name = path.rpartition(os.sep)
            if link:
                try:
                    target = os.readlink(path)
                except OSError:
                    pass  # no symlink (any more), or gone: the whole walk below
                else:
                    self.targets[path] = target
                    real, st, ok = self._join(folder or sep, target, {path: None})
                    if ok:
                        return real, st
            real, st, ok = self._join(folder or sep, name, {})
            if ok:
                return real, st
        real = os.path.realpath(path)  # also a loop of symlinks, as realpath gives it
        try:
            return real, os.lstat(real)
        except (OSError, ValueError):
            return real, None

    def _join(
        self, path: str, rest: str, seen: dict[str, str | None]
    ) -> tuple[str, os.stat_result | None, bool]:
        """posixpath's ``_joinrealpath`` (not strict) from the real path ``path``, with
        the folders remembered; False when it meets a loop of symlinks."""
        sep = os.sep
        if rest.startswith(sep):
            path = sep
        names = rest.split(sep)
        last = len(names) - 1
        folders = self.folders
        st: os.stat_result | None = None
        for i, name in enumerate(names):
            if not name or name == ".":
                continue
            if name == "..":
                if path != sep:
                    path = path[: path.rindex(sep)] or sep
                st = None
                continue
            new = sep + name if path == sep else path + sep + name
            if new in folders:
                path, st = new, None
                continue
            try:
                st = os.lstat(new)
            except (OSError, ValueError):
                path, st = new, None  # missing (or unreadable): taken as it is
                continue
            if not stat.S_ISLNK(st.st_mode):
                if i < last and stat.S_ISDIR(st.st_mode):  # a folder passed through
                    folders.put(new, None)
                path = new
                continue
            if new in seen:
                found = seen[new]
                if found is None:
                    return new, None, False  # a loop
                path, st = found, None
                continue
            seen[new] = None
            try:
                target = os.readlink(new)
            except OSError:
                path, st = new, None
                continue
            self.targets[new] = target
            path, st, ok = self._join(path, target, seen)
            if not ok:
                return path, None, False
            seen[new] = path
        if st is None and path != sep:
            try:
                st = os.lstat(path)
            except (OSError, ValueError):
                st = None
        return path, st, True


class LinkPolicy:
    """Which real paths out of one checkpoint root may be read (see the module).

    Parameters
    ----------
    real_root : str
        The checkpoint's real path (``os.path.realpath``).
    trusted : tuple of str
        Absolute trusted paths (resolved here).

    Examples
    --------
    >>> policy = LinkPolicy("/c/models--a--b/snapshots/0123", ())       # doctest: +SKIP
    >>> policy.reason("/c/models--a--b/blobs/" + "0" * 64, final=True)  # doctest: +SKIP
    'a blob of the Hugging Face cache /c/models--a--b'
    """

    def __init__(self, real_root: str, trusted: tuple[str, ...]) -> None:
        self.real_root = real_root
        self.trusted = tuple(os.path.realpath(p) for p in trusted) if trusted else ()
        self._stores: list[tuple[str, str]] | None = None  # (kind, real folder), on demand
        # the Hugging Face blobs/ folder the root's real path names (no system call), if
        # any: "<blobs>/", and the reason a blob of it gives
        self._hf_files, self._hf_reason = hf_files(real_root)

    def reason(self, real: str, *, final: bool, st: object = None) -> str | None:
        """Why ``real`` (a real path outside the root) may be read, or None when it may
        not. ``final``: it is the key's file (a content store holds files only; a trusted
        path may hold the folders a key passes through too). ``st``: its ``lstat`` when
        known (None: looked at here).

        A file of the ``blobs/`` folder that the root's real path names is answered
        before the folders above the root are looked at: ``real``, a real path, holds no
        symlink, so that ``blobs/`` is then a real folder, as :func:`_find_stores` checks
        (the answer is the one the list of stores gives, where the cache comes first)."""
        for path in self.trusted:
            if real == path or real.startswith(path.rstrip(os.sep) + os.sep):
                return f"below the trusted path {path}"
        if not final:
            return None
        files = self._hf_files  # "<blobs>/": a blob is one name of hex digits there
        if (
            files is not None
            and real.startswith(files)
            and HF_BLOB.fullmatch(real, len(files)) is not None
            and _regular(real, st)
        ):
            return self._hf_reason
        for kind, folder in self.stores():
            rest = real[len(folder) + 1 :] if real.startswith(folder + os.sep) else None
            if rest is not None and _fits(kind, rest.split(os.sep)) and _regular(real, st):
                return f"a {_KINDS[kind]} {os.path.dirname(folder) if kind == 'hf' else folder}"
        return None

    def stores(self) -> list[tuple[str, str]]:
        """``(kind, real folder)`` of the content stores that hold the checkpoint."""
        if self._stores is None:
            self._stores = _find_stores(self.real_root)
        return self._stores


_KINDS = {
    "hf": "blob of the Hugging Face cache",
    "annex": "git-annex object of",
    "dvc": "file of the DVC cache",
}


def _fits(kind: str, parts: list[str]) -> bool:
    """Whether the path of a file below a store's folder has that store's structure."""
    if kind == "hf":
        return len(parts) == 1 and HF_BLOB.fullmatch(parts[0]) is not None
    if kind == "annex":
        return (
            len(parts) == 4
            and parts[2] == parts[3]
            and "-" in parts[2]
            and all(_ANNEX_HASH_DIR.fullmatch(p) for p in parts[:2])
        )
    if parts[:2] == ["files", "md5"]:
        parts = parts[2:]
    return (
        len(parts) == 2
        and _HEX2.fullmatch(parts[0]) is not None
        and _HEX30.fullmatch(parts[1]) is not None
    )


def _regular(real: str, st: object = None) -> bool:
    """A regular file, or nothing (a link to a missing blob is a missing file); ``st``:
    its ``lstat`` when known."""
    if type(st) is os.stat_result:
        return stat.S_ISREG(st.st_mode)
    try:
        return stat.S_ISREG(os.lstat(real).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _real_dir(path: str) -> bool:
    """A folder that is no symlink."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _hf_blobs(real_root: str) -> str | None:
    """The ``blobs/`` folder of the Hugging Face cache that ``real_root`` is a snapshot of
    (or is in), by its path alone: ``<repo>/snapshots/<rev>[/...]``, the nearest such
    ``snapshots``; None when the path is no such snapshot. A function of the string
    (no system call), remembered: a store and its link policy ask it on each open."""
    if real_root in _BLOBS_OF:
        return _BLOBS_OF[real_root]
    found = None
    parts = real_root.split(os.sep)
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "snapshots" and parts[i + 1] and _HF_REPO.fullmatch(parts[i - 1]):
            found = os.path.join(os.sep.join(parts[:i]) or os.sep, "blobs")
            break
    return _BLOBS_OF.put(real_root, found)


# real root -> _hf_blobs of it (bounded)
_BLOBS_OF: BoundedCache[str, str | None] = BoundedCache(256)


def hf_files(real_root: str) -> tuple[str | None, str]:
    """``(<blobs>/, the reason its files may be read)`` of :func:`_hf_blobs`; None and
    an empty reason when the root is in no snapshot."""
    blobs = _hf_blobs(real_root)
    if blobs is None:
        return None, ""
    return blobs + os.sep, f"a {_KINDS['hf']} {os.path.dirname(blobs)}"


def _find_stores(real_root: str) -> list[tuple[str, str]]:
    """The content stores above ``real_root`` (see the module for each rule)."""
    found = []
    # Hugging Face: <repo>/snapshots/<rev>[/...], the nearest such "snapshots"
    blobs = _hf_blobs(real_root)
    if blobs is not None and _real_dir(blobs):
        found.append(("hf", blobs))
    git = dvc = False
    here = real_root
    while not (git and dvc):
        up = os.path.dirname(here)
        if up == here:
            break
        here = up
        if not git and os.path.lexists(os.path.join(here, ".git")):
            git = True  # the nearest repository decides, whatever its .git is
            objects = os.path.join(here, ".git", "annex", "objects")
            if all(
                _real_dir(p)
                for p in (os.path.join(here, ".git"), os.path.dirname(objects), objects)
            ):
                found.append(("annex", objects))
        if not dvc and _real_dir(os.path.join(here, ".dvc")):
            dvc = True
            found.extend(("dvc", cache) for cache in _dvc_caches(os.path.join(here, ".dvc")))
    return found


def _dvc_caches(dot_dvc: str) -> list[str]:
    """The real cache folders of a DVC repository: the configured one, and the default."""
    caches = []
    for name in ("config.local", "config"):
        configured = _dvc_cache_dir(os.path.join(dot_dvc, name))
        if configured is not None:
            caches.append(os.path.realpath(os.path.join(dot_dvc, configured)))
            break
    default = os.path.join(dot_dvc, "cache")
    if _real_dir(default):
        caches.append(default)
    return [c for c in caches if os.path.isdir(c)]


def _dvc_cache_dir(config: str) -> str | None:
    """The ``dir`` of the ``[cache]`` section of a DVC config file (INI), if any."""
    try:
        fd = os.open(config, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, _DVC_CONFIG_BYTES).decode("utf-8", "replace")
    finally:
        os.close(fd)
    section = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]").strip().strip("'\"")
        elif section == "cache" and "=" in line:
            name, _, value = line.partition("=")
            if name.strip() == "dir" and value.strip():
                return value.strip().strip("'\"")
    return None


def untrusted_link(
    root: str, real_root: str, key: str, link: str, target: str, real: str, *, final: bool
) -> UntrustedLinkError:
    """The error for a key that leaves the root through ``link`` to an untrusted place."""
    folder = os.path.dirname(real) if final else real
    return UntrustedLinkError(
        f"refusing key {key!r} in {root}: it resolves to {real}, outside the checkpoint "
        f"root {real_root}, through the symlink {link} -> {target!r}, which leads into "
        "no content store holding the checkpoint (a Hugging Face cache, git-annex or DVC). "
        f"To read files there, trust that folder: call tdview.trust_paths({folder!r}) or "
        f"set {TRUSTED_PATHS_ENV}={shlex.quote(folder)}, then open the checkpoint again "
        "(tdview never writes through such a link)."
    )


def plain_target(folder: str, target: str) -> str | None:
    """The path a symlink in the real folder ``folder`` (with a trailing separator) that
    says ``target`` names, when ``target`` is some ``..`` then plain names (a real
    folder's ``..`` is its parent: no system call); None for any other target (``.``,
    ``//``, a name starting with a dot: the per-key path resolves those).

    Examples
    --------
    >>> plain_target("/c/models--a--b/snapshots/0123/", "../../blobs/f00d")
    '/c/models--a--b/blobs/f00d'
    >>> plain_target("/c/d/", "../x/../y") is None
    True
    """
    sep = os.sep
    if target[:1] == sep:
        base, rest = "", target[1:]
    else:
        rest = target.lstrip("./")
        ups = len(target) - len(rest)
        if target[:ups] != "../" * (ups // 3) or ups % 3:
            return None  # "./", "..." or a dot name: not the plain form
        base = folder[:-1].rsplit(sep, ups // 3)[0] if ups else folder[:-1]
    if (
        not rest
        or rest[0] == "."
        or "/." in rest
        or "//" in rest
        or rest[-1] == sep
        or ("\x00" in rest)
    ):
        return None
    return base + sep + rest
