"""The ``devices`` and ``load`` methods: where a subtree can go, and loading it there."""

from __future__ import annotations

import json
import re
import reprlib
import threading
from collections.abc import Callable, MutableMapping
from types import ModuleType
from typing import Any

from .._units import dtype_text, shape_text
from ..errors import RequestError, VariableBoundError
from ..index import Tree, rollup

#: Longest ``summary`` text of a load reply.
MAX_SUMMARY_CHARS = 4000

#: Device strings that ``torch.device`` keeps as they are: checked without importing
#: torch (2 s), which a view that only browses never needs.
_PLAIN_DEVICE = re.compile(r"(cpu|meta|cuda|mps|xpu)(:(0|[1-9][0-9]{0,3}))?")


def host_memory() -> dict[str, int | None]:
    """Available and total RAM from ``/proc/meminfo`` (Linux), else both None."""
    sizes: dict[str, int | None] = {"free_bytes": None, "total_bytes": None}
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo if ":" in line)
        keys = ("MemAvailable", "MemTotal")
        available, total = (int(fields[key].split()[0]) * 1024 for key in keys)
    except (OSError, KeyError, ValueError, IndexError):
        return sizes
    return {"free_bytes": min(available, total), "total_bytes": total}


def devices() -> dict[str, Any]:
    """``DevicesResult``: ``cpu`` with the host's available and total memory (None where
    it cannot be read), every ``cuda:N`` with its free and total memory (from
    ``torch.cuda.mem_get_info``; None when it cannot be read), ``mps`` when present,
    and ``meta`` (shapes only, no data).

    Examples
    --------
    >>> devices()["devices"][0]["name"]
    'cpu'
    """
    import torch  # the first device list pays for torch, not the view

    warm_loader()
    found: list[dict[str, Any]] = [{"name": "cpu", **host_memory()}]
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            try:
                free, total = torch.cuda.mem_get_info(index)
                sizes: dict[str, int | None] = {"free_bytes": int(free), "total_bytes": int(total)}
            except (RuntimeError, AssertionError):
                sizes = {"free_bytes": None, "total_bytes": None}
            found.append({"name": f"cuda:{index}", **sizes})
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append({"name": "mps", "free_bytes": None, "total_bytes": None})
    found.append({"name": "meta", "free_bytes": None, "total_bytes": None})
    return {"devices": found}


_warming: list[threading.Thread] = []
_warming_lock = threading.Lock()


def warm_loader() -> None:
    """Import the loader (tensordict: about 1 s) on a daemon thread, once. The form asks
    for the devices when it opens, so the Load click finds it imported and costs what
    ``Checkpoint.load`` costs."""
    with _warming_lock:
        if not _warming:
            _warming.append(
                threading.Thread(target=_import_loader, name="tdview-warm", daemon=True)
            )
            _warming[0].start()


def _warmed() -> None:
    """Wait for the loader's import on its thread, if one runs: two threads importing
    tensordict's modules at once can meet in a cycle (Python's import deadlock error)."""
    with _warming_lock:
        thread = _warming[0] if _warming else None
    if thread is not None:
        thread.join()


def _import_loader() -> None:
    try:
        from ..loader import import_modules

        import_modules()
    except Exception:  # noqa: BLE001 - the load itself imports it again and reports
        return


def check_device(device: str) -> str:
    """``device`` normalized by ``torch.device`` (``"cuda"`` stays ``"cuda"``); a plain
    name such as ``"cpu"`` or ``"cuda:1"`` is checked without importing torch.

    Raises
    ------
    ValueError
        Torch does not know the device string.
    """
    if _PLAIN_DEVICE.fullmatch(device):
        return device
    import torch

    try:
        return str(torch.device(device))
    except (RuntimeError, ValueError) as error:
        raise ValueError(f"unknown device {device!r}: {error}") from None


def load_code(
    source: str,
    path: tuple[str, ...],
    device: str,
    mode: str | None,
    allow_pickle: bool,
    variable: str | None,
    *,
    leaf: bool = False,
    foreign: bool = False,
) -> str:
    """The Python line that loads the same subtree (or, ``leaf``, tensor) with tdview.
    ``foreign``: a format ``load_memmap`` refuses, as tensordict's does (safetensors, a
    consolidated file...): the line reads it with ``Checkpoint(...).load``.

    Examples
    --------
    >>> load_code("ckpt.tdz", ("replay",), "cpu", "r", False, "replay")
    'replay = tdview.load_memmap("ckpt.tdz", subpath="replay", device="cpu", mode="r")'
    >>> load_code("ckpt.tdz", ("a/b",), "cpu", None, True, None)
    'tdview.load_memmap("ckpt.tdz", subpath=("a/b",), device="cpu", mode=None, allow_pickle=True)'
    >>> load_code("ckpt.tdz", ("replay", "reward"), "cpu", "r", False, "r", leaf=True)
    'r = tdview.Checkpoint("ckpt.tdz").load_leaf("replay/reward", device="cpu", mode="r")'
    >>> load_code("m.safetensors", ("model",), "cpu", None, False, "m", foreign=True)
    'm = tdview.Checkpoint("m.safetensors").load(subpath="model", device="cpu", mode=None)'
    """
    where = ""
    if path and any(not key or "/" in key for key in path):
        # "a/b" would split such a key: spell the nested key as a tuple instead.
        keys = ", ".join(json.dumps(key) for key in path)
        where = f"({keys}{',' if len(path) == 1 else ''})"
    elif path:
        where = json.dumps("/".join(path))
    options = [
        f"device={json.dumps(device)}",
        f"mode={json.dumps(mode) if mode is not None else 'None'}",
    ]
    if leaf:  # a tensor has no pickles
        call = f"tdview.Checkpoint({json.dumps(source)}).load_leaf({', '.join([where, *options])})"
    else:
        args = [json.dumps(source), *([f"subpath={where}"] if where else []), *options]
        if allow_pickle:
            args.append("allow_pickle=True")
        call = f"tdview.load_memmap({', '.join(args)})"
        if foreign:
            call = f"tdview.Checkpoint({args[0]}).load({', '.join(args[1:])})"
    return f"{variable} = {call}" if variable else call


def bound_to(value: object, owner: object = None) -> str:
    """What a kernel variable holds, in a few words (``owner``: the view that loads).

    Examples
    --------
    >>> bound_to(5), bound_to([1, 2]), bound_to(None)
    ('an int: 5', 'a list: [1, 2]', 'None')
    """
    if owner is not None and value is owner:
        return f"this {type(value).__name__}"
    if value is None:
        return "None"
    kind = type(value).__name__
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    try:  # the user's object: its attributes may raise
        batch, source = getattr(value, "batch_size", None), getattr(value, "source", None)
        shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
        name, keys_of = getattr(value, "__name__", None), getattr(value, "keys", None)
        if isinstance(batch, tuple) and callable(keys_of):
            keys = len(keys_of())
            return f"{article} {kind} of {keys} key{'s' * (keys != 1)}, batch {shape_text(batch)}"
        if isinstance(shape, tuple) and dtype is not None:  # a tensor, an array
            return f"{article} {kind} {shape_text(shape)} {dtype_text(str(dtype))}"
        if kind == "TDView" and isinstance(source, str):
            return f"another TDView (of {_SHORT.repr(source)})"
        if isinstance(name, str) and (callable(value) or isinstance(value, ModuleType)):
            what = "class" if isinstance(value, type) else _CALLABLES.get(kind, kind)
            return f"the {what} {name}"
        return f"{article} {kind}: {_SHORT.repr(value)}"
    except Exception:  # noqa: BLE001
        return f"{article} {kind}"


_CALLABLES = {"builtin_function_or_method": "function", "method": "method"}
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 40


def short_repr(value: object, limit: int = MAX_SUMMARY_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def load_subtree(
    ckpt: Tree,
    path: tuple[str, ...],
    *,
    device: str,
    mode: str | None,
    allow_pickle: bool,
    progress: Callable[[int, int, str], None] | None = None,
) -> Any:
    """Load the subtree at ``path`` with ``Checkpoint.load``.

    ``progress(done, total, label)`` is called at the start (0 of the subtree's leaf
    count), after each leaf (labelled with its path), and at the end. Raising from it
    stops the load.
    """
    node = ckpt.node(path) if path else ckpt.root
    total = rollup(ckpt, node).leaves
    label = "/".join(path) or "<root>"
    if progress is not None:
        progress(0, total, label)
    result = ckpt.load(
        path or None,
        device=device,
        mode=mode,
        allow_pickle=allow_pickle,
        progress=None if progress is None else _per_leaf(progress, total),
    )
    if progress is not None:
        progress(total, total, label)
    return result


def _per_leaf(
    progress: Callable[[int, int, str], None], total: int
) -> Callable[[tuple[str, ...]], None]:
    """The loader's per-leaf callback that reports ``progress(done, total, path)``."""
    done = 0

    def on_leaf(key: tuple[str, ...]) -> None:
        nonlocal done
        done += 1
        progress(min(done, total), total, "/".join(key))

    return on_leaf


def load_value(
    ckpt: Tree,
    path: tuple[str, ...],
    *,
    device: str,
    mode: str | None,
    allow_pickle: bool,
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[Any, bool]:
    """What the widget's Load button and ``TDView.load`` load at ``path``, and whether it
    is a leaf: a tensor leaf's tensor (``Checkpoint.load_leaf``), any other node's
    subtree (:func:`load_subtree`). ``progress`` as there. In a folder of checkpoints,
    a member's node is loaded from that member."""
    _warmed()  # TDView.load calls here too, from the kernel's own thread
    owner, _, inner = ckpt.locate(path)
    if owner is not ckpt:
        return load_value(
            owner, inner, device=device, mode=mode, allow_pickle=allow_pickle, progress=progress
        )
    leaf = bool(path) and ckpt.node(path).is_leaf  # a clear SubpathError before any read
    if not leaf:
        return load_subtree(
            ckpt, path, device=device, mode=mode, allow_pickle=allow_pickle, progress=progress
        ), False
    report = progress or (lambda done, total, label: None)
    report(0, 1, "/".join(path))
    value = ckpt.load_leaf(path, device=device, mode=mode)
    report(1, 1, "/".join(path))
    return value, True


def load(
    ckpt: Tree,
    source: str,
    params: dict[str, Any],
    namespace: MutableMapping[str, Any] | None,
    progress: Callable[[int, int, str], None] | None = None,
    bind: Callable[[Any], None] | None = None,
    check: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Run a ``load`` request: load the subtree (or the tensor, for a leaf), bind it to
    ``params["variable"]`` in ``namespace`` (when both are given), and return
    ``LoadResult``.

    Parameters
    ----------
    ckpt : Checkpoint
    source : str
        The checkpoint path as the user gave it (used in ``code``).
    params : dict
        Validated ``load`` params: ``path, device, mode, allow_pickle, variable`` and
        ``replace`` (absent: False): a name already bound is rebound only when it is
        True, else :class:`~tdview.errors.VariableBoundError` says what it holds before
        anything is read.
    namespace : mutable mapping or None
        Where the variable is bound (the widget passes the IPython user namespace).
    progress : callable, optional
        ``progress(done, total, label)``.
    bind : callable, optional
        Called with the loaded value before it is bound (the widget keeps it).
    check : callable, optional
        Called once the subtree is loaded and described, right before anything is bound:
        raise from it to drop the result (cancellation). Nothing checks after binding.

    Examples
    --------
    >>> ns = {}
    >>> result = load(ckpt, "demo_ckpt", {"path": ("replay",), "device": "cpu",
    ...               "mode": "r", "allow_pickle": False, "variable": "replay"}, ns)
    ...                                                               # doctest: +SKIP
    >>> result["code"]                                                # doctest: +SKIP
    'replay = tdview.load_memmap("demo_ckpt", subpath="replay", device="cpu", mode="r")'
    """
    path = params["path"]
    device = check_device(params["device"])
    variable = params["variable"]
    if variable is not None and namespace is None:
        if path:
            ckpt.node(path)  # a clear SubpathError first
        raise RequestError(f"cannot bind {variable!r}: the widget has no namespace")
    if variable is not None and namespace is not None and not params.get("replace", False):
        if variable in namespace:  # the form asks before it replaces, not after
            if path:
                ckpt.node(path)  # a wrong path says so first
            owner = getattr(bind, "__self__", None)  # the view whose ``_loaded`` binds
            what = bound_to(namespace[variable], owner)
            raise VariableBoundError(f"`{variable}` is already bound to {what}")
    value, leaf = load_value(
        ckpt,
        path,
        device=device,
        mode=params["mode"],
        allow_pickle=params["allow_pickle"],
        progress=progress,
    )
    result = {
        "path": list(path),
        "summary": short_repr(value),
        "variable": variable,
        "code": load_code(
            source,
            path,
            device,
            params["mode"],
            params["allow_pickle"],
            variable,
            leaf=leaf,
            foreign=ckpt.store.foreign_format is not None,
        ),
    }
    check()  # the last chance to cancel: once bound, the load is reported as done
    if bind is not None:
        bind(value)
    if variable is not None and namespace is not None:
        namespace[variable] = value
    return result
