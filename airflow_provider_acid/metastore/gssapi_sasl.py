"""SASL GSSAPI (Kerberos, RFC 4752) for the metastore's Thrift transport, with ``gssapi``.

A Kerberos metastore (``metastore.sasl.enabled`` with ``hadoop.security.authentication=
kerberos``) takes the client's GSS-API context tokens inside Thrift's SASL framing, then offers
security layers; Hive's default ``hadoop.rpc.protection=authentication`` offers none but "no
layer", which this client chooses (frames then go as they are).

The server principal is Hive's ``hive.metastore.kerberos.principal`` as clients know it:
``SERVICE/_HOST@REALM``, ``_HOST`` replaced by the host of the URI being tried, or by an
explicit host (a load balancer in front of HA metastores whose principal names another host).
"""

from __future__ import annotations

from typing import Any

from ..kerberos.errors import KerberosError, translate
from ..kerberos.login import KerberosLogin

#: "no security layer" (RFC 4752 3.1): the only one Hive offers at qop=auth
_NO_LAYER = 0x01


def server_principal(
    host: str,
    *,
    principal: str | None = None,
    service_name: str = "hive",
    principal_host: str | None = None,
) -> str:
    """The metastore's principal for a connection to ``host``.

    :param host: the host of the URI being tried.
    :param principal: ``hive/_HOST@REALM`` (or a full principal); by default
        ``SERVICE/_HOST`` in the default realm.
    :param service_name: the principal's service part when no principal is given.
    :param principal_host: replaces ``_HOST`` instead of ``host``.
    """
    template = principal or f"{service_name}/_HOST"
    return template.replace("_HOST", (principal_host or host).lower())


class GssapiSaslClient:
    """SASL GSSAPI in the interface ``thrift_sasl`` expects (the ``sasl`` package's client).

    :param login: whose tickets to present.
    :param target: the server's principal (``hive/host@REALM``).
    """

    def __init__(self, login: KerberosLogin, target: str) -> None:
        import gssapi

        self._gssapi = gssapi
        self.login = login
        self.target = target
        self.error = ""
        self._ctx: Any = None
        self._negotiated = False

    def start(self, mechanism: str) -> tuple[bool, str, bytes]:
        gssapi = self._gssapi
        creds = self.login.credentials(service=self.target)
        try:
            name = gssapi.Name(self.target, gssapi.NameType.kerberos_principal)
            flags = [gssapi.RequirementFlag.mutual_authentication]
            self._ctx = gssapi.SecurityContext(
                name=name, creds=creds, usage="initiate", flags=flags
            )
            token = self._ctx.step()
        except gssapi.exceptions.GSSError as exc:
            raise translate(
                exc, principal=self.login.principal, ccache=self.login.cache, service=self.target
            ) from None
        return True, mechanism, token or b""

    def step(self, challenge: bytes) -> tuple[bool, bytes]:
        gssapi = self._gssapi
        try:
            if not self._ctx.complete:
                token = self._ctx.step(challenge or None)
                return True, token or b""
            # Security layer negotiation: the server's wrapped offer, our wrapped choice.
            offer = self._ctx.unwrap(challenge).message
            if len(offer) != 4 or not offer[0] & _NO_LAYER:
                self.error = f"the metastore {self.target} requires a SASL security layer"
                return False, b""
            self._negotiated = True
            answer = bytes([_NO_LAYER, 0, 0, 0])
            return True, self._ctx.wrap(answer, False).message
        except gssapi.exceptions.GSSError as exc:
            error = translate(
                exc, principal=self.login.principal, ccache=self.login.cache, service=self.target
            )
            self.error = str(error)
            raise error from None

    def encode(self, data: bytes) -> tuple[bool, bytes]:
        return True, data  # no security layer: frames go as they are

    def decode(self, data: bytes) -> tuple[bool, bytes]:
        return True, data

    def getError(self) -> str:  # noqa: N802 - the name thrift_sasl calls
        return self.error or f"SASL GSSAPI with {self.target} failed"


__all__ = ["GssapiSaslClient", "KerberosError", "server_principal"]
