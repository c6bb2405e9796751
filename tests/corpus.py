"""A corpus of checkpoints covering every node kind and dtype, written by tensordict's
own writers in every container: directory, ``.tdz`` (stored, aligned), and archives
packed with each compression. Index and loader tests compare against tensordict on it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from tensordict import (
    LazyStackedTensorDict,
    MetaData,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictParams,
    pack_memmap,
    set_lazy_legacy,
    tensorclass,
)

#: Dtypes tensordict 0.15.3's own loader reads back (the rest load only in tdview).
REFERENCE_DTYPES = [
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex32",
    "complex64",
    "complex128",
]
#: Dtypes tensordict writes but its loader rejects.
EXTRA_DTYPES = [
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "bits8",
    "bits16",
]


@tensorclass
class Point:
    """A tensorclass with tensor, nested and non-tensor fields."""

    pos: torch.Tensor
    vel: torch.Tensor
    label: str
    count: int
    tags: list
    inner: TensorDict


def _patterned(dtype_name: str, shape: tuple[int, ...]) -> torch.Tensor:
    """Distinct bytes in every element, viewed as ``dtype_name`` (any dtype)."""
    dtype = getattr(torch, dtype_name)
    numel = math.prod(shape)
    raw = (torch.arange(numel * dtype.itemsize) * 7 % 61).to(torch.uint8)
    if dtype == torch.bool:
        return (raw[:numel] % 2).bool().reshape(shape)
    return raw.view(dtype).reshape(shape)


def plain_nested() -> TensorDict:
    return TensorDict(
        obs=torch.randn(2, 3, 4),
        step=torch.arange(6).reshape(2, 3),
        nested=TensorDict(
            reward=torch.randn(2, 3, 1),
            deeper=TensorDict(flag=torch.ones(2, 3, dtype=torch.bool), batch_size=[2, 3]),
            batch_size=[2, 3],
        ),
        empty_level=TensorDict(batch_size=[2, 3]),
        batch_size=[2, 3],
        names=["batch", "time"],
    )


def dtypes(names: list[str] = REFERENCE_DTYPES) -> TensorDict:
    return TensorDict({name: _patterned(name, (2, 3)) for name in names})


def edge_leaves() -> TensorDict:
    nested = torch.nested.nested_tensor(
        [torch.arange(6.0).reshape(2, 3), torch.arange(4.0).reshape(1, 4)]
    )
    return TensorDict(
        scalar=torch.tensor(3.5),
        empty_rows=torch.zeros(0, 5),
        empty_cols=torch.zeros(3, 0, dtype=torch.int64),
        jagged=nested,
        partial_names=TensorDict(x=torch.zeros(2, 4), batch_size=[2, 4], names=["a", None]),
    )


TRICKY_KEYS = [
    "a b",
    "a/b",
    "%",
    "",
    ".",
    "ключ",
    "emoji😀",
    "x.memmap",
    "meta.json",
    "_class",
    "tab\there",
    'q?*<>|:"\\',
]


def tricky_keys() -> TensorDict:
    leaves = {key: torch.full((2,), float(i)) for i, key in enumerate(TRICKY_KEYS)}
    collections = {
        "sub dir": TensorDict(v=torch.ones(1)),
        "..": TensorDict(w=torch.ones(1)),
        ".": TensorDict(z=torch.zeros(1)),
        "ключи": TensorDict(u=torch.ones(1)),
    }
    return TensorDict({**leaves, **collections})


def tensorclass_tree() -> TensorDict:
    point = Point(
        pos=torch.randn(2, 3),
        vel=torch.randn(2, 3, dtype=torch.float64),
        label="json-string",
        count=3,
        tags=["a", "b"],
        inner=TensorDict(z=torch.zeros(2, 1), batch_size=[2]),
        batch_size=[2],
    )
    return TensorDict(tc=point, params=TensorDictParams(TensorDict(w=torch.ones(3))))


def non_tensor() -> TensorDict:
    return TensorDict(
        text=NonTensorData("hello"),
        number=NonTensorData(5),
        nan=NonTensorData(float("nan")),
        mapping=NonTensorData({"lr": 0.1, "betas": [0.9, 0.99]}),
        meta=MetaData({"width": 64}),
        a_set=NonTensorData({"x", "y"}),
        stack=NonTensorStack(*(NonTensorData(s) for s in "abc")),
        grid=NonTensorStack(
            *(NonTensorStack(*(NonTensorData(f"s{i}{j}") for j in range(3))) for i in range(2))
        ),
        pickled_stack=NonTensorStack(NonTensorData({1, 2}), NonTensorData({3})),
    )


def lazy_stacks() -> TensorDict:
    members = [
        TensorDict(a=torch.zeros(3, 2), only_first=torch.ones(3), batch_size=[3]),
        TensorDict(
            a=torch.ones(3, 2), sub=TensorDict(b=torch.ones(3, 4), batch_size=[3]), batch_size=[3]
        ),
    ]
    return TensorDict(
        ls=LazyStackedTensorDict(*members, stack_dim=1, stack_dim_name="s"),
        ls0=LazyStackedTensorDict(
            TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(2)), stack_dim=0
        ),
    )


def legacy_views() -> TensorDict:
    """Permuted/unsqueezed views and a sub-tensordict (only directories keep the layout)."""
    source = TensorDict(a=torch.arange(24.0).reshape(2, 3, 4), batch_size=[2, 3])
    with set_lazy_legacy(True):
        permuted = source.permute(1, 0)
        unsqueezed = source.unsqueeze(0)
    sub = source._get_sub_tensordict((slice(0, 1), torch.tensor([0, 2])))
    return TensorDict(permuted=permuted, unsqueezed=unsqueezed, sub=sub)


BUILDERS: dict[str, Callable[[], TensorDict]] = {
    "plain_nested": plain_nested,
    "dtypes": dtypes,
    "edge_leaves": edge_leaves,
    "tricky_keys": tricky_keys,
    "tensorclass_tree": tensorclass_tree,
    "non_tensor": non_tensor,
    "lazy_stacks": lazy_stacks,
    "legacy_views": legacy_views,
}

#: How a checkpoint is written: a directory, ``td.save(".tdz")``, or ``pack_memmap``.
CONTAINERS = ["dir", "tdz", "packed", "deflate", "bzip2", "lzma"]


def write(td: TensorDict, root: Path, name: str, container: str) -> Path:
    """Write ``td`` under ``root`` in ``container`` form and return the checkpoint path."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if container == "tdz":
            path = root / f"{name}.tdz"
            td.save(str(path))
            return path
        directory = root / f"{name}.dir"
        if not directory.exists():
            td.memmap(directory)
        if container == "dir":
            return directory
        path = root / f"{name}.{container}.zip"
        pack_memmap(directory, path, compression=None if container == "packed" else container)
        return path


def write_at(td: TensorDict, path: Path) -> Path:
    """Write ``td`` at ``path``: a ``.tdz`` archive for that suffix, else a directory."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if path.suffix == ".tdz":
            td.save(str(path))
        else:
            td.memmap(path)
    return path


def write_diff_pair(a_path: Path, b_path: Path) -> tuple[Path, Path]:
    """Two checkpoints of a model before and after a step: ``w`` changed, a key renamed
    (``old`` -> ``new``), one added (``extra``), ``step`` changed, ``same`` unchanged."""
    torch.manual_seed(0)
    a = TensorDict(
        model=TensorDict(w=torch.randn(4, 3), b=torch.zeros(3), old=torch.arange(6.0)),
        step=torch.tensor(1),
        same=torch.ones(5),
    )
    b = a.clone()
    b["model", "w"] = a["model", "w"] + 0.5
    b["model", "new"] = b["model"].pop("old")
    b["extra"] = torch.zeros(2)
    b["step"] = torch.tensor(2)
    return write_at(a, a_path), write_at(b, b_path)
