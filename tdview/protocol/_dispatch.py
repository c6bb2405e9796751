"""The dispatcher: one message in, one reply (plus buffers) out, never an exception.

:func:`handle` is synchronous and kernel-free (tests call it directly).
:class:`Dispatcher` runs it on worker threads for the widget, in lanes (see
:data:`LANES`), so that no slow request freezes browsing: ``children`` and ``node``
without totals (what a click asks) have threads of their own; searches and requests
with totals (which may walk a whole subtree) have theirs; a preview and a load have one
each. The table of methods (:mod:`._methods`) checks a request's params, names its
lane and answers it. A cancel marks the request's id; a request that sees the mark
(before it starts, at every node of a walk, between chunks or leaves, or when it is
done) answers ``Cancelled`` instead of its result, and a cancelled load binds nothing.
Every reply is bounded (:func:`~._messages.bound_reply`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from .._text import error_text
from ..errors import NoCheckpointError, RequestError, TDViewError
from ..index import cancellable
from ._messages import (
    CANCEL,
    Request,
    bound_reply,
    message_id,
    parse_cancel,
    progress,
    reply_error,
    reply_ok,
)
from ._methods import LANES, answer, lane, parse_request
from ._session import Session

log = logging.getLogger("tdview.protocol")

Reply = tuple[dict[str, Any] | None, list[bytes]]
ProgressFn = Callable[[int, int, str], None]
_SURROGATE = re.compile("[\ud800-\udfff]")


def handle(
    session: Session,
    message: object,
    buffers: list[bytes] | None = None,
    progress_fn: ProgressFn | None = None,
    *,
    expected: bool = False,
) -> Reply:
    """Answer one message: ``(reply, buffers)``; ``reply`` is None for a cancel.

    Parameters
    ----------
    session : Session
    message : object
        The JSON content of a custom message (a request or a cancel).
    buffers : list of bytes, optional
        The message's binary buffers (no v1 request carries any).
    progress_fn : callable, optional
        ``progress_fn(done, total, label)`` for ``load`` progress.
    expected : bool
        The request was noted pending (:meth:`Session.expect`) when it was received.

    Returns
    -------
    (dict or None, list of bytes)
        A ``tdview:reply`` (``ok`` with ``result``, or a structured ``error`` whose
        ``type`` is the exception's class name, e.g. ``SubpathError``,
        ``RequestError``, ``Cancelled``) and its buffers.

    Examples
    --------
    >>> reply, _ = handle(session, {"kind": "tdview:request", "v": 1, "id": 1,
    ...                             "method": "search", "params": {"pattern": "obs",
    ...                                                            "limit": 5}})
    ...                                                             # doctest: +SKIP
    >>> reply["result"]["matches"][:1]                              # doctest: +SKIP
    [['replay', 'observation']]
    """
    if isinstance(message, dict) and message.get("kind") == CANCEL:
        try:
            session.cancel(parse_cancel(message))
        except RequestError as error:
            log.debug("ignored a bad cancel: %s", error)
        return None, []
    try:
        request = parse_request(message)
    except RequestError as error:
        if expected:
            session.forget(message_id(message) or 0)
        return reply_error(message_id(message) or 0, "RequestError", str(error), None), []
    if not expected:
        session.expect(request.id)
    path = request.params.get("path")
    try:
        if session.ckpt is None and session.diff is None:
            raise NoCheckpointError(session.error or f"{session.source}: no checkpoint is open")
        session.check(request.id)
        with cancellable(lambda: session.check(request.id)):
            result, out = answer(session, request, progress_fn)
        if request.method != "load":  # a load checks before it binds: after, it is done
            session.check(request.id)
        assert result is not None
        return bound_reply(reply_ok(request.id, result), out, request.method)
    except Exception as error:  # noqa: BLE001 - every failure becomes an error reply
        return _error_reply(request, error, path), []
    finally:
        session.forget(request.id)


def _error_reply(
    request: Request, error: BaseException, path: tuple[str, ...] | None
) -> dict[str, Any]:
    """The error reply of a failed request; never raises (a hostile value's error must
    still be answered, and the reply bounded)."""
    try:
        if not isinstance(error, (TDViewError, OSError, ValueError, TypeError)):
            log.exception("tdview: %s request %s failed", request.method, request.id)
        reply = reply_error(request.id, type(error).__name__, error_text(error), path)
        return bound_reply(reply, [], request.method)[0]
    except Exception:  # noqa: BLE001 - the last resort: a reply that says only the type
        return reply_error(request.id, type(error).__name__, type(error).__name__, None)


class Dispatcher:
    """Runs :func:`handle` off the caller's thread and sends what it returns.

    Parameters
    ----------
    session : Session
    send : callable
        ``send(content, buffers)``: the widget's ``self.send``.
    progress_interval : float
        Least seconds between two progress messages of one request (the first and the
        last always go).
    """

    def __init__(
        self,
        session: Session,
        send: Callable[[dict, list[bytes]], None],
        progress_interval: float = 0.1,
    ) -> None:
        self.session = session
        self._send = send
        self._interval = progress_interval
        self._lanes = {
            lane: ThreadPoolExecutor(n, thread_name_prefix=f"tdview-{lane}")
            for lane, n in LANES.items()
        }
        self._futures: set[Future[None]] = set()

    def receive(self, content: object, buffers: list[bytes] | None = None) -> None:
        """Take one custom message: cancels apply at once, requests are queued."""
        if isinstance(content, dict) and content.get("kind") == CANCEL:
            handle(self.session, content, buffers)
            return
        pool = self._lanes[lane(content)]
        request_id = message_id(content) or 0
        self.session.expect(request_id)  # cancellable from now on, while it waits
        try:
            future = pool.submit(self._answer, content, buffers)
        except RuntimeError:  # shut down
            self.session.forget(request_id)
            log.debug("tdview: a message arrived after close")
            return
        self._futures.add(future)
        future.add_done_callback(self._futures.discard)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every request received so far is answered; False on timeout."""
        _, pending = wait(list(self._futures), timeout=timeout)
        return not pending

    def close(self) -> None:
        """Stop taking requests; queued ones are dropped, running ones finish."""
        for pool in self._lanes.values():
            pool.shutdown(wait=False, cancel_futures=True)

    def _answer(self, content: object, buffers: list[bytes] | None) -> None:
        request_id = message_id(content) or 0
        last = [0.0]

        def report(done: int, total: int, label: str) -> None:
            now = time.monotonic()
            if done not in (0, total) and now - last[0] < self._interval:
                return
            last[0] = now
            self._safe_send(progress(request_id, done, total, label), [])

        reply, out = handle(self.session, content, buffers, report, expected=True)
        if reply is not None:
            self._safe_send(reply, out)

    def _safe_send(self, content: dict, buffers: list[bytes]) -> None:
        try:
            try:
                self._send(content, buffers)
            except UnicodeEncodeError:
                # a lone surrogate (a key of a hostile meta.json) has no UTF-8 form: send
                # it as U+FFFD rather than leave the request unanswered
                self._send(_utf8_safe(content), buffers)
        except Exception:  # a closed comm must not kill the worker
            log.exception("tdview: could not send a message")


def _utf8_safe(value: Any) -> Any:
    """``value`` with every string made encodable as UTF-8 (lone surrogates -> U+FFFD)."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_utf8_safe(k): _utf8_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_utf8_safe(v) for v in value]
    return value
