"""The text of a diff, as ``tdview diff`` prints it: one line per key, then the totals.

A line starts with a mark: ``~`` changed, ``+`` added, ``-`` removed, ``R`` renamed,
``!`` not read (a problem), and two spaces for a key that is the same. A key the same
by its metadata alone says that its values were not compared, and so do the totals.
"""

from __future__ import annotations

from collections.abc import Iterator

from .._text import printable
from .._units import dtype_text, human_bytes, shape_text
from ..index import show_path
from ._result import (
    ADDED,
    CHANGED,
    CRC_EQUAL,
    FINGERPRINT_TEXT,
    REMOVED,
    RENAMED,
    SAME,
    Diff,
    Facts,
    Row,
    ValueStats,
)

_MARKS = {SAME: " ", CHANGED: "~", ADDED: "+", REMOVED: "-", RENAMED: "R"}
#: What a row the same by its metadata alone says (its values were not compared).
UNVERIFIED_TEXT = "same shape and dtype, values not compared"


__all__ = ["describe", "line", "printable", "render", "summary", "values_text"]


def render(result: Diff, *, only_changed: bool = False) -> Iterator[str]:
    """The lines of ``tdview diff`` (keys are data: print them through ``printable``)."""
    yield f"--- {result.a}"
    yield f"+++ {result.b}"
    for row in result.changed() if only_changed else result.rows:
        yield line(row)
    yield summary(result)


def line(row: Row) -> str:
    mark = "!" if row.problem else _MARKS[row.status]
    path = show_path(row.path)
    if row.renamed_from is not None:
        path = f"{show_path(row.renamed_from)} -> {path}"
    if row.spelling is not None and spelled(row):
        path = f"{path} ({spelled(row)})"
    return f"{mark} {path}  {describe(row)}"


def spelled(row: Row) -> str:
    """Each side's real path of a row, where a side spells its key otherwise."""
    sides = (("a", row.path_a), ("b", row.path_b))
    return ", ".join(
        f"{side}: {show_path(p)}" for side, p in sides if p is not None and p != row.path
    )


def describe(row: Row) -> str:
    """What a row says, after its path."""
    fa, fb = row.a, row.b
    parts: list[str] = []
    if row.status in (ADDED, REMOVED):
        facts = fb if row.status == ADDED else fa
        assert facts is not None
        parts.append(f"{row.status}: {_facts(facts)}")
    elif row.status == RENAMED:
        assert fb is not None
        parts.append(f"renamed: {_facts(fb)}")
    elif fa is None or fb is None:  # a node one side spells in its keys' names
        facts = fb if fb is not None else fa
        assert facts is not None
        parts.append(_facts(facts))
    else:
        parts.append(_facts(fb) if not row.changes else "; ".join(_changes(row, fa, fb)))
    if row.fingerprint is not None and (row.status != CHANGED or row.values is None):
        if row.fingerprint == CRC_EQUAL or row.status == SAME or "content" in row.changes:
            parts.append(FINGERPRINT_TEXT[row.fingerprint])
    if row.values is not None and (row.values.numel or row.status != SAME):
        parts.append(values_text(row.values))
    if row.value_equal is not None:
        parts.append("values equal" if row.value_equal else "values differ")
    if row.scalars is not None:
        a, b = row.scalars
        shown = [a] if a == b else [v for v in (a, b) if v is not None]
        parts.append(" -> ".join(_number(v) for v in shown))
    if row.note:
        parts.append(row.note)
    if row.problem:
        parts.append(f"PROBLEM: {row.problem}")
    if row.unverified:
        parts.append(UNVERIFIED_TEXT)
    return "; ".join(parts)


def _facts(facts: Facts) -> str:
    if facts.kind == "leaf":
        shape = shape_text(facts.shape)
        text = f"{dtype_text(facts.dtype or '?')} {'nested' if facts.nested else ''}{shape}"
        return f"{text} {human_bytes(facts.nbytes)}"
    text = facts.class_name or facts.kind
    if facts.batch_size is not None:
        text += f" batch {shape_text(facts.batch_size)}"
    if facts.has_value:
        text += f" = {_short(facts.value)}"
    elif facts.pickled:
        text += f" (pickled, {human_bytes(facts.nbytes)})"
    return text


def _changes(row: Row, fa: Facts, fb: Facts) -> Iterator[str]:
    for change in row.changes:
        if change == "kind":
            yield f"kind {fa.kind} -> {fb.kind}"
        elif change == "class":
            yield f"class {fa.class_name} -> {fb.class_name}"
        elif change == "batch_size":
            yield f"batch size {shape_text(fa.batch_size)} -> {shape_text(fb.batch_size)}"
        elif change == "names":
            yield f"names {list(fa.names or [])} -> {list(fb.names or [])}"
        elif change == "dtype":
            yield f"dtype {dtype_text(fa.dtype or '?')} -> {dtype_text(fb.dtype or '?')}"
        elif change == "shape":
            yield f"shape {shape_text(fa.shape)} -> {shape_text(fb.shape)}"
        elif change == "bytes":
            yield f"size {human_bytes(fa.nbytes)} -> {human_bytes(fb.nbytes)}"
        elif change == "value":
            if fa.has_value and fb.has_value:
                yield f"value {_short(fa.value)} -> {_short(fb.value)}"
            else:
                yield "value changed"
        elif change == "content":
            yield f"{_facts(fb)} content changed"


def values_text(stats: ValueStats) -> str:
    """``"3 of 12 elements differ, max |a-b| 0.5, ..."``."""
    if stats.bytes_only:
        return "bytes equal" if stats.equal else "bytes differ"
    if not stats.numel:
        return "no elements"
    head = (
        f"{stats.differing:,} of {stats.numel:,} elements differ"
        if stats.differing
        else "values equal"
    )
    parts = [head]
    if stats.differing:
        parts.append(
            f"max |a-b| {_num(stats.max_abs)}, mean |a-b| {_num(stats.mean_abs)}, "
            f"rel L2 {_num(stats.rel_l2)}, cosine {_num(stats.cosine, 7)}"
        )
    for name, text in (
        ("nan_appeared", "NaN appeared"),
        ("nan_disappeared", "NaN gone"),
        ("inf_appeared", "Inf appeared"),
        ("inf_disappeared", "Inf gone"),
    ):
        count = getattr(stats, name)
        if count:
            parts.append(f"{text} at {count:,}")
    return ", ".join(parts)


def summary(result: Diff) -> str:
    total = result.rollup()
    text = (
        f"{result.level}: {total.changed:,} changed, {total.added:,} added, "
        f"{total.removed:,} removed, {total.renamed:,} renamed, {total.same:,} same"
    )
    how = []
    if total.same_metadata:
        how.append(f"{total.same_metadata:,} leaves by shape and dtype only: values not compared")
    if total.same_crc:
        how.append(f"{total.same_crc:,} leaves by size and CRC-32 only")
    if how:
        text += f" ({'; '.join(how)})"
    if total.problems:
        text += f", {total.problems:,} not read"
    extra = []
    if total.bytes_changed:
        extra.append(f"{human_bytes(total.bytes_changed)} changed")
    if total.bytes_added:
        extra.append(f"{human_bytes(total.bytes_added)} added")
    if total.bytes_removed:
        extra.append(f"{human_bytes(total.bytes_removed)} removed")
    if total.elements_changed:
        extra.append(f"{total.elements_changed:,} elements differ")
    return text + (f" ({', '.join(extra)})" if extra else "")


def _number(value: object) -> str:
    """A scalar's number: an integer whole, a float to 6 significant digits."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}g}"


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
