"""Nested keys and ``"a/b"`` paths, normalized the one way both the index and load use."""

from __future__ import annotations

NestedPath = tuple[str, ...]

_END = object()
_BAD_SUBPATH = "subpath must be a string path or a (nested) tuple of strings."


def normalize_subpath(subpath: object) -> NestedPath:
    """Turn ``"a/b"``, ``"a"``, ``("a", "b")`` or ``(("a",), "b")`` into ``("a", "b")``.

    A string is split on ``/`` with empty parts dropped (``""`` is the root); a tuple
    is flattened. Anything else, or an empty tuple, raises ``ValueError``.

    Examples
    --------
    >>> normalize_subpath("/model//layers/0/")
    ('model', 'layers', '0')
    >>> normalize_subpath((("model",), "layers"))
    ('model', 'layers')
    """
    if isinstance(subpath, str):
        return tuple(part for part in subpath.split("/") if part)
    if not (isinstance(subpath, tuple) and subpath):
        raise ValueError(_BAD_SUBPATH)
    flat: list[str] = []
    stack = [iter(subpath)]  # iterative: a tuple nested 10,000 deep is no RecursionError
    while stack:
        part = next(stack[-1], _END)
        if part is _END:
            stack.pop()
        elif isinstance(part, str):
            flat.append(part)
        elif isinstance(part, tuple) and part:
            stack.append(iter(part))
        else:
            raise ValueError(_BAD_SUBPATH)
    return tuple(flat)


#: Characters of one key, and of a whole path, that :func:`show_path` shows.
MAX_SHOWN_KEY, MAX_SHOWN_PATH = 120, 400


def show_path(path: NestedPath) -> str:
    """The ``"a/b"`` spelling of a path, for messages (``"<root>"`` for the root): a key
    longer than 120 characters, and a path longer than 400, is cut (``…``), however long
    the key a checkpoint or a request holds.

    Examples
    --------
    >>> show_path(("model", "k" * 1000))[:10], len(show_path(("model", "k" * 1000)))
    ('model/kkkk', 127)
    """
    if not path:
        return "<root>"
    text = "/".join(
        key if len(key) <= MAX_SHOWN_KEY else key[:MAX_SHOWN_KEY] + "…"
        for key in path[:MAX_SHOWN_PATH]
    )
    return text if len(text) <= MAX_SHOWN_PATH else text[:MAX_SHOWN_PATH] + "…"


def join_key(*parts: str) -> str:
    """Join store keys, skipping empty parts (``""`` is the store root)."""
    if len(parts) == 2:  # the common case, once per leaf: no generator
        head, tail = parts
        return f"{head}/{tail}" if head and tail else head or tail
    return "/".join(part for part in parts if part)
