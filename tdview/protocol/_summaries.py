"""Node summaries and details and children pages, from the index alone.

Nothing here reads a tensor payload byte or unpickles: sizes come from the index's
cached rollups, storage facts from the store's directory, pickle imports from opcodes.
"""

from __future__ import annotations

from typing import Any

from ..errors import TDViewError
from ..index import (
    LEAF,
    Node,
    Tree,
    cached_rollup,
    leaf_storage,
    needs_unpickling,
    pickle_info,
    pickle_key,
    rollup,
    size_problems,
    stack_members,
    stack_schema,
    storage_rows,
)
from ._duplicates import param_field
from ._json import bounded_value

#: Said of a node whose load unpickles, as ``tdview tree`` says it (``PICKLE_POLICY``).
PICKLE_PROBLEM = (
    "pickled value: unpickled only on load with allow_pickle=True, or None with a warning"
)


def dtype_name(name: str) -> str:
    """``"torch.float32"`` -> ``"float32"``."""
    return name.removeprefix("torch.")


def _problems(ckpt: Tree, node: Node, pickled: bool) -> list[str]:
    problems = list(node.problems)
    try:
        problems += size_problems(ckpt.store, node)
    except (TDViewError, OSError) as error:
        problems.append(str(error))
    if pickled:
        problems.append(PICKLE_PROBLEM)
    return problems


def _pickled(ckpt: Tree, node: Node) -> bool:
    try:
        return needs_unpickling(ckpt.store, node)
    except (TDViewError, OSError):
        return True


def _n_children(ckpt: Tree, node: Node) -> int:
    return 0 if node.is_leaf else ckpt.count_children(node)


def unread_summary(path: tuple[str, ...], kind: str, problems: list[str]) -> dict[str, Any]:
    """The ``NodeSummary`` of a node that cannot be read: its key, path, kind and
    problems, every fact null or empty."""
    return {
        "key": path[-1] if path else "",
        "path": list(path),
        "kind": kind,
        "class_name": "",
        "has_children": False,
        "n_children": 0,
        "shape": None,
        "dtype": None,
        "batch_size": None,
        "stack_dim": None,
        "bytes": None,
        "numel": None,
        "pickled": False,
        "problems": problems,
    }


def summary(ckpt: Tree, node: Node, *, totals: bool = True) -> dict[str, Any]:
    """The ``NodeSummary`` of a node (protocol v1).

    Leaves report their shape and dtype (``"float32"``, without ``torch.``); other nodes
    their batch size. ``bytes`` and ``numel`` are the subtree's rollup (cached by the
    index), None for a node that holds no tensor (a non-tensor value); ``bytes`` counts
    the pickle files that loading would unpickle too (a pickled value alone has
    ``bytes`` and no ``numel``). ``pickled`` says whether loading the node alone would
    unpickle; ``problems`` lists what the index and the size checks found.

    Parameters
    ----------
    ckpt : Checkpoint
    node : Node
    totals : bool
        ``False`` reports a collection's ``bytes``/``numel`` only when its rollup is
        already cached (None otherwise): the widget's first paint must not walk a
        million-key tree. A leaf, and a node without children (a pickled value: its
        file's size), always report their own.

    Returns
    -------
    dict
        ``key, path, kind, class_name, has_children, n_children, shape, dtype,
        batch_size, stack_dim, bytes, numel, pickled, problems``.

    Examples
    --------
    >>> ckpt = Checkpoint("demo_ckpt")                                # doctest: +SKIP
    >>> summary(ckpt, ckpt.node("replay/reward"))["dtype"]              # doctest: +SKIP
    'bfloat16'
    """
    record = node.record
    n_children = _n_children(ckpt, node)
    # a leaf's totals are its own, a childless node's its pickle file's (no walk):
    # always there, so a pickled value shows its size at first paint
    cheap = node.is_leaf or n_children == 0
    total = rollup(ckpt, node) if totals or cheap or cached_rollup(ckpt, node) is not None else None
    holds_tensors = total is not None and (node.is_leaf or total.leaves > 0 or n_children > 0)
    sized = holds_tensors or (total is not None and total.pickles > 0)
    batch = None if node.is_leaf else ckpt.batch_size(node)
    stack_dim = getattr(node.meta, "stack_dim", None)
    pickled = _pickled(ckpt, node)
    shape = list(record.shape) if record is not None and not record.is_nested else None
    return {
        "key": node.key,
        "path": list(node.path),
        "kind": node.kind,
        "class_name": node.class_name,
        "has_children": n_children > 0,
        "n_children": n_children,
        "shape": shape,
        "dtype": dtype_name(record.dtype.name) if record is not None else None,
        "batch_size": None if batch is None else list(batch),
        "stack_dim": stack_dim if isinstance(stack_dim, int) else None,
        "bytes": total.bytes if total is not None and sized else None,
        "numel": total.numel if total is not None and holds_tensors else None,
        "pickled": pickled,
        "problems": _problems(ckpt, node, pickled),
    }


def _storage(ckpt: Tree, node: Node) -> dict[str, Any] | None:
    """Where a leaf's or a pickled value's bytes are: ``offset`` only in an archive (a
    file of its own starts at 0, which says nothing)."""
    packed = ckpt.store.packed
    if node.is_leaf:
        facts = leaf_storage(ckpt.store, node)
        if facts.location is None:
            return None
        return {
            "location": facts.location,
            "offset": facts.offset if packed else None,
            "stored_bytes": facts.stored_bytes,
            "compression": facts.compression,
            "crc32": facts.crc32,
            "cost": facts.cost,
        }
    key = pickle_key(node)
    if key is None or not ckpt.store.is_file(key):
        return None
    payload = ckpt.store.locate(key)
    return {
        "location": payload.display,
        "offset": payload.offset if packed else None,
        "stored_bytes": payload.stored_size,
        "compression": payload.compression,
        "crc32": payload.crc32,
        "cost": "copy" if payload.compression == "stored" else "decompress",
    }


def _pickle(ckpt: Tree, node: Node, problems: list[str]) -> dict[str, Any] | None:
    try:
        info = pickle_info(ckpt.store, node)
    except (TDViewError, OSError) as error:
        problems.append(str(error))
        return None
    if info is None:
        return None
    if info.unknown is not None:  # the scan stopped: what it found is not all
        problems.append(f"{ckpt.store.display(pickle_key(node) or '')}: {info.unknown}")
    return {
        "bytes": info.size,
        "globals": [[module, name] for module, name in info.globals],
        "stopped": info.unknown,
    }


def _rows(ckpt: Tree, node: Node, problems: list[str]) -> dict[str, int] | None:
    """``{written, capacity}`` of a torchrl storage (a bad ``storage_metadata.json`` is
    a problem of the node)."""
    try:
        found = storage_rows(ckpt, node)
    except (TDViewError, OSError) as error:
        problems.append(str(error))
        return None
    return None if found is None else {"written": found.written, "capacity": found.capacity}


def _device(ckpt: Tree, node: Node) -> str | None:
    if not node.is_leaf:
        return ckpt.device(node)
    parent = ckpt.node(node.path[:-1]) if node.path else ckpt.root
    found = ckpt.device(parent)
    if found is None and node.record is not None:
        found = node.record.device
    return found


def details(ckpt: Tree, node: Node, *, totals: bool = True) -> dict[str, Any]:
    """The ``NodeDetails`` of a node: its summary plus names, device, ``"a/b"`` subpath,
    storage facts (where the bytes are, what loading them costs), the inline JSON value
    of a non-tensor node (JSON-safe and bounded), pickle facts and the subtree rollup
    (``totals=False``: only when it is cached, see :func:`summary`), and ``rows``, the
    ``{written, capacity}`` rows of a torchrl replay-buffer storage (None elsewhere).

    Examples
    --------
    >>> ckpt = Checkpoint("demo_ckpt.tdz")                            # doctest: +SKIP
    >>> details(ckpt, ckpt.node("replay"))["rollup"]["leaves"]          # doctest: +SKIP
    5
    """
    result = summary(ckpt, node, totals=totals)
    names = None if node.is_leaf else ckpt.names(node)
    problems = result["problems"]
    total = None
    if not node.is_leaf and result["bytes"] is not None:
        found = rollup(ckpt, node)
        total = {
            "bytes": found.bytes,
            "numel": found.numel,
            "leaves": found.leaves,
            "by_dtype": {dtype_name(k): v for k, v in found.by_dtype.items()},
        }
        if found.pickles:  # pickled values below: their files are in "bytes", no leaf
            total.update(pickles=found.pickles, pickle_bytes=found.pickle_bytes)
    try:
        storage = _storage(ckpt, node)
    except (TDViewError, OSError) as error:
        problems.append(str(error))
        storage = None
    result.update(
        names=None if names is None else list(names),
        device=_device(ckpt, node),
        subpath="/".join(node.path),
        storage=storage,
        value=bounded_value(node.value) if node.has_value else None,
        pickle=_pickle(ckpt, node, problems),
        rollup=total,
        rows=_rows(ckpt, node, problems),
    )
    param = param_field(ckpt, node)  # an optimizer's state/<i>: its parameter, or why not
    if param is not None:
        result["param"] = param
    if not node.path and ckpt.store.metadata:  # the file's own (safetensors' __metadata__)
        result["metadata"] = bounded_value(ckpt.store.metadata)
    if stack_members(ckpt, node) is not None:  # a lazy stack: its merged schema, with
        result["schema"] = _schema(ckpt, node) if total is not None else None  # totals
    return result


#: Entries of a lazy stack's schema sent at most (a stack of models may hold thousands).
MAX_SCHEMA_ENTRIES = 1000


def _schema(ckpt: Tree, node: Node) -> dict[str, Any] | None:
    """``{members, stack_dim, entries, truncated}``: the merged schema of a lazy stack
    (:func:`~tdview.index.stack_schema`), each entry ``{key, kind, class_name, dtype,
    shape, members}`` with -1 in a dim where the members differ."""
    found = stack_members(ckpt, node)
    entries = stack_schema(ckpt, node)
    if found is None or entries is None:
        return None
    return {
        "members": len(found[0]),
        "stack_dim": found[1],
        "entries": [
            {
                "key": list(e.key),
                "kind": e.kind,
                "class_name": e.class_name,
                "dtype": None if e.dtype is None else dtype_name(e.dtype),
                "shape": None if e.shape is None else list(e.shape),
                "members": e.members,
            }
            for e in entries[:MAX_SCHEMA_ENTRIES]
        ],
        "truncated": len(entries) > MAX_SCHEMA_ENTRIES,
    }


def children_page(
    ckpt: Tree, path: tuple[str, ...], offset: int, limit: int, *, totals: bool = True
) -> dict:
    """One page of a node's children as ``ChildrenResult``: ``{path, offset, total,
    children}``; ``total`` counts every child, ``children`` at most ``limit`` summaries
    (``totals=False``: without the rollups not cached yet, see :func:`summary`).

    Examples
    --------
    >>> page = children_page(Checkpoint("demo_ckpt"), (), 0, 2)       # doctest: +SKIP
    >>> page["total"], [c["key"] for c in page["children"]]          # doctest: +SKIP
    (10, ['model', 'optimizer'])
    """
    node = ckpt.node(path) if path else ckpt.root
    page = ckpt.page(node, offset, limit) if node.kind != LEAF else None
    items = page.items if page is not None else []
    return {
        "path": list(path),
        "offset": offset,
        "total": page.total if page else 0,
        "children": [summary(ckpt, child, totals=totals) for child in items],
    }
