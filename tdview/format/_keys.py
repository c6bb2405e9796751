"""The key codec: tensordict keys <-> file and directory names (*Key encoding* in
:mod:`tdview.format`).

Robust encoding (every writer since 0.14, and the default on read) maps a key to a
single path component: ``""`` -> ``%``, ``"."`` -> ``%2E``, ``".."`` -> ``%2E%2E``,
and otherwise each character of ``/ < > : " | ? * \\``, space, ``%``, the controls
0x00-0x1F and DEL 0x7F becomes ``%XX`` (two upper-case hex digits); every other
character, non-ASCII included, is kept. The mapping is injective, so
:func:`decode_name` inverts it.

Older writers used the raw key as the name (the legacy layout). On read, the
robust name is tried first, then the raw key when it is a *safe legacy key*.
"""

from __future__ import annotations

import re

from .._platform import WINDOWS_PATHS

__all__ = [
    "candidate_names",
    "decode_name",
    "encode_key",
    "is_canonical_name",
    "is_safe_legacy_key",
]

_UNSAFE = set('/<>:"|?*\\ %') | {chr(c) for c in range(32)} | {chr(127)}
_ENCODE_TABLE = str.maketrans({c: f"%{ord(c):02X}" for c in _UNSAFE})
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def encode_key(key: str) -> str:
    """Return the robust file-system name of a key (without ``.memmap``).

    Parameters
    ----------
    key : str
        A tensordict key (one level, not a nested tuple).

    Returns
    -------
    str
        A single, non-empty path component that is neither ``.`` nor ``..`` and
        holds no ``/``, ``\\`` or NUL.

    Examples
    --------
    >>> encode_key("a b"), encode_key(""), encode_key(".."), encode_key("ключ")
    ('a%20b', '%', '%2E%2E', 'ключ')
    """
    if not isinstance(key, str):
        raise TypeError(f"a key must be a str, got {type(key).__name__}")
    if not key:
        return "%"
    if key in (".", ".."):
        return "%2E" * len(key)
    return key.translate(_ENCODE_TABLE)


def decode_name(name: str) -> str:
    """Return the key that a file or directory name stands for.

    The generic inverse of :func:`encode_key`: ``"%"`` alone is the empty key and
    each ``%HH`` (two hex digits, either case) is the character U+00HH; any other
    ``%`` stays literal. Meant for tools that list directories; the loader never
    decodes names, it encodes the keys that ``meta.json`` names.

    Parameters
    ----------
    name : str
        A file name without its ``.memmap`` suffix, or a directory name.

    Returns
    -------
    str

    Examples
    --------
    >>> decode_name("a%20b"), decode_name("%"), decode_name("%2E%2E"), decode_name("50%")
    ('a b', '', '..', '50%')
    """
    if name == "%":
        return ""
    if "%" not in name:
        return name
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), name)


def is_canonical_name(name: str) -> bool:
    """Whether ``name`` is exactly what :func:`encode_key` writes for its decoded key.

    A name that is not canonical (``"a b"``, ``"%2f"``) was written by a legacy
    writer, and stands for the raw key ``name``.

    Examples
    --------
    >>> is_canonical_name("a%20b"), is_canonical_name("a b")
    (True, False)
    """
    return encode_key(decode_name(name)) == name


def is_safe_legacy_key(key: str, *, collection: bool) -> bool:
    """Whether a raw key may be used verbatim as a name (the legacy fallback).

    A safe legacy key has no ``/`` or ``\\``, does not start like a Windows drive
    (``C:...``), and, for a collection, is none of ``""``, ``"."`` and ``".."``.
    Additionally (tdview hardening, not in the reference) it holds no NUL.

    Examples
    --------
    >>> is_safe_legacy_key("a b", collection=True), is_safe_legacy_key("..", collection=True)
    (True, False)
    >>> is_safe_legacy_key("", collection=False), is_safe_legacy_key("C:x", collection=False)
    (True, False)
    """
    if "/" in key or "\\" in key or "\0" in key:
        return False
    if _is_drive(key):
        return False
    return not collection or key not in ("", ".", "..")


def candidate_names(key: str, *, robust: bool, collection: bool) -> list[str]:
    """Return the names to try for a key, in order (the first that exists wins).

    A leaf's file is ``<name>.memmap`` (a nested leaf's sizes are in
    ``<name>.shape.memmap``); a collection's directory is ``<name>/``.

    Parameters
    ----------
    key : str
        The entry key from ``meta.json``.
    robust : bool
        ``True`` (the reference's default ``robust_key=None``/``True``): the encoded
        name, then the raw key when it differs and is a safe legacy key.
        ``False``: the raw key only.
    collection : bool
        Whether the entry is a collection (directory) rather than a leaf.

    Returns
    -------
    list of str
        Zero, one or two names. Every name is relative and stays under its
        parent: with ``robust=False`` a raw key that would escape (an empty or
        ``.``/``..`` collection, a ``..`` component, an absolute path, on Windows a
        drive path, a NUL) gives no candidate, where the reference would join it
        verbatim.
        Raw keys with ``/`` in that mode give a multi-component name, as the
        legacy writer did.

    Examples
    --------
    >>> candidate_names("a b", robust=True, collection=False)
    ['a%20b', 'a b']
    >>> candidate_names("a/b", robust=True, collection=True)
    ['a%2Fb']
    >>> candidate_names("..", robust=False, collection=True)
    []
    """
    if robust:
        encoded = encode_key(key)
        names = [encoded]
        if encoded != key and is_safe_legacy_key(key, collection=collection):
            names.append(key)
        return names
    return [key] if _confined_raw(key, collection=collection) else []


def _confined_raw(key: str, *, collection: bool) -> bool:
    """Whether a raw (unencoded) key names something below its parent directory.

    A leaf is checked as its file name ``<key>.memmap``.
    """
    if "\0" in key or key.startswith("/"):
        return False
    name = key if collection else key + ".memmap"
    if WINDOWS_PATHS:  # a backslash separates and a drive prefix escapes there only
        if key.startswith("\\") or _is_drive(key):
            return False
        name = name.replace("\\", "/")
    parts = name.split("/")
    if ".." in parts:
        return False
    # "" or "." (or "a/" / "a/.") would name the parent directory itself
    return parts[-1] not in ("", ".")


def _is_drive(key: str) -> bool:
    """Whether a key starts like a Windows drive (``C:``), which escapes a prefix there."""
    return len(key) >= 2 and key[0].isalpha() and key[1] == ":"
