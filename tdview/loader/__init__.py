"""Load: index nodes -> tensordict objects, with tdview's own reading of the bytes.

:func:`load_memmap` (alias :func:`load`) does what tensordict's ``load_memmap`` does, on
top of :class:`~tdview.index.Checkpoint`; ``Checkpoint.load`` and
``Checkpoint.load_leaf`` run the same loader on an open index, so that later loads cost
only their subtree. Each entry point only builds a :class:`LoadRequest` (the options,
checked once when it is made) and hands it to :func:`run`. tensordict supplies the
result types (TensorDict, tensorclasses, MemoryMappedTensor, NonTensorData,
NonTensorStack, LazyStackedTensorDict, the legacy views); none of its loading code is
used.

Modules: :mod:`._api` (``LoadRequest``, ``run``, subpath), :mod:`._build` (each node kind),
:mod:`._leaves` (one leaf), :mod:`._mapping` (the one archive mapping),
:mod:`._classes` (saved class -> Python class), :mod:`._pickles` (pickle policy),
:mod:`._index` (``index=``: only the rows selected),
:mod:`._prefetch` (parallel decompression), :mod:`._out` (``out=``), :mod:`._stacks`
(NonTensorStack values), :mod:`._context` (the state of one load).

This module imports torch and tensordict only when a load runs: ``import tdview`` stays
light, and the metadata-only layers never import torch.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..index import resolve_subpath
    from ._api import LoadRequest, load_leaf, run
    from ._pickles import PICKLE_WARNING, non_tensor_extras, unpickle_file

__all__ = [
    "PICKLE_WARNING",
    "LoadRequest",
    "import_modules",
    "load",
    "load_leaf",
    "load_memmap",
    "non_tensor_extras",
    "resolve_subpath",
    "run",
    "unpickle_file",
]

_LAZY = {
    "LoadRequest": "._api",
    "run": "._api",
    "load_leaf": "._api",
    "resolve_subpath": "..index",
    "PICKLE_WARNING": "._pickles",
    "non_tensor_extras": "._pickles",
    "unpickle_file": "._pickles",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def import_modules() -> None:
    """Import the loader's modules (torch, tensordict, the walk) now: on a thread while a
    load form is open, so that the load asked next does not wait for them."""
    from . import _build, _walk  # noqa: F401


def load_memmap(
    prefix: str | os.PathLike[str],
    device: Any = None,
    non_blocking: bool = False,
    *,
    out: Any = None,
    robust_key: bool | None = None,
    subpath: Any = None,
    mode: str | None = None,
    num_threads: int = 0,
    allow_pickle: bool | None = None,
    index: Any = None,
) -> Any:
    """Load a tensordict that ``memmap()`` or ``save()`` wrote, from a directory or an archive.

    tdview's own reading of tensordict's ``TensorDictBase.load_memmap`` (0.15): same
    arguments, same result classes. From a directory, each leaf is a
    :class:`~tensordict.MemoryMappedTensor` of its file; from an archive, each leaf is a
    view into one memory map of the archive (compressed or unaligned entries are copied).
    Only the pages of the leaves you use are read. The result has the saved class and is
    not locked.

    Parameters
    ----------
    prefix : str or Path
        A checkpoint directory, or an archive (``.tdz``, or any zip with a top-level
        ``meta.json``).
    device : torch.device, str or int, optional
        The device of the result. The leaves are copied there (which reads the files)
        unless it is the CPU. ``"meta"`` reads no leaf data and gives meta tensors.
        Defaults to None: the leaves stay memory-mapped on the CPU.
    non_blocking : bool, optional
        If True, the device is not synchronized after the copies.

    Keyword Arguments
    -----------------
    out : TensorDictBase, optional
        A tensordict to load into: its nested tensordicts are reused, its leaves replaced,
        and its keys absent from the checkpoint removed. If it has a device, the data is
        loaded there and another ``device`` raises ``ValueError``.
    robust_key : bool, optional
        False reads the legacy raw file names only; None or True read the percent-encoded
        names with the legacy fallback.
    subpath : nested key or str, optional
        The nested tensordict to load (``("module", "0")`` or ``"module/0"``); only that
        subtree is read. A nested key reaches a tensorclass's entries as ``obj.get(key)``.
    mode : {None, "r", "r+"}, optional
        ``"r"``: copy-on-write mappings, the files never change. ``"r+"``: writes reach the
        files (a file that cannot be written raises ``PermissionError``; an archive needs
        stored, aligned, non-nested entries). None: archives as ``"r"``, directory files
        as ``"r+"`` when writable and ``"r"`` otherwise.
    num_threads : int, optional
        Threads that decompress the leaves of a compressed archive (0 or 1: one after the
        other).
    allow_pickle : bool, optional
        True unpickles pickled non-tensor data, False refuses it (``RuntimeError``), None
        unpickles it with a ``FutureWarning``. ``json_types.json`` data needs no pickle.
    index : optional
        What ``td[index]`` takes on the batch dims (an int, a slice with a step, a bool
        or integer tensor, a tuple of those): the result is ``load_memmap(...)[index]``,
        and only the rows selected are read (local leaves are views of the mapping;
        remote ones, ranged reads of their rows). An index the batch cannot take raises
        what ``td[index]`` raises (``IndexError``) before a payload byte is read.

    Returns
    -------
    The loaded tensordict (or tensorclass, lazy stack...), or ``out`` when given.

    Raises
    ------
    ValueError
        ``prefix`` is a file but not an archive, ``subpath`` names no saved tensordict,
        or ``mode`` is not None, ``"r"`` or ``"r+"``.
    TypeError
        ``allow_pickle`` is not a bool or None.
    FileNotFoundError
        ``prefix`` does not exist, or a folder has no ``meta.json`` (for a folder that
        holds checkpoints it is also a ``NotACheckpointError``, and names them).
    tdview.errors.TDViewError
        A corrupt checkpoint: each error names the file, the key and the numbers.

    Notes
    -----
    Deliberate differences from tensordict 0.15.3:

    * float8, float4 and bits leaves load (tensordict writes them, then raises KeyError).
    * A leaf file shorter than its shape is a ``LeafDataError`` naming the file and both
      sizes; tensordict grows a writable one with zeros, changing the checkpoint.
    * A nested leaf without its sizes file is an error; tensordict creates a zero-filled
      one. A nested leaf whose elements are all empty (no data file is written) comes
      back from its sizes; tensordict drops the key. With ``device="meta"`` it is the
      ``[N, D]`` meta tensor tensordict gives for nested leaves.
    * A leaf whose file is missing, or a collection whose folder is missing, is left out
      as tensordict does, but with a ``UserWarning`` naming it. So are the sub-folders
      that a 0.3-era ``meta.json`` does not name (tensordict 0.15 skips them silently).
    * Symlinks of a directory are followed inside it, and out of it only into a content
      store that holds it (a Hugging Face cache's ``blobs/``, git-annex's
      ``.git/annex/objects``, a DVC cache) or below a trusted path
      (:func:`tdview.trust_paths`, the ``TDVIEW_TRUSTED_PATHS`` environment variable);
      tensordict follows every link. Any other link out of the root, and any leaf file
      or folder the store refuses (a FIFO, a symlink loop), is an
      ``UnsafeCheckpointError`` (a ``ValueError``), never a key left out:
      ``UntrustedLinkError`` names the link, its target and the folder to trust. A file
      read through a link out of the root is mapped copy-on-write whatever ``mode``
      (its ``_mode`` is ``"r"``, and a folder whose ``meta.json`` is such a link gets
      no ``_memmap_prefix``), and ``mode="r+"`` refuses it with ``LinkWriteError`` (a
      ``PermissionError``): nothing is ever written through such a link.
    * A checkpoint may change after it was indexed: each leaf file is opened and checked
      when it is loaded (a symlink or a FIFO swapped in since is an
      ``UnsafeCheckpointError``, a short file a ``LeafDataError``; nothing blocks) and
      mapped from that descriptor, never reopened by its path. An archive truncated in
      place after it was opened is an ``ArchiveError`` naming it for every read tdview
      makes, and a load checks it once more right before it returns; a file whose path
      now names another file (one saved over it) is refused too. What a load returns
      still maps the files (archive views, ``MemoryMappedTensor``): if another process
      later truncates one **in place**, touching a page past its new end kills the
      process with SIGBUS, which no library can turn into an exception (copy-on-write
      does not help: pages not yet copied are read from the file). tensordict's
      archive writers (``save(".tdz")``, ``pack_memmap``), ``huggingface_hub`` and
      ``mv``/``rsync`` replace files instead, which leaves a mapping whole; writing in
      place (``truncate``, ``cp`` over the file) is what can do it. To hold data that no
      longer depends on the files, ``.clone()`` what you keep, or load it to another
      device (``device="cuda"``: the copy is checked first); ``python -X faulthandler``
      names the line that met the signal.
    * Zero-element leaves always come back as ``torch.empty`` of their saved shape.
    * Archives written by Info-ZIP ``zip`` (UTF-8 names without the UTF-8 flag) load the
      keys with non-ASCII names; tensordict drops them.
    * With ``robust_key=False``, a key that would name a path outside its folder
      (``".."``, ``"."``, absolute) is left out; tensordict joins it (and recurses
      forever on ``"."``).
    * ``subpath`` steps into a tensorclass's fields even when the tensorclass's class is
      not defined in this process (the fields do not need it).
    * ``subpath`` follows the keys the saved tensordicts record, as the full load does:
      a folder that no ``meta.json`` records (left by an earlier save into the same
      prefix, or a key such as ``"device"`` that ``meta.json`` overwrites with a field)
      is no saved tensordict, and the ``ValueError`` names the folder; tensordict goes
      by folders and loads it. A part may still be given as its folder's encoded name
      (``"sp%20ace"``), as tensordict allows. ``"."`` and ``""`` parts are no keys.
    * ``num_threads`` must be a non-negative int, also where it has no effect.
    * ``MemoryMappedTensor.filename`` and ``_memmap_prefix`` are absolute, real paths
      (tensordict keeps a relative ``prefix`` as given, which breaks after a ``chdir``).
    * ``prefix`` may be an fsspec URL (``https://``, ``s3://``..., or
      :func:`tdview.remote` for storage options and caching); tensordict reads local
      paths only. Remote leaves cannot be mapped: they are read into memory (only the
      byte ranges of the loaded subtree), so directory leaves are MemoryMappedTensors
      with no file (``filename`` raises), archive leaves plain tensors as locally, no
      ``_memmap_prefix`` is set, and ``mode="r+"`` is a ``RemoteModeError``.

    Examples
    --------
    >>> import tempfile, torch, tdview
    >>> from tensordict import TensorDict
    >>> td = TensorDict(a=torch.zeros(3), nested=TensorDict(b=torch.ones(3)))
    >>> with tempfile.TemporaryDirectory() as path:
    ...     _ = td.memmap(path)
    ...     loaded = tdview.load_memmap(path)
    ...     print((loaded == td).all(), type(loaded["a"]).__name__)
    ...     print(tdview.load_memmap(path, subpath="nested")["b"])
    ...     print(tdview.load_memmap(path, device="meta")["a"].device)
    True MemoryMappedTensor
    MemoryMappedTensor([1., 1., 1.])
    meta
    """
    from ._api import LoadRequest, load_path

    request = LoadRequest(
        subpath,
        device,
        non_blocking,
        out=out,
        mode=mode,
        num_threads=num_threads,
        allow_pickle=allow_pickle,
        index=index,
    )
    return load_path(prefix, request, robust_key)


#: ``tdview.load`` is :func:`load_memmap`, as ``tensordict.load`` is its ``load_memmap``.
load = load_memmap
