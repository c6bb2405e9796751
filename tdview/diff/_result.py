"""What a diff returns: one :class:`Row` per key of the union, rollups per subtree, and
the :class:`Diff` that holds them (iterable, ``to_dict``/``to_json``/``to_pandas``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..index import LeafFile, NestedPath, show_path
from ._records import Facts, ValueStats, leaf_facts

# Row status.
SAME, CHANGED, ADDED, REMOVED, RENAMED = "same", "changed", "added", "removed", "renamed"
# Fingerprint verdicts: bytes compared and equal; CRC-32 and size equal (strong evidence,
# not proof); proved different.
EQUAL, CRC_EQUAL, DIFFERS = "equal", "crc_equal", "differs"
LEVELS = ("metadata", "fingerprint", "values")
#: The level that reads no payload byte and says the most: ``"fingerprint"`` when both
#: sides are archives (their central directories record each entry's size and CRC-32),
#: else ``"metadata"``.
AUTO = "auto"
FINGERPRINT_TEXT = {EQUAL: "bytes equal", CRC_EQUAL: "CRC equal", DIFFERS: "differs"}
#: Each side's real path of a row that a side spells otherwise (``layers.0.weight``
#: against ``layers/0/weight``): None for a side without the key or that spells it in
#: its keys' names.
Spelling = tuple[NestedPath | None, NestedPath | None]


class Row:
    """One key of the union of the two trees.

    ``path`` is relative to the compared roots (the new path, for a rename; the old one is
    ``renamed_from``). ``status`` is ``"same"``, ``"changed"``, ``"added"``, ``"removed"``
    or ``"renamed"``; ``changes`` names what changed (``"kind"``, ``"class"``,
    ``"batch_size"``, ``"names"``, ``"dtype"``, ``"shape"``, ``"bytes"``, ``"value"``,
    ``"content"``). ``a`` and ``b`` are each side's :class:`Facts` (None on the side that
    lacks the key). ``fingerprint`` is ``"equal"`` (bytes compared), ``"crc_equal"`` (size
    and CRC-32 equal: strong evidence, not proof), ``"differs"`` or None (not asked, or not
    comparable); ``values`` the element-wise :class:`ValueStats` of a tensor leaf (value
    tier), ``value_equal`` whether two pickled values are equal (None: not compared),
    ``scalars`` the numbers of a one-element leaf on each side (read at every level but
    ``"metadata"``).
    ``note`` says how a value was compared when that matters (a pickle compared as
    bytes); ``problem`` why a side could not be read (the row is then not known equal).
    ``path_a`` and ``path_b`` are each side's real path of the key: keys pair across
    spellings (a ``/`` tree against dotted names, :mod:`tdview.diff._spelling`), and a
    node one side spells only in its keys' names is ``same`` with no facts on that side.
    """

    __slots__ = (
        "_a",
        "_b",
        "changes",
        "fingerprint",
        "item_a",
        "item_b",
        "note",
        "path",
        "problem",
        "renamed_from",
        "scalars",
        "spelling",
        "status",
        "value_equal",
        "values",
    )

    def __init__(
        self,
        path: NestedPath,
        status: str,
        a: Facts | None,
        b: Facts | None,
        item_a: Any = None,
        item_b: Any = None,
        *,
        renamed_from: NestedPath | None = None,
        fingerprint: str | None = None,
        changes: tuple[str, ...] = (),
        spelling: Spelling | None = None,
    ) -> None:
        self.path, self.status, self._a, self._b = path, status, a, b
        self.spelling = spelling
        # the index items of both sides (a Node, or a LeafFile for a plain leaf)
        self.item_a, self.item_b = item_a, item_b
        self.changes = changes
        self.renamed_from = renamed_from
        self.fingerprint = fingerprint
        self.values: ValueStats | None = None
        self.value_equal: bool | None = None
        # the numbers of a one-element leaf on each side (None: not such a leaf, not read)
        self.scalars: tuple[Any, Any] | None = None
        self.note = ""
        self.problem = ""

    def __repr__(self) -> str:
        extra = f", renamed_from={show_path(self.renamed_from)!r}" if self.renamed_from else ""
        return (
            f"Row({show_path(self.path)!r}, {self.status!r}, changes={self.changes!r}"
            f"{extra}, fingerprint={self.fingerprint!r})"
        )

    @property
    def a(self) -> Facts | None:
        """The old side's facts (None when the key is added)."""
        if self._a is None and isinstance(self.item_a, LeafFile):
            self._a = leaf_facts(self.item_a.record)
        return self._a

    @property
    def b(self) -> Facts | None:
        """The new side's facts (None when the key is removed)."""
        if self._b is None and isinstance(self.item_b, LeafFile):
            self._b = leaf_facts(self.item_b.record)
        return self._b

    @property
    def key(self) -> str:
        return self.path[-1] if self.path else ""

    @property
    def path_a(self) -> NestedPath | None:
        """The old side's real path of this key (None where it has no node for it)."""
        if self.item_a is None and self._a is None:
            return None
        if self.spelling is not None:
            return self.spelling[0]
        return self.renamed_from if self.renamed_from is not None else self.path

    @property
    def path_b(self) -> NestedPath | None:
        """The new side's real path of this key (None where it has no node for it)."""
        if self.item_b is None and self._b is None:
            return None
        return self.spelling[1] if self.spelling is not None else self.path

    def moved_under(self, path: NestedPath, path_a: NestedPath, path_b: NestedPath) -> None:
        """Put a row of a diff made at ``path`` (``path_a``, ``path_b`` on each side)
        under it, as a part of the diff of the whole."""
        if self.spelling is not None or path_a != path or path_b != path:
            own_a, own_b = self.spelling or (self.renamed_from or self.path, self.path)
            self.spelling = (
                None if own_a is None else path_a + own_a,
                None if own_b is None else path_b + own_b,
            )
        if self.renamed_from is not None:
            self.renamed_from = path_a + self.renamed_from
        self.path = path + self.path

    @property
    def is_leaf(self) -> bool:
        item = self.item_b if self.item_b is not None else self.item_a
        if isinstance(item, LeafFile):
            return True
        facts = self.b or self.a
        return facts is not None and facts.kind == "leaf"

    @property
    def differs(self) -> bool:
        return self.status != SAME

    @property
    def unverified(self) -> bool:
        """Same by its metadata alone: a leaf with elements (or a pickled value) whose
        content was not compared (no fingerprint, no values)."""
        if self.status != SAME or self.problem or self._compared():
            return False
        if self.is_leaf:
            facts = self.b or self.a
            return self.nbytes > 0 or (facts is not None and facts.nested)
        facts = self.b if self.b is not None else self.a
        return facts is not None and facts.pickled

    @property
    def crc_only(self) -> bool:
        """Same by size and CRC-32 alone (strong evidence, not proof)."""
        return (
            self.status == SAME
            and not self.problem
            and self.fingerprint == CRC_EQUAL
            and self.values is None
            and self.value_equal is None
        )

    def _compared(self) -> bool:
        return (
            self.fingerprint is not None
            or self.values is not None
            or (self.value_equal is not None)
        )

    @property
    def nbytes(self) -> int:
        """The bytes this row's key holds: its new side's, or the old side's if removed."""
        item = self.item_b if self.item_b is not None else self.item_a
        if isinstance(item, LeafFile):
            return item.record.nbytes or 0
        facts = self.b if self.b is not None else self.a
        return (facts.nbytes or 0) if facts is not None else 0

    def mark(self, change: str) -> None:
        """Record a change (once) and make the row ``changed`` if it was ``same``."""
        if change not in self.changes:
            self.changes += (change,)
        if self.status == SAME:
            self.status = CHANGED

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": list(self.path),
            "key": show_path(self.path),
            "status": self.status,
            "changes": list(self.changes),
        }
        if self.renamed_from is not None:
            out["renamed_from"] = list(self.renamed_from)
        if self.spelling is not None:
            out["path_a"], out["path_b"] = (
                None if p is None else list(p) for p in (self.path_a, self.path_b)
            )
        out["a"] = None if self.a is None else self.a.to_dict()
        out["b"] = None if self.b is None else self.b.to_dict()
        out["fingerprint"] = self.fingerprint
        out["values"] = None if self.values is None else self.values.to_dict()
        if self.value_equal is not None:
            out["value_equal"] = self.value_equal
        if self.scalars is not None:
            out["scalars"] = list(self.scalars)
        if self.note:
            out["note"] = self.note
        if self.problem:
            out["problem"] = self.problem
        return out


@dataclass(slots=True)
class DiffRollup:
    """Totals of the rows at and below one path: keys by status, and bytes.

    ``bytes_changed`` is the (new) size of the changed leaves, ``bytes_added`` and
    ``bytes_removed`` those of the leaves added and removed; ``elements_changed`` the
    differing elements the value tier counted. ``problems`` counts rows not read.
    ``same_leaves`` counts the leaves among the ``same`` rows; of them, ``same_metadata``
    were compared by their shape and dtype alone (their values were not compared) and
    ``same_crc`` by size and CRC-32 alone.
    """

    same: int = 0
    changed: int = 0
    added: int = 0
    removed: int = 0
    renamed: int = 0
    problems: int = 0
    leaves: int = 0
    bytes_changed: int = 0
    bytes_added: int = 0
    bytes_removed: int = 0
    elements_changed: int = 0
    same_leaves: int = 0
    same_metadata: int = 0
    same_crc: int = 0

    def add(self, row: Row) -> None:
        status = row.status
        if status == SAME:
            self.same += 1
        else:
            setattr(self, status, getattr(self, status) + 1)
        if row.problem:
            self.problems += 1
        if not row.is_leaf:
            return
        self.leaves += 1
        if status == SAME:
            self.same_leaves += 1
            if row.unverified:
                self.same_metadata += 1
            elif row.crc_only:
                self.same_crc += 1
            return
        if status == CHANGED:
            self.bytes_changed += row.nbytes
        elif status == ADDED:
            self.bytes_added += row.nbytes
        elif status == REMOVED:
            self.bytes_removed += row.nbytes
        if row.values is not None and row.values.differing:
            self.elements_changed += row.values.differing

    @property
    def differences(self) -> int:
        return self.changed + self.added + self.removed + self.renamed

    def to_dict(self) -> dict[str, int]:
        out = {name: getattr(self, name) for name in self.__slots__}
        out["differences"] = self.differences
        return out


class Diff:
    """The result of :func:`tdview.diff`: rows per key, in the load order of ``a`` (keys
    only in ``b`` after the key before them in ``b``), with rollups per subtree.

    Iterating gives every :class:`Row`; :meth:`changed` only those that differ.
    ``equal`` is True when nothing differs at the level asked (a CRC equal counts as
    equal at the fingerprint level) and nothing failed to read.

    Examples
    --------
    >>> d = tdview.diff("before.tdz", "after.tdz", level="values")   # doctest: +SKIP
    >>> d.equal, d.rollup("model").changed                           # doctest: +SKIP
    (False, 12)
    >>> [r.key for r in d.changed()][:2]                             # doctest: +SKIP
    ['weight', 'bias']
    """

    def __init__(
        self,
        a: str,
        b: str,
        subpath_a: NestedPath,
        subpath_b: NestedPath,
        level: str,
        rtol: float,
        atol: float,
        rows: list[Row],
    ) -> None:
        self.a, self.b = a, b
        self.subpath_a, self.subpath_b = subpath_a, subpath_b
        self.level, self.rtol, self.atol = level, rtol, atol
        self.rows = rows
        self._rollups: dict[NestedPath, DiffRollup] | None = None
        self._by_path: dict[NestedPath, Row] | None = None

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        total = self.rollup()
        return (
            f"<Diff {self.level} {self.a!r} -> {self.b!r}: {total.changed} changed, "
            f"{total.added} added, {total.removed} removed, {total.renamed} renamed, "
            f"{total.same} same>"
        )

    def changed(self) -> list[Row]:
        """The rows that differ (every status but ``same``), and rows not read."""
        return [row for row in self.rows if row.status != SAME or row.problem]

    @property
    def equal(self) -> bool:
        return all(row.status == SAME and not row.problem for row in self.rows)

    @property
    def problems(self) -> list[Row]:
        return [row for row in self.rows if row.problem]

    def row(self, path: object) -> Row:
        """The row of a path (``"a/b"`` or a tuple); ``KeyError`` when no key has it."""
        if self._by_path is None:
            self._by_path = {row.path: row for row in self.rows}
        key = path if isinstance(path, tuple) else tuple(p for p in str(path).split("/") if p)
        return self._by_path[key]

    def rollup(self, path: object = ()) -> DiffRollup:
        """Totals of the rows at and below ``path`` (the whole diff by default)."""
        if self._rollups is None:
            self._rollups = _rollups(self.rows)
        key = path if isinstance(path, tuple) else tuple(p for p in str(path).split("/") if p)
        found = self._rollups.get(key)
        if found is None:  # a leaf (or no such key)
            found = DiffRollup()
            row = self._row_or_none(key)
            if row is not None:
                found.add(row)
        return found

    def _row_or_none(self, path: NestedPath) -> Row | None:
        try:
            return self.row(path)
        except KeyError:
            return None

    def rollups(self) -> dict[NestedPath, DiffRollup]:
        """The rollup of every path that has rows below it."""
        self.rollup()
        assert self._rollups is not None
        return dict(self._rollups)

    def splice(self, path: NestedPath, rows: list[Row], level: str) -> None:
        """Replace the rows of the subtree at ``path`` (the row at ``path`` and every row
        below it, which follow it) by ``rows``, made at ``level`` (the diff's level becomes
        ``"mixed"`` if that differs)."""
        start = self.rows.index(self.row(path))
        depth, stop = len(path), start + 1
        while (
            stop < len(self.rows)
            and self.rows[stop].path[:depth] == path
            and len(self.rows[stop].path) > depth
        ):
            stop += 1
        self.rows[start:stop] = rows
        if level != self.level:
            self.level = "mixed"
        self._rollups = self._by_path = None

    def to_dict(self, *, only_changed: bool = False) -> dict[str, Any]:
        """A JSON-ready dict: the sides, the options, the totals and the rows."""
        rows = self.changed() if only_changed else self.rows
        return {
            "a": self.a,
            "b": self.b,
            "subpath_a": list(self.subpath_a),
            "subpath_b": list(self.subpath_b),
            "level": self.level,
            "rtol": self.rtol,
            "atol": self.atol,
            "equal": self.equal,
            "summary": self.rollup().to_dict(),
            "rows": [row.to_dict() for row in rows],
        }

    def to_json(self, *, only_changed: bool = False, **kwargs: Any) -> str:
        """:meth:`to_dict` as JSON text (strict JSON: no NaN; ``kwargs`` to ``json.dumps``)."""
        return json.dumps(self.to_dict(only_changed=only_changed), allow_nan=False, **kwargs)

    def to_pandas(self, *, only_changed: bool = False) -> Any:
        """One DataFrame row per key (needs pandas): path, status, both sides' kind, dtype,
        shape and bytes, the fingerprint and the value statistics."""
        try:
            import pandas as pd
        except ImportError as error:
            raise ImportError("Diff.to_pandas needs pandas (pip install pandas)") from error
        records = []
        for row in self.changed() if only_changed else self.rows:
            record: dict[str, Any] = {
                "path": show_path(row.path),
                "status": row.status,
                "changes": ",".join(row.changes),
                "renamed_from": None if row.renamed_from is None else show_path(row.renamed_from),
            }
            for side, facts in (("a", row.a), ("b", row.b)):
                record[f"kind_{side}"] = None if facts is None else facts.kind
                record[f"dtype_{side}"] = (
                    None
                    if facts is None or facts.dtype is None
                    else (facts.dtype.removeprefix("torch."))
                )
                record[f"shape_{side}"] = (
                    None if facts is None or facts.shape is None else (tuple(facts.shape))
                )
                record[f"bytes_{side}"] = None if facts is None else facts.nbytes
            record["fingerprint"] = row.fingerprint
            stats = row.values
            for name in (
                "differing",
                "max_abs",
                "mean_abs",
                "rel_l2",
                "cosine",
                "nan_appeared",
                "nan_disappeared",
                "inf_appeared",
                "inf_disappeared",
            ):
                record[name] = None if stats is None else getattr(stats, name)
            record["problem"] = row.problem or None
            records.append(record)
        return pd.DataFrame.from_records(records)


def _rollups(rows: list[Row]) -> dict[NestedPath, DiffRollup]:
    """The rollup of every path that is a node (or the parent of a row), in one pass:
    consecutive rows share their parent, whose chain of totals is found once."""
    totals: dict[NestedPath, DiffRollup] = {}
    parent: NestedPath | None = None
    chain: list[DiffRollup] = []
    for row in rows:
        path = row.path
        if not row.is_leaf:
            own = totals.get(path)
            if own is None:
                own = totals[path] = DiffRollup()
            own.add(row)
            if not path:
                continue
        up = path[:-1]
        if up != parent:
            parent = up
            chain = []
            for depth in range(len(up) + 1):
                prefix = up[:depth]
                total = totals.get(prefix)
                if total is None:
                    total = totals[prefix] = DiffRollup()
                chain.append(total)
        for total in chain:
            total.add(row)
    return totals
