"""``TDView``: the anywidget that shows a checkpoint in JupyterLab or the notebook.

It only wires traits and custom messages to :mod:`tdview.protocol`; the front end is
``js/`` (built into ``tdview/static/``).
"""

from __future__ import annotations

import html
import os
import pathlib
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from . import views
from ._compare_widget import compare_state, open_comparison, static_html, static_text
from ._text import error_text, printable
from .index import Tree, is_folder, normalize_subpath, open_tree
from .protocol import (
    MODES,
    PROTOCOL_VERSION,
    Dispatcher,
    Session,
    check_device,
    load_value,
    root_summary,
)
from .views import holds_checkpoints, nothing_found

if TYPE_CHECKING:
    from .diff import Diff

_STATIC = pathlib.Path(__file__).parent / "static"
#: The heights ``TDView(..., height=)`` takes, in pixels (``js/src/fill-height.ts``).
MIN_HEIGHT, MAX_HEIGHT = 240, 4000
#: The view's report of a click: ``{"kind": SELECT, "v": 1, "path": [...]}``.
SELECT = "tdview:select"


def _user_namespace() -> MutableMapping[str, Any] | None:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipywidgets
        return None
    shell = get_ipython()
    return None if shell is None else shell.user_ns


def _open_error(path: str, error: BaseException) -> str:
    """What the view says when its checkpoint cannot be opened (escaped and bounded, as
    every error shown: :func:`~tdview._text.error_text`)."""
    message = error_text(error)
    text = f"{type(error).__name__}: {message}"
    return text if path in message else f"{type(error).__name__}: {printable(path)}: {message}"


class TDView(anywidget.AnyWidget):
    """Browse a tensordict checkpoint (directory or ``.tdz`` archive) in a notebook.

    The tree is read from metadata alone; tensor bytes are read only to preview a leaf
    or to load a subtree, which the front end asks for through the protocol.

    Parameters
    ----------
    path : str or PathLike
        The checkpoint, or a folder holding checkpoints (a training run, a replay-buffer
        dump): each checkpoint found in it is a node to open. If it cannot be opened the
        widget still shows, with ``error`` saying why.
    device : str
        Default device of loads (``"cpu"``, ``"cuda:0"``, ``"meta"`` …).
    allow_pickle : bool
        Default for loads of pickled non-tensor values.
    robust_key : bool, optional
        ``False`` reads the legacy raw key layout only.
    mode : {"r", "r+", None}
        Default mode of loads: memory-mapped read-only, read-write, or copied.
    compare : str or PathLike, optional
        A second checkpoint: the view then compares ``path`` (the old side, ``a``) with it
        (the new side, ``b``) as :func:`tdview.diff` does, in one tree of both with the
        keys added, removed, changed and renamed marked; a subtree or a leaf can be
        compared again by bytes or values from the view, and each side's subtrees loaded.
    level, subpath_a, subpath_b, rtol, atol
        With ``compare``: the first comparison's :func:`tdview.diff` arguments
        (``"auto"`` by default: no tensor's payload read until asked; two archives are
        compared by the sizes and CRC-32s their central directories record).
    height : int, optional
        The view's height in pixels, from ``MIN_HEIGHT`` (240) to ``MAX_HEIGHT``
        (4000); None (the default) keeps the compact height in a notebook cell and the
        panel's height in the tdview panel. The handle at the view's bottom sets it (a
        double click on the handle gives back the default), and the notebook keeps it.

    Attributes
    ----------
    selected : tuple of str
        The nested key of the node selected in the view. The view reports a click with a
        message (not a trait change of its own), so that hosts that treat the synced
        traits as the widget's value (marimo) do not re-run cells on every click;
        setting it from Python still reveals the node in the view.
    value : object
        The last subtree loaded (from the view or :meth:`load`), None before.
    loaded : dict
        ``{"path": [...], "count": n}`` of the last load (synced; empty before any):
        the view sets it after each load it made, which is what makes a load reactive
        in marimo (a cell reading ``mo.ui.anywidget(view).value`` runs again, and reads
        :attr:`value`).
    namespace : mapping or None
        Where the view's loads bind their variable (the IPython user namespace; None
        in a host without one, such as marimo, where the form offers no variable).

    Examples
    --------
    >>> from tdview import TDView
    >>> view = TDView("demo_ckpt.tdz")                                # doctest: +SKIP
    >>> view                                                          # doctest: +SKIP
    >>> replay = view.load("replay")                                  # doctest: +SKIP
    """

    _esm = _STATIC / "widget.js"
    _css = _STATIC / "widget.css"

    _protocol_version = traitlets.Int(PROTOCOL_VERSION).tag(sync=True)
    source = traitlets.Unicode("").tag(sync=True)
    root = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)
    selected = traitlets.Tuple().tag(sync=True)
    options = traitlets.Dict().tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    loaded = traitlets.Dict().tag(sync=True)
    #: The view's height in pixels (``height=``, the view's resize handle); None: the
    #: compact height in a cell, the panel's in the tdview panel.
    height = traitlets.Int(None, allow_none=True).tag(sync=True)
    #: What the user chose of this view's layout in the front end (``ViewLayout`` in
    #: ``js/src/render-app.ts``: the divider's share, the grouping of dotted keys),
    #: kept per view and saved with the notebook's widget state.
    _layout = traitlets.Dict().tag(sync=True)
    #: ``CompareState`` of a compare view (``compare=``), else None.
    compare = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)
    #: The static tree (the output's ``text/html``, bounded), set when the view is
    #: displayed. With widget state saved, nbconvert's HTML and a notebook reopened
    #: without its kernel render the view, not the text/html: the view shows this until
    #: a kernel answers.
    _static_html = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        device: str = "cpu",
        allow_pickle: bool = False,
        robust_key: bool | None = None,
        mode: str | None = "r",
        compare: str | os.PathLike[str] | None = None,
        level: str = "auto",
        subpath_a: object = None,
        subpath_b: object = None,
        rtol: float = 0.0,
        atol: float = 0.0,
        height: int | None = None,
        **kwargs: Any,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be 'r', 'r+' or None, not {mode!r}")
        source = os.fspath(path)
        ckpt, error, root = None, "", None
        comparison = None
        if compare is not None:  # no one checkpoint: the comparison owns both
            comparison, error = open_comparison(
                source,
                compare,
                level=level,
                subpath_a=subpath_a,
                subpath_b=subpath_b,
                rtol=rtol,
                atol=atol,
            )
        try:
            if compare is None:
                ckpt = open_tree(source, robust_key=robust_key)
                root = root_summary(ckpt, source)  # totals on demand
                if is_folder(ckpt) and not holds_checkpoints(ckpt):
                    error = nothing_found(ckpt)
                elif ckpt.root.problems:
                    error = "; ".join(ckpt.root.problems)
        except Exception as exc:  # noqa: BLE001 - shown in the widget, not raised
            ckpt, error = None, _open_error(source, exc)
        namespace = _user_namespace()
        options = {
            "device": check_device(device),
            "mode": mode,
            "allow_pickle": bool(allow_pickle),
            "robust_key": robust_key is not False,
            "can_bind": namespace is not None,
        }
        if ckpt is not None and ckpt.store.foreign_format is not None:
            options["foreign"] = True  # load_memmap refuses it: the line uses Checkpoint.load
        super().__init__(
            source=source,
            root=root,
            options=options,
            error=error,
            compare=compare_state(comparison),
            height=height,
            **kwargs,
        )
        self.checkpoint: Tree | None = ckpt
        self.comparison = comparison
        self._compare_source = None if compare is None else os.fspath(compare)
        self.value: Any = None
        self._static: list[views.Row] | None = None
        self._session = Session(
            ckpt,
            source,
            namespace=namespace,
            error=error if ckpt is None else "",
            on_load=self._loaded,
            diff=comparison,
        )
        if comparison is not None:
            comparison.on_refine = self._refined
        self._dispatcher = Dispatcher(self._session, self._send_message)
        self.on_msg(self._on_custom_msg)

    @traitlets.validate("selected")
    def _check_selected(self, proposal: dict[str, Any]) -> tuple[str, ...]:
        value = proposal["value"]
        return () if not value else normalize_subpath(tuple(value))

    @traitlets.validate("height")
    def _check_height(self, proposal: dict[str, Any]) -> int | None:
        value = proposal["value"]
        if value is None or (not isinstance(value, bool) and MIN_HEIGHT <= value <= MAX_HEIGHT):
            return value
        raise traitlets.TraitError(
            f"TDView({printable(self.source)!r}): height must be None or a number of pixels "
            f"from {MIN_HEIGHT} to {MAX_HEIGHT}, not {value!r}"
        )

    @property
    def namespace(self) -> MutableMapping[str, Any] | None:
        return self._session.namespace

    @namespace.setter
    def namespace(self, value: MutableMapping[str, Any] | None) -> None:
        self._session.namespace = value
        self.options = {**self.options, "can_bind": value is not None}

    # -- messages -------------------------------------------------------------------

    def _on_custom_msg(self, _widget: object, content: Any, buffers: list[bytes]) -> None:
        if isinstance(content, dict) and content.get("kind") == SELECT:
            self._on_select(content)
            return
        self._dispatcher.receive(content, list(buffers or []))

    def _on_select(self, content: dict[str, Any]) -> None:
        path = content.get("path")
        if not isinstance(path, list) or not all(isinstance(k, str) for k in path):
            return  # a malformed report changes nothing
        try:
            self.selected = tuple(path)
        except Exception:  # noqa: BLE001 - a key the checkpoint cannot have
            return

    def _send_message(self, content: dict[str, Any], buffers: list[bytes]) -> None:
        self.send(content, buffers)

    def _loaded(self, value: Any) -> None:
        self.value = value

    def _refined(self, state: dict[str, Any]) -> None:
        self.compare = state

    @property
    def diff(self) -> Diff | None:
        """The compare view's :class:`~tdview.diff.Diff` as it stands (subtrees compared
        again from the view included); None for a view of one checkpoint."""
        return None if self.comparison is None else self.comparison.view.result

    def close(self) -> None:
        """Close the view and stop answering its requests."""
        dispatcher = getattr(self, "_dispatcher", None)
        if dispatcher is not None:
            dispatcher.close()
        comparison = getattr(self, "comparison", None)
        if comparison is not None:
            comparison.close()
        super().close()

    # -- Python API -----------------------------------------------------------------

    def load(self, subpath: object = None, device: str | None = None) -> Any:
        """Load a subtree (the whole checkpoint when ``subpath`` is None) with the
        view's options, keep it as :attr:`value` and return it.

        Parameters
        ----------
        subpath : str or tuple of str, optional
            ``"a/b"`` or ``("a", "b")``; ``view.load(view.selected)`` loads the selection.
        device : str, optional
            Overrides the view's default device.

        Examples
        --------
        >>> obs = view.load(("replay", "observation"), device="cpu")  # doctest: +SKIP
        """
        if self.checkpoint is None:
            raise RuntimeError(f"tdview: no checkpoint is open: {self.error}")
        path = () if subpath in (None, (), "") else normalize_subpath(subpath)
        options = self.options
        # what the Load button loads: a tensor leaf's tensor, or the subtree
        self.value, _ = load_value(
            self.checkpoint,
            path,
            device=check_device(device or options["device"]),
            mode=options["mode"],
            allow_pickle=options["allow_pickle"],
        )
        self.loaded = {"path": list(path), "count": int(self.loaded.get("count", 0)) + 1}
        return self.value

    # -- static renderings ----------------------------------------------------------

    def _table(self) -> list[views.Row]:
        if self._static is None:
            self._static = [] if self.checkpoint is None else list(views.rows(self.checkpoint))
        return self._static

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle or {}, {})
        data = dict(data)
        if self._compare_source is not None:
            text = static_text(self.comparison, self.source, self._compare_source, self.error)
            data["text/plain"], data["text/html"] = text, static_html(text)
            self._static_html = static_html(text[: views.STATE_HTML // 6])  # escaped: ≤ 6×
            return data, metadata
        try:
            data["text/plain"] = views.render_text(self.source, self._table(), self.error)
            data["text/html"] = views.render_html(self.source, self._table(), self.error)
            self._static_html = (
                data["text/html"]
                if len(data["text/html"]) <= views.STATE_HTML
                else views.render_html(self.source, self._table(), self.error, views.STATE_HTML)
            )
        except Exception as error:  # noqa: BLE001 - a repr must not raise
            text = printable(f"tdview: {self.source}: {type(error).__name__}: {error_text(error)}")
            data["text/plain"], data["text/html"] = text, f"<pre>{html.escape(text)}</pre>"
            self._static_html = data["text/html"]
        return data, metadata
