"""Kerberos for the provider's clients: logins from a keytab or a ticket cache, renewed before
they expire (:mod:`.login`), and one-line errors that say what to do (:mod:`.errors`).

Used by the metastore's SASL GSSAPI transport and by WebHDFS's SPNEGO; needs the ``kerberos``
extra (``gssapi``, built against MIT Kerberos' ``libkrb5-dev``)."""

from .errors import (
    KerberosConfigurationError,
    KerberosCredentialsError,
    KerberosError,
    KerberosUnavailableError,
)
from .login import KerberosLogin

__all__ = [
    "KerberosConfigurationError",
    "KerberosCredentialsError",
    "KerberosError",
    "KerberosLogin",
    "KerberosUnavailableError",
]
