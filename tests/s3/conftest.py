"""Real S3-compatible HTTP servers on 127.0.0.1 for the S3 tests: every test runs on both.

* ``moto``: moto's S3 (``moto[server]``, the same WSGI application ``moto_server`` serves), run
  in a thread for the whole test session behind a small WSGI layer that records every HTTP
  request it receives;
* ``s3proxy``: S3Proxy with its filesystem backend (``scripts/s3.py``, a JVM of its own with a
  fresh data folder for the session), behind the fault proxy
  (:mod:`airflow_provider_acid.testing.fault_proxy`) that records every request the same way.

So tests count what a scan really costs on the wire, on either. Clients talk to them over TCP
exactly as they talk to AWS or MinIO: s3fs, aiobotocore, signed requests. A server that cannot
start fails the session fixture (nothing is skipped).
"""

from __future__ import annotations

import os
import subprocess
import sys
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

from airflow_provider_acid.testing.fault_proxy import FaultProxy

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


class _Recorder:
    """What both servers' front layers share: the request log, delays, injected failures and
    the body bytes answered per object key."""

    def __init__(self, log: RequestLog) -> None:
        self.log = log
        #: operation name -> (seconds the server waits before answering it, for keys holding)
        self.delays: dict[str, tuple[float, str]] = {}
        #: failures to inject, checked in order (see :meth:`S3Server.fail`)
        self.failures: list[_Failure] = []
        self._failures_lock = threading.Lock()
        #: object key -> bytes of the answer bodies sent for it
        self.sent: dict[str, int] = {}

    def observe(self, method: str, path: str, query: dict[str, list[str]]) -> _Failure | None:
        """Log a request and wait its delay; the failure it gets, if any."""
        bucket, _, key = path.lstrip("/").partition("/")
        request = S3Request(method, bucket, key, query, time.monotonic())
        self.log.add(request)
        delay, key_contains = self.delays.get(request.operation, (0.0, ""))
        if delay and key_contains in request.key:
            time.sleep(delay)  # this request's own server thread; other requests go on
        with self._failures_lock:
            for failure in self.failures:
                if failure.matches(request):
                    failure.hits.append(request)
                    return failure
        return None

    def answered(self, key: str, size: int) -> None:
        with self._failures_lock:
            self.sent[key] = self.sent.get(key, 0) + size

    def intercept(self, method: str, path: str, query: dict[str, list[str]]) -> Any:
        """For the fault proxy: the error a failure answers, or None to forward."""
        failure = self.observe(method, path, query)
        if failure is None:
            return None
        return failure.status, _REASONS.get(failure.status, "Error"), failure.body(path)


class _RecordingApp:
    """WSGI middleware: logs each request, can delay some, drops moto's extra Server header.

    Werkzeug writes its own ``Server`` header and moto adds ``Server: AmazonS3``; strict HTTP
    parsers (aiohttp in debug mode) reject the duplicate, so only werkzeug's is kept.
    """

    def __init__(self, app: Callable, recorder: _Recorder) -> None:
        self.app = app
        self.recorder = recorder

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Any:
        path = environ.get("PATH_INFO", "/")
        query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        if failure := self.recorder.observe(environ["REQUEST_METHOD"], path, query):
            return failure.respond(environ, start_response)

        def start(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            headers = [(k, v) for k, v in headers if k.lower() != "server"]
            return start_response(status, headers, *exc_info)

        return self._counted(path.lstrip("/").partition("/")[2], self.app(environ, start))

    def _counted(self, key: str, body: Any) -> Iterator[bytes]:
        try:
            for chunk in body:
                self.recorder.answered(key, len(chunk))
                yield chunk
        finally:
            if hasattr(body, "close"):
                body.close()


_REASONS = {403: "Forbidden", 500: "Internal Server Error", 503: "Slow Down"}


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

    def body(self, path: str) -> bytes:
        key = path.lstrip("/").partition("/")[2]
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{self.code}</Code><Message>injected by the test</Message>"
            f"<Key>{key}</Key><RequestId>injected</RequestId></Error>"
        ).encode()

    def respond(self, environ: dict[str, Any], start_response: Callable) -> Any:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length:  # consume the upload, as a server that refuses it after reading it does
            environ["wsgi.input"].read(length)
        body = self.body(environ.get("PATH_INFO", "/"))
        start_response(
            f"{self.status} {_REASONS.get(self.status, 'Error')}",
            [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))],
        )
        return [b"" if environ["REQUEST_METHOD"] == "HEAD" else body]


class _QuietHandler(MotoRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:  # the RequestLog has them
        pass


@dataclass
class S3Server:
    """A running S3-compatible server with one bucket, and what clients need to reach it."""

    backend: str  # "moto" or "s3proxy"
    endpoint_url: str
    bucket: str
    region: str
    key: str
    secret: str
    requests: RequestLog
    _recorder: _Recorder = field(repr=False)
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
    def slow(self, operation: str, seconds: float, key_contains: str = "") -> Iterator[None]:
        """Make the server take ``seconds`` before answering each ``operation`` request (whose
        key contains ``key_contains``)."""
        self._recorder.delays[operation] = (seconds, key_contains)
        try:
            yield
        finally:
            self._recorder.delays.pop(operation, None)

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
        with self._recorder._failures_lock:
            self._recorder.failures.append(failure)
        try:
            yield failure.hits
        finally:
            with self._recorder._failures_lock:
                self._recorder.failures.remove(failure)

    def sent_bytes(self) -> dict[str, int]:
        """Object key -> bytes of the answer bodies the server sent for it so far."""
        with self._recorder._failures_lock:
            return dict(self._recorder.sent)


def _no_proxy_for_loopback() -> None:
    """A developer's HTTP(S)_PROXY must not capture requests to 127.0.0.1."""
    for name in ("NO_PROXY", "no_proxy"):
        current = [h for h in os.environ.get(name, "").split(",") if h]
        if "127.0.0.1" not in current:
            os.environ[name] = ",".join([*current, "127.0.0.1", "localhost"])


REPO = Path(__file__).resolve().parents[2]
BACKENDS = ("moto", "s3proxy")
#: The first start fetches S3Proxy through Maven.
START_TIMEOUT = 600


@contextmanager
def _moto(recorder: _Recorder) -> Iterator[str]:
    app = _RecordingApp(DomainDispatcherApplication(create_backend_app), recorder)
    server: BaseWSGIServer = make_server(
        "127.0.0.1", 0, app, threaded=True, request_handler=_QuietHandler
    )
    thread = threading.Thread(target=server.serve_forever, name="moto-s3", daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _s3_script(command: str, home: Path) -> subprocess.CompletedProcess:
    script = REPO / "scripts" / "s3.py"
    return subprocess.run(
        [sys.executable, str(script), command, "--home", str(home)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


@contextmanager
def _s3proxy(recorder: _Recorder, home: Path) -> Iterator[str]:
    started = _s3_script("start", home)
    lines = started.stdout.strip().splitlines()
    if started.returncode != 0 or not lines or not lines[-1].startswith("http://"):
        pytest.fail(
            f"scripts/s3.py start failed (exit {started.returncode})\n--- stdout ---\n"
            f"{started.stdout}\n--- stderr ---\n{started.stderr}",
            pytrace=False,
        )
    proxy = FaultProxy(lines[-1], intercept=recorder.intercept, answered=recorder.answered)
    proxy.start()
    try:
        yield proxy.endpoint_url
    finally:
        proxy.stop()
        _s3_script("stop", home)


@pytest.fixture(scope="session", params=BACKENDS)
def s3_server(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Iterator[S3Server]:
    """A server on a free port of 127.0.0.1 with bucket ``warehouse``: moto's, then S3Proxy's
    (each test runs on both); stopped at the end."""
    _no_proxy_for_loopback()
    log = RequestLog()
    recorder = _Recorder(log)
    backend = request.param
    if backend == "moto":
        running = _moto(recorder)
    else:
        running = _s3proxy(recorder, tmp_path_factory.mktemp("s3proxy"))
    with running as endpoint:
        s3 = S3Server(
            backend=backend,
            endpoint_url=endpoint,
            bucket=BUCKET,
            region=REGION,
            key=ACCESS_KEY,
            secret=SECRET_KEY,
            requests=log,
            _recorder=recorder,
        )
        if backend == "moto":  # S3Proxy's home has the bucket's folder already
            s3.fs.call_s3("create_bucket", Bucket=BUCKET)
        log.clear()
        yield s3


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
