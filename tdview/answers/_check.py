"""``tdview.check``: is a checkpoint healthy.

A walk over the index from the node asked (as the diff's; on a folder of checkpoints'
own node, in each member below it: :mod:`._members`): every problem the index
flags on a node (a ``meta.json`` that does not parse, numbers against batch dims, a
store's refusal, a missing file), then each leaf's file against its shape and dtype
(short, long, empty). The payload passes follow (:mod:`._check_read`): each archive
entry's CRC-32, and with ``values`` the NaN, ±Inf and all-zero counts of every leaf (of
a torchrl replay buffer, the rows written only). Whatever is damaged is a problem of
the report; only a checkpoint that cannot be opened at all raises (exit status 2).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

from ..errors import CheckpointFormatError, NotACheckpointError, TDViewError
from ..index import (
    Checkpoint,
    Node,
    Tree,
    join_key,
    normalize_subpath,
    refusal,
    show_path,
    walk,
)
from ..storage import Store
from ._check_read import check_entries, check_keys, check_values
from ._check_report import CheckReport
from ._duplicates import find_duplicates
from ._members import Part, Unopened, nothing_below, own_nodes, parts_below

Progress = Callable[[int, int, str], object]
_ZIP_START = b"PK\x03\x04"


def check(
    path: str | os.PathLike[str] | Tree,
    subpath: object = None,
    values: bool = False,
    *,
    progress: Progress | None = None,
    num_threads: int | None = None,
) -> CheckReport:
    """Check a checkpoint, or the subtree at ``subpath``: is it healthy?

    Parameters
    ----------
    path : str, os.PathLike or Checkpoint
        A checkpoint directory or archive, or a folder of checkpoints (or an open
        :class:`~tdview.Checkpoint`, left open).
    subpath : nested key or "a/b" path, optional
        Check from this node (a leaf too). On a folder of checkpoints' own node (its
        root, a sub-folder), every checkpoint below it is checked: problems and
        duplicates are named from the folder's root, the member's path first.
    values : bool
        Also read every value: NaN and ±Inf counts, all-zero leaves (of a torchrl
        replay buffer, the rows written only). Without it, only what integrity needs is
        read: archive entries for their CRC-32, file sizes from the file system.
    progress : callable, optional
        ``progress(done_bytes, total_bytes, label)`` as payloads are read.
    num_threads : int, optional
        Threads computing CRC-32s and counting values (default: up to 4, one per CPU).

    Returns
    -------
    CheckReport
        ``problems`` (each with ``path``, ``kind``, ``message``), ``duplicates``,
        ``checked`` counts; ``exit_status`` 0 or 1.

    Raises
    ------
    NotACheckpointError, FileNotFoundError, SubpathError
        Nothing to check there (exit status 2): not a checkpoint, or a folder with no
        checkpoint below the node. A truncated archive (or a member of a folder that
        cannot be opened) is a problem of the report, not an error.

    Examples
    --------
    >>> report = tdview.check("ckpt.tdz")                            # doctest: +SKIP
    >>> [(p.path, p.kind) for p in report.problems]                  # doctest: +SKIP
    [(('model', 'weight'), 'stale_crc')]
    """
    keys = () if subpath is None or subpath in ((), "") else normalize_subpath(subpath)
    if isinstance(path, Tree):
        return _check_open(path, keys, values, progress, num_threads)
    try:
        ckpt = Checkpoint(path)
    except NotACheckpointError as error:
        truncated = _truncated_archive(os.fspath(path), error)
        if truncated is None:
            raise
        return truncated
    with ckpt:
        return _check_open(ckpt, keys, values, progress, num_threads)


def _check_open(
    tree: Tree,
    keys: tuple[str, ...],
    values: bool,
    progress: Progress | None,
    num_threads: int | None,
) -> CheckReport:
    """Check the node at ``keys`` of ``tree``: in its checkpoint, or, on a folder of
    checkpoints' own node, in every member below it (paths from the folder's root)."""
    threads = _threads(num_threads)
    report = CheckReport(tree.path, keys, values=values)
    owns: dict[str, Node] = {}  # a folder of checkpoints' own nodes, if any: side files by key
    for own in own_nodes(tree, keys):
        _flagged(own, report)  # a folder that cannot be listed, a side file refused
        if own.file is not None:
            owns[own.file] = own
    check_keys(tree.store, list(owns), owns, report, progress, threads)  # in a zip
    parts = 0
    for part in parts_below(tree, keys):
        parts += 1
        if isinstance(part, Part):
            found = _check_part(part, values, _progress_of(part, progress), threads)
            report.merge(found, part.prefix)
        else:
            _unopened(tree.store, part, report)
    if not parts:
        raise nothing_below(tree, keys)
    # stored twice: from the CRC-32s an archive records; with values, files hashed and
    # every group confirmed byte by byte (the duplicates finder, :mod:`._duplicates`)
    found_twice = find_duplicates(
        tree, keys, progress, read=values, confirm=values, num_threads=threads
    )
    report.duplicates = [list(group) for group in found_twice.groups]
    return report


def _check_part(part: Part, values: bool, progress: Progress | None, threads: int) -> CheckReport:
    """The report of one checkpoint's node (paths from that checkpoint's root)."""
    owner = part.tree
    start = owner.node(part.inner)
    report = CheckReport(owner.path, part.inner, values=values)
    report.checked["checkpoints"] = 1
    leaves, owners = walk_nodes(owner, start, report)
    bad = check_entries(owner.store, start, owners, report, progress, threads)
    if not owner.store.crc_recorded:  # sizes (and values) only: no CRC-32 to check
        report.checked["no_crc"] = report.checked["leaves"]
    if values:
        whole = [leaf for leaf in leaves if leaf.file not in bad]
        check_values(owner, whole, report, progress, threads)
    return report


def _progress_of(part: Part, progress: Progress | None) -> Progress | None:
    """A member's progress, its labels naming it (``step_1000.tdz: CRC-32``)."""
    if progress is None or not part.prefix:
        return progress
    name = show_path(part.prefix)

    def report(done: int, total: int, label: str) -> object:
        return progress(done, total, f"{name}: {label}")

    return report


def _unopened(store: Store, member: Unopened, report: CheckReport) -> None:
    """The problem of a member of a folder that could not be opened: ``truncated`` for
    an archive that ends early, ``metadata`` for a root that does not parse, else
    ``unreadable``."""
    truncated = _truncated_member(store, member)
    if truncated is not None:
        report.add(member.path, "truncated", truncated)
    elif isinstance(member.error, CheckpointFormatError):
        report.add(member.path, "metadata", str(member.error))
    else:
        report.add(member.path, "unreadable", str(member.error))


def walk_nodes(ckpt: Tree, start: Node, report: CheckReport) -> tuple[list[Node], dict[str, Node]]:
    """Record what the index flags on every node from ``start`` down and each leaf's
    file against its record; return the leaves whose files are whole (to read on), and
    the node each store key belongs to (a leaf's files, a folder's ``meta.json``)."""
    whole: list[Node] = []
    owners: dict[str, Node] = {}
    nodes = iter(walk(ckpt, start)) if not start.is_leaf else iter(())
    node: Node | None = start
    while node is not None:
        report.checked["nodes"] += 1
        _flagged(node, report)
        for key in (node.file, node.sizes_file):
            if key is not None:
                owners[key] = node
        if node.dirkey is not None:
            owners[join_key(node.dirkey, "meta.json")] = node
        if node.is_leaf:
            report.checked["leaves"] += 1
            if _leaf_file(ckpt.store, node, report):
                whole.append(node)
        above = node
        try:
            node = next(nodes, None)
        except (TDViewError, OSError) as error:  # a folder the walk could not list
            report.add(above.path, "unreadable", str(error))
            break
    return whole, owners


def _flagged(node: Node, report: CheckReport) -> None:
    """The index's problems of ``node``: a refusal, a missing file, or metadata."""
    refused = refusal(node)
    for problem in node.problems:
        if problem is refused:
            kind = "refused"
        elif node.is_leaf and node.file is None and "is missing" in problem:
            kind = "missing"
        else:
            kind = "metadata"
        report.add(node.path, kind, str(problem))


def _leaf_file(store: Store, node: Node, report: CheckReport) -> bool:
    """Check a leaf's file against its record; True when its bytes can be read on."""
    record = node.record
    if record is None or node.file is None:
        return False
    payload = store.locate(node.file)
    need = record.nbytes if not record.is_nested else None
    sizes = node.sizes_file
    if record.is_nested and sizes is not None:
        have_sizes = store.locate(sizes).size
        if have_sizes != record.sizes_nbytes:
            report.add(
                node.path,
                "size",
                f"{store.display(sizes)} has {have_sizes} bytes but the sizes of a nested "
                f"leaf of shape {list(record.shape)} need {record.sizes_nbytes} bytes",
            )
            return False
    if need is None or payload.size == need:
        return True
    shape = f"shape {list(record.shape)} of {record.dtype.name}"
    if payload.size == 0:
        report.add(
            node.path, "empty", f"{payload.display} has 0 bytes but {shape} needs {need} bytes"
        )
    else:
        which = "shorter" if payload.size < need else "longer"
        report.add(
            node.path,
            "size",
            f"{payload.display} has {payload.size} bytes, {which} than the {need} bytes "
            f"{shape} needs",
        )
    return payload.size > need and not payload.in_archive


def _truncated_archive(path: str, error: NotACheckpointError) -> CheckReport | None:
    """A report of one ``truncated`` problem when ``path`` is a regular file that starts
    as a zip archive but has no end of central directory; None for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = os.pread(fd, len(_ZIP_START), 0)
    finally:
        os.close(fd)
    report = CheckReport(os.path.abspath(path))
    message = _truncated_message(report.path, head, error)
    if message is None:
        return None
    report.add((), "truncated", message)
    return report


def _truncated_member(store: Store, member: Unopened) -> str | None:
    """Why a member archive of a folder could not be opened, when it is truncated."""
    if member.key is None or not isinstance(member.error, NotACheckpointError):
        return None
    head = bytearray(len(_ZIP_START))
    try:
        store.read_into(member.key, 0, head)
    except (TDViewError, OSError, ValueError):  # a folder, a file refused, or too short
        return None
    return _truncated_message(store.display(member.key), head, member.error)


def _truncated_message(where: str, head: bytes | bytearray, error: Exception) -> str | None:
    if head != _ZIP_START or "end-of-central-directory" not in str(error):
        return None
    return (
        f"{where} starts as a zip archive but its end (the central directory, which "
        "lists its entries) is missing: the file is truncated"
    )


def _threads(num_threads: int | None) -> int:
    if num_threads is None:
        return max(1, min(4, os.cpu_count() or 1))
    if type(num_threads) is not int or num_threads < 1:
        raise ValueError(f"num_threads must be a positive int, got {num_threads!r}.")
    return num_threads
