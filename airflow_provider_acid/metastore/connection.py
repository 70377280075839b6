"""How to reach a Hive Metastore: its address, its authentication, and the Thrift transport.

A metastore is named by a URI, ``thrift://HOST:PORT`` (several, comma-separated, are tried in
order, as Hive's ``hive.metastore.uris``). Authentication is either none (plain Thrift, the
metastore's ``NOSASL``/``NONE``) or SASL ``PLAIN`` with a user and a password, for metastores
that ask for one (Hive 4's ``metastore.authentication=CONFIG`` or ``LDAP``):
``thrift://USER@HOST:PORT?auth=PLAIN``, with the password given separately (never in a URI
that is logged or stored); or SASL ``GSSAPI`` (Kerberos) for metastores with
``metastore.sasl.enabled``: the server principal ``SERVICE/_HOST@REALM`` with ``_HOST`` replaced
per endpoint tried (:mod:`.gssapi_sasl`), the client's tickets from a principal and keytab or a
ticket cache (:class:`~airflow_provider_acid.kerberos.KerberosLogin`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

from ..kerberos.errors import KerberosCredentialsError, KerberosError
from ..kerberos.login import KerberosLogin
from .errors import MetastoreAuthenticationError, MetastoreConnectionError

AUTH_MECHANISMS = ("NONE", "PLAIN", "GSSAPI")
_AUTH_ALIASES = {
    "NOSASL": "NONE",
    "NONE": "NONE",
    "PLAIN": "PLAIN",
    "LDAP": "PLAIN",
    "CONFIG": "PLAIN",
    "GSSAPI": "GSSAPI",
    "KERBEROS": "GSSAPI",
}
PASSWORD_ENV = "ACID_METASTORE_PASSWORD"
DEFAULT_PORT = 9083


def normalise_auth(value: str | None) -> str:
    """``NONE``, ``PLAIN`` or ``GSSAPI`` from the names Hive and the apache-hive provider use."""
    key = (value or "NONE").strip().upper()
    if key not in _AUTH_ALIASES:
        raise ValueError(
            f"metastore auth {value!r} is not supported: use one of {sorted(_AUTH_ALIASES)}"
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
    #: GSSAPI: whose tickets, the server principal (``hive/_HOST@REALM``), its service name
    #: when no principal is given, and a host that replaces ``_HOST`` for every endpoint
    kerberos: KerberosLogin | None = None
    server_principal: str | None = None
    kerberos_service_name: str = "hive"
    kerberos_principal_host: str | None = None

    @classmethod
    def parse(
        cls,
        uri: str | MetastoreAddress,
        *,
        auth: str | None = None,
        user: str | None = None,
        password: str | None = None,
        timeout: float | None = None,
        kerberos: KerberosLogin | None = None,
        server_principal: str | None = None,
        kerberos_service_name: str | None = None,
        kerberos_principal_host: str | None = None,
    ) -> MetastoreAddress:
        """From ``thrift://[USER@]HOST:PORT[,thrift://...][?auth=PLAIN|GSSAPI]``.

        :param uri: the endpoints (or an address, returned as it is).
        :param auth: ``NONE``, ``PLAIN`` or ``GSSAPI`` (or the aliases Hive uses).
        :param user: the SASL PLAIN user.
        :param password: the SASL PLAIN password, else ``$ACID_METASTORE_PASSWORD``.
        :param timeout: seconds a call may take.
        :param kerberos: GSSAPI: whose tickets (default: the ticket cache, ``KRB5CCNAME``).
        :param server_principal: GSSAPI: the metastore's principal, ``hive/_HOST@REALM``.
        :param kerberos_service_name: GSSAPI: the service part when no principal is given
            (default ``hive``).
        :param kerberos_principal_host: GSSAPI: the host put for ``_HOST`` (behind a load
            balancer), instead of each endpoint's own.
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
        if mechanism == "GSSAPI" and kerberos is None:
            kerberos = KerberosLogin()
        return cls(
            tuple(endpoints),
            mechanism,
            user,
            password,
            float(timeout if timeout is not None else (query.get("timeout") or [60])[0]),
            kerberos if mechanism == "GSSAPI" else None,
            server_principal or (query.get("principal") or [None])[0],
            kerberos_service_name or "hive",
            kerberos_principal_host,
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
    if address.auth == "GSSAPI":
        import thrift_sasl

        from .gssapi_sasl import GssapiSaslClient

        login = address.kerberos or KerberosLogin()
        target = address_principal(address, host)
        return thrift_sasl.TSaslClientTransport(
            lambda: GssapiSaslClient(login, target), "GSSAPI", sock
        )
    return TTransport.TBufferedTransport(sock)


def address_principal(address: MetastoreAddress, host: str) -> str:
    """The metastore principal a GSSAPI connection to ``host`` authenticates.

    :param address: the metastore's address and GSSAPI settings.
    :param host: the host of the endpoint being tried.
    """
    from .gssapi_sasl import server_principal

    return server_principal(
        host,
        principal=address.server_principal,
        service_name=address.kerberos_service_name,
        principal_host=address.kerberos_principal_host,
    )


def open_client(
    address: MetastoreAddress, client_class: Callable[[Any], Any]
) -> tuple[Any, TTransport.TTransportBase, tuple[str, int]]:
    """Connect to the first endpoint that answers; the Thrift client, its transport, and
    the endpoint. Raises :class:`MetastoreConnectionError` naming every endpoint tried."""
    problems = []
    last_kerberos: KerberosError | None = None
    for host, port in address.endpoints:
        transport = _transport(address, host, port)
        try:
            transport.open()
        except KerberosCredentialsError:
            transport.close()
            raise  # the same for every endpoint: not worth another
        except KerberosError as exc:
            transport.close()
            problems.append(f"{host}:{port} ({exc})")
            last_kerberos = exc
            continue
        except TTransport.TTransportException as exc:
            text = str(exc) or type(exc).__name__
            # thrift_sasl: "Bad status: 3 (b'Error validating the login')" (3 is BAD)
            if address.auth == "PLAIN" and ("SASL" in text.upper() or "Bad status" in text):
                raise MetastoreAuthenticationError(
                    f"Hive Metastore at {host}:{port} refused the SASL PLAIN login of user "
                    f"{address.user!r}: {text}"
                ) from None
            if address.auth == "GSSAPI" and "Bad status" in text:
                who = (address.kerberos or KerberosLogin()).describe()
                raise MetastoreAuthenticationError(
                    f"Hive Metastore at {host}:{port} refused the Kerberos login of {who} as "
                    f"{address_principal(address, host)}: check the server principal "
                    f"(kerberos_service_name, the principal's host) and the realm: {text}"
                ) from None
            problems.append(f"{host}:{port} ({text})")
            continue
        except (TimeoutError, OSError) as exc:
            problems.append(f"{host}:{port} ({exc})")
            continue
        protocol = TBinaryProtocol.TBinaryProtocol(transport)
        return client_class(protocol), transport, (host, port)
    if last_kerberos is not None and len(problems) == 1:
        raise last_kerberos  # its own line says what to do
    raise MetastoreConnectionError("cannot connect to the Hive Metastore at " + ", ".join(problems))


__all__ = [
    "AUTH_MECHANISMS",
    "DEFAULT_PORT",
    "PASSWORD_ENV",
    "MetastoreAddress",
    "address_principal",
    "normalise_auth",
    "open_client",
]
