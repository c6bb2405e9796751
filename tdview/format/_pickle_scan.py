"""Listing what a pickle would import, without unpickling it.

``other.pickle`` and ``pickle.pkl`` hold pickled Python values. Before anyone
decides to unpickle them, tdview shows which globals (``module.name``) the pickle
refers to: every ``GLOBAL``/``INST`` argument and every ``STACK_GLOBAL`` whose
module and name strings can be traced. The opcodes are walked with
:func:`pickletools.genops` (which only decodes arguments) while a small abstract
stack and memo follow the string constants; nothing is imported or called.
"""

from __future__ import annotations

import pickletools
from dataclasses import dataclass
from typing import Any

from ..errors import CheckpointFormatError

__all__ = ["PickleInfo", "scan_pickle"]

_MARK = object()
_UNKNOWN = object()
_STRING_OPS = frozenset(
    {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "SHORT_BINUNICODE",
     "BINUNICODE", "BINUNICODE8"}
)  # fmt: skip
_GET_OPS = frozenset({"GET", "BINGET", "LONG_BINGET"})
_PUT_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_EXT_OPS = frozenset({"EXT1", "EXT2", "EXT4"})


@dataclass(frozen=True)
class PickleInfo:
    """What a pickle refers to.

    Attributes
    ----------
    size : int
        Bytes scanned (the whole input).
    globals : tuple of (str, str)
        ``(module, name)`` pairs in first-use order, without repeats. A
        ``STACK_GLOBAL`` whose strings cannot be traced gives ``("?", "?")``; an
        extension-registry code gives ``("copyreg.extension", "<code>")``.
    protocol : int
        The ``PROTO`` argument, else the highest protocol of the opcodes seen.
    persistent_ids : bool
        Whether ``PERSID``/``BINPERSID`` occur (plain ``pickle.load`` rejects them).
    end : int
        Offset just past ``STOP``; bytes after it are ignored by ``pickle.load``.
    """

    size: int
    globals: tuple[tuple[str, str], ...]
    protocol: int
    persistent_ids: bool
    end: int

    @property
    def is_plain_data(self) -> bool:
        """No globals and no persistent ids: unpickling builds only builtin values."""
        return not self.globals and not self.persistent_ids


class _Scan:
    """The abstract machine: a stack of string constants and unknowns, and a memo."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.stack: list[Any] = []
        self.memo: dict[int, Any] = {}
        self.found: dict[tuple[str, str], None] = {}
        self.persistent = False

    def bad(self, pos: int, problem: str) -> CheckpointFormatError:
        return CheckpointFormatError(f"{self.where}: malformed pickle at byte {pos}: {problem}")

    def pop(self, count: int, pos: int, name: str) -> list[Any]:
        if count > len(self.stack) or _MARK in self.stack[len(self.stack) - count :]:
            raise self.bad(pos, f"{name} needs {count} stack items")
        if not count:
            return []
        items = self.stack[-count:]
        del self.stack[-count:]
        return items

    def pop_mark(self, pos: int, name: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i] is _MARK:
                del self.stack[i:]
                return
        raise self.bad(pos, f"{name} without a MARK")

    def step(self, op: pickletools.OpcodeInfo, arg: Any, pos: int) -> None:
        name = op.name
        before = [s.name for s in op.stack_before]
        if "mark" in before:
            self.pop_mark(pos, name)
            self.pop(before.index("mark"), pos, name)
        elif name not in ("MEMOIZE", "STACK_GLOBAL", "DUP"):
            self.pop(len(before), pos, name)
        if name in _STRING_OPS:
            self.stack.append(arg if isinstance(arg, str) else _UNKNOWN)
        elif name in _GET_OPS:
            if arg not in self.memo:
                raise self.bad(pos, f"{name} of memo key {arg} that was never stored")
            self.stack.append(self.memo[arg])
        elif name in _PUT_OPS or name == "MEMOIZE":
            top = self.pop(1, pos, name)[0]
            self.stack.append(top)
            self.memo[len(self.memo) if name == "MEMOIZE" else arg] = top
        elif name == "DUP":
            top = self.pop(1, pos, name)[0]
            self.stack += [top, top]
        elif name in ("GLOBAL", "INST"):
            module, _, attr = str(arg).partition(" ")
            self.found.setdefault((module, attr), None)
            self.stack.append(_UNKNOWN)
        elif name == "STACK_GLOBAL":
            module, attr = self.pop(2, pos, name)
            ok = isinstance(module, str) and isinstance(attr, str)
            self.found.setdefault((module, attr) if ok else ("?", "?"), None)
            self.stack.append(_UNKNOWN)
        elif name in _EXT_OPS:
            self.found.setdefault(("copyreg.extension", str(arg)), None)
            self.stack.append(_UNKNOWN)
        else:
            if name in ("PERSID", "BINPERSID"):
                self.persistent = True
            self.stack += [_MARK if s.name == "mark" else _UNKNOWN for s in op.stack_after]


def scan_pickle(data: bytes, where: str) -> PickleInfo:
    """List the globals a pickle refers to, without executing it.

    Parameters
    ----------
    data : bytes
        The whole pickle file (the caller bounds its size).
    where : str
        The file's location, for error messages.

    Returns
    -------
    PickleInfo

    Raises
    ------
    CheckpointFormatError
        The bytes are not a well-formed pickle (bad opcode, truncated argument,
        no ``STOP``, stack or memo misuse).

    Examples
    --------
    >>> import pickle, collections
    >>> scan_pickle(pickle.dumps({"a": collections.OrderedDict()}), "other.pickle").globals
    (('collections', 'OrderedDict'),)
    """
    data = bytes(data)
    scan = _Scan(where)
    protocol, highest, end = None, 0, None
    ops = pickletools.genops(data)
    while True:
        try:
            item = next(ops, None)
        except Exception as exc:  # genops raises ValueError and friends on bad input
            raise CheckpointFormatError(f"{where}: malformed pickle: {exc}") from None
        if item is None:
            break
        op, arg, pos = item
        pos = pos or 0
        highest = max(highest, op.proto)
        if op.name == "PROTO":
            if protocol is not None:
                raise scan.bad(pos, "a second PROTO opcode")
            protocol = arg
        scan.step(op, arg, pos)
        if op.name == "STOP":
            end = pos + 1
    if end is None:
        raise CheckpointFormatError(f"{where}: malformed pickle: no STOP opcode")
    return PickleInfo(
        size=len(data),
        globals=tuple(scan.found),
        protocol=protocol if protocol is not None else highest,
        persistent_ids=scan.persistent,
        end=end,
    )
