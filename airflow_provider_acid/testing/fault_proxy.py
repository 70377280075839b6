"""A fault-injecting HTTP proxy between s3fs and the S3 test server, on 127.0.0.1.

Clients use the proxy's URL as their S3 ``endpoint_url``; it forwards each request to the real
server (moto's S3 of ``conftest.py``) and passes the answer back, except for the requests a
:class:`Fault` picks, which get one of:

* ``500``: ``500 InternalError`` (the request is not forwarded);
* ``503``: ``503 ServiceUnavailable`` (not forwarded);
* ``slowdown``: ``503 SlowDown``, S3's throttling answer (not forwarded);
* ``reset``: a connection reset mid-body: a request with a body is cut off (TCP RST) after
  half of its body was read, before it reaches the server; a ``GET`` is forwarded and its
  answer cut off after the headers and half of the body (an empty answer: before anything is
  sent); other requests without a body (``HEAD``, ``DELETE``, starting a multipart upload)
  are cut off before they are forwarded, so none is applied twice;
* ``stall``: no answer at all until the client gives up (its read timeout) and closes the
  connection; the request is not forwarded.

A fault picks matching requests at a set ``rate`` (deterministically: the n-th matching request
is hit when ``floor(n * rate)`` grows), at most ``per_request`` times for the same request
(method, path and query), so a client that retries gets through, and at most ``limit`` times in
all. With ``rate=1`` and ``per_request=None`` every matching request fails, so retries run out.

The proxy counts what it injected and every request it saw, with botocore's attempt number
(the ``amz-sdk-request: attempt=N; max=M`` header each attempt carries), so a test can report
the retries the client made, and the body bytes it passed each way (:meth:`FaultProxy.traffic`).

It can also make the server seem far away (:meth:`FaultProxy.shaped`, or the constructor's
arguments): ``latency`` seconds added to every request before it is forwarded (a round trip to
a distant object store: requests made one after another pay it each time, requests made at
once pay it once), and ``bandwidth`` bytes a second that all request and answer bodies share
(a link of that capacity: bodies are passed on in 64 KiB pieces no faster than it allows).
Bodies are streamed as a network passes them: a request no fault picks has its body passed on
to the server as it arrives and the answer's body passed back as the server sends it (holding
each whole first would add a delay that grows with the body's size, twice); the connections
to the server are kept alive between requests (for at most ``_IDLE_SECONDS`` idle; one the
server closed meanwhile is replaced for a request without a body), and the proxy's own
answers are not held back by Nagle's algorithm. A request a fault picks is read whole, to be
cut off or answered instead.

An ``intercept`` callable, given each request's method, path and query before anything else,
may answer it instead of the server (returning status, reason and an XML body) or delay it;
the test suite's request log and failure injection use it in front of a server that has no
such hooks of its own (with ``answered``, told each forwarded answer's key and body size).
"""

from __future__ import annotations

import http.client
import math
import re
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

KINDS = ("500", "503", "slowdown", "reset", "stall")
_ERRORS = {
    "500": (500, "Internal Server Error", "InternalError", "We encountered an internal error."),
    "503": (503, "Service Unavailable", "ServiceUnavailable", "Service is unable to handle."),
    "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
}
_ATTEMPT = re.compile(r"attempt=(\d+)")
#: Hop-by-hop headers (and those the proxy recomputes) are not passed on.
_DROPPED = {"connection", "keep-alive", "transfer-encoding", "expect", "content-length", "server"}
#: Body bytes passed on at once under a bandwidth cap.
_PIECE = 64 * 1024
#: Body bytes passed on at once without a cap (bodies are streamed, not held whole).
_STREAM_PIECE = 1024 * 1024
#: A connection to the server idle longer than this is not used again (servers close them).
_IDLE_SECONDS = 2.0
#: What an ``intercept`` answers instead of the server: status, reason, XML body.
Answer = tuple[int, str, bytes]


class _Link:
    """A link of ``rate`` bytes a second that all bodies share (None: unlimited)."""

    def __init__(self, rate: float | None = None) -> None:
        self.rate = rate
        self._lock = threading.Lock()
        self._free_at = 0.0

    def send(self, size: int) -> None:
        """Wait until ``size`` more bytes have crossed the link."""
        rate = self.rate
        if not rate or size <= 0:
            return
        with self._lock:
            start = max(time.monotonic(), self._free_at)
            self._free_at = start + size / rate
            done = self._free_at
        delay = done - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def operation_of(method: str, path: str, query: dict[str, list[str]]) -> str:
    """The S3 operation of a path-style request, for the operations s3fs makes."""
    bucket, _, key = path.lstrip("/").partition("/")
    if not bucket:
        return "ListBuckets"
    if not key:
        if method == "GET" and query.get("list-type") == ["2"]:
            return "ListObjectsV2"
        if method == "GET" and "uploads" in query:
            return "ListMultipartUploads"
        if method == "POST" and "delete" in query:
            return "DeleteObjects"
        return {"GET": "ListObjects", "HEAD": "HeadBucket", "PUT": "CreateBucket"}.get(
            method, f"{method} bucket"
        )
    if method == "POST" and "uploads" in query:
        return "CreateMultipartUpload"
    if method == "PUT" and "partNumber" in query:
        return "UploadPart"
    if method == "DELETE" and "uploadId" in query:
        return "AbortMultipartUpload"
    if method == "POST" and "uploadId" in query:
        return "CompleteMultipartUpload"
    if method == "PUT" and "x-amz-copy-source" in query:
        return "CopyObject"
    return {
        "GET": "GetObject",
        "HEAD": "HeadObject",
        "PUT": "PutObject",
        "DELETE": "DeleteObject",
    }.get(method, f"{method} object")


@dataclass(frozen=True)
class SeenRequest:
    """One request the proxy received, and what it did with it."""

    operation: str
    key: str
    identity: tuple[str, str, str]  # method, path, query without signature parts
    attempt: int  # botocore's attempt number (1: first try)
    injected: str | None  # the fault kind, or None when it was forwarded untouched


@dataclass
class Fault:
    """Which requests get which fault (see the module docstring)."""

    kind: str
    rate: float = 0.25
    operations: frozenset[str] | None = None  # None: every operation
    key_contains: str = ""
    per_request: int | None = 1  # None: no limit per request
    limit: int | None = None  # None: no limit in all
    _matched: int = 0
    _hits: int = 0
    _per_identity: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"fault kind {self.kind!r}: expected one of {KINDS}")
        if not 0 < self.rate <= 1:
            raise ValueError(f"fault rate {self.rate}: expected 0 < rate <= 1")

    def picks(self, operation: str, key: str, identity: tuple[str, str, str]) -> bool:
        """Whether this request gets the fault (call under the proxy's lock)."""
        if self.operations is not None and operation not in self.operations:
            return False
        if self.key_contains not in key:
            return False
        if self.limit is not None and self._hits >= self.limit:
            return False
        if self.per_request is not None and self._per_identity[identity] >= self.per_request:
            return False
        before = math.floor(self._matched * self.rate)
        self._matched += 1
        if math.floor(self._matched * self.rate) == before:
            return False
        self._hits += 1
        self._per_identity[identity] += 1
        return True


class FaultProxy:
    """The running proxy: ``endpoint_url`` for clients, ``faults`` to inject, counters.

    :param upstream: the server's URL (``http://host:port``).
    :param stall_seconds: how long a ``stall`` fault holds a request.
    :param latency: seconds added to each request before it is forwarded.
    :param bandwidth: bytes a second all bodies share (None: no cap).
    :param intercept: called with each request's method, path and query; an answer it
        returns is sent instead of the server's.
    :param answered: called with each forwarded answer's object key and body size.
    """

    def __init__(
        self,
        upstream: str,
        *,
        stall_seconds: float = 30.0,
        latency: float = 0.0,
        bandwidth: float | None = None,
        intercept: Callable[[str, str, dict[str, list[str]]], Answer | None] | None = None,
        answered: Callable[[str, int], None] | None = None,
    ) -> None:
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname, parts.port or 80
        self.stall_seconds = stall_seconds
        #: seconds added to each request before it is forwarded
        self.latency = latency
        self._link = _Link(bandwidth)
        self.intercept = intercept
        #: called with each forwarded answer's object key and body size
        self.answered = answered
        self._bytes = Counter()  # "up" (request bodies) and "down" (answer bodies)
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._seen: list[SeenRequest] = []
        self._idle: list[tuple[http.client.HTTPConnection, float]] = []  # to the server
        self._stop = threading.Event()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="s3-fault-proxy", daemon=True
        )

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes stalled requests
        with self._lock:
            for connection, _ in self._idle:
                connection.close()
            self._idle.clear()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    @property
    def endpoint_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- faults and counters ---------------------------------------------------------------

    @contextmanager
    def inject(self, *faults: Fault) -> Iterator[list[SeenRequest]]:
        """Inject ``faults`` in the block; yields the requests seen in it (filled at exit)."""
        with self._lock:
            start = len(self._seen)
            self._faults.extend(faults)
        seen: list[SeenRequest] = []
        try:
            yield seen
        finally:
            with self._lock:
                for fault in faults:
                    self._faults.remove(fault)
                seen.extend(self._seen[start:])

    def seen(self) -> list[SeenRequest]:
        with self._lock:
            return list(self._seen)

    def traffic(self) -> dict[str, int]:
        """Body bytes passed so far: ``up`` (to the server) and ``down`` (to the clients)."""
        with self._lock:
            return {"up": self._bytes["up"], "down": self._bytes["down"]}

    @contextmanager
    def shaped(self, latency: float = 0.0, bandwidth: float | None = None) -> Iterator[None]:
        """Add ``latency`` seconds to each request and cap the bodies' shared bandwidth at
        ``bandwidth`` bytes a second (None: no cap) in the block.

        :param latency: seconds added to each request.
        :param bandwidth: bytes a second all bodies share (None: no cap).
        """
        before = self.latency, self._link.rate
        self.latency, self._link.rate = latency, bandwidth
        try:
            yield
        finally:
            self.latency, self._link.rate = before

    def _count(self, direction: str, size: int) -> None:
        with self._lock:
            self._bytes[direction] += size

    def _pick(self, operation: str, key: str, identity: tuple[str, str, str]) -> str | None:
        with self._lock:
            for fault in self._faults:
                if fault.picks(operation, key, identity):
                    return fault.kind
        return None

    def _record(self, request: SeenRequest) -> None:
        with self._lock:
            self._seen.append(request)

    # -- the HTTP side ---------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, and 100-continue answered for us
            disable_nagle_algorithm = True  # a small body is not held back for an ACK

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:
                proxy._serve(self)

            do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

        return Handler

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        operation = operation_of(handler.command, parts.path, query)
        path = unquote(parts.path)  # as the server reads it (S3 keys are URL-encoded)
        key = path.lstrip("/").partition("/")[2]
        stable = "&".join(
            sorted(p for p in parts.query.split("&") if not p.lower().startswith("x-amz-"))
        )
        identity = (handler.command, parts.path, stable)
        match = _ATTEMPT.search(handler.headers.get("amz-sdk-request", ""))
        attempt = int(match.group(1)) if match else 1
        answer = self.intercept(handler.command, path, query) if self.intercept else None
        kind = proxy_kind = None if answer else self._pick(operation, key, identity)
        self._record(SeenRequest(operation, key, identity, attempt, proxy_kind))
        if self.latency:
            time.sleep(self.latency)  # this request's own thread: others go on meanwhile

        length = int(handler.headers.get("Content-Length") or 0)
        chunked = "chunked" in handler.headers.get("Transfer-Encoding", "").lower()
        if kind == "reset" and (length or chunked or handler.command != "GET"):
            if length:
                handler.rfile.read(length // 2)
            _reset(handler)  # before the server saw the request
            return
        if kind is None and answer is None and not chunked:
            self._stream(handler, key, length)
            return
        body = _read_chunked(handler) if chunked else handler.rfile.read(length)
        self._link.send(len(body))
        self._count("up", len(body))
        if answer is not None:
            _send_xml(handler, *answer)
            return
        if kind == "stall":
            self._stop.wait(self.stall_seconds)  # the client times out and goes away
            handler.close_connection = True
            return
        if kind in _ERRORS:
            status, reason, code, message = _ERRORS[kind]
            payload = (
                '<?xml version="1.0" encoding="UTF-8"?>\n'
                f"<Error><Code>{code}</Code><Message>{message}</Message>"
                f"<Resource>{parts.path}</Resource><RequestId>fault-proxy</RequestId></Error>"
            ).encode()
            _send_xml(handler, status, reason, payload)
            return

        upstream = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=60)
        try:
            headers = {k: v for k, v in handler.headers.items() if k.lower() not in _DROPPED}
            headers["Content-Length"] = str(len(body))
            upstream.request(handler.command, handler.path, body=body, headers=headers)
            response = upstream.getresponse()
            payload = response.read()
            answer_headers = response.getheaders()
            status, reason = response.status, response.reason
        finally:
            upstream.close()
        if kind == "reset" and not payload:  # nothing to cut in half: no answer at all
            _reset(handler)
            return
        handler.send_response(status, reason)
        for name, value in answer_headers:
            if name.lower() not in _DROPPED:
                handler.send_header(name, value)
        if handler.command == "HEAD":
            announced = dict((k.lower(), v) for k, v in answer_headers).get("content-length", "0")
            handler.send_header("Content-Length", announced)
            handler.end_headers()
            return
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        if kind == "reset":
            handler.wfile.write(payload[: len(payload) // 2])
            handler.wfile.flush()
            _reset(handler)
            return
        self._count("down", len(payload))
        if self.answered is not None:
            self.answered(key, len(payload))
        piece = _PIECE if self._link.rate else max(1, len(payload))
        for start in range(0, len(payload), piece):
            chunk = payload[start : start + piece]
            self._link.send(len(chunk))
            handler.wfile.write(chunk)

    def _connection(self) -> tuple[bool, http.client.HTTPConnection]:
        """(kept, connection): a connection to the server kept alive after an earlier request
        (idle for less than ``_IDLE_SECONDS``), or a new one."""
        with self._lock:
            while self._idle:
                connection, since = self._idle.pop()
                if time.monotonic() - since < _IDLE_SECONDS:
                    return True, connection
                connection.close()  # the server may have closed it meanwhile
        return False, self._new_connection()

    def _new_connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=60)

    def _ask(
        self, handler: BaseHTTPRequestHandler, length: int
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send the request to the server, its body streamed from the client, and read the
        head of the answer. A kept-alive connection that the server closed meanwhile is
        replaced by a new one, once, for a request without a body (a body is read from the
        client as it is sent: it cannot be sent again)."""
        kept, upstream = self._connection()
        try:
            self._send(handler, upstream, length)
            return upstream, upstream.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            upstream.close()
            if not kept or length:
                raise
        except BaseException:
            upstream.close()
            raise
        upstream = self._new_connection()
        try:
            self._send(handler, upstream, 0)
            return upstream, upstream.getresponse()
        except BaseException:
            upstream.close()
            raise

    def _send(
        self, handler: BaseHTTPRequestHandler, upstream: http.client.HTTPConnection, length: int
    ) -> None:
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _DROPPED}
        headers["Content-Length"] = str(length)
        upstream.putrequest(
            handler.command,
            handler.path,
            skip_host="host" in (k.lower() for k in headers),
            skip_accept_encoding=True,
        )
        for name, value in headers.items():
            upstream.putheader(name, value)
        upstream.endheaders()
        left = length
        while left > 0:
            piece = handler.rfile.read(min(left, _STREAM_PIECE))
            if not piece:
                raise ConnectionError(f"the client sent {length - left} of {length} bytes")
            self._link.send(len(piece))
            upstream.send(piece)
            left -= len(piece)
        self._count("up", length)

    def _stream(self, handler: BaseHTTPRequestHandler, key: str, length: int) -> None:
        """Forward a request no fault picked as a network would: its body passed on to the
        server as it arrives, the answer's body to the client as the server sends it (an
        answer without a length is passed on whole)."""
        upstream, response = self._ask(handler, length)
        reusable = False
        try:
            answer_headers = response.getheaders()
            announced = dict((k.lower(), v) for k, v in answer_headers).get("content-length")
            handler.send_response(response.status, response.reason)
            for name, value in answer_headers:
                if name.lower() not in _DROPPED:
                    handler.send_header(name, value)
            if handler.command == "HEAD":
                handler.send_header("Content-Length", announced or "0")
                handler.end_headers()
            else:
                whole = None if announced is not None else response.read()  # no length given
                size = int(announced) if whole is None else len(whole)
                handler.send_header("Content-Length", str(size))
                handler.end_headers()
                if self.answered is not None:
                    self.answered(key, size)
                piece_size = _PIECE if self._link.rate else _STREAM_PIECE
                pieces = iter(lambda: response.read(piece_size), b"") if whole is None else [whole]
                for piece in pieces:
                    self._link.send(len(piece))
                    self._count("down", len(piece))  # counted before the client has it
                    handler.wfile.write(piece)
            reusable = not response.will_close and response.isclosed()
        finally:
            if reusable:
                with self._lock:
                    self._idle.append((upstream, time.monotonic()))
            else:
                upstream.close()


class _QuietServer(ThreadingHTTPServer):
    """Clients that go away (after a stall or a reset) are expected: no traceback for them.
    Connections opened at once wait in a listen queue of 128, not socketserver's 5: a client
    opening more at once (a compaction's fetches, its uploads) had some dropped by the kernel
    and opened again by the client a second later (its SYN retransmitted)."""

    request_queue_size = 128

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _send_xml(handler: BaseHTTPRequestHandler, status: int, reason: str, payload: bytes) -> None:
    """Answer with an XML body (none to a HEAD) instead of the server."""
    handler.send_response(status, reason)
    handler.send_header("Content-Type", "application/xml")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(payload)


def _read_chunked(handler: BaseHTTPRequestHandler) -> bytes:
    data = bytearray()
    while True:
        size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return bytes(data)
        data += handler.rfile.read(size)
        handler.rfile.readline()


def _reset(handler: BaseHTTPRequestHandler) -> None:
    """Close the connection with a TCP RST (SO_LINGER 0), as a dropped connection does."""
    connection: socket.socket = handler.connection
    try:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()
    except OSError:
        pass
    handler.close_connection = True


def retries_of(seen: list[SeenRequest]) -> dict[str, int]:
    """What the client did about the faults: the faults injected, botocore's retries (attempts
    after the first, as its ``amz-sdk-request`` header numbers them), and first attempts of a
    request made before (s3fs's own retries after botocore gave up, and reads of the same
    object that the client makes anyway: an upper bound for s3fs's retries)."""
    first_tries: Counter = Counter(r.identity for r in seen if r.attempt == 1)
    return {
        "requests": len(seen),
        "injected": sum(1 for r in seen if r.injected),
        "botocore_retries": sum(1 for r in seen if r.attempt > 1),
        "repeated_first_attempts": sum(n - 1 for n in first_tries.values() if n > 1),
    }
