"""The trusted paths: folders (or files) outside a checkpoint root whose files a
directory store may read through a symlink (see :mod:`._links`): given to
:func:`trust_paths` or listed in the ``TDVIEW_TRUSTED_PATHS`` environment variable
(``os.pathsep``-separated). Folders linked from the checkpoint may lead there too, not
only files.
"""

from __future__ import annotations

import os

__all__ = ["TRUSTED_PATHS_ENV", "trust_paths", "trusted_paths"]

#: The environment variable listing trusted paths (``os.pathsep``-separated).
TRUSTED_PATHS_ENV = "TDVIEW_TRUSTED_PATHS"
# Paths added by trust_paths, in order, absolute (resolved when a store is opened).
_ADDED: list[str] = []


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
    :mod:`tdview.storage._content_stores`). This trusts more places for this process, as the
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
