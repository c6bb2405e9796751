"""The tensordict checkpoint format, as tdview reads it (format versions 0 and 1).

This package turns bytes and decoded JSON into typed, immutable records. It does no
I/O: callers pass the bytes of a file and a ``where`` string (``"/ckpt/sub/meta.json"``
or ``"/x.tdz::sub/meta.json"``) that every error message names. It never unpickles,
never imports a module a checkpoint names, and imports torch only in
:func:`torch_dtype` and :meth:`IndexTensor.to_torch`.

Layout
------
A checkpoint is a tree of *nodes*. A node is a directory (or an archive folder)
holding one ``meta.json``: a UTF-8 JSON object, possibly with the non-standard
tokens ``NaN``, ``Infinity`` and ``-Infinity`` and integers of any width. The
decoder bounds the nesting depth and insists on an object at the root.

Every node has ``"_type"``, Python's ``str(cls)`` (``"<class 'tensordict._td.TensorDict'>"``).
Format version 1 adds ``"_format_version": 1`` and ``"_class": "module:qualname"``
(``"tensordict:TensorDict"``) to every node except tensorclass and NonTensorData
nodes. An integer version above 1 is refused; a missing or non-integer one
(a dict: see *colliding keys*) is version 0. The kind of a node comes from
``"_class"`` when it names one of tensordict's classes, else from ``"_type"``,
matched by qualname in any ``tensordict.*`` module (old paths such as
``tensordict.tensordict.TensorDict`` included). Other classes are user classes,
never imported: with ``"_class"`` they are TensorDict subclasses (or lazy-stack
subclasses when the node has an integer ``"stack_dim"`` and no ``"shape"``);
without it, a node with a ``"shape"`` list and a ``"device"`` is an older TensorDict
subclass, one with ``"_is_non_tensor": true`` a NonTensorData subclass, and
anything else a tensorclass.

Node kinds
----------
TensorDict (also TensorDictParams, PersistentTensorDict, stores, TypedTensorDict,
user subclasses) -- :class:`TensorDictNode`
    One flat object mixing entry records and node fields. Node fields:
    ``"shape"`` (batch size, default ``[]``), ``"device"`` (``"None"`` or absent
    means none; JSON ``null`` is an error), ``"_names"`` (a list of str/null,
    applied only when it is a list: all-null means no names, otherwise it must
    have one unique name per batch dim). Entry records, in file order:

    * leaf ``{"dtype": "torch.float32", "shape": [..], "is_nested": bool?,
      "device": str?}`` -> :class:`LeafRecord`, bytes in ``<name>.memmap``
      (raw, C-order, little-endian, no header; extra trailing bytes allowed; no
      file when ``numel == 0``). Nested (strided) leaves record the ``[N, D]``
      shape of their int64 sizes, stored in ``<name>.shape.memmap``, and pack
      the elements back to back in ``<name>.memmap``;
    * collection ``{"type": "<ClassName>"}`` -> :class:`CollectionRecord`, a
      child node in ``<name>/`` whose own ``meta.json`` decides its class;
    * any other value is skipped (listed in ``ignored_keys``).

    The reference loads leaves first, then collections (``load_order``).
    Colliding keys: an entry named ``"shape"``, ``"device"`` or ``"_type"`` was
    overwritten by the node field (its key is lost); one named
    ``"_format_version"``, ``"_class"`` or ``"_names"`` kept its dict record and
    the node field was dropped.
Tensorclass -- :class:`TensorclassNode`
    ``{"_type": "<class 'pkg.Point'>", <JSON non-tensor fields>}``; the fields live
    in ``_tensordict/`` (a TensorDict node), non-JSON extras in ``other.pickle``
    (or, when they are only container classes, described by ``json_types.json``:
    ``{"types": {field: "dict"|"OrderedDict"|"list"|"tuple"}, "pickle_sha256": hex}``,
    valid only when the hash matches).
NonTensorData / MetaData / ``MetaData[str]`` -- :class:`NonTensorDataNode`
    ``{"_type", "data", "_metadata", "_is_non_tensor"}`` with no ``_tensordict/``
    and no batch size; ``"data"`` absent means it is in ``other.pickle``. Older
    shapes: ``{"_type", "data"}`` or ``{"_type"}`` + ``other.pickle`` (0.3-0.4);
    ``_metadata`` pickled (0.14).
NonTensorStack -- :class:`NonTensorStackNode`
    ``{"stack_dim", "device", "data"}`` where ``"data"`` is nested lists, the
    string ``"pickle.pkl"`` (values pickled in that file; any other string is an
    error), or absent/null (members in ``0/``, ``1/``... like a lazy stack).
LazyStackedTensorDict -- :class:`LazyStackNode`
    ``{"stack_dim": int, "stack_dim_name": str|null}``; members in ``0/``,
    ``1/``... up to the first missing index.
Legacy lazy views -- :class:`ViewNode`
    ``{"custom_op", "custom_op_kwargs", "inv_op", "inv_op_kwargs", "shape",
    "device"}`` over ``_source/``; ops are squeeze{dim}|{}, unsqueeze{dim},
    view{size}, transpose{dim0, dim1}, permute{dims}, with int / list-of-int values.
``_SubTensorDict`` -- :class:`SubTensorDictNode`
    ``{"index"}`` over ``_source/``; tagged index ``["tuple", [..]]``,
    ``["list", [..]]``, ``["slice", {start, stop, step}]``, ``["range", {..}]``,
    ``["tensor", data, device]``, ``["ellipsis"]``, plain ints/bools/null, or the
    legacy untagged array (a tuple of items).

Dtypes
------
``str(torch.dtype)`` from a closed table (:data:`DTYPES`) of every torch 2.13
dtype with its item size. Quantized and sub-byte ``intN``/``uintN`` dtypes are
recognized but not loadable; float8/float4/bits dtypes are loadable (tensordict
0.15.3's own loader rejects them).

Key encoding
------------
Robust names (default): ``""`` -> ``%``, ``"."`` -> ``%2E``, ``".."`` -> ``%2E%2E``;
otherwise ``/ < > : " | ? * \\``, space, ``%``, 0x00-0x1F and 0x7F become ``%XX``
(upper-case hex) and everything else, non-ASCII included, is kept. Leaves are
``<name>.memmap``, collections ``<name>/``. Legacy writers (<= 0.13 for
collections, <= 0.12 for leaves) used the raw key; the reader falls back to it
when the robust name is missing and the raw key is safe (no ``/``/``\\``, no
drive prefix, and for a collection not ``""``/``.``/``..``). Version 0 nodes
written by 0.3 have no collection records at all (nested tensordicts are
subdirectories with a ``meta.json``): see
:attr:`TensorDictNode.legacy_no_collection_records`.

Pickles
-------
``other.pickle`` (tensorclass/NonTensorData fields) and ``pickle.pkl``
(NonTensorStack values) are only ever scanned here (:func:`scan_pickle` lists
the globals they would import, within bounded work: a scan past its opcode, byte
or time budget stops and says the imports are unknown).
"""

from __future__ import annotations

from ._classes import ClassRef, NodeKind, parse_class_id, parse_type_name
from ._dtypes import DTYPES, DTypeInfo, parse_dtype, torch_dtype
from ._json import DEFAULT_MAX_DEPTH, MAX_META_BYTES, json_depth, parse_meta_json
from ._json_types import JSON_TYPE_NAMES, JsonTypes, json_type, parse_json_types
from ._keys import (
    candidate_names,
    decode_name,
    encode_key,
    is_canonical_name,
    is_safe_legacy_key,
)
from ._kinds import (
    LazyStackNode,
    NodeMeta,
    NonTensorDataNode,
    NonTensorStackNode,
    SubTensorDictNode,
    TensorclassNode,
    ViewNode,
    ancestor_entry,
    parse_node,
)
from ._pickle_scan import (
    MAX_SCAN_BYTES,
    SCAN_STOPPED,
    PickleInfo,
    ScanLimits,
    scan_pickle,
    unscanned,
)
from ._records import (
    FORMAT_VERSION,
    CollectionRecord,
    LeafRecord,
    NodeBase,
    TensorDictNode,
)
from ._subtd_index import IndexTensor, decode_index, index_problem, to_torch_index

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DTYPES",
    "FORMAT_VERSION",
    "JSON_TYPE_NAMES",
    "MAX_META_BYTES",
    "MAX_SCAN_BYTES",
    "SCAN_STOPPED",
    "ClassRef",
    "CollectionRecord",
    "DTypeInfo",
    "IndexTensor",
    "JsonTypes",
    "LazyStackNode",
    "LeafRecord",
    "NodeBase",
    "NodeKind",
    "NodeMeta",
    "NonTensorDataNode",
    "NonTensorStackNode",
    "PickleInfo",
    "ScanLimits",
    "SubTensorDictNode",
    "TensorDictNode",
    "TensorclassNode",
    "ViewNode",
    "ancestor_entry",
    "candidate_names",
    "decode_index",
    "decode_name",
    "encode_key",
    "index_problem",
    "is_canonical_name",
    "is_safe_legacy_key",
    "json_depth",
    "json_type",
    "parse_class_id",
    "parse_dtype",
    "parse_json_types",
    "parse_meta_json",
    "parse_node",
    "parse_type_name",
    "scan_pickle",
    "to_torch_index",
    "torch_dtype",
    "unscanned",
]
