"""How to reach a Hive Metastore: its address, its authentication, and the Thrift transport.

A metastore is named by a URI, ``thrift://HOST:PORT`` (several, comma-separated, are tried in
order, as Hive's ``hive.metastore.uris``). Authentication is either none (plain Thrift, the
metastore's ``NOSASL``/``NONE``) or SASL ``PLAIN`` with a user and a password, for metastores
that ask for one (Hive 4's ``metastore.authentication=CONFIG`` or ``LDAP``):
``thrift://USER@HOST:PORT?auth=PLAIN``, with the password given separately (never in a URI
that is logged or stored).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

from .errors import MetastoreAuthenticationError, MetastoreConnectionError

AUTH_MECHANISMS = ("NONE", "PLAIN")
_AUTH_ALIASES = {
    "NOSASL": "NONE",
    "NONE": "NONE",
    "PLAIN": "PLAIN",
    "LDAP": "PLAIN",
    "CONFIG": "PLAIN",
}
PASSWORD_ENV = "ACID_METASTORE_PASSWORD"
DEFAULT_PORT = 9083


def normalise_auth(value: str | None) -> str:
    """``NONE`` or ``PLAIN`` from the names Hive and the apache-hive provider use."""
    key = (value or "NONE").strip().upper()
    if key not in _AUTH_ALIASES:
        raise ValueError(
            f"metastore auth {value!r} is not supported: use one of {sorted(_AUTH_ALIASES)} "
            "(Kerberos/GSSAPI is not supported)"
        )
    return _AUTH_ALIASES[key]


@dataclass(frozen=True)
class MetastoreAddress:
    """One or more metastore endpoints and how to authenticate to them."""

    endpoints: tuple[tuple[str, int], ...]
    auth: str = "NONE"
    user: str | None = None
    password: str | None = field(default=None, repr=False, compare=False)
    timeout: float = 60.0

    @classmethod
    def parse(
        cls,
        uri: str | MetastoreAddress,
        *,
        auth: str | None = None,
        user: str | None = None,
        password: str | None = None,
        timeout: float | None = None,
    ) -> MetastoreAddress:
        """From ``thrift://[USER@]HOST:PORT[,thrift://...][?auth=PLAIN]``.

        The password comes from ``password``, else from ``$ACID_METASTORE_PASSWORD``.
        """
        if isinstance(uri, MetastoreAddress):
            return uri
        text = (uri or "").strip()
        if not text:
            raise ValueError("metastore: no URI given (expected thrift://HOST:PORT)")
        endpoints: list[tuple[str, int]] = []
        query: dict[str, list[str]] = {}
        for part in text.split(","):
            part = part.strip()
            if "://" not in part:
                part = "thrift://" + part
            parsed = urlsplit(part)
            if parsed.scheme != "thrift" or not parsed.hostname:
                raise ValueError(f"metastore URI {part!r} is not thrift://HOST:PORT")
            try:
                port = parsed.port or DEFAULT_PORT
            except ValueError:
                raise ValueError(f"metastore URI {part!r}: the port is not a number") from None
            endpoints.append((parsed.hostname, port))
            if parsed.username and user is None:
                user = unquote(parsed.username)
            if parsed.password and password is None:
                password = unquote(parsed.password)
            query.update(parse_qs(parsed.query))
        mechanism = normalise_auth(auth or (query.get("auth") or [None])[0])
        if mechanism == "PLAIN":
            password = password if password is not None else os.environ.get(PASSWORD_ENV)
            if not user:
                raise ValueError("metastore auth PLAIN needs a user (thrift://USER@HOST:PORT)")
        return cls(
            tuple(endpoints),
            mechanism,
            user,
            password,
            float(timeout if timeout is not None else (query.get("timeout") or [60])[0]),
        )

    @property
    def uri(self) -> str:
        """The endpoints as a URI without credentials (safe to log and to store)."""
        return ",".join(f"thrift://{host}:{port}" for host, port in self.endpoints)

    def __str__(self) -> str:
        return self.uri


class _PlainSaslClient:
    """SASL PLAIN in the interface ``thrift_sasl`` expects (the ``sasl`` package's client)."""

    def __init__(self, user: str, password: str) -> None:
        self._user, self._password = user, password

    def start(self, mechanism: str) -> tuple[bool, str, bytes]:
        return True, mechanism, b"\0" + self._user.encode() + b"\0" + self._password.encode()

    def step(self, challenge: bytes) -> tuple[bool, bytes]:
        return True, b""

    def encode(self, data: bytes) -> tuple[bool, bytes]:
        return True, data  # PLAIN has no security layer: frames go as they are

    def decode(self, data: bytes) -> tuple[bool, bytes]:
        return True, data

    def getError(self) -> str:  # noqa: N802 - the name thrift_sasl calls
        return "SASL PLAIN failed"


def _transport(address: MetastoreAddress, host: str, port: int) -> TTransport.TTransportBase:
    sock = TSocket.TSocket(host, port)
    sock.setTimeout(address.timeout * 1000)
    if address.auth == "PLAIN":
        import thrift_sasl

        user, password = address.user or "", address.password or ""
        return thrift_sasl.TSaslClientTransport(
            lambda: _PlainSaslClient(user, password), "PLAIN", sock
        )
    return TTransport.TBufferedTransport(sock)


def open_client(
    address: MetastoreAddress, client_class: Callable[[Any], Any]
) -> tuple[Any, TTransport.TTransportBase, tuple[str, int]]:
    """Connect to the first endpoint that answers; the Thrift client, its transport, and
    the endpoint. Raises :class:`MetastoreConnectionError` naming every endpoint tried."""
    problems = []
    for host, port in address.endpoints:
        transport = _transport(address, host, port)
        try:
            transport.open()
        except TTransport.TTransportException as exc:
            text = str(exc) or type(exc).__name__
            # thrift_sasl: "Bad status: 3 (b'Error validating the login')" (3 is BAD)
            if address.auth == "PLAIN" and ("SASL" in text.upper() or "Bad status" in text):
                raise MetastoreAuthenticationError(
                    f"Hive Metastore at {host}:{port} refused the SASL PLAIN login of user "
                    f"{address.user!r}: {text}"
                ) from None
            problems.append(f"{host}:{port} ({text})")
            continue
        except (TimeoutError, OSError) as exc:
            problems.append(f"{host}:{port} ({exc})")
            continue
        protocol = TBinaryProtocol.TBinaryProtocol(transport)
        return client_class(protocol), transport, (host, port)
    raise MetastoreConnectionError("cannot connect to the Hive Metastore at " + ", ".join(problems))


__all__ = [
    "AUTH_MECHANISMS",
    "DEFAULT_PORT",
    "PASSWORD_ENV",
    "MetastoreAddress",
    "normalise_auth",
    "open_client",
]
