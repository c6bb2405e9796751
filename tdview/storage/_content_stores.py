"""The content-addressed stores whose files a checkpoint's symlinks may lead to, for
reading only (see :mod:`._links`), and the :class:`LinkPolicy` that answers for one root.

A store is recognised by its structure from the root's real path (never from the link's
words alone):

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

The folders these rules climb to are above the checkpoint root, so a checkpoint cannot
make one up: a ``.git`` or ``.dvc`` folder inside the root is the checkpoint's own (links
into it stay inside the root and are followed anyway). A trusted path (:mod:`._trust`)
may hold the folders a key passes through too.
"""

from __future__ import annotations

import os
import re
import stat

from .._cache import BoundedCache

__all__ = ["HF_BLOB", "LinkPolicy", "hf_files"]

_HF_REPO = re.compile(r"(models|datasets|spaces)--.+")
#: The name of a blob in the Hugging Face cache: a git (SHA-1) or a SHA-256 hash.
HF_BLOB = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_ANNEX_HASH_DIR = re.compile(r"[0-9A-Za-z]{2,3}")
_HEX2 = re.compile(r"[0-9a-f]{2}")
_HEX30 = re.compile(r"[0-9a-f]{30}")
_DVC_CONFIG_BYTES = 1 << 16


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
