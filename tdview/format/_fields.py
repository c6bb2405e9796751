"""Small validators shared by the record parsers.

Every failure raises :class:`~tdview.errors.CheckpointFormatError` with a message
of the form ``"<where>: <context>: <problem>, got <value>"``, where ``context``
names the entry key or the node field.
"""

from __future__ import annotations

import re

from .._text import echo
from ..errors import CheckpointFormatError

__all__ = [
    "MAX_DIM",
    "MAX_NBYTES",
    "MAX_RANK",
    "check_bool",
    "check_device",
    "check_int",
    "check_opt_str",
    "check_shape",
    "fail",
    "short_repr",
]

#: Largest rank accepted for a batch size or a leaf shape.
MAX_RANK = 64
#: Largest single dimension (torch sizes are int64).
MAX_DIM = 2**63 - 1
#: ``numel * itemsize`` of a leaf must stay below this.
MAX_NBYTES = 2**62

_DEVICE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?::[0-9]{1,9})?")
# Device strings already found valid (a checkpoint names the same one on every node).
_GOOD_DEVICES: set[str] = {"cpu"}


def short_repr(value: object, limit: int = 120) -> str:
    """``repr`` of a value for error messages: bounded however long or deep the value
    is, and escaped (:func:`tdview._text.echo`)."""
    return echo(value, limit)


def fail(where: str, context: str, problem: str, value: object) -> CheckpointFormatError:
    """Build (not raise) the error for a bad value."""
    return CheckpointFormatError(f"{where}: {context}: {problem}, got {short_repr(value)}")


def check_int(value: object, where: str, context: str) -> int:
    """Return ``value`` if it is a JSON integer (a bool is not), else raise."""
    if type(value) is not int:
        raise fail(where, context, "expected an integer", value)
    return value


def check_bool(value: object, where: str, context: str) -> bool:
    """Return ``value`` if it is a JSON boolean, else raise."""
    if type(value) is not bool:
        raise fail(where, context, "expected true or false", value)
    return value


def check_opt_str(value: object, where: str, context: str) -> str | None:
    """Return ``value`` if it is a string or ``None``, else raise."""
    if value is not None and not isinstance(value, str):
        raise fail(where, context, "expected a string or null", value)
    return value


def check_device(value: object, where: str, context: str, *, allow_null: bool) -> str | None:
    """Validate a device string such as ``"cpu"`` or ``"cuda:0"``.

    The string ``"None"`` means no device and gives ``None``; so does JSON ``null``
    when ``allow_null``.
    """
    if type(value) is str and value in _GOOD_DEVICES:
        return value
    if value is None and allow_null:
        return None
    if not isinstance(value, str):
        raise fail(where, context, "expected a device string", value)
    if value == "None":
        return None
    if len(value) > 64 or not _DEVICE.fullmatch(value):
        raise fail(where, context, "not a device string such as 'cpu' or 'cuda:0'", value)
    if len(_GOOD_DEVICES) < 64:
        _GOOD_DEVICES.add(value)
    return value


def check_shape(
    value: object, where: str, context: str, *, itemsize: int | None = None
) -> tuple[int, ...]:
    """Validate a shape: a list of non-negative integers of bounded rank and size.

    Parameters
    ----------
    value : object
        The decoded JSON value.
    where, context : str
        For error messages.
    itemsize : int, optional
        When given, ``numel * itemsize`` must be below :data:`MAX_NBYTES` (with each 0
        counted as 1: an empty tensor's strides must fit too).

    Returns
    -------
    tuple of int
    """
    if not isinstance(value, list):
        raise fail(where, context, "expected a list of non-negative integers", value)
    if len(value) > MAX_RANK:
        raise fail(where, context, f"rank {len(value)} exceeds the limit of {MAX_RANK}", value)
    for dim in value:
        if type(dim) is not int or dim < 0:
            raise fail(where, context, "expected a list of non-negative integers", value)
        if dim > MAX_DIM:
            raise fail(where, context, "a dimension does not fit in 64 bits", value)
    shape = tuple(value)
    if itemsize is not None:
        # a 0 makes no elements, but torch still needs the strides of the other sizes
        total = itemsize
        for dim in shape:
            total *= dim or 1
            if total >= MAX_NBYTES:
                why = (
                    "numel * itemsize reaches 2**62 bytes"
                    if 0 not in shape
                    else "its sizes other than 0 reach 2**62 bytes (torch cannot make strides)"
                )
                raise fail(where, context, why, value)
    return shape
