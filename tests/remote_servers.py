"""Servers on loopback for the remote-checkpoint tests and benchmarks, with request logs.

* :class:`RangeServer`: a small HTTP/1.1 file server of our own (Python's ``http.server``
  has no Range support), serving a folder with single ``Range`` requests
  (``bytes=a-b``, ``bytes=a-``, ``bytes=-n``) answered ``206`` with ``Content-Range``
  (bodies sent with ``sendfile``), and keep-alive. Per path it can misbehave:
  ``"ignore-range"`` answers ``200`` with the whole body, ``"short"`` announces the
  range but sends half of it and closes, ``"wrong-range"`` sends the range one byte
  later than asked (and says so in ``Content-Range``).
* :class:`LoggedMotoServer`: moto's S3 server (``ThreadedMotoServer``), its WSGI app
  wrapped to log each request.

Both log every request as a :class:`Request` (method, path, the ``Range`` header, status,
body bytes sent), so tests count requests and bytes instead of guessing.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

__all__ = ["LoggedMotoServer", "RangeServer", "Request", "start_s3"]

_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    status: int
    sent: int  # body bytes

    def span(self) -> tuple[int, int] | None:
        """``(start, end)`` of the bytes sent for a ranged read, else None."""
        return getattr(self, "_span", None)


class _Log:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: list[Request] = []

    def add(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def take(self) -> list[Request]:
        """The requests logged since the last take (or clear)."""
        with self._lock:
            found, self.requests = self.requests, []
        return found


class RangeServer:
    """Serve ``root`` on ``127.0.0.1`` (a free port) until :meth:`stop`.

    Attributes
    ----------
    url : str
        ``http://127.0.0.1:<port>``.
    log : list of Request
        Every request so far (:meth:`take` returns and forgets them).
    behaviour : dict
        URL path (``"/x.tdz"``) -> ``"ignore-range"``, ``"short"`` or ``"wrong-range"``.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self.behaviour: dict[str, str] = {}
        self._log = _Log()
        self._busy = 0
        self._busy_lock = threading.Lock()
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = _Quiet(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, daemon=True, name="tdview-test-range-server"
        )
        self._thread.start()

    @property
    def log(self) -> list[Request]:
        return list(self._log.requests)

    def take(self) -> list[Request]:
        """The requests logged since the last take, once no request is being served (a
        body the client hung up on is counted as far as it went)."""
        import time

        for _ in range(500):
            with self._busy_lock:
                if not self._busy:
                    break
            time.sleep(0.01)
        return self._log.take()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


class _Quiet(ThreadingHTTPServer):
    request_queue_size = 256  # the base's 5 drops concurrent connections (a 1 s SYN retry)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up on a body it refused (the misbehaving modes)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: RangeServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    def setup(self) -> None:
        super().setup()
        # headers and body go in two writes: without this, Nagle's algorithm and the
        # client's delayed ACK hold each small response back by tens of milliseconds
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _serve(self, *, body: bool) -> None:
        with self.owner._busy_lock:
            self.owner._busy += 1
        try:
            self._serve_file(body=body)
        finally:
            with self.owner._busy_lock:
                self.owner._busy -= 1

    def _serve_file(self, *, body: bool) -> None:
        path = unquote(self.path.split("?", 1)[0])
        file = os.path.join(self.owner.root, path.lstrip("/"))
        header = self.headers.get("Range")
        if not os.path.isfile(file):
            self._answer(path, header, 404, [("Content-Length", "0")])
            return
        size = os.path.getsize(file)
        mode = self.owner.behaviour.get(path)
        span = _parse_range(header, size) if header and mode != "ignore-range" else None
        if header and mode != "ignore-range" and span is None:
            self._answer(
                path, header, 416, [("Content-Range", f"bytes */{size}"), ("Content-Length", "0")]
            )
            return
        if span is None:
            start, end, status, headers = 0, size, 200, []
        else:
            start, end = span
            if mode == "wrong-range" and end < size:
                start, end = start + 1, end + 1
            status, headers = 206, [("Content-Range", f"bytes {start}-{end - 1}/{size}")]
        length = end - start
        send = length // 2 if mode == "short" and status == 206 else length
        headers += [("Content-Length", str(length)), ("Accept-Ranges", "bytes")]
        request = self._answer(
            path, header, status, headers, sent=send if body else 0, span=(start, start + send)
        )
        if body and send:
            with open(file, "rb") as f:
                try:
                    sent = self.connection.sendfile(f, start, send)
                except (TimeoutError, BrokenPipeError, ConnectionResetError):
                    sent = f.tell() - start  # what went before the client hung up
                    self.close_connection = True
                request.sent = sent
                if sent != send:
                    self.close_connection = True
                    return
        if send != length:  # a short body: close, so that the client sees it end early
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _answer(
        self,
        path: str,
        header: str | None,
        status: int,
        headers: list[tuple[str, str]],
        *,
        sent: int = 0,
        span: tuple[int, int] | None = None,
    ) -> Request:
        request = Request(self.command, path, header, status, sent)
        if span is not None and sent:
            request._span = span  # type: ignore[attr-defined]
        self.owner._log.add(request)
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        return request


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """``(start, end)`` of a single-range header, None when it cannot be served."""
    match = _RANGE.fullmatch(header.strip())
    if match is None:
        return None
    first, last = match.groups()
    if not first:  # a suffix: the last n bytes
        if not last or int(last) == 0:
            return None
        return max(0, size - int(last)), size
    start = int(first)
    end = min(size, int(last) + 1) if last else size
    if start >= size or end <= start:
        return None
    return start, end


class LoggedMotoServer:
    """moto's S3 server (``ThreadedMotoServer``) on ``127.0.0.1`` (a free port), each
    request logged.

    Attributes
    ----------
    endpoint : str
        ``http://127.0.0.1:<port>``: s3fs's ``endpoint_url``.
    """

    def __init__(self) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from moto.server import ThreadedMotoServer
        from werkzeug.serving import make_server

        self._log = _Log()
        log = self._log

        class Server(ThreadedMotoServer):
            def _server_entry(self) -> None:  # the base's, with the app wrapped
                app = DomainDispatcherApplication(create_backend_app)

                def logged(environ: dict[str, Any], start_response: Any) -> Any:
                    status: list[int] = [0]

                    def start(code: str, headers: Any, *rest: Any) -> Any:
                        status[0] = int(code.split()[0])
                        return start_response(code, headers, *rest)

                    chunks = list(app(environ, start))
                    query = environ.get("QUERY_STRING")
                    log.add(
                        Request(
                            environ["REQUEST_METHOD"],
                            environ.get("PATH_INFO", "") + ("?" + query if query else ""),
                            environ.get("HTTP_RANGE"),
                            status[0],
                            sum(len(c) for c in chunks),
                        )
                    )
                    return chunks

                self._server = make_server(
                    self._ip_address, self._port, logged, True, request_handler=MotoRequestHandler
                )
                self._server_ready_event.set()
                self._server.serve_forever()

        self._moto = Server(ip_address="127.0.0.1", port=0, verbose=False)
        self._moto.start()
        host, port = self._moto.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"

    @property
    def log(self) -> list[Request]:
        return list(self._log.requests)

    def take(self) -> list[Request]:
        return self._log.take()

    def stop(self) -> None:
        self._moto.stop()


def start_s3(bucket: str) -> tuple[LoggedMotoServer, dict[str, Any]]:
    """A :class:`LoggedMotoServer` with an empty ``bucket``, and the s3fs storage options
    that reach it (``testing`` credentials, ``us-east-1``); the caller stops the server."""
    import logging

    import boto3

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = LoggedMotoServer()
    options = {
        "key": "testing",
        "secret": "testing",
        "skip_instance_cache": True,
        "client_kwargs": {"endpoint_url": server.endpoint, "region_name": "us-east-1"},
    }
    boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=bucket)
    return server, options
