"""Nested keys and ``"a/b"`` paths, normalized the one way both the index and load use."""

from __future__ import annotations

NestedPath = tuple[str, ...]

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
    if isinstance(subpath, tuple) and subpath:
        flat: list[str] = []
        for part in subpath:
            if isinstance(part, str):
                flat.append(part)
            elif isinstance(part, tuple) and part:
                flat.extend(normalize_subpath(part))
            else:
                raise ValueError(_BAD_SUBPATH)
        return tuple(flat)
    raise ValueError(_BAD_SUBPATH)


def show_path(path: NestedPath) -> str:
    """The ``"a/b"`` spelling of a path, for messages (``"<root>"`` for the root)."""
    return "/".join(path) if path else "<root>"


def join_key(*parts: str) -> str:
    """Join store keys, skipping empty parts (``""`` is the store root)."""
    if len(parts) == 2:  # the common case, once per leaf: no generator
        head, tail = parts
        return f"{head}/{tail}" if head and tail else head or tail
    return "/".join(part for part in parts if part)
