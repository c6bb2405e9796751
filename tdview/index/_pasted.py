"""What users paste into the search box, read as the key it names before the search
rules of :mod:`._match` apply.

The rules are written once more in TypeScript (``readPattern`` in
``js/src/search-match.ts``); both are checked against the ``notes`` of
``tests/search_cases.json``.

* A **key tuple**, as the widget copies it: ``("model", "layers", "0")`` (or a list, or
  ``'``-quoted strings; Python's escapes ``\\n``, ``\\xNN``, ``\\uNNNN``...).
* A **bracket form**, as code spells it: ``model['layers']['0']``,
  ``state_dict["layers.0.linear1.weight"]``, ``td["a"][0]``. The name before the first
  ``[`` is a Python variable, not a key: it is dropped.

Either is a **key path**, matched whole: a node matches when its state_dict spelling
ends with the keys joined by ``.`` at a key boundary. So ``state_dict['layers.0.w']``
finds the one key ``layers.0.w`` of a flat ``TensorDict(model.state_dict())`` and the
node ``layers/0/w`` of a ``TensorDict.from_module`` tree; ``td['model']`` finds keys
named ``model``, never ``model_ema``.

Then any pattern (a key path, a plain pattern or a glob) drops the prefixes that
PyTorch's wrappers add to parameter names, ``module.`` (DistributedDataParallel) and
``_orig_mod.`` (``torch.compile``), spelled with ``.`` or ``/``, at its start (after an
anchoring ``/``), as many as lead it, while something is left: they are matched as if
absent. Each reading is said in ``notes``, which the search reply carries.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["Reading", "read_pattern"]

#: A Python string literal, ``'`` or ``"`` quoted, with backslash escapes.
_STRING = r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\""""
_WS = "[ \t\r\n]*"  # not ``\s``: JavaScript's differs
_ITEMS = rf"{_WS}(?:{_STRING})(?:{_WS},{_WS}(?:{_STRING}))*{_WS},?{_WS}"
_TUPLE = re.compile(rf"\({_ITEMS}\)|\[{_ITEMS}\]", re.S)
_NAME = "[A-Za-z_][A-Za-z0-9_]*"
_SUBSCRIPT = rf"{_WS}\[{_WS}(?:{_STRING}|[0-9]+){_WS}\]"
_BRACKETS = re.compile(rf"({_NAME}(?:\.{_NAME})*)((?:{_SUBSCRIPT})+)", re.S)
_PART = re.compile(rf"{_STRING}|[0-9]+", re.S)
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.S)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", "'": "'", '"': '"'}
#: Prefixes of parameter names added by PyTorch wrappers, and who adds them.
PREFIXES = {"module": "DistributedDataParallel", "_orig_mod": "torch.compile"}
_PREFIX = re.compile(r"(module|_orig_mod)[./]")


class Reading(NamedTuple):
    """A pattern as read: ``text``, what the rules of :mod:`._match` take; ``keys``, a
    key path's keys joined by ``.`` when the pattern named one (then matched whole, not
    by those rules); ``notes``, what the reading did, for people."""

    text: str
    keys: str | None
    notes: tuple[str, ...]


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] in "xuU" and len(code) > 1 and int(code[1:], 16) <= 0x10FFFF:
        return chr(int(code[1:], 16))
    return _SIMPLE.get(code, "\\" + code)  # an unknown escape keeps its backslash


def _literal(token: str) -> str:
    """The text of a string literal token (a run of digits: itself, an index)."""
    if token[0] not in "'\"":
        return token
    text = _ESCAPE.sub(_unescape, token[1:-1])
    # ``"\ud83d\ude00"`` (how JSON writes one character) is one character, as in JavaScript
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _key_path(text: str) -> tuple[list[str], str] | None:
    """The keys a pasted tuple or bracket form names and the note that says so; None:
    neither."""
    if _TUPLE.fullmatch(text):
        keys = [_literal(t) for t in _PART.findall(text[1:-1])]
        return keys, f"read as the key {'/'.join(keys)}"
    found = _BRACKETS.fullmatch(text)
    if found:
        keys = [_literal(t) for t in _PART.findall(found.group(2))]
        return keys, f"read as the key {'/'.join(keys)} ({found.group(1)} is a variable)"
    return None


def _drop_prefixes(text: str) -> tuple[str, list[str]]:
    """``text`` without its leading wrapper prefixes (after an anchoring ``/``), and
    the names dropped, in order (each once)."""
    anchor = "/" if text.startswith("/") else ""
    body = text[len(anchor) :]
    dropped: list[str] = []
    while (found := _PREFIX.match(body)) and body[found.end() :].strip("./"):
        body = body[found.end() :]
        if found.group(1) not in dropped:
            dropped.append(found.group(1))
    return anchor + body, dropped


def read_pattern(pattern: str) -> Reading:
    """What ``pattern`` asks for (see the module docstring).

    Examples
    --------
    >>> read_pattern('("model", "layers", "0")')
    Reading(text='model.layers.0', keys='model.layers.0', notes=('read as the key model/layers/0',))
    >>> read_pattern("module.layers.0.weight").text
    'layers.0.weight'
    """
    text = pattern.strip()
    notes: list[str] = []
    path = _key_path(text)
    if path is not None:
        keys, note = path
        text = ".".join(keys)
        notes.append(note)
    text, dropped = _drop_prefixes(text)
    notes += [f"matched without the {name}. prefix ({PREFIXES[name]})" for name in dropped]
    return Reading(text, text if path is not None else None, tuple(notes))
