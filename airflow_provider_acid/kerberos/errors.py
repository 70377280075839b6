"""Kerberos failures as one line each: whose login, against which service, and what to do.

Two kinds, for Airflow's retries: :class:`KerberosUnavailableError` is a ``ConnectionError``
(the KDC did not answer, no ticket yet, a ticket expired: a retry may find the KDC back or a
ticket renewed by ``airflow kerberos``); :class:`KerberosCredentialsError` is not
(``retryable = False``: a keytab without the principal's key, a principal the KDC does not
know, a clock too far from the KDC's: retrying the same task cannot fix them; the operators
fail at once with it)."""

from __future__ import annotations

from typing import Any, ClassVar


class KerberosError(RuntimeError):
    """A Kerberos login or a service ticket failed; the message names principal and service."""

    retryable: ClassVar[bool] = True


class KerberosUnavailableError(KerberosError, ConnectionError):
    """The KDC could not be reached, or there is no valid ticket yet: retried."""


class KerberosCredentialsError(KerberosError, PermissionError):
    """Wrong principal or keytab, an unknown service principal, or clock skew: not retried."""

    retryable: ClassVar[bool] = False


class KerberosConfigurationError(KerberosCredentialsError, ValueError):
    """A keytab without a principal, a keytab file that is missing: not retried."""


def _who(principal: str | None, ccache: str | None) -> str:
    if principal:
        return principal
    return f"the ticket cache {ccache}" if ccache else "the default ticket cache"


def translate(
    exc: Any,
    *,
    principal: str | None,
    keytab: str | None = None,
    ccache: str | None = None,
    service: str | None = None,
) -> KerberosError:
    """The one-line error for a ``gssapi`` failure ``exc`` (MIT's words kept at the end).

    :param exc: the ``GSSError`` (or a text standing for one).
    :param principal: whose login it was.
    :param keytab: the keytab it logged in from, if any.
    :param ccache: the ticket cache it read, if any.
    :param service: the service principal it wanted a ticket for.
    """
    try:
        words = exc.gen_message()
    except Exception:  # not a GSSError
        words = str(exc)
    words = " ".join(str(words).split())
    low = words.lower()
    who = _who(principal, ccache)
    target = f" (to reach {service})" if service else ""
    if "clock skew" in low:
        return KerberosCredentialsError(
            f"Kerberos login of {who}{target}: clock skew too great between this host and the "
            f"KDC; synchronise the clocks (NTP) ({words})"
        )
    if "cannot contact any kdc" in low or "cannot find kdc" in low or "kdc unreachable" in low:
        return KerberosUnavailableError(
            f"Kerberos login of {who}{target}: the KDC cannot be reached; check the realm's kdc "
            f"entries in KRB5_CONFIG and that the KDC runs ({words})"
        )
    if "server" in low and "not found in kerberos database" in low:
        return KerberosCredentialsError(
            f"Kerberos: the KDC does not know the service principal {service or '?'}; set the "
            f"service name or the principal's host to the server's real principal ({words})"
        )
    if keytab and (
        "no credentials" in low
        or "key table" in low
        or "keytab" in low
        or "not found in kerberos database" in low
        or "preauthentication failed" in low
        or "password incorrect" in low
        or "decrypt integrity check failed" in low
        or "no key table entry" in low
    ):
        return KerberosCredentialsError(
            f"Kerberos login of {who} from keytab {keytab} failed: the principal or the keytab "
            f"is wrong (klist -kt {keytab} lists its principals) ({words})"
        )
    if "expired" in low:
        return KerberosUnavailableError(
            f"Kerberos ticket of {who}{target} has expired; renew it (kinit, or airflow "
            f"kerberos) or give a principal and keytab ({words})"
        )
    if (
        "no kerberos credentials" in low
        or "no credentials cache" in low
        or "credentials cache" in low
        and "not found" in low
        or "no credentials were supplied" in low
    ):
        return KerberosUnavailableError(
            f"no Kerberos ticket for {who}{target}: run kinit (or airflow kerberos) or give a "
            f"principal and keytab ({words})"
        )
    return KerberosUnavailableError(f"Kerberos login of {who}{target} failed: {words}")


__all__ = [
    "KerberosConfigurationError",
    "KerberosCredentialsError",
    "KerberosError",
    "KerberosUnavailableError",
    "translate",
]
