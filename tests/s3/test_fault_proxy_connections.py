"""The fault proxy's connections to the server it forwards to: kept alive between requests,
and replaced when the server closed one meanwhile (a request without a body is sent again on
a new connection, as a client's connection pool does), so a closed connection is never the
client's failure. The server here is a real HTTP/1.1 server on 127.0.0.1 that closes each
connection after its answer without saying so (no ``Connection: close``)."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from airflow_provider_acid.testing.fault_proxy import FaultProxy


class _Closing(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    connections: list[str] = []

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:
        body = f"{self.path} on {self.client_address[1]}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.connections.append(f"{self.client_address[1]}")
        self.close_connection = True  # closed after the answer, without a header saying so


@pytest.fixture
def closing_server() -> Iterator[str]:
    _Closing.connections = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Closing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_connection_the_server_closed_is_replaced_not_failed(closing_server):
    proxy = FaultProxy(closing_server).start()
    try:
        client = http.client.HTTPConnection("127.0.0.1", int(proxy.endpoint_url.rsplit(":", 1)[1]))
        answers = []
        for name in ("first", "second", "third"):
            client.request("GET", f"/bucket/{name}")
            response = client.getresponse()
            answers.append((response.status, response.read().decode().split(" on ")[0]))
        client.close()
    finally:
        proxy.stop()

    assert answers == [(200, "/bucket/first"), (200, "/bucket/second"), (200, "/bucket/third")]
    # each answer came on a connection of its own: the closed ones were not used for it
    assert len(set(_Closing.connections)) == 3
    assert [r.attempt for r in proxy.seen()] == [1, 1, 1]
