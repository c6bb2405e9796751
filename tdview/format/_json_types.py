"""``json_types.json``: a pickle-free description of some ``other.pickle`` files.

When every value in ``other.pickle`` is one of the container classes ``dict``,
``OrderedDict``, ``list`` or ``tuple`` (the class objects, as ``from_pytree``
stores them), the writer also saves
``{"types": {field: name}, "pickle_sha256": hex}``. If the SHA-256 of the
``other.pickle`` next to it matches, the fields are restored from the names and
the pickle is never read.
"""

from __future__ import annotations

import collections
import hashlib
from dataclasses import dataclass

from ..errors import CheckpointFormatError
from ._fields import fail
from ._json import parse_meta_json

__all__ = ["JSON_TYPE_NAMES", "JsonTypes", "json_type", "parse_json_types"]

#: The class names ``json_types.json`` may hold, sorted.
JSON_TYPE_NAMES = ("OrderedDict", "dict", "list", "tuple")
_CLASSES = {"OrderedDict": collections.OrderedDict, "dict": dict, "list": list, "tuple": tuple}


@dataclass(frozen=True)
class JsonTypes:
    """A parsed ``json_types.json``.

    Attributes
    ----------
    types : tuple of (str, str)
        ``(field, class name)`` pairs in file order. The names are checked only by
        :meth:`types_if_matches`, as in the reference, where a file whose hash
        does not match is ignored whatever it holds.
    pickle_sha256 : str or None
        The hex digest the file claims for ``other.pickle``.
    where : str
    """

    types: tuple[tuple[str, object], ...]
    pickle_sha256: str | None
    where: str

    def matches(self, pickle_bytes: bytes) -> bool:
        """Whether ``pickle_bytes`` (the whole ``other.pickle``) has the recorded hash."""
        return hashlib.sha256(pickle_bytes).hexdigest() == self.pickle_sha256

    def types_if_matches(self, pickle_bytes: bytes) -> dict[str, str] | None:
        """The field -> class name mapping, or None when the hash does not match.

        Raises
        ------
        CheckpointFormatError
            The hash matches and a name is not in :data:`JSON_TYPE_NAMES`.
        """
        if not self.matches(pickle_bytes):
            return None
        result = {}
        for field, name in self.types:
            if not isinstance(name, str) or name not in _CLASSES:
                raise CheckpointFormatError(
                    f"Unknown type name {name!r} for the field {field!r} in {self.where}. "
                    f"Expected one of {sorted(_CLASSES)}."
                )
            result[field] = name
        return result


def json_type(name: str) -> type:
    """The class a ``json_types.json`` name stands for (``"OrderedDict"`` -> ``OrderedDict``)."""
    return _CLASSES[name]


def parse_json_types(data: bytes, where: str) -> JsonTypes:
    """Decode ``json_types.json``.

    Parameters
    ----------
    data : bytes
        The whole file.
    where : str
        Its location, for error messages.

    Returns
    -------
    JsonTypes

    Raises
    ------
    CheckpointFormatError
        Not JSON, or not ``{"types": {str: ...}, "pickle_sha256": str}``.

    Examples
    --------
    >>> jt = parse_json_types(b'{"types": {"data": "dict"}, "pickle_sha256": "00"}', "jt.json")
    >>> jt.types, jt.matches(b"x")
    ((('data', 'dict'),), False)
    """
    obj = parse_meta_json(data, where, max_depth=4)
    types = obj.get("types")
    if not isinstance(types, dict):
        raise fail(where, 'field "types"', "expected an object", types)
    digest = obj.get("pickle_sha256")
    if digest is not None and not isinstance(digest, str):
        raise fail(where, 'field "pickle_sha256"', "expected a hex string", digest)
    return JsonTypes(tuple(types.items()), digest, where)
