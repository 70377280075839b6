"""A real S3-compatible HTTP server on 127.0.0.1 for the S3 tests.

The server is moto's S3 (``moto[server]``, the same WSGI application ``moto_server`` serves),
run in a thread for the whole test session behind a small WSGI layer that records every HTTP
request it receives, so tests can count what a scan really costs on the wire. Clients talk
to it over TCP exactly as they talk to AWS or MinIO: s3fs, aiobotocore, signed requests.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
import s3fs
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, make_server

REGION = "us-east-1"
BUCKET = "warehouse"
#: Dummy credentials (moto accepts any); long enough not to trip Airflow's secret masker.
ACCESS_KEY = "testing-access-key"
SECRET_KEY = "testing-secret-key"


@dataclass(frozen=True)
class S3Request:
    """One HTTP request as the server received it (path-style addressing)."""

    method: str
    bucket: str
    key: str
    query: dict[str, list[str]]
    at: float

    @property
    def operation(self) -> str:
        """The S3 API operation, for the requests these tests make."""
        q, m = self.query, self.method
        if not self.bucket:
            return "ListBuckets" if m == "GET" else f"{m} /"
        if not self.key:
            if m == "GET" and q.get("list-type") == ["2"]:
                return "ListObjectsV2"
            if m == "GET" and "location" in q:
                return "GetBucketLocation"
            if m == "GET" and "versions" in q:
                return "ListObjectVersions"
            if m == "GET" and not ({"acl", "policy", "tagging", "uploads"} & q.keys()):
                return "ListObjects"
            if m == "POST" and "delete" in q:
                return "DeleteObjects"
            return {"PUT": "CreateBucket", "HEAD": "HeadBucket", "DELETE": "DeleteBucket"}.get(
                m, f"{m} bucket"
            )
        if m == "POST" and "uploads" in q:
            return "CreateMultipartUpload"
        if m == "PUT" and "partNumber" in q:
            return "UploadPart"
        if m == "DELETE" and "uploadId" in q:
            return "AbortMultipartUpload"
        if m == "POST" and "uploadId" in q:
            return "CompleteMultipartUpload"
        return {
            "GET": "GetObject",
            "HEAD": "HeadObject",
            "PUT": "PutObject",
            "DELETE": "DeleteObject",
        }.get(m, f"{m} object")

    @property
    def prefix(self) -> str | None:
        return (self.query.get("prefix") or [None])[0]

    @property
    def is_continuation(self) -> bool:
        """A later page of a paginated listing (not a listing of its own)."""
        return "continuation-token" in self.query or "marker" in self.query


class RequestLog:
    """Every request the server received, in order; thread-safe, clearable."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[S3Request] = []

    def add(self, request: S3Request) -> None:
        with self._lock:
            self._requests.append(request)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()

    def all(self) -> list[S3Request]:
        with self._lock:
            return list(self._requests)

    @contextmanager
    def recording(self) -> Iterator[list[S3Request]]:
        """``with log.recording() as seen:`` -- ``seen`` holds the requests made in the block."""
        with self._lock:
            start = len(self._requests)
        seen: list[S3Request] = []
        try:
            yield seen
        finally:
            with self._lock:
                seen.extend(self._requests[start:])


class _RecordingApp:
    """WSGI middleware: logs each request, can delay some, drops moto's extra Server header.

    Werkzeug writes its own ``Server`` header and moto adds ``Server: AmazonS3``; strict HTTP
    parsers (aiohttp in debug mode) reject the duplicate, so only werkzeug's is kept.
    """

    def __init__(self, app: Callable, log: RequestLog) -> None:
        self.app = app
        self.log = log
        #: operation name -> seconds the server waits before answering it
        self.delays: dict[str, float] = {}
        #: failures to inject, checked in order (see :meth:`S3Server.fail`)
        self.failures: list[_Failure] = []
        self._failures_lock = threading.Lock()

    def _failure_for(self, request: S3Request) -> _Failure | None:
        with self._failures_lock:
            for failure in self.failures:
                if failure.matches(request):
                    failure.hits.append(request)
                    return failure
        return None

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Any:
        path = environ.get("PATH_INFO", "/").lstrip("/")
        bucket, _, key = path.partition("/")
        request = S3Request(
            method=environ["REQUEST_METHOD"],
            bucket=bucket,
            key=key,
            query=parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True),
            at=time.monotonic(),
        )
        self.log.add(request)
        if delay := self.delays.get(request.operation):
            time.sleep(delay)  # this request's own server thread; other requests go on
        if failure := self._failure_for(request):
            return failure.respond(environ, start_response, request)

        def start(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            headers = [(k, v) for k, v in headers if k.lower() != "server"]
            return start_response(status, headers, *exc_info)

        return self.app(environ, start)


@dataclass
class _Failure:
    """Requests of one operation whose key contains a text get an S3 error instead of moto."""

    operation: str
    key_contains: str
    status: int
    code: str
    times: int | None  # None: every matching request
    hits: list[S3Request] = field(default_factory=list)

    def matches(self, request: S3Request) -> bool:
        if self.times is not None and len(self.hits) >= self.times:
            return False
        return request.operation == self.operation and self.key_contains in request.key

    def respond(self, environ: dict[str, Any], start_response: Callable, request: S3Request) -> Any:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length:  # consume the upload, as a server that refuses it after reading it does
            environ["wsgi.input"].read(length)
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{self.code}</Code><Message>injected by the test</Message>"
            f"<Key>{request.key}</Key><RequestId>injected</RequestId></Error>"
        ).encode()
        reason = {403: "Forbidden", 500: "Internal Server Error", 503: "Slow Down"}
        start_response(
            f"{self.status} {reason.get(self.status, 'Error')}",
            [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))],
        )
        return [b"" if request.method == "HEAD" else body]


class _QuietHandler(MotoRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:  # the RequestLog has them
        pass


@dataclass
class S3Server:
    """A running S3-compatible server with one bucket, and what clients need to reach it."""

    endpoint_url: str
    bucket: str
    region: str
    key: str
    secret: str
    requests: RequestLog
    _app: _RecordingApp = field(repr=False)
    fs: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.fs = self.new_filesystem()

    @property
    def storage_options(self) -> dict[str, Any]:
        """fsspec options for ``s3://`` URLs on this server (as ``AcidHook`` builds them)."""
        return {
            "key": self.key,
            "secret": self.secret,
            "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": self.region},
        }

    @property
    def connection_extra(self) -> dict[str, str]:
        """The extras of an ``acid`` connection pointing at this server."""
        return {
            "uri_prefix": f"s3://{self.bucket}",
            "endpoint_url": self.endpoint_url,
            "region_name": self.region,
            "key": self.key,
            "secret": self.secret,
        }

    def new_filesystem(self, **options: Any) -> Any:
        """A fresh synchronous ``S3FileSystem`` (never one from s3fs's instance cache)."""
        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options, **options)

    def url(self, name: str) -> str:
        """A fresh ``s3://bucket/<name>-<unique>`` location, so tests never share objects."""
        return f"s3://{self.bucket}/{name}-{uuid.uuid4().hex[:8]}"

    def upload_table(self, local_dir: Path | str, url: str) -> str:
        """Upload every file below ``local_dir`` as objects under ``url``; returns ``url``."""
        local = Path(local_dir)
        files = sorted(p for p in local.rglob("*") if p.is_file())
        if not files:
            raise ValueError(f"{local} holds no file to upload")
        target = url.rstrip("/")
        self.fs.pipe({f"{target}/{p.relative_to(local).as_posix()}": p.read_bytes() for p in files})
        self.fs.invalidate_cache()
        return url

    @contextmanager
    def slow(self, operation: str, seconds: float) -> Iterator[None]:
        """Make the server take ``seconds`` before answering each ``operation`` request."""
        self._app.delays[operation] = seconds
        try:
            yield
        finally:
            self._app.delays.pop(operation, None)

    @contextmanager
    def fail(
        self,
        operation: str,
        key_contains: str,
        *,
        times: int | None = 1,
        status: int = 403,
        code: str = "AccessDenied",
    ) -> Iterator[list[S3Request]]:
        """Answer ``operation`` requests whose key contains ``key_contains`` with an S3 error
        (the first ``times`` of them; None: all) instead of serving them.

        The default, 403 ``AccessDenied``, is an error no client retries, so the failure reaches
        the caller at once (a 5xx is retried with back-off by botocore first). Yields the list
        of requests that were failed.
        """
        failure = _Failure(operation, key_contains, status, code, times)
        with self._app._failures_lock:
            self._app.failures.append(failure)
        try:
            yield failure.hits
        finally:
            with self._app._failures_lock:
                self._app.failures.remove(failure)


def _no_proxy_for_loopback() -> None:
    """A developer's HTTP(S)_PROXY must not capture requests to 127.0.0.1."""
    for name in ("NO_PROXY", "no_proxy"):
        current = [h for h in os.environ.get(name, "").split(",") if h]
        if "127.0.0.1" not in current:
            os.environ[name] = ",".join([*current, "127.0.0.1", "localhost"])


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 on a free port of 127.0.0.1 with bucket ``warehouse``; stopped at the end."""
    _no_proxy_for_loopback()
    log = RequestLog()
    app = _RecordingApp(DomainDispatcherApplication(create_backend_app), log)
    server: BaseWSGIServer = make_server(
        "127.0.0.1", 0, app, threaded=True, request_handler=_QuietHandler
    )
    thread = threading.Thread(target=server.serve_forever, name="moto-s3", daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        s3 = S3Server(
            endpoint_url=f"http://{host}:{port}",
            bucket=BUCKET,
            region=REGION,
            key=ACCESS_KEY,
            secret=SECRET_KEY,
            requests=log,
            _app=app,
        )
        s3.fs.call_s3("create_bucket", Bucket=BUCKET)
        yield s3
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(autouse=True)
def _fresh_s3fs_instances() -> Iterator[None]:
    """s3fs caches filesystem instances (and their listings) per option set: none may carry
    a listing or an open session from one test into another."""
    s3fs.S3FileSystem.clear_instance_cache()
    yield
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def s3(s3_server: S3Server) -> S3Server:
    """The session's server with its request log emptied for this test."""
    s3_server.requests.clear()
    s3_server.fs.invalidate_cache()
    return s3_server
