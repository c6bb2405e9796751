"""Human-readable sizes and shapes, shared by the command line and the static views."""

from __future__ import annotations

from collections.abc import Sequence


def human_bytes(count: int | None) -> str:
    """``1536`` -> ``"1.5 KiB"``; ``None`` -> ``"?"``.

    Examples
    --------
    >>> human_bytes(0), human_bytes(1536), human_bytes(3 * 1024**3)
    ('0 B', '1.5 KiB', '3.0 GiB')
    """
    if count is None:
        return "?"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def shape_text(shape: Sequence[int] | None) -> str:
    """``(2, 3)`` -> ``"[2, 3]"``; ``None`` -> ``"?"``."""
    return "?" if shape is None else "[" + ", ".join(str(int(d)) for d in shape) + "]"


def dtype_text(name: str) -> str:
    """``"torch.float32"`` -> ``"float32"``."""
    return name.removeprefix("torch.")
