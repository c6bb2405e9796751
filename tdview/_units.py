"""Human-readable sizes and shapes, shared by the command line and the static views."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal

#: Sizes are decimal (1 KB = 1,000 bytes) everywhere tdview shows one: the widget
#: (js/src/format.ts ``humanBytes``), the command line, the saved text/HTML views and the
#: tour. tests/units_cases.json holds the cases both sides are tested on.
_UNITS = ("B", "KB", "MB", "GB", "TB", "PB")


def human_bytes(count: int | None) -> str:
    """Bytes in powers of 1000, three significant digits (as the widget writes them);
    ``None`` -> ``"?"``.

    Examples
    --------
    >>> human_bytes(0), human_bytes(1536), human_bytes(21_168_000), human_bytes(999_999)
    ('0 B', '1.54 KB', '21.2 MB', '1.00 MB')
    """
    if count is None:
        return "?"
    value, unit = float(count), 0
    while value >= 1000 and unit < len(_UNITS) - 1:
        value /= 1000
        unit += 1
    if unit == 0:
        return f"{int(value)} B"
    rounded = float(_fixed(value, _digits(value)))
    if rounded >= 1000 and unit < len(_UNITS) - 1:  # 999,999 B is 1.00 MB, not 1000 KB
        return f"{_fixed(value / 1000, 2)} {_UNITS[unit + 1]}"
    # 9,999 B rounds to 10 KB: three digits of that ("10.0 KB", not "10.00 KB")
    return f"{_fixed(value, _digits(rounded))} {_UNITS[unit]}"


def _digits(value: float) -> int:
    """Decimals that leave three significant digits."""
    return 0 if value >= 100 else 1 if value >= 10 else 2


def _fixed(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals, a tie rounded up, as JavaScript's ``toFixed``
    rounds (Python's format rounds a tie to even: 1.125 would be 1.12, not 1.13)."""
    return str(Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def shape_text(shape: Sequence[int] | None) -> str:
    """``(2, 3)`` -> ``"[2, 3]"``; ``None`` -> ``"?"``."""
    return "?" if shape is None else "[" + ", ".join(str(int(d)) for d in shape) + "]"


def dtype_text(name: str) -> str:
    """``"torch.float32"`` -> ``"float32"``."""
    return name.removeprefix("torch.")
