"""The pickle policy: when ``other.pickle`` and ``pickle.pkl`` may be unpickled.

Unpickling runs arbitrary code, so ``allow_pickle`` decides: ``False`` refuses (naming
the file), ``True`` unpickles, and ``None`` unpickles with the ``FutureWarning`` that
tensordict 0.15 emits. An ``other.pickle`` that ``json_types.json`` describes (it only
holds the container classes ``dict``/``OrderedDict``/``list``/``tuple``, and its SHA-256
matches) is restored from the names, never unpickled, and never warned about.
"""

from __future__ import annotations

import pickle
import warnings
from typing import Any

from ..errors import CheckpointFormatError, PickleRefusedError
from ..format import json_type
from ..index import described_pickle
from ..storage import Store
from ._context import user_stacklevel

__all__ = ["PICKLE_WARNING", "check_allow_pickle", "non_tensor_extras", "unpickle_file"]

#: Largest pickle file the loader reads (the caller allowed unpickling it).
MAX_PICKLE_BYTES = 1 << 34

#: The text of the warning for ``allow_pickle=None``, as tensordict 0.15 words it.
PICKLE_WARNING = (
    "TensorDict.load_memmap is loading a pickled non-tensor field. This is only safe for "
    "trusted data. Starting with TensorDict 0.16, the default will change to "
    "allow_pickle=False. Pass allow_pickle=True to acknowledge trusted data or "
    "allow_pickle=False to reject pickle now."
)
_REFUSAL = (
    "Refusing to load pickled non-tensor data from a memory-mapped TensorDict. Pickle can "
    "execute arbitrary code. Pass allow_pickle=True only when the saved data is trusted. "
    "(pickled file: {where})"
)


def check_allow_pickle(allow_pickle: object) -> None:
    """Raise ``TypeError`` unless ``allow_pickle`` is True, False or None.

    Examples
    --------
    >>> check_allow_pickle(None)
    >>> check_allow_pickle("yes")
    Traceback (most recent call last):
    ...
    TypeError: allow_pickle must be a bool or None.
    """
    if allow_pickle is not None and not isinstance(allow_pickle, bool):
        raise TypeError("allow_pickle must be a bool or None.")


def unpickle_file(store: Store, key: str, allow_pickle: bool | None) -> Any:
    """Unpickle one file of the checkpoint under the ``allow_pickle`` policy.

    Parameters
    ----------
    store : Store
    key : str
        The store key of ``other.pickle`` or ``pickle.pkl``.
    allow_pickle : bool or None

    Raises
    ------
    PickleRefusedError
        ``allow_pickle`` is False (a ``RuntimeError`` naming the file).

    Examples
    --------
    >>> unpickle_file(store, "obj/other.pickle", allow_pickle=True)   # doctest: +SKIP
    {'data': {1, 2}}
    """
    where = store.display(key)
    if allow_pickle is False:
        raise PickleRefusedError(_REFUSAL.format(where=where))
    if allow_pickle is None:
        warnings.warn(PICKLE_WARNING, FutureWarning, stacklevel=user_stacklevel())
    return pickle.loads(store.read_bytes(key, MAX_PICKLE_BYTES))  # noqa: S301 - the caller allowed it (allow_pickle)


def non_tensor_extras(store: Store, dirkey: str, allow_pickle: bool | None) -> dict | None:
    """The non-tensor fields that a tensorclass or NonTensorData node keeps outside JSON.

    Parameters
    ----------
    store : Store
    dirkey : str
        The node's folder.
    allow_pickle : bool or None

    Returns
    -------
    dict or None
        ``{field: value}`` from ``json_types.json`` (when it matches ``other.pickle``) or
        from unpickling ``other.pickle``; None when the node has no ``other.pickle``.

    Raises
    ------
    PickleRefusedError
        The fields need unpickling and ``allow_pickle`` is False.
    CheckpointFormatError
        ``json_types.json`` is malformed, or names an unknown class.
    """
    pickle_key = f"{dirkey}/other.pickle" if dirkey else "other.pickle"
    if not store.is_file(pickle_key):
        return None
    names = described_pickle(store, dirkey)
    if names is not None:
        return {field: json_type(name) for field, name in names.items()}
    fields = unpickle_file(store, pickle_key, allow_pickle)
    if not isinstance(fields, dict):
        raise CheckpointFormatError(
            f"{store.display(pickle_key)}: expected a pickled dict of fields, got "
            f"{type(fields).__name__}"
        )
    return fields
