"""Which names and keys a store accepts: none may leave the checkpoint root.

Every key that reaches a store is checked by :func:`check_key`, and every name found
in an archive by :func:`name_problem` (or, for a whole listing, :func:`first_unsafe_name`).

A backslash and a drive prefix (``"C:"``) change what a path means on Windows only. On
other systems, and in an archive (whose names are looked up, never joined to a path),
they are characters of a name like any other, and tensordict writes them: keys such as
``"a:b"`` or ``"a\\b"`` saved with ``robust_key=False`` are file and entry names as they are.
"""

from __future__ import annotations

import errno
import os

from ..errors import UnsafeCheckpointError

__all__ = ["check_key", "first_unsafe_name", "has_file_name", "name_problem", "not_found"]


def name_problem(name: str, *, windows: bool = False) -> str | None:
    """Say why ``name`` cannot be a relative key, or return ``None`` when it can.

    Parameters
    ----------
    name : str
        A non-empty relative key or archive entry name (without a trailing ``/``).
    windows : bool
        The name will be joined to a Windows path: a backslash (a separator there) and a
        drive prefix are refused too.

    Returns
    -------
    str or None
        A short reason such as ``"has a '..' component"``.

    Examples
    --------
    >>> name_problem("nested/b.memmap") is None
    True
    >>> name_problem("../x")
    "has a '..' component"
    >>> name_problem("a:b.memmap") is None, name_problem("a:b.memmap", windows=True)
    (True, 'starts with a drive letter')
    """
    if (
        name
        and name[0] not in "/."
        and name[-1] != "/"
        and "//" not in name
        and "/." not in name
        and "\x00" not in name
        and not (windows and ("\\" in name or name[1:2] == ":"))
        and (name.isascii() or has_file_name(name))
    ):
        return None  # the common name, in a few substring searches
    if not name:
        return "is empty"
    if "\x00" in name:
        return "contains a NUL character"
    if not has_file_name(name):
        return "has no file-name form (it holds a lone surrogate)"
    if windows and "\\" in name:
        return "contains a backslash (a separator on Windows)"
    if name[0] == "/":
        return "is absolute"
    if windows and len(name) >= 2 and name[1] == ":" and name[0].isascii() and name[0].isalpha():
        return "starts with a drive letter"
    for part in name.split("/"):
        if part == "..":
            return "has a '..' component"
        if part in ("", "."):
            return "has an empty or '.' component"
    return None


def has_file_name(name: str) -> bool:
    """Whether ``name`` can be turned into the bytes of a file name (``os.fsencode``)."""
    try:
        os.fsencode(name)
    except UnicodeEncodeError:
        return False
    return True


def first_unsafe_name(names: list[str]) -> tuple[str, str] | None:
    """Return ``(name, reason)`` for the first unsafe name, or ``None`` if all are safe.

    The names are joined once and searched for every substring an unsafe name must
    contain; only when one is found are the names checked one by one. A 20,000-entry
    archive is checked with a handful of fast substring searches.

    Examples
    --------
    >>> first_unsafe_name(["meta.json", "sub/a.memmap"]) is None
    True
    >>> first_unsafe_name(["meta.json", "sub/../../x"])
    ('sub/../../x', "has a '..' component")
    """
    joined = "\n" + "\n".join(names) + "\n"
    if not any(s in joined for s in _SUSPECT):
        return None
    for name in names:
        problem = name_problem(name)
        if problem is not None:
            return name, problem
    return None


# Every unsafe archive name contains one of these once names are framed by newlines:
# NUL, an empty component ("//", a leading or trailing "/", an empty name), or a
# component starting with "." (covers "." and "..").
_SUSPECT = ("\x00", "//", "\n/", "/\n", "\n\n", "/.", "\n.")


def check_key(key: str, root: str, *, windows: bool = False) -> str:
    """Return ``key`` when it is a safe relative key, else raise.

    Parameters
    ----------
    key : str
        The key to check; ``""`` (the root) is allowed.
    root : str
        The store's root, named in the error message.
    windows : bool
        See :func:`name_problem` (directory stores pass :data:`WINDOWS_PATHS`).

    Raises
    ------
    TypeError
        If ``key`` is not a string.
    UnsafeCheckpointError
        If the key is absolute, has ``..``/``.``/empty components or a NUL (or, with
        ``windows``, a backslash or a drive prefix).

    Examples
    --------
    >>> check_key("sub/a.memmap", "/ckpt")
    'sub/a.memmap'
    """
    if not isinstance(key, str):
        raise TypeError(f"a store key must be a str, got {type(key).__name__}: {key!r}")
    if key:
        problem = name_problem(key, windows=windows)
        if problem is not None:
            raise UnsafeCheckpointError(f"refusing key {key!r} in {root}: the key {problem}.")
    return key


def not_found(display: str) -> FileNotFoundError:
    """Build the builtin error for a missing key, worded like ``open()``'s own."""
    return FileNotFoundError(errno.ENOENT, "No such file or directory", display)
