"""Keys and values as text for people: escaped and bounded, in one place.

A checkpoint's keys and values are data. Printed raw, a key holding
``"\\x1b]2;PWNED\\x07\\x1b[2J"`` retitles and clears the user's terminal, and a
right-to-left override makes ``"gpj.exe"`` read as ``"exe.jpg"``. Every text rendering
(``tdview tree``, the widget's ``text/plain`` and ``text/html`` fallbacks, error
messages) goes through :func:`printable`, which shows such characters as their escapes
(``\\x1b``, ``\\u202e``), visibly; the protocol's JSON keeps the real key. Every value
echoed in an error message goes through :func:`echo`, which is bounded however long or
deep the value is (a 50 MB key, a list nested 10,000 deep).
"""

from __future__ import annotations

import reprlib
import unicodedata
from itertools import islice

__all__ = ["MAX_ECHO", "MAX_MESSAGE", "clip", "echo", "error_text", "printable"]

#: Characters of one value echoed in an error message.
MAX_ECHO = 120
#: Characters of one error message shown (a reply's, the command line's).
MAX_MESSAGE = 4000

# Bidirectional controls (embeddings, overrides, isolates, marks) and invisible
# characters that make one text look like another.
_INVISIBLE = frozenset(
    "\u061c\u200b\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\ufeff"
)
# Other, Control / Surrogate; Separator, Line / Paragraph.
_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})


_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    code = ord(char)
    if char in _SHORT:
        return _SHORT[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str, limit: int | None = None) -> str:
    r"""``text`` with control, bidirectional and invisible characters escaped, visibly.

    Escaped: C0 and C1 controls (newline and tab included: one key is one line), DEL,
    lone surrogates (they have no UTF-8 form), line and paragraph separators, the
    bidirectional embeddings, overrides, isolates and marks, and zero-width characters.
    Everything else, non-ASCII letters included, is kept. ``limit``: at most that many
    characters of ``text`` are shown, then ``… (N more characters)``.

    Examples
    --------
    >>> printable("\x1b]2;PWNED\x07\x1b[2J")
    '\\x1b]2;PWNED\\x07\\x1b[2J'
    >>> printable("gpj.\u202eexe")
    'gpj.\\u202eexe'
    >>> printable("poids_é")
    'poids_é'
    >>> printable("k" * 10, limit=4)
    'kkkk… (6 more characters)'
    """
    if limit is not None and len(text) > limit:
        return printable(text[:limit]) + f"… ({len(text) - limit:,} more characters)"
    if text.isprintable():  # no control, format, surrogate or separator other than " "
        return text
    return "".join(
        _escape(c) if c in _INVISIBLE or unicodedata.category(c) in _CATEGORIES else c for c in text
    )


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out.

    Examples
    --------
    >>> clip("abcdef", 3)
    'abc… (3 more characters)'
    """
    if len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit:,} more characters)"


class _Echo(reprlib.Repr):
    """``repr`` bounded in depth, items and string length (reprlib: recursion stops at
    ``maxlevel``), never raising."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 4
        self.maxstring = self.maxother = self.maxlong = MAX_ECHO
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = 8

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 256:  # str() of a very long int is slow, or refused
            return f"<an int of {x.bit_length():,} bits>"
        return super().repr_int(x, level)

    def repr_dict(self, x: dict, level: int) -> str:  # in insertion order, not sorted
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        pieces = [
            f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
            for k, v in islice(x.items(), self.maxdict)
        ]
        return "{" + ", ".join(pieces) + (", ...}" if len(x) > self.maxdict else "}")

    def repr_instance(self, x: object, level: int) -> str:
        try:
            text = repr(x)
        except Exception:  # noqa: BLE001 - an echo must not raise
            return f"<{type(x).__name__}>"
        return clip(text, self.maxother)


_ECHO = _Echo()


def echo(value: object, limit: int = MAX_ECHO) -> str:
    r"""A value as an error message shows it: its ``repr``, bounded (at most ``limit``
    characters; strings are cut before they are copied, containers at 4 levels and 8
    items) and escaped (:func:`printable`). Never raises.

    Examples
    --------
    >>> echo("k" * 10**8)[:12], len(echo("k" * 10**8)) <= 130
    ("'kkkkkkkkkkk", True)
    >>> deep = []
    >>> for _ in range(10_000):
    ...     deep = [deep]
    >>> echo(deep)
    '[[[[[...]]]]]'
    >>> echo(10**5000)
    '<an int of 16,610 bits>'
    """
    try:
        text = _ECHO.repr(value)
    except Exception:  # noqa: BLE001 - an echo must not raise
        text = f"<{type(value).__name__}>"
    return printable(text[:limit] + "..." if len(text) > limit else text)


def error_text(error: BaseException, limit: int = MAX_MESSAGE) -> str:
    r"""An exception's message as it is shown to a user: ``str(error)`` (its class name
    when that is empty or fails), escaped and cut to ``limit`` characters. Never raises.

    Examples
    --------
    >>> print(error_text(ValueError("bad key \x1b[2J")))
    bad key \x1b[2J
    >>> error_text(KeyError())
    'KeyError'
    """
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - the message of a hostile value may not print
        text = ""
    return printable(text or type(error).__name__, limit=limit)
