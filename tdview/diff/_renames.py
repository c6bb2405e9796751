"""Renames: a removed leaf and an added leaf of the same dtype, shape and fingerprint.

The fingerprint of a leaf is its size and CRC-32: an archive records it in its central
directory (no payload byte read); a file's is computed, only for leaves that could pair
(a removed and an added leaf of one dtype and shape exist). Among leaves of equal
fingerprints, a leaf pairs first with one of the same last key (``layers/0/bias`` moved
to ``blocks/0/bias``), then in load order. The value tier compares a pair's values and
takes back a rename whose values differ (a CRC-32 collision).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..errors import TDViewError
from ._jobs import CRC, Job, Span
from ._result import ADDED, CRC_EQUAL, REMOVED, RENAMED, Row, Spelling
from ._sides import Side
from ._walk import leaf_parts

Signature = tuple[str | None, tuple[int, ...] | None]


def _spelling(old: Row, new: Row) -> Spelling:
    """Each side's real path of a rename whose ends a side spells otherwise."""
    return old.path_a, new.path_b


class Renames:
    """Finds renames among ``rows`` (see the module docstring)."""

    def __init__(self, rows: list[Row], a: Side, b: Side) -> None:
        self.a, self.b = a, b
        removed: dict[Signature, list[Row]] = defaultdict(list)
        added: dict[Signature, list[Row]] = defaultdict(list)
        for row in rows:
            if row.problem or not row.is_leaf or row.status not in (ADDED, REMOVED):
                continue
            facts = row.a if row.status == REMOVED else row.b
            assert facts is not None
            if facts.nested:
                continue
            item = row.item_a if row.status == REMOVED else row.item_b
            if leaf_parts(item)[1] is None and facts.nbytes:
                continue  # no file
            target = removed if row.status == REMOVED else added
            target[facts.dtype, facts.shape].append(row)
        self.groups = [(removed[key], added[key]) for key in removed if key in added]
        self.fingerprints: dict[int, tuple[int, int]] = {}  # id(row) -> (size, crc)
        self.pairs: list[tuple[Row, Row, Row]] = []  # (removed, added, renamed)

    def jobs(self) -> list[Job]:
        """CRC jobs for the candidates whose CRC no archive records."""
        jobs: list[Job] = []
        for removed, added in self.groups:
            for rows, side in ((removed, self.a), (added, self.b)):
                for row in rows:
                    job = self._fingerprint(row, side)
                    if job is not None:
                        jobs.append(job)
        return jobs

    def _fingerprint(self, row: Row, side: Side) -> Job | None:
        item = row.item_a if side is self.a else row.item_b
        facts = row.a if side is self.a else row.b
        assert facts is not None
        size = facts.nbytes or 0
        file = leaf_parts(item)[1]
        if not size or file is None:
            self.fingerprints[id(row)] = (0, 0)
            return None
        store = side.ckpt.store
        if store.crc_recorded:  # the archive records each entry's CRC-32
            try:
                entry = store.entry(file)
            except (TDViewError, OSError):
                return None
            if entry.size == size and not entry.encrypted:
                self.fingerprints[id(row)] = (size, entry.crc32 or 0)
            return None

        def done(job: Job) -> None:
            if job.error is None:
                self.fingerprints[id(row)] = (size, job.crc)

        return Job(CRC, Span(store, file, size), None, done)

    def match(self) -> list[Row]:
        """Pair the candidates; returns the rename rows."""
        renamed: list[Row] = []
        for removed, added in self.groups:
            by_print: dict[tuple[int, int], list[Row]] = defaultdict(list)
            for row in added:
                found = self.fingerprints.get(id(row))
                if found is not None:
                    by_print[found].append(row)
            for old in removed:
                found = self.fingerprints.get(id(old))
                candidates = by_print.get(found) if found is not None else None
                if not candidates:
                    continue
                new = next((c for c in candidates if c.key == old.key), candidates[0])
                candidates.remove(new)
                row = Row(
                    new.path,
                    RENAMED,
                    old.a,
                    new.b,
                    renamed_from=old.path,
                    spelling=None if old.spelling is new.spelling is None else _spelling(old, new),
                    fingerprint=CRC_EQUAL,
                    item_a=old.item_a,
                    item_b=new.item_b,
                )
                self.pairs.append((old, new, row))
                renamed.append(row)
        return renamed

    def undo_unequal(self) -> None:
        """Take back the renames whose values the value tier found different."""
        kept = []
        for old, new, row in self.pairs:
            if row.values is not None and not row.values.equal:
                continue
            if row.problem:
                continue
            kept.append((old, new, row))
        self.pairs = kept

    def apply(self, rows: list[Row]) -> list[Row]:
        """The rows with each pair's removed row dropped and added row replaced."""
        if not self.pairs:
            return rows
        dropped = {id(old) for old, _, _ in self.pairs}
        replaced: dict[int, Any] = {id(new): row for _, new, row in self.pairs}
        return [replaced.get(id(row), row) for row in rows if id(row) not in dropped]
