"""The closed table of dtype strings a leaf record may carry.

A leaf's ``"dtype"`` is ``str(torch.dtype)``, e.g. ``"torch.float32"``. The table
below lists every dtype of torch 2.13 by that string, with its item size, so the
format layer can check sizes without importing torch. Anything else is rejected.

``loadable`` says whether tdview materializes the dtype: quantized dtypes need a
scale and zero point that the format does not record, and the sub-byte
``int1``..``int7``/``uint1``..``uint7`` dtypes cannot be copied by torch (tensordict
cannot write them either). ``in_reference`` says whether tensordict 0.15.3's
loader knows the string: it lacks the float8/float4/bits dtypes although its
writer produces them, so tdview reading them is an extension.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import CheckpointFormatError

__all__ = ["DTYPES", "DTypeInfo", "parse_dtype", "torch_dtype"]


@dataclass(frozen=True)
class DTypeInfo:
    """One entry of the dtype table.

    Attributes
    ----------
    name : str
        The string stored in ``meta.json``, e.g. ``"torch.float32"``.
    itemsize : int
        Bytes per element on disk.
    torch_name : str
        The attribute of the ``torch`` module, e.g. ``"float32"``.
    loadable : bool
        Whether tdview can turn the bytes into a tensor of this dtype.
    kind : str
        ``"bool"``, ``"int"``, ``"uint"``, ``"float"``, ``"complex"``, ``"bits"``,
        ``"quantized"`` or ``"subbyte"``.
    in_reference : bool
        Whether tensordict 0.15.3's loader accepts the string.
    """

    name: str
    itemsize: int
    torch_name: str
    loadable: bool
    kind: str
    in_reference: bool


_REFERENCE = {
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex32", "complex64", "complex128",
    "qint8", "qint32", "quint8", "quint4x2",
}  # fmt: skip

_ROWS: tuple[tuple[str, int, str], ...] = (
    ("bool", 1, "bool"),
    ("uint8", 1, "uint"),
    ("uint16", 2, "uint"),
    ("uint32", 4, "uint"),
    ("uint64", 8, "uint"),
    ("int8", 1, "int"),
    ("int16", 2, "int"),
    ("int32", 4, "int"),
    ("int64", 8, "int"),
    ("float16", 2, "float"),
    ("bfloat16", 2, "float"),
    ("float32", 4, "float"),
    ("float64", 8, "float"),
    ("float8_e4m3fn", 1, "float"),
    ("float8_e5m2", 1, "float"),
    ("float8_e4m3fnuz", 1, "float"),
    ("float8_e5m2fnuz", 1, "float"),
    ("float8_e8m0fnu", 1, "float"),
    ("float4_e2m1fn_x2", 1, "float"),
    ("complex32", 4, "complex"),
    ("complex64", 8, "complex"),
    ("complex128", 16, "complex"),
    ("bits8", 1, "bits"),
    ("bits16", 2, "bits"),
    ("bits1x8", 1, "bits"),
    ("bits2x4", 1, "bits"),
    ("bits4x2", 1, "bits"),
    ("qint8", 1, "quantized"),
    ("qint32", 4, "quantized"),
    ("quint8", 1, "quantized"),
    ("quint4x2", 1, "quantized"),
    ("quint2x4", 1, "quantized"),
    *((f"int{n}", 1, "subbyte") for n in range(1, 8)),
    *((f"uint{n}", 1, "subbyte") for n in range(1, 8)),
)

#: Every known dtype string, ``"torch.<name>"`` -> :class:`DTypeInfo`.
DTYPES: dict[str, DTypeInfo] = {
    f"torch.{name}": DTypeInfo(
        name=f"torch.{name}",
        itemsize=size,
        torch_name=name,
        loadable=kind not in ("quantized", "subbyte"),
        kind=kind,
        in_reference=name in _REFERENCE,
    )
    for name, size, kind in _ROWS
}


def parse_dtype(value: object, where: str, key: str) -> DTypeInfo:
    """Look up the ``"dtype"`` of a leaf record in the closed table.

    Parameters
    ----------
    value : object
        The decoded JSON value.
    where : str
        The ``meta.json`` location, for error messages.
    key : str
        The leaf's key, for error messages.

    Returns
    -------
    DTypeInfo

    Raises
    ------
    CheckpointFormatError
        ``value`` is not a string of the table.

    Examples
    --------
    >>> parse_dtype("torch.bfloat16", "meta.json", "w").itemsize
    2
    """
    info = DTYPES.get(value) if isinstance(value, str) else None
    if info is None:
        raise CheckpointFormatError(
            f"{where}: leaf {key!r}: unknown dtype {_short(value)} "
            "(expected a torch dtype string such as 'torch.float32')"
        )
    return info


def torch_dtype(dtype: DTypeInfo | str) -> Any:
    """Return the ``torch.dtype`` of a table entry, importing torch on first use.

    Parameters
    ----------
    dtype : DTypeInfo or str
        A table entry, or its ``"torch.<name>"`` string.

    Returns
    -------
    torch.dtype

    Raises
    ------
    CheckpointFormatError
        The string is not in the table, or the installed torch lacks the dtype.

    Examples
    --------
    >>> torch_dtype("torch.int16")
    torch.int16
    """
    info = dtype if isinstance(dtype, DTypeInfo) else DTYPES.get(dtype)
    if info is None:
        raise CheckpointFormatError(f"unknown dtype {_short(dtype)}")
    import torch

    result = getattr(torch, info.torch_name, None)
    if not isinstance(result, torch.dtype):
        raise CheckpointFormatError(
            f"dtype {info.name} is not available in torch {torch.__version__}"
        )
    return result


def _short(value: object, limit: int = 120) -> str:
    """``repr`` of a value, cut to ``limit`` characters for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
