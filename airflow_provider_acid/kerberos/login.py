"""A Kerberos login: from a principal and keytab (the provider logs in itself, into a private
ticket cache, and logs in again before the ticket expires), or from an existing ticket cache
(``KRB5CCNAME``, as ``airflow kerberos`` keeps it renewed).

A keytab login keeps its tickets in ``FILE:<tmp>/airflow-acid-krb5cc-<uid>-<digest>`` (one per
principal and keytab, mode 0600), never in the user's own cache. Each use asks for the
credentials again (:meth:`KerberosLogin.credentials`); when the ticket-granting ticket has less
than a quarter of its life left (at least :data:`RENEW_MARGIN` seconds), a new one is obtained
from the keytab into a new file that replaces the cache in one rename, so a long-lived process
(the triggerer, a transaction's heartbeat) never presents an expired ticket. Connections
already made stay authenticated; new ones use the new ticket.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

from .errors import KerberosConfigurationError, translate

#: A ticket with fewer seconds than this left (or a quarter of its life) is renewed.
RENEW_MARGIN = 20.0
log = logging.getLogger(__name__)
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _gssapi() -> Any:
    try:
        import gssapi
    except ImportError as exc:  # pragma: no cover - the extra is installed by make install
        raise KerberosConfigurationError(
            "Kerberos needs the gssapi package: pip install 'airflow-provider-acid[kerberos]' "
            f"(it builds against MIT Kerberos' libkrb5-dev) ({exc})"
        ) from None
    return gssapi


@dataclass(frozen=True)
class KerberosLogin:
    """Whose tickets a client presents.

    :param principal: the client principal (``user@REALM``); with ``keytab``, the provider
        logs in itself; alone, the ticket cache must hold this principal's ticket.
    :param keytab: the keytab holding the principal's key.
    :param ccache: a ticket cache to use instead (``FILE:/path``); by default a private one for
        a keytab login, ``KRB5CCNAME`` (or the library's default) otherwise.
    """

    principal: str | None = None
    keytab: str | None = None
    ccache: str | None = None

    def __post_init__(self) -> None:
        if self.keytab and not self.principal:
            raise KerberosConfigurationError(
                f"Kerberos keytab {self.keytab} given without a principal: give the principal "
                "(user@REALM) it holds the key of"
            )

    @property
    def cache(self) -> str | None:
        """The ticket cache this login reads (None: the library's default)."""
        if self.ccache:
            return self.ccache
        if self.keytab:
            digest = hashlib.sha256(f"{self.principal}\0{self.keytab}".encode()).hexdigest()
            path = os.path.join(
                tempfile.gettempdir(), f"airflow-acid-krb5cc-{os.getuid()}-{digest[:16]}"
            )
            return f"FILE:{path}"
        return os.environ.get("KRB5CCNAME") or None

    def describe(self) -> str:
        """The principal (or ticket cache) for messages."""
        if self.principal:
            return self.principal
        return f"the ticket cache {self.cache}" if self.cache else "the default ticket cache"

    def _name(self) -> Any:
        gssapi = _gssapi()
        if not self.principal:
            return None
        return gssapi.Name(self.principal, gssapi.NameType.kerberos_principal)

    def _from_cache(self, service: str | None) -> Any:
        gssapi = _gssapi()
        store = {b"ccache": self.cache.encode()} if self.cache else None
        try:
            creds = gssapi.Credentials(name=self._name(), usage="initiate", store=store)
            lifetime = creds.lifetime
        except gssapi.exceptions.GSSError as exc:
            raise translate(
                exc, principal=self.principal, ccache=self.cache, service=service
            ) from None
        return creds, lifetime

    def credentials(self, service: str | None = None) -> Any:
        """``gssapi.Credentials`` to initiate with, logging in from the keytab first when the
        cache holds no ticket or one that expires soon.

        :param service: the service principal they are for (named in errors).
        """
        if not self.keytab:
            creds, lifetime = self._from_cache(service)
            if not lifetime:
                raise translate(
                    "Ticket expired", principal=self.principal, ccache=self.cache, service=service
                )
            return creds
        if not os.path.isfile(self.keytab):
            raise KerberosConfigurationError(
                f"Kerberos keytab {self.keytab} of {self.principal} does not exist: give the "
                "path of a readable keytab"
            )
        with _lock_for(self.cache or ""):
            try:
                creds, lifetime = self._from_cache(service)
            except Exception:
                lifetime = 0
            if lifetime and lifetime > RENEW_MARGIN and not self._renew_due(lifetime):
                return creds
            self.login(service)
            creds, _ = self._from_cache(service)
            return creds

    def _renew_due(self, remaining: float) -> bool:
        started = _ticket_lives.get(self.cache or "")
        return started is not None and remaining < started / 4

    def login(self, service: str | None = None) -> float:
        """Obtain a new ticket-granting ticket from the keytab into the private cache (a new
        file renamed over it); returns its lifetime in seconds.

        :param service: the service principal it is for (named in errors).
        """
        gssapi = _gssapi()
        cache = self.cache or ""
        path = cache[len("FILE:") :] if cache.startswith("FILE:") else None
        fresh = f"{path}.{os.getpid()}.{threading.get_ident()}.new" if path else cache
        if path and os.path.exists(fresh):
            os.unlink(fresh)
        store = {b"client_keytab": str(self.keytab).encode(), b"ccache": f"FILE:{fresh}".encode()}
        if not path:
            store[b"ccache"] = cache.encode()
        try:
            creds = gssapi.Credentials(name=self._name(), usage="initiate", store=store)
            lifetime = creds.lifetime or 0
        except gssapi.exceptions.GSSError as exc:
            if path and os.path.exists(fresh):
                os.unlink(fresh)
            raise translate(
                exc, principal=self.principal, keytab=self.keytab, service=service
            ) from None
        if path:
            os.chmod(fresh, 0o600)
            os.replace(fresh, path)
        _ticket_lives[cache] = float(lifetime)
        _logins[cache] = _logins.get(cache, 0) + 1
        log.info(
            "Kerberos: %s logged in from the keytab %s into %s (login %d of this process; the "
            "ticket lives %.0f s)",
            self.principal, self.keytab, cache, _logins[cache], lifetime,
        )  # fmt: skip
        return float(lifetime)


#: cache -> the lifetime its last keytab login got; cache -> how many logins this process made
_ticket_lives: dict[str, float] = {}
_logins: dict[str, int] = {}


def logins(login: KerberosLogin) -> int:
    """How many keytab logins this process made into ``login``'s cache (renewals included)."""
    return _logins.get(login.cache or "", 0)


def _lock_for(cache: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(cache, threading.Lock())


__all__ = ["RENEW_MARGIN", "KerberosLogin", "logins"]
