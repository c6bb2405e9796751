"""What ``tdview check`` found: :class:`Problem`, :class:`CheckReport`, and its text and
JSON forms (``{"problems": [...], "duplicates": [...], "checked": {...}}``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..index import NestedPath, show_path

#: Each kind of problem, and what it means (the docs and the widget say the same).
KINDS: dict[str, str] = {
    "metadata": "a meta.json or node the index flags (cannot parse, bad numbers, ...)",
    "refused": "a file or folder the store refuses (a symlink out of the root, a FIFO...)",
    "missing": "a leaf's file is absent",
    "empty": "a leaf's file has no byte where data is expected",
    "size": "a leaf's file is shorter or longer than its shape and dtype need",
    "truncated": "the archive, or an entry of it, ends early",
    "crc": "an archive entry's bytes do not match its CRC-32: damaged",
    "stale_crc": "a stored leaf's CRC-32 does not match, as after writes with mode='r+'",
    "corrupt": "a compressed entry does not decompress to what the archive records",
    "unreadable": "reading failed (an I/O error, a refusal while reading)",
    "nan": "a leaf holds NaN values (--values)",
    "inf": "a leaf holds infinite values (--values)",
    "zeros": "every value of a leaf is zero (--values)",
}


#: The counts of ``CheckReport.checked``.
COUNTS = ("checkpoints", "nodes", "leaves", "entries", "bytes", "values", "no_crc")


@dataclass(frozen=True)
class Problem:
    """One problem: the keys from the checkpoint's root, its kind (:data:`KINDS`), and
    a message naming the file and the offending value."""

    path: NestedPath
    kind: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": list(self.path), "kind": self.kind, "message": self.message}


@dataclass
class CheckReport:
    """The report of :func:`tdview.check`.

    Attributes
    ----------
    path : str
        The checkpoint checked.
    subpath : tuple of str
        The node checked (``()``: the whole checkpoint).
    problems : list of Problem
        In the order of the walk (metadata and sizes), then archive entries, then values.
    duplicates : list of list of tuple of str
        Groups of leaves whose payloads are the same bytes (each a list of paths).
    checked : dict
        Counts: ``checkpoints`` (1, or the members of a folder of checkpoints checked),
        ``nodes``, ``leaves``, ``entries`` (archive entries whose CRC-32 was computed),
        ``bytes`` (payload bytes read), ``values`` (leaves whose values were counted)
        and ``no_crc``: leaves of a format that records no CRC-32 (a directory, a
        safetensors, consolidated, HDF5 or zarr file), whose bytes could not be
        verified (their sizes were; their values with ``values``).
    values : bool
        Whether values were read (``--values``).
    """

    path: str
    subpath: NestedPath = ()
    problems: list[Problem] = field(default_factory=list)
    duplicates: list[list[NestedPath]] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    values: bool = False

    @property
    def healthy(self) -> bool:
        """True when no problem was found."""
        return not self.problems

    @property
    def exit_status(self) -> int:
        """0 when healthy, 1 when problems were found (2, could not check, is raised)."""
        return 0 if self.healthy else 1

    def add(self, path: NestedPath, kind: str, message: str) -> None:
        assert kind in KINDS, kind
        self.problems.append(Problem(tuple(path), kind, message))

    def merge(self, other: CheckReport, prefix: NestedPath) -> None:
        """Add the problems and counts of ``other``, the report of a checkpoint whose
        root is at ``prefix`` (a member of the folder this report checks)."""
        for problem in other.problems:
            self.add(tuple(prefix) + problem.path, problem.kind, problem.message)
        for key, value in other.checked.items():
            self.checked[key] += value

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``tdview check --json``).

        Examples
        --------
        >>> report = CheckReport("/ck")
        >>> report.add(("a",), "missing", "the file /ck/a.memmap is missing")
        >>> report.to_dict()["problems"]
        [{'path': ['a'], 'kind': 'missing', 'message': 'the file /ck/a.memmap is missing'}]
        """
        return {
            "problems": [problem.to_dict() for problem in self.problems],
            "duplicates": [[list(path) for path in group] for group in self.duplicates],
            "checked": dict(self.checked),
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    def lines(self) -> list[str]:
        """The text form: one line per problem naming its key, a line per group of
        duplicates, then a summary line."""
        out = [f"{show_path(p.path)}: {p.kind}: {p.message}" for p in self.problems]
        for group in self.duplicates:
            out.append("same bytes: " + ", ".join(show_path(path) for path in group))
        out.append(self.summary())
        return out

    def summary(self) -> str:
        c = self.checked
        found = f"{len(self.problems)} problem{'s' if len(self.problems) != 1 else ''}"
        what = f"{c['leaves']} leaves, {c['entries']} archive entries"
        if self.values:
            what += f", values of {c['values']} leaves"
        where = (
            self.path if c["checkpoints"] < 2 else f"{c['checkpoints']} checkpoints of {self.path}"
        )
        line = f"{'healthy' if self.healthy else found}: checked {what} in {where}"
        if c["no_crc"]:
            line += (
                f"; no CRC-32 recorded for {c['no_crc']} leaves: their sizes checked, "
                "not their bytes"
            )
        return line
