"""The checkpoint index: a lazy tree over a store, read from metadata alone.

Both the browser and the loader stand on it. It never reads a payload byte, never
unpickles, never imports a module named in a checkpoint, and never writes.
"""

from __future__ import annotations

from ._cancel import cancel_point, cancellable
from ._checkpoint import Checkpoint, open_tree
from ._children import collection_names, leaf_names
from ._collection import (
    FOLDER,
    JSON_FILE,
    MAX_DEPTH,
    MEMBER,
    PICKLE_FILE,
    RAW_MEMMAP,
    Collection,
    is_folder,
    not_a_checkpoint_folder,
)
from ._dims import range_problem
from ._facts import (
    DECOMPRESS,
    LeafStorage,
    described_pickle,
    leaf_entry,
    leaf_storage,
    needs_unpickling,
    pickle_info,
    pickle_key,
    refusal,
    size_problems,
)
from ._loading import LoadAccess
from ._match import Matcher, compile_pattern, path_matcher
from ._node import (
    LAZY_STACK,
    LEAF,
    NON_TENSOR,
    NON_TENSOR_STACK,
    TENSORCLASS,
    TENSORDICT,
    VIEW,
    LeafFile,
    LoadItem,
    Node,
    PlainFolder,
)
from ._optimizer import OptimizerMap, ParamLabel, optimizer_map, param_label
from ._paths import NestedPath, join_key, normalize_subpath, show_path
from ._replay import StorageRows, rows_of_leaf, storage_rows
from ._rollup import Rollup, cached_rollup, rollup
from ._schema import SchemaEntry, schema_lines, stack_members, stack_schema
from ._search import SearchPage, iter_matches, search, search_page, walk
from ._subpath import resolve_subpath
from ._tree import Located, Page, Tree, load_access

__all__ = [
    "DECOMPRESS",
    "FOLDER",
    "JSON_FILE",
    "LAZY_STACK",
    "LEAF",
    "MAX_DEPTH",
    "MEMBER",
    "NON_TENSOR",
    "NON_TENSOR_STACK",
    "PICKLE_FILE",
    "RAW_MEMMAP",
    "TENSORCLASS",
    "TENSORDICT",
    "VIEW",
    "Checkpoint",
    "Collection",
    "LeafFile",
    "LeafStorage",
    "LoadAccess",
    "LoadItem",
    "Located",
    "Matcher",
    "NestedPath",
    "Node",
    "OptimizerMap",
    "Page",
    "ParamLabel",
    "PlainFolder",
    "Rollup",
    "SchemaEntry",
    "SearchPage",
    "StorageRows",
    "Tree",
    "cached_rollup",
    "cancel_point",
    "cancellable",
    "collection_names",
    "compile_pattern",
    "described_pickle",
    "is_folder",
    "iter_matches",
    "join_key",
    "leaf_entry",
    "leaf_names",
    "leaf_storage",
    "load_access",
    "needs_unpickling",
    "normalize_subpath",
    "not_a_checkpoint_folder",
    "optimizer_map",
    "param_label",
    "open_tree",
    "path_matcher",
    "pickle_info",
    "pickle_key",
    "range_problem",
    "refusal",
    "resolve_subpath",
    "rollup",
    "rows_of_leaf",
    "schema_lines",
    "search",
    "search_page",
    "show_path",
    "size_problems",
    "stack_members",
    "stack_schema",
    "storage_rows",
    "walk",
]
