"""The fingerprint and value tiers: which payloads to read for which rows, and what the
answers mean for them. Renames are found first (a removed and an added leaf of one dtype,
shape and fingerprint), so that the value tier compares renamed leaves too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import TDViewError
from ..format import torch_dtype
from ..index import NON_TENSOR, NON_TENSOR_STACK, Node, Tree, pickle_key
from ._jobs import COMPARE, CRC, VALUES, Job, Span
from ._renames import Renames
from ._result import CRC_EQUAL, DIFFERS, EQUAL, SAME, Row, ValueStats
from ._sides import Side
from ._values import nested_numel, read_sizes, same_value
from ._walk import is_leaf_item, leaf_parts

_RANK = {EQUAL: 0, CRC_EQUAL: 1, DIFFERS: 2}
_PICKLE_NOTE = "pickled: compared as bytes (allow_pickle=True compares the values)"


def payload_tiers(
    rows: list[Row],
    a: Side,
    b: Side,
    *,
    level: str,
    rtol: float,
    atol: float,
    allow_pickle: bool,
    progress: Callable[[int, int, str], object] | None,
    threads: int,
) -> None:
    """Fill the fingerprints (or values) of ``rows`` and find renames, in place."""
    tiers = _Tiers(a, b, rtol, atol, allow_pickle)
    renames = Renames(rows, a, b)
    jobs = renames.jobs()
    if level == "fingerprint":
        for row in rows:
            if row.status != "added" and row.status != "removed":
                jobs.extend(tiers.fingerprint_jobs(row))
    _run(jobs, threads, progress, "fingerprints")
    renamed = renames.match()
    if level == "values":
        jobs = []
        for row in rows:
            if row.a is not None and row.b is not None and not row.problem:
                jobs.extend(tiers.value_jobs(row))
        for row in renamed:
            jobs.extend(tiers.value_jobs(row))
        _run(jobs, threads, progress, "values")
        renames.undo_unequal()
    rows[:] = renames.apply(rows)


def _run(
    jobs: list[Job], threads: int, progress: Callable[[int, int, str], object] | None, label: str
) -> None:
    """Run ``jobs`` on the pool (imported with torch only when there is a job)."""
    if jobs:
        from ._pool import run_jobs

        run_jobs(jobs, threads, progress, label)


def _combine(row: Row, verdict: str) -> None:
    """Add one part's verdict to a row: the strongest wins (differs > CRC equal > equal)."""
    if row.fingerprint is None or _RANK[verdict] > _RANK[row.fingerprint]:
        row.fingerprint = verdict
    if verdict == DIFFERS:
        row.mark("content")


def _problem(row: Row, error: BaseException) -> None:
    text = str(error)
    row.problem = f"{row.problem}; {text}" if row.problem else text


class _Tiers:
    def __init__(self, a: Side, b: Side, rtol: float, atol: float, allow_pickle: bool) -> None:
        self.a, self.b = a, b
        self.rtol, self.atol, self.allow_pickle = rtol, atol, allow_pickle

    # -- fingerprints ---------------------------------------------------------------

    def fingerprint_jobs(self, row: Row) -> list[Job]:
        """Jobs (or verdicts at once) for a key present on both sides."""
        fa, fb = row.a, row.b
        if fa is None or fb is None or row.problem:
            return []
        ia, ib = row.item_a, row.item_b
        if is_leaf_item(ia) and is_leaf_item(ib):
            if fa.dtype != fb.dtype or fa.shape != fb.shape or fa.nested != fb.nested:
                return []  # a metadata change already: nothing to fingerprint
            ra, file_a, sizes_a = leaf_parts(ia)
            _, file_b, sizes_b = leaf_parts(ib)
            jobs: list[Job] = []
            if fa.nested:
                assert sizes_a is not None and sizes_b is not None
                size = ra.sizes_nbytes or 0
                jobs += self._bytes(row, (sizes_a, size), (sizes_b, size))
                if file_a is None and file_b is None:
                    return jobs  # every element empty on both sides: no data file
                if file_a is None or file_b is None or fa.nbytes != fb.nbytes:
                    _combine(row, DIFFERS)
                    return jobs
                return jobs + self._bytes(row, (file_a, fa.nbytes or 0), (file_b, fb.nbytes or 0))
            if not fa.nbytes:
                _combine(row, EQUAL)
                return []
            assert file_a is not None and file_b is not None
            return self._bytes(row, (file_a, fa.nbytes), (file_b, fb.nbytes or 0))
        if fa.nbytes is not None and fb.nbytes is not None:  # both keep a pickle
            key_a, key_b = pickle_key(ia), pickle_key(ib)
            if key_a is not None and key_b is not None:
                if fa.nbytes != fb.nbytes:
                    _combine(row, DIFFERS)
                    return []
                return self._bytes(row, (key_a, fa.nbytes), (key_b, fb.nbytes))
        return []

    def _bytes(self, row: Row, part_a: tuple[str, int], part_b: tuple[str, int]) -> list[Job]:
        """Compare one file or entry of each side: two archive entries by their CRC-32
        (no read), an archive entry and a file by the file's CRC-32, two files by bytes."""
        (key_a, size), (key_b, size_b) = part_a, part_b
        store_a, store_b = self.a.ckpt.store, self.b.ckpt.store
        if size != size_b:
            _combine(row, DIFFERS)
            return []
        try:
            crc_a = stored_crc(store_a, key_a, size)
            crc_b = stored_crc(store_b, key_b, size)
        except (TDViewError, OSError) as error:
            _problem(row, error)
            return []
        if crc_a is not None and crc_b is not None:
            _combine(row, CRC_EQUAL if crc_a == crc_b else DIFFERS)
            return []
        if crc_a is not None or crc_b is not None:
            known = crc_a if crc_a is not None else crc_b
            store, key = (store_b, key_b) if crc_a is not None else (store_a, key_a)

            def crc_done(job: Job) -> None:
                if job.error is not None:
                    _problem(row, job.error)
                else:
                    _combine(row, CRC_EQUAL if job.crc == known else DIFFERS)

            return [Job(CRC, Span(store, key, size), None, crc_done)]

        def compared(job: Job) -> None:
            if job.error is not None:
                _problem(row, job.error)
            else:
                _combine(row, DIFFERS if job.differs else EQUAL)

        return [Job(COMPARE, Span(store_a, key_a, size), Span(store_b, key_b, size), compared)]

    # -- values ---------------------------------------------------------------------

    def value_jobs(self, row: Row) -> list[Job]:
        fa, fb = row.a, row.b
        assert fa is not None and fb is not None
        ia, ib = row.item_a, row.item_b
        if is_leaf_item(ia) and is_leaf_item(ib):
            if fa.shape != fb.shape or fa.nested != fb.nested:
                return []
            try:
                return self._leaf_values(row, ia, ib)
            except (TDViewError, OSError) as error:
                _problem(row, error)
                return []
        if (
            isinstance(ia, Node)
            and isinstance(ib, Node)
            and (fa.nbytes is not None or fb.nbytes is not None)
        ):  # a pickle on one side
            return self._pickle_values(row, ia, ib)
        return []

    def _leaf_values(self, row: Row, ia: Any, ib: Any) -> list[Job]:
        fa, fb = row.a, row.b
        assert fa is not None and fb is not None
        ra, file_a, sizes_a = leaf_parts(ia)
        rb, file_b, sizes_b = leaf_parts(ib)
        dtype_a, dtype_b = torch_dtype(ra.dtype), torch_dtype(rb.dtype)
        if fa.nested:
            assert sizes_a is not None and sizes_b is not None
            sizes = read_sizes(self.a.ckpt.store, sizes_a, ra)
            if sizes != read_sizes(self.b.ckpt.store, sizes_b, rb):
                row.mark("shape")
                row.note = "the nested tensors' sizes differ: values not compared"
                return []
            numel = nested_numel(sizes, ra, self.a.ckpt.store.display(sizes_a))
        else:
            numel = ra.numel or 0
        if numel == 0:
            row.values = ValueStats(numel=0)
            return []
        if file_a is None or file_b is None:
            _problem(row, TDViewError("a data file is missing"))
            return []
        from ._stats import bytes_only_stats, numeric

        span_a = Span(self.a.ckpt.store, file_a, numel * dtype_a.itemsize)
        span_b = Span(self.b.ckpt.store, file_b, numel * dtype_b.itemsize)
        if numeric(dtype_a) and numeric(dtype_b):

            def values_done(job: Job) -> None:
                if job.error is not None:
                    _problem(row, job.error)
                    return
                assert job.acc is not None
                row.values = job.acc.result()
                if not row.values.equal:
                    row.mark("content")

            return [
                Job(VALUES, span_a, span_b, values_done, dtype_a, dtype_b, self.rtol, self.atol)
            ]
        if dtype_a != dtype_b:
            row.note = (
                f"{ra.dtype.name} and {rb.dtype.name} have no common numbers: values not compared"
            )
            return []

        def bytes_done(job: Job) -> None:
            if job.error is not None:
                _problem(row, job.error)
                return
            row.values = bytes_only_stats(numel, not job.differs)
            if job.differs:
                row.mark("content")

        return [Job(COMPARE, span_a, span_b, bytes_done)]

    def _pickle_values(self, row: Row, na: Node, nb: Node) -> list[Job]:
        """Non-tensor values kept in pickles: as values when allowed (or described by
        ``json_types.json``, or kept in ``meta.json`` on one side), else their bytes."""
        fa, fb = row.a, row.b
        assert fa is not None and fb is not None
        if self.allow_pickle or not (fa.pickled or fb.pickled):
            try:
                value_a = _node_value(self.a.ckpt, na, self.allow_pickle)
                value_b = _node_value(self.b.ckpt, nb, self.allow_pickle)
            except Exception as error:  # noqa: BLE001 - unpickling runs the pickle's code
                _problem(row, error)
                return []
            row.value_equal = same_value(value_a, value_b)
            if row.value_equal is False:
                row.mark("value")
            elif row.value_equal is None:
                row.note = "the values cannot be compared"
            else:
                # equal values: another pickle size, or JSON against a pickle, is no change
                row.changes = tuple(c for c in row.changes if c not in ("bytes", "value"))
                if not row.changes:
                    row.status = SAME
            return []
        row.note = _PICKLE_NOTE
        if fa.nbytes is None or fb.nbytes is None or fa.nbytes != fb.nbytes:
            return []  # the metadata tier said what differs
        return self.fingerprint_jobs(row)


def stored_crc(store: Any, key: str, size: int) -> int | None:
    """The CRC-32 an archive records for an entry of ``size`` bytes (None for a file)."""
    if not store.packed:
        return None
    entry = store.entry(key)
    if entry.size != size:
        raise TDViewError(f"{entry.display} holds {entry.size} bytes, but {size} are needed.")
    if entry.encrypted:
        raise TDViewError(f"{entry.display} is encrypted: tdview does not read it.")
    return entry.crc32


def _node_value(ckpt: Tree, node: Node, allow_pickle: bool) -> Any:
    """A non-tensor node's value: from ``meta.json``, ``json_types.json`` names or its
    pickle (a NonTensorData's ``data`` field; a tensorclass's extra fields)."""
    from ..loader import non_tensor_extras, unpickle_file

    if node.has_value:
        return node.value
    store = ckpt.store
    key = pickle_key(node)
    if key is None or node.dirkey is None or not store.is_file(key):
        return None
    if node.kind == NON_TENSOR_STACK:
        return unpickle_file(store, key, allow_pickle)
    extras = non_tensor_extras(store, node.dirkey, allow_pickle)
    if node.kind == NON_TENSOR and isinstance(extras, dict) and "data" in extras:
        return extras["data"]
    return extras
