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
import time
from dataclasses import dataclass
from typing import Any

from ..errors import CheckpointFormatError

__all__ = ["SCAN_STOPPED", "PickleInfo", "ScanLimits", "scan_pickle", "unscanned"]

_MARK = object()
_UNKNOWN = object()
_STRING_OPS = frozenset(
    {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "SHORT_BINUNICODE",
     "BINUNICODE", "BINUNICODE8"}
)  # fmt: skip
_GET_OPS = frozenset({"GET", "BINGET", "LONG_BINGET"})
_PUT_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_EXT_OPS = frozenset({"EXT1", "EXT2", "EXT4"})

#: Said wherever pickle facts are shown when a scan stopped before ``STOP``.
SCAN_STOPPED = "too large to scan: imports unknown"
#: Most opcodes one scan walks (a dense pickle has one every byte or two: about a second).
MAX_SCAN_OPCODES = 2_000_000
#: Most bytes one scan walks (callers do not read a larger pickle to scan it).
MAX_SCAN_BYTES = 64 * 1024 * 1024
#: Most seconds one scan takes (checked every few thousand opcodes).
MAX_SCAN_SECONDS = 2.0
_CLOCK_EVERY = 4096


@dataclass(frozen=True)
class ScanLimits:
    """How much work one scan may do: opcodes, bytes (offset in the pickle) and wall
    seconds. A scan past any of them stops and says so (:attr:`PickleInfo.stopped`)."""

    opcodes: int = MAX_SCAN_OPCODES
    bytes: int = MAX_SCAN_BYTES
    seconds: float = MAX_SCAN_SECONDS


@dataclass(frozen=True)
class PickleInfo:
    """What a pickle refers to.

    Attributes
    ----------
    size : int
        Bytes of the pickle (the whole input).
    globals : tuple of (str, str)
        ``(module, name)`` pairs in first-use order, without repeats. A
        ``STACK_GLOBAL`` whose strings cannot be traced gives ``("?", "?")``; an
        extension-registry code gives ``("copyreg.extension", "<code>")``. When the
        scan stopped (:attr:`stopped`), only those found before it stopped.
    protocol : int
        The ``PROTO`` argument, else the highest protocol of the opcodes seen.
    persistent_ids : bool
        Whether ``PERSID``/``BINPERSID`` occur (plain ``pickle.load`` rejects them).
    end : int or None
        Offset just past ``STOP``; bytes after it are ignored by ``pickle.load``. None
        when the scan stopped before it.
    stopped : str or None
        Why the scan stopped before ``STOP`` (``"stopped after 2,000,000 opcodes"``,
        ``"larger than 64.0 MiB"``...): the imports are then unknown. None for a
        complete scan.
    """

    size: int
    globals: tuple[tuple[str, str], ...]
    protocol: int
    persistent_ids: bool
    end: int | None
    stopped: str | None = None

    @property
    def complete(self) -> bool:
        """Whether the scan reached ``STOP``: :attr:`globals` are then all of them."""
        return self.stopped is None

    @property
    def is_plain_data(self) -> bool:
        """No globals and no persistent ids, all opcodes seen: unpickling builds only
        builtin values."""
        return self.complete and not self.globals and not self.persistent_ids

    @property
    def unknown(self) -> str | None:
        """``"too large to scan: imports unknown; why"`` for a scan that stopped, else
        None: the one wording of every view (CLI, widget, collection)."""
        return None if self.stopped is None else f"{SCAN_STOPPED}; {self.stopped}"


def unscanned(size: int, why: str) -> PickleInfo:
    """The :class:`PickleInfo` of a pickle not scanned at all (``why``: too large to read).

    Examples
    --------
    >>> unscanned(1 << 30, "larger than 64 MiB").unknown
    'too large to scan: imports unknown; larger than 64 MiB'
    """
    return PickleInfo(
        size=size, globals=(), protocol=0, persistent_ids=False, end=None, stopped=why
    )


# Per opcode, precomputed from pickletools' stack effects: (what it does, the index of
# its MARK among the items it takes or -1, how many items it takes, what it pushes).
_PLAIN, _STRING, _GET, _PUT, _MEMOIZE, _DUP, _GLOBAL, _STACK_GLOBAL, _EXT = range(9)


def _spec(op: pickletools.OpcodeInfo) -> tuple[int, int, int, tuple[Any, ...]]:
    before = [s.name for s in op.stack_before]
    name = op.name
    kind = (
        _STRING
        if name in _STRING_OPS
        else _GET
        if name in _GET_OPS
        else _PUT
        if name in _PUT_OPS
        else _MEMOIZE
        if name == "MEMOIZE"
        else _DUP
        if name == "DUP"
        else _GLOBAL
        if name in ("GLOBAL", "INST")
        else _STACK_GLOBAL
        if name == "STACK_GLOBAL"
        else _EXT
        if name in _EXT_OPS
        else _PLAIN
    )
    mark = before.index("mark") if "mark" in before else -1
    # MEMOIZE, STACK_GLOBAL and DUP take their items themselves
    take = mark if mark >= 0 else 0 if kind in (_MEMOIZE, _STACK_GLOBAL, _DUP) else len(before)
    after = tuple(_MARK if s.name == "mark" else _UNKNOWN for s in op.stack_after)
    return kind, mark, take, after


_SPECS = {op.name: _spec(op) for op in pickletools.opcodes}


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
        stack = self.stack
        if count > len(stack) or _MARK in stack[len(stack) - count :]:
            raise self.bad(pos, f"{name} needs {count} stack items")
        if not count:
            return []
        items = stack[-count:]
        del stack[-count:]
        return items

    def pop_mark(self, pos: int, name: str) -> None:
        stack = self.stack
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is _MARK:
                del stack[i:]
                return
        raise self.bad(pos, f"{name} without a MARK")

    def step(self, name: str, arg: Any, pos: int) -> None:
        kind, mark, take, after = _SPECS[name]
        if mark >= 0:
            self.pop_mark(pos, name)
        if take:
            self.pop(take, pos, name)
        if kind == _PLAIN:
            if name in ("PERSID", "BINPERSID"):
                self.persistent = True
            self.stack += after
        elif kind == _STRING:
            self.stack.append(arg if isinstance(arg, str) else _UNKNOWN)
        elif kind == _GET:
            if arg not in self.memo:
                raise self.bad(pos, f"{name} of memo key {arg} that was never stored")
            self.stack.append(self.memo[arg])
        elif kind in (_PUT, _MEMOIZE):
            top = self.pop(1, pos, name)[0]
            self.stack.append(top)
            self.memo[len(self.memo) if kind == _MEMOIZE else arg] = top
        elif kind == _DUP:
            top = self.pop(1, pos, name)[0]
            self.stack += [top, top]
        elif kind == _GLOBAL:
            module, _, attr = str(arg).partition(" ")
            self.found.setdefault((module, attr), None)
            self.stack.append(_UNKNOWN)
        elif kind == _STACK_GLOBAL:
            module, attr = self.pop(2, pos, name)
            ok = isinstance(module, str) and isinstance(attr, str)
            self.found.setdefault((module, attr) if ok else ("?", "?"), None)
            self.stack.append(_UNKNOWN)
        else:  # _EXT
            self.found.setdefault(("copyreg.extension", str(arg)), None)
            self.stack.append(_UNKNOWN)


def scan_pickle(data: bytes, where: str, limits: ScanLimits | None = None) -> PickleInfo:
    """List the globals a pickle refers to, without executing it.

    Parameters
    ----------
    data : bytes
        The whole pickle file (the caller bounds its size).
    where : str
        The file's location, for error messages.
    limits : ScanLimits, optional
        How much work the scan may do (default: 2,000,000 opcodes, 64 MiB, 2 seconds).
        A scan past a limit stops: :attr:`PickleInfo.stopped` says which, and the
        imports are unknown (a few dozen hostile kilobytes of deflate can hold tens
        of megabytes of one-byte opcodes).

    Returns
    -------
    PickleInfo

    Raises
    ------
    CheckpointFormatError
        The bytes are not a well-formed pickle (bad opcode, truncated argument,
        no ``STOP``, stack or memo misuse) as far as they were scanned.

    Examples
    --------
    >>> import pickle, collections
    >>> scan_pickle(pickle.dumps({"a": collections.OrderedDict()}), "other.pickle").globals
    (('collections', 'OrderedDict'),)
    >>> scan_pickle(pickle.dumps(list(range(100))), "p", ScanLimits(opcodes=10)).unknown
    'too large to scan: imports unknown; stopped after 10 opcodes'
    """
    limits = limits or ScanLimits()
    if len(data) > limits.bytes:
        return unscanned(len(data), f"larger than {_mib(limits.bytes)}")
    data = bytes(data)
    scan = _Scan(where)
    protocol, highest, end, stopped = None, 0, None, None
    ops = pickletools.genops(data)
    deadline = time.monotonic() + limits.seconds
    count = 0
    while True:
        try:
            item = next(ops, None)
        except Exception as exc:  # noqa: BLE001 - genops raises ValueError and friends on bad input
            raise CheckpointFormatError(f"{where}: malformed pickle: {exc}") from None
        if item is None:
            break
        if count >= limits.opcodes:
            stopped = f"stopped after {count:,} opcodes"
            break
        count += 1
        if not count % _CLOCK_EVERY and time.monotonic() > deadline:
            stopped = f"stopped after {limits.seconds:g} s, at opcode {count:,}"
            break
        op, arg, pos = item
        pos = pos or 0
        highest = max(highest, op.proto)
        if op.name == "PROTO":
            if protocol is not None:
                raise scan.bad(pos, "a second PROTO opcode")
            protocol = arg
        scan.step(op.name, arg, pos)
        if op.name == "STOP":
            end = pos + 1
    if end is None and stopped is None:
        raise CheckpointFormatError(f"{where}: malformed pickle: no STOP opcode")
    return PickleInfo(
        size=len(data),
        globals=tuple(scan.found),
        protocol=protocol if protocol is not None else highest,
        persistent_ids=scan.persistent,
        end=end,
        stopped=stopped,
    )


def _mib(size: int) -> str:
    return f"{size / (1 << 20):g} MiB"
