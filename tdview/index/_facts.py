"""Facts about single nodes that need the store: where a leaf lives and what reading it
costs (and, for a file read through a symlink out of the checkpoint, that link), size
problems, the store's refusal of a node's file or folder, and what a pickle would
import (read from opcodes, never run)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TDViewError
from ..format import (
    MAX_SCAN_BYTES,
    NonTensorDataNode,
    NonTensorStackNode,
    PickleInfo,
    TensorclassNode,
    parse_json_types,
    scan_pickle,
    unscanned,
)
from ..storage import EntryInfo, Link, Store
from ._node import Node
from ._paths import join_key

#: Largest pickle tdview reads to list its imports (a larger one's are unknown).
MAX_PICKLE_BYTES = MAX_SCAN_BYTES
#: Largest ``json_types.json``.
MAX_JSON_TYPES_BYTES = 1 << 20
#: Largest ``other.pickle`` that a ``json_types.json`` can describe: the pickled dict of
#: its fields' container classes takes a few dozen bytes per field. A larger one is never
#: read to check its hash (it must be unpickled, if the caller allows that).
MAX_DESCRIBED_PICKLE_BYTES = 1 << 20

MAP, COPY, DECOMPRESS, NONE = "map", "copy", "decompress", "none"


@dataclass(frozen=True)
class LeafStorage:
    """Where a leaf's bytes are and what loading them costs.

    ``cost`` is ``"map"`` (a zero-copy memory map), ``"copy"`` (an unaligned or nested
    archive entry is copied), ``"decompress"`` or ``"none"`` (no bytes: empty or missing).
    ``offset`` is the payload's offset in the archive file (0 for a directory file).
    ``link`` is the symlink out of the checkpoint root the file is read through (a
    content store's file, or one below a trusted path: read-only, never written), or
    None.
    """

    location: str | None
    offset: int | None
    size: int
    stored_bytes: int
    compression: str
    crc32: int | None
    cost: str
    read_bytes: int
    link: Link | None = None


class Refusal(str):
    """A node's problem that is the store refusing its file or folder (a symlink out of
    the checkpoint root that no rule trusts, a symlink loop, a FIFO...), with the store's
    error: the browser shows the text, and a loader raises the error instead of
    leaving the key out as it does a missing file."""

    error: BaseException

    def __new__(cls, text: str, error: BaseException) -> Refusal:
        made = super().__new__(cls, text)
        made.error = error
        return made


def refusal(node: Node) -> Refusal | None:
    """The store's refusal among a node's problems, if any (see :class:`Refusal`).

    Examples
    --------
    >>> refusal(ckpt.node("weights"))                   # doctest: +SKIP
    "the file /ck/weights.memmap cannot be read: refusing key 'weights.memmap' in /ck: ..."
    """
    for problem in node.problems:
        if isinstance(problem, Refusal):
            return problem
    return None


def leaf_entry(store: Store, node: Node) -> EntryInfo | None:
    """The store entry of a leaf's data file, or None when it has none."""
    return store.entry(node.file) if node.file is not None else None


def size_problems(store: Store, node: Node) -> list[str]:
    """Problems of a leaf against its file or entry: sizes, encryption, and (archives)
    where its payload lies. Reads at most one local zip header, never a payload byte."""
    record = node.record
    payload = store.locate(node.file) if node.file is not None else None
    if record is None or payload is None or record.nbytes is None:
        return []
    need, have = record.nbytes, payload.size
    if not payload.in_archive and have < need:  # a file may be longer than its leaf
        return [
            f"{payload.display} has {have} bytes but shape {list(record.shape)} of "
            f"{record.dtype.name} needs {need} bytes"
        ]
    if payload.in_archive and have != need:
        return [
            f"{payload.display} holds {have} bytes but shape {list(record.shape)} of "
            f"{record.dtype.name} needs exactly {need} bytes"
        ]
    if payload.encrypted:
        return [f"{payload.display} is encrypted"]
    if payload.error is not None:  # its local header: the payload must lie inside the
        return [str(payload.error)]  # file, before the next entry
    return []


def leaf_storage(store: Store, node: Node) -> LeafStorage:
    """Storage facts of a leaf; reads at most one local zip header."""
    record = node.record
    payload = store.locate(node.file) if node.file is not None else None
    if payload is None or record is None:
        return LeafStorage(None, None, 0, 0, "none", None, NONE, 0)
    offset = payload.offset
    if payload.compression != "stored":
        cost = DECOMPRESS
    elif not payload.mappable or (  # read into memory (remote, HDF5, zarr)
        payload.in_archive
        and (record.is_nested or offset is None or offset % record.dtype.itemsize)
    ):
        cost = COPY
    else:
        cost = MAP
    return LeafStorage(
        payload.display,
        offset,
        payload.size,
        payload.stored_size,
        payload.compression,
        payload.crc32,
        cost,
        payload.stored_size,
        payload.link,
    )


def pickle_key(node: Node) -> str | None:
    """The store key of the pickle a node would unpickle on load, if any."""
    meta, dirkey = node.meta, node.dirkey
    if dirkey is None:
        return None
    if isinstance(meta, NonTensorStackNode) and meta.pickled:
        return join_key(dirkey, "pickle.pkl")
    if isinstance(meta, (NonTensorDataNode, TensorclassNode)):
        return join_key(dirkey, "other.pickle")
    return None


def needs_unpickling(store: Store, node: Node) -> bool:
    """Whether loading this node (alone) unpickles: a pickle exists and no valid
    ``json_types.json`` describes it."""
    key = pickle_key(node)
    if key is None or not store.is_file(key):
        return False
    if key.endswith("other.pickle"):
        try:
            return described_pickle(store, node.dirkey or "") is None
        except (TDViewError, OSError):
            return True
    return True


def described_pickle(store: Store, dirkey: str) -> dict[str, str] | None:
    """The ``{field: class name}`` that the folder's ``json_types.json`` gives for its
    ``other.pickle`` when the pickle's SHA-256 matches: the fields are then restored from
    the names, without unpickling. None when there is no ``json_types.json``, the hash
    differs, or the pickle is larger than any it describes (not read, then).

    Raises
    ------
    CheckpointFormatError
        ``json_types.json`` is malformed, or the hash matches and it names a class that
        is no container.
    """
    types_key = join_key(dirkey, "json_types.json")
    if not store.is_file(types_key):
        return None
    types = parse_json_types(
        store.read_bytes(types_key, MAX_JSON_TYPES_BYTES), store.display(types_key)
    )
    pickle_key = join_key(dirkey, "other.pickle")
    if store.entry(pickle_key).size > MAX_DESCRIBED_PICKLE_BYTES:
        return None
    return types.types_if_matches(store.read_bytes(pickle_key, MAX_DESCRIBED_PICKLE_BYTES))


def pickle_info(store: Store, node: Node) -> PickleInfo | None:
    """Size and imported globals of the node's pickle, read from its opcodes with bounded
    work: a pickle larger than :data:`MAX_PICKLE_BYTES` is not read, and a scan past its
    opcode or time budget stops; both say so (``info.unknown``: "too large to scan:
    imports unknown")."""
    key = pickle_key(node)
    if key is None or not store.is_file(key):
        return None
    size = store.entry(key).size
    if size > MAX_PICKLE_BYTES:
        return unscanned(size, f"larger than {MAX_PICKLE_BYTES >> 20} MiB")
    return scan_pickle(store.read_bytes(key, MAX_PICKLE_BYTES), store.display(key))
