"""The Python side of the tdview wire protocol, version 1 (mirrored by ``js/src/protocol.ts``).

Plain functions over an index :class:`~tdview.index.Checkpoint`: a request dict in, a
reply dict plus binary buffers out. No kernel, no ipywidgets: the widget only wires
its comm to :class:`Dispatcher`.

Messages (JSON content, buffers binary):

- ``{"kind": "tdview:request", "v": 1, "id", "method", "params"}`` with ``method`` one
  of ``children``, ``node``, ``search``, ``preview``, ``devices``, ``load``;
- ``{"kind": "tdview:cancel", "v": 1, "id"}``;
- ``{"kind": "tdview:reply", "v": 1, "id", "ok": true, "result"}`` or
  ``{..., "ok": false, "error": {"type", "message", "path"}}``;
- ``{"kind": "tdview:progress", "v": 1, "id", "done", "total", "label"}`` (loads).

Ids are echoed unchanged; paths are lists of keys (``[]`` is the root); every number
is finite (a statistic with no finite value is ``null``); tensor bytes travel as
buffers described by ``{dtype, shape, buffer}``. See ``_preview`` for how each dtype
is converted for display (complex leaves are shown by magnitude).
"""

from __future__ import annotations

from ..errors import Cancelled, NoCheckpointError, RequestError
from ._checks import MAX_PAGE, MAX_ROWS, MODES
from ._collection import root_summary
from ._compare import Comparison
from ._diff import open_view
from ._dispatch import Dispatcher, handle
from ._json import json_safe
from ._load import check_device, devices, load, load_code, load_value
from ._messages import PROTOCOL_VERSION, Request, parse_cancel, progress, reply_error, reply_ok
from ._methods import METHODS, parse_request
from ._preview import PreviewUnsupportedError, preview, statistics
from ._search import search_result
from ._session import Session
from ._summaries import children_page, details, summary

__all__ = [
    "MAX_PAGE",
    "MAX_ROWS",
    "METHODS",
    "MODES",
    "PROTOCOL_VERSION",
    "Cancelled",
    "Comparison",
    "Dispatcher",
    "NoCheckpointError",
    "PreviewUnsupportedError",
    "Request",
    "RequestError",
    "Session",
    "check_device",
    "children_page",
    "details",
    "devices",
    "handle",
    "json_safe",
    "load",
    "load_code",
    "load_value",
    "open_view",
    "parse_cancel",
    "parse_request",
    "preview",
    "progress",
    "reply_error",
    "reply_ok",
    "root_summary",
    "search_result",
    "statistics",
    "summary",
]
