"""How a directory store resolves its keys: confined to the root, and out of it only
through a symlink the link policy allows, for reading only.

A key whose real path stays inside the root is read as it is. A key whose real path
leaves the root is read only when the :class:`~._content_stores.LinkPolicy` says so: a
content-addressed store that holds the checkpoint (Hugging Face cache, git-annex, DVC;
the rules are in :mod:`._content_stores`) or a trusted path (:mod:`._trust`). Every other
link out of the root is refused (:class:`~tdview.errors.UntrustedLinkError`, naming the
link, its target and how to trust it). tdview never writes through a link that leaves
the root, whichever rule let it read the file.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Callable, Iterable
from typing import NamedTuple

from .._cache import BoundedCache
from ..errors import UnsafeCheckpointError, UntrustedLinkError
from ._checked import proc_names, readlink_or
from ._content_stores import LinkPolicy
from ._trust import TRUSTED_PATHS_ENV

__all__ = ["Link", "LinkResolver", "plain_target", "untrusted_link"]

# Keys read through a link out of the root, kept per store (dropped all at once beyond).
_HELD_LINKS = 16384
_new_tuple = tuple.__new__


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
