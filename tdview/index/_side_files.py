"""The side files of a folder of checkpoints: JSON values, raw ``.memmap`` arrays typed
by a neighbouring JSON, pickles (see :mod:`._collection`). Read through the store, each
read bounded."""

from __future__ import annotations

import json
from typing import Any

from ..errors import TDViewError
from ..format import DEFAULT_MAX_DEPTH, DTYPES, LeafRecord, json_depth
from ..storage import Store
from ._node import Node

# Node kinds of a folder's side files (a raw .memmap is a LEAF: this is its class name).
JSON_FILE = "json"
PICKLE_FILE = "pickle"
RAW_MEMMAP = "raw .memmap"
#: The largest side JSON file whose value is read.
MAX_SIDE_JSON = 1024 * 1024


def read_side_json(store: Store, key: str) -> Any:
    """The value of a side ``.json`` file (at most :data:`MAX_SIDE_JSON` bytes, nesting
    bounded as a ``meta.json``'s)."""
    where = store.display(key)
    size = store.entry(key).size
    if size > MAX_SIDE_JSON:
        raise ValueError(
            f"{where} is {size:,} bytes: larger than the {MAX_SIDE_JSON:,} "
            "bytes tdview reads of a side JSON file"
        )
    data = store.read_bytes(key, MAX_SIDE_JSON)
    if json_depth(data) > DEFAULT_MAX_DEPTH:
        raise ValueError(f"{where} nests deeper than {DEFAULT_MAX_DEPTH} levels")
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{where} is not JSON: {error}") from None


def read_value(store: Store, node: Node) -> None:
    """Read a side JSON node's value once: a file that does not read is a problem of
    the node, kept."""
    assert node.file is not None
    try:
        node.value, node.has_value = read_side_json(store, node.file), True
    except (TDViewError, OSError, ValueError) as error:
        node.problems.append(str(error))
        node.has_value = True  # read once: the problem stays


def size_of(store: Store, key: str) -> int:
    """Bytes of file ``key`` (0 when it cannot be read)."""
    try:
        return store.entry(key).size
    except (TDViewError, OSError):
        return 0


def raw_record(name: str, dtype: str, shape: tuple[int, ...]) -> LeafRecord:
    """The leaf record of a raw array (a dtype of the closed table, a shape)."""
    return LeafRecord(key=name, dtype=DTYPES[dtype], shape=shape, is_nested=False, device=None)


def describe_raw_arrays(store: Store, dirkey: str, children: list[Node]) -> None:
    """Type the raw ``.memmap`` files of a folder from a neighbouring JSON.

    Two descriptions are read: torchrl's samplers (``sampler_metadata.json`` records
    ``_max_capacity``; ``sumtree.memmap`` and ``mintree.memmap`` hold that many float64,
    as torchrl 0.14's ``PrioritizedSampler.dumps`` writes them), and a JSON object that
    maps the file's stem to ``{"shape": [...], "dtype": "torch.<name>"}``. A description
    whose size does not fit the file is not used: the file stays raw bytes, with a
    problem that says so.
    """
    raws = [c for c in children if c.type_hint == RAW_MEMMAP]
    if not raws:
        return
    described: dict[str, tuple[str, tuple[int, ...], str]] = {}
    for side in children:
        if side.kind != JSON_FILE:
            continue
        if not side.has_value:
            read_value(store, side)
        value = side.value
        if not isinstance(value, dict):
            continue
        capacity = value.get("_max_capacity")
        if (
            side.key == "sampler_metadata.json"
            and isinstance(capacity, (int, float))
            and (capacity == int(capacity) and capacity >= 0)
        ):
            for stem in ("sumtree", "mintree"):
                described[stem] = ("torch.float64", (int(capacity),), side.key)
        for stem, spec in value.items():
            if isinstance(spec, dict) and spec.get("dtype") in DTYPES:
                shape = spec.get("shape")
                if isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape):
                    described[stem] = (spec["dtype"], tuple(shape), side.key)
    for raw in raws:
        stem = raw.key[: -len(".memmap")]
        if stem not in described:
            continue
        dtype, shape, source = described[stem]
        record = raw_record(raw.key, dtype, shape)
        size = size_of(store, raw.file or "")
        if record.nbytes == size:
            raw.record = record
        else:
            raw.problems.append(
                f"{store.display(raw.file or '')}: {source} describes it as {dtype} "
                f"{list(shape)} ({record.nbytes:,} bytes) but the file holds {size:,} "
                "bytes; shown as raw bytes"
            )
